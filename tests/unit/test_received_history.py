"""``received.jsonl`` keeps every version ever received (issue #18, finding 3).

The export is append-only: start-up (:func:`subscriber.export.reconcile`) and the housekeeping
checkpoint only append the records the file lacks; the only bytes they may cut are an
unterminated last line (a write torn by a crash, which no reader can have taken for a record).
Start-up reads the file a line at a time, so a long history costs no memory.

Against the real SQLite keyring and files in a temp folder.
"""

from __future__ import annotations

import json
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from subscriber.export import checkpoint, reconcile
from subscriber.store import Inbox, Keyring


def _record(document: str, version: int) -> dict[str, object]:
    return {"publisher": "p", "document": document, "version": version, "fragments": {}}


def _line(document: str, version: int) -> str:
    return json.dumps(_record(document, version), sort_keys=True)


def _versions(path: Path) -> list[tuple[str, int]]:
    return [
        (json.loads(line)["document"], json.loads(line)["version"])
        for line in path.read_text().splitlines()
    ]


def _accept(keyring: Keyring, inbox: Inbox | None, document: str, version: int, seq: int) -> None:
    record = _record(document, version)
    keyring.accept(record, address="d2:1", sequence=seq, publisher_sequence=seq, at_ms=0)
    if inbox is not None:
        inbox.record(record)


@pytest.fixture
def keyring(tmp_path: Path):  # type: ignore[no-untyped-def]
    ring = Keyring(tmp_path / "keyring.sqlite")
    yield ring
    ring.close()


def test_every_version_of_a_document_stays_over_restarts(tmp_path: Path) -> None:
    out = tmp_path / "out"
    for version in (1, 2, 3):  # one run each, the last line lost by a crash every time
        keyring = Keyring(tmp_path / "keyring.sqlite")
        try:
            inbox = Inbox(out)
            reconcile(keyring, inbox)
            _accept(keyring, None, "order", version, version)  # line never written
        finally:
            keyring.close()
    keyring = Keyring(tmp_path / "keyring.sqlite")
    try:
        reconcile(keyring, Inbox(out))
    finally:
        keyring.close()
    assert _versions(out / "received.jsonl") == [("order", 1), ("order", 2), ("order", 3)]


def test_a_keyring_that_knows_less_than_the_file_never_cuts_it(
    tmp_path: Path, keyring: Keyring
) -> None:
    """A new (or restored) keyring beside an export of earlier runs: the history stays."""
    inbox = Inbox(tmp_path / "out")
    history = "".join(_line("order", v) + "\n" for v in (1, 2, 3))
    inbox.received_path.write_text(history)
    reconcile(keyring, inbox)
    assert inbox.received_path.read_text() == history
    _accept(keyring, inbox, "order", 4, 1)
    checkpoint(keyring, inbox)
    reconcile(keyring, inbox)
    assert _versions(inbox.received_path) == [("order", v) for v in (1, 2, 3, 4)]


def test_lines_after_the_mark_that_no_record_explains_are_kept(
    tmp_path: Path, keyring: Keyring
) -> None:
    inbox = Inbox(tmp_path / "out")
    _accept(keyring, inbox, "order", 1, 1)
    checkpoint(keyring, inbox)
    # After the mark: a line the keyring has no record of (its commit lost with the
    # database's last transactions, say), then v2 accepted and never written.
    with open(inbox.received_path, "a") as export:
        export.write(_line("other", 7) + "\n")
    _accept(keyring, None, "order", 2, 2)
    reconcile(keyring, inbox)
    assert _versions(inbox.received_path) == [("order", 1), ("other", 7), ("order", 2)]


def test_a_checkpoint_after_a_short_write_only_appends(tmp_path: Path, keyring: Keyring) -> None:
    inbox = Inbox(tmp_path / "out")
    _accept(keyring, inbox, "order", 1, 1)
    checkpoint(keyring, inbox)
    with open(inbox.received_path, "a") as export:
        export.write(_line("other", 7) + "\n")  # not one of the records after the mark
    _accept(keyring, inbox, "order", 2, 2)
    _accept(keyring, None, "order", 3, 3)  # its write failed
    checkpoint(keyring, inbox)
    assert _versions(inbox.received_path) == [
        ("order", 1), ("other", 7), ("order", 2), ("order", 3)
    ]
    assert keyring.export_tail() == []
    assert keyring.export_mark().offset == inbox.received_path.stat().st_size


def test_only_an_unterminated_last_line_is_cut(tmp_path: Path, keyring: Keyring) -> None:
    inbox = Inbox(tmp_path / "out")
    _accept(keyring, inbox, "order", 1, 1)
    checkpoint(keyring, inbox)
    _accept(keyring, None, "order", 2, 2)
    with open(inbox.received_path, "a") as export:
        export.write(_line("order", 2)[:15])  # torn by the crash
    reconcile(keyring, inbox)
    assert _versions(inbox.received_path) == [("order", 1), ("order", 2)]


def _big_export(path: Path, lines: int) -> int:
    with open(path, "w") as export:
        for n in range(lines):
            export.write(_line(f"doc-{n:07d}", 1) + "\n")
    return path.stat().st_size


def _peak(run: object) -> int:
    tracemalloc.start()
    try:
        assert callable(run)
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_start_up_reads_a_long_history_in_bounded_memory(tmp_path: Path, keyring: Keyring) -> None:
    inbox = Inbox(tmp_path / "out")
    size = _big_export(inbox.received_path, 100_000)
    assert size > 4 * 1024 * 1024
    _accept(keyring, None, "new", 1, 1)
    peak = _peak(lambda: reconcile(keyring, inbox))
    assert peak < 2 * 1024 * 1024, f"reconcile held {peak} bytes for a {size}-byte export"
    with open(inbox.received_path, "rb") as export:
        export.seek(size - 200)
        tail = export.read().decode().splitlines()
    assert json.loads(tail[-2])["document"] == "doc-0099999"  # the history is all there
    assert json.loads(tail[-1])["document"] == "new"


def test_an_older_store_is_adopted_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "keyring.sqlite"
    old = sqlite3.connect(path)  # documents as older versions kept them: each with its record
    old.execute(
        "CREATE TABLE documents (id INTEGER PRIMARY KEY, publisher TEXT NOT NULL, document "
        "TEXT NOT NULL, version INTEGER NOT NULL, record TEXT NOT NULL, "
        "UNIQUE (publisher, document))"
    )
    old.executemany(
        "INSERT INTO documents (publisher, document, version, record) VALUES ('p', ?, ?, ?)",
        [("doc-0000000", 2, _line("doc-0000000", 2)), ("late", 1, _line("late", 1))],
    )
    old.commit()
    old.close()
    inbox = Inbox(tmp_path / "out")
    size = _big_export(inbox.received_path, 100_000)
    with open(inbox.received_path, "a") as export:
        export.write(_line("doc-0000000", 2) + "\n")  # v2 is in the file; "late" is not
    keyring = Keyring(path)
    try:
        peak = _peak(lambda: reconcile(keyring, inbox))
        assert keyring.legacy_records() is None
    finally:
        keyring.close()
    assert peak < 2 * 1024 * 1024, f"adoption held {peak} bytes for a {size}-byte export"
    with open(inbox.received_path, "rb") as export:
        export.seek(size - 100)
        tail = export.read().decode().splitlines()
    assert [json.loads(line)["document"] for line in tail[-3:]] == [
        "doc-0099999", "doc-0000000", "late"
    ]
    with open(inbox.received_path) as export:
        assert sum(1 for _ in export) == 100_002


def test_a_new_keyring_beside_a_long_history_starts_quickly_and_in_bounded_memory(
    tmp_path: Path, keyring: Keyring
) -> None:
    inbox = Inbox(tmp_path / "out")
    size = _big_export(inbox.received_path, 100_000)
    peak = _peak(lambda: reconcile(keyring, inbox))  # (nothing to look for: read all once)
    assert peak < 2 * 1024 * 1024, f"reconcile held {peak} bytes for a {size}-byte export"
    assert inbox.received_path.stat().st_size == size
    assert keyring.export_mark().offset == size  # the next start reads nothing before it
