"""A subscriber's bounded state (issue #15): the keyring prunes accepted-document entries,
old group keys and per-document keys without letting a replay in or starving a held document,
and ``received.jsonl`` is checked by its tail only.

Against the real SQLite keyring in a temp folder; the session tests feed genuine signed
documents (1-3 of a publisher's sequence) straight to a :class:`Session`.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from subscriber.export import checkpoint, reconcile
from subscriber.retention import Pruned, Retention
from subscriber.store import Inbox, Keyring
from tests.unit import sequence_fixtures
from tests.unit.bounded_checks import assert_keeps_something
from tests.unit.sequence_fixtures import GROUP_KEY, NOW, PUBLISHER, alice_session, concepts_of
from xdn.wire.v1 import dissemination_pb2 as pb

DAY_MS = 86_400_000


def _record(publisher: str, document: str, version: int = 1) -> dict[str, object]:
    return {"publisher": publisher, "document": document, "version": version, "fragments": {}}


def _accept(keyring: Keyring, publisher: str, document: str, sequence: int, at_ms: int) -> None:
    keyring.accept(
        _record(publisher, document), address="d2:1", sequence=sequence,
        publisher_sequence=sequence, at_ms=at_ms,
    )


@pytest.fixture
def keyring(tmp_path: Path):  # type: ignore[no-untyped-def]
    ring = Keyring(tmp_path / "keyring.sqlite")
    yield ring
    ring.close()


# ---- accepted documents -------------------------------------------------------------------


def test_entries_past_the_retention_are_pruned_behind_a_floor(keyring: Keyring) -> None:
    for n in range(1, 6):
        _accept(keyring, "p", f"old-{n}", n, at_ms=0)
    for n in range(6, 9):
        _accept(keyring, "p", f"new-{n}", n, at_ms=31 * DAY_MS)
    _accept(keyring, "q", "other", 3, at_ms=31 * DAY_MS)
    assert keyring.prune(31 * DAY_MS, Retention(days=30)) == Pruned(documents=5)
    assert keyring.floor("p") == 5 and keyring.floor("q") == 0
    assert keyring.version("p", "old-1") is None  # no entry any more ...
    assert keyring.version("p", "new-6") == 1
    assert keyring.prune(31 * DAY_MS, Retention(days=30)) == Pruned()  # nothing more


def test_no_publisher_keeps_more_than_its_share(keyring: Keyring) -> None:
    for n in range(1, 11):
        _accept(keyring, "p", f"d{n}", n, at_ms=n)
    assert keyring.prune(20, Retention(documents=3)).documents == 7
    assert keyring.floor("p") == 7
    assert [keyring.version("p", f"d{n}") for n in (7, 8, 10)] == [None, 1, 1]


def test_unsequenced_entries_are_kept(keyring: Keyring) -> None:
    keyring.accept(_record("p", "legacy"), address="d2:1", sequence=1, at_ms=0)
    _accept(keyring, "p", "numbered", 4, at_ms=0)
    assert keyring.prune(99 * DAY_MS, Retention(days=1)).documents == 1
    assert keyring.version("p", "legacy") == 1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("pq"), st.integers(1, 30), st.integers(0, 4), st.booleans()),
        max_size=40,
    ),
    st.integers(1, 6),
)
def test_whatever_was_accepted_stays_known_and_the_record_stays_bounded(
    steps: list[tuple[str, int, int, bool]], share: int
) -> None:
    """After any interleaving of accepts and prunes, every document accepted is still known
    (an entry at its version, or a number at or below the floor: a redelivery is refused) and
    each publisher keeps at most its share of entries once pruned."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        ring = Keyring(Path(folder) / "keyring.sqlite")
        accepted: set[tuple[str, int]] = set()
        now = 0
        for publisher, sequence, day, prune in steps:
            now = max(now, day * DAY_MS)
            known = ring.version(publisher, f"d{sequence}") is not None
            if not known and sequence > ring.floor(publisher):
                _accept(ring, publisher, f"d{sequence}", sequence, at_ms=now)
            accepted.add((publisher, sequence))
            if prune:
                ring.prune(now, Retention(days=1, documents=share))
                for p in "pq":
                    (kept,) = ring._db.execute(
                        "SELECT COUNT(*) FROM documents WHERE publisher = ?", (p,)
                    ).fetchone()
                    assert kept <= share
            for p, n in accepted:
                assert ring.version(p, f"d{n}") == 1 or n <= ring.floor(p)
            assert ring.floor(publisher) <= 30  # a number above all accepted is never refused
        ring.close()


# ---- keys ---------------------------------------------------------------------------------


def _epochs(keyring: Keyring, concept: str) -> list[int]:
    return [e for e in range(1, 50) if keyring.get("p", concept, e) is not None]


def test_each_group_keeps_its_newest_epochs_and_those_a_held_document_needs(
    keyring: Keyring,
) -> None:
    for epoch in range(1, 11):
        keyring.put("p", "A", epoch, bytes([epoch]) * 32)
        keyring.put("p", "B", epoch, bytes([epoch]) * 32)
    keyring.hold(
        publisher="p", document="d", version=1, serial=1, payload=b"held", waits=[("p", "C")],
        needs=[("p", "A", 2, "p.A.e2.d"), ("p", "C", 1, "p.C.e1.d")],
    )
    assert keyring.prune(0, Retention(epochs=3)).keys == 6 + 7
    assert _epochs(keyring, "A") == [2, 8, 9, 10]
    assert _epochs(keyring, "B") == [8, 9, 10]
    (held,) = keyring.held_entries()
    keyring.drop_held(held.id)  # opened (or dropped): what it needed may go
    assert keyring.prune(0, Retention(epochs=3)).keys == 1
    assert _epochs(keyring, "A") == [8, 9, 10]


def test_a_document_held_by_an_older_version_keeps_its_publishers_keys(
    keyring: Keyring,
) -> None:
    for epoch in range(1, 6):
        keyring.put("p", "A", epoch, b"k" * 32)
        keyring.put("q", "A", epoch, b"k" * 32)
    keyring.hold(  # no needs recorded: which keys it needs is not known
        publisher="p", document="d", version=1, serial=1, payload=b"held", waits=[("p", "C")]
    )
    keyring.put_document_keys({"x.A.e1.d": b"k" * 32}, at_ms=1)
    assert keyring.prune(99 * DAY_MS, Retention(epochs=1)) == Pruned(keys=4)
    assert _epochs(keyring, "A") == [1, 2, 3, 4, 5]
    assert keyring.document_key("x.A.e1.d") is not None


def test_per_document_keys_go_after_the_retention_unless_a_held_document_needs_them(
    keyring: Keyring,
) -> None:
    keyring.put_document_keys({"p.A.e1.old": b"1" * 32, "p.A.e1.held": b"2" * 32}, at_ms=1)
    keyring.put_document_keys({"p.A.e1.new": b"3" * 32}, at_ms=40 * DAY_MS)
    keyring.hold(
        publisher="p", document="held", version=1, serial=1, payload=b"held",
        waits=[("p", "B")], needs=[("p", "A", 1, "p.A.e1.held")],
    )
    assert keyring.prune(40 * DAY_MS, Retention(days=30)).document_keys == 1
    assert keyring.document_key("p.A.e1.old") is None
    assert keyring.document_key("p.A.e1.held") is not None
    assert keyring.document_key("p.A.e1.new") is not None


# ---- received.jsonl: the tail only ---------------------------------------------------------


def _lines(path: Path) -> list[str]:
    return [json.loads(line)["document"] for line in path.read_text().splitlines()]


def _synced(tmp_path: Path, keyring: Keyring) -> Inbox:
    """An inbox in ``tmp_path`` where d1 and d2 were accepted, exported and checkpointed."""
    inbox = Inbox(tmp_path / "out")
    for n in (1, 2):
        _accept(keyring, "p", f"d{n}", n, at_ms=0)
        inbox.record(_record("p", f"d{n}"))
    checkpoint(keyring, inbox)
    return inbox


def test_a_checkpoint_syncs_the_export_and_empties_the_log(
    tmp_path: Path, keyring: Keyring
) -> None:
    inbox = _synced(tmp_path, keyring)
    assert keyring.export_tail() == []
    assert keyring.export_mark().offset == inbox.received_path.stat().st_size
    (rows,) = keyring._db.execute("SELECT COUNT(*) FROM received_log").fetchone()
    assert rows == 0


def test_start_up_reads_and_repairs_only_the_tail(tmp_path: Path, keyring: Keyring) -> None:
    inbox = _synced(tmp_path, keyring)
    synced = inbox.received_path.read_bytes()
    # Before the mark: overwritten in place with bytes no record has. Were the synced part
    # read or rewritten at start-up, this would be found and replaced.
    marker = synced.replace(b'"d1"', b'"D1"')
    _accept(keyring, "p", "d3", 3, at_ms=0)
    _accept(keyring, "p", "d4", 4, at_ms=0)
    inbox.received_path.write_bytes(marker + json.dumps(_record("p", "d3"), sort_keys=True)
                                    .encode()[:20])  # d3 torn by the crash, d4 never written
    reconcile(keyring, inbox)
    assert _lines(inbox.received_path) == ["D1", "d2", "d3", "d4"]
    assert keyring.export_tail() == []  # repaired, synced and marked
    reconcile(keyring, inbox)  # nothing to do now
    assert _lines(inbox.received_path) == ["D1", "d2", "d3", "d4"]


def test_an_export_cut_short_by_hand_gets_the_tail_after_its_last_whole_line(
    tmp_path: Path, keyring: Keyring
) -> None:
    inbox = _synced(tmp_path, keyring)
    _accept(keyring, "p", "d3", 3, at_ms=0)
    first = inbox.received_path.read_text().splitlines()[0]
    inbox.received_path.write_text(first + "\n" + "{half a li")
    reconcile(keyring, inbox)
    assert _lines(inbox.received_path) == ["d1", "d3"]


def test_a_store_of_an_older_version_is_adopted_once(tmp_path: Path) -> None:
    path = tmp_path / "keyring.sqlite"
    old = sqlite3.connect(path)  # documents as older versions kept them: each with its record
    old.execute(
        "CREATE TABLE documents (id INTEGER PRIMARY KEY, publisher TEXT NOT NULL, document "
        "TEXT NOT NULL, version INTEGER NOT NULL, record TEXT NOT NULL, "
        "UNIQUE (publisher, document))"
    )
    records = [json.dumps(_record("p", f"d{n}"), sort_keys=True) for n in (1, 2, 3)]
    old.executemany(
        "INSERT INTO documents (publisher, document, version, record) VALUES ('p', ?, 1, ?)",
        [(f"d{n}", r) for n, r in zip((1, 2, 3), records, strict=True)],
    )
    old.commit()
    old.close()
    inbox = Inbox(tmp_path / "out")
    inbox.received_path.write_text(records[0] + "\n" + records[1] + "\n" + records[2][:9])
    keyring = Keyring(path)
    try:
        reconcile(keyring, inbox)
        assert _lines(inbox.received_path) == ["d1", "d2", "d3"]
        assert keyring.legacy_records() is None  # the column is gone
        assert keyring.export_mark().offset == inbox.received_path.stat().st_size
        assert keyring.version("p", "d2") == 1
        _accept(keyring, "p", "d4", 4, at_ms=0)  # and the store goes on as a new one
        assert [r for _, r in keyring.export_tail()] == [
            json.dumps(_record("p", "d4"), sort_keys=True)
        ]
    finally:
        keyring.close()


# ---- the session: a pruned document is refused, a held document still opens ----------------


pki = sequence_fixtures.pki
documents = sequence_fixtures.documents


def test_a_document_whose_entry_was_pruned_is_refused_when_replayed(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    clock = [NOW]
    concepts = concepts_of(documents[0])
    session = alice_session(
        tmp_path, pki, concepts, clock=lambda: clock[0], retention=Retention(days=1, every_s=60)
    )
    try:
        assert session.on_dissemination(documents[0], 1)
        assert session.on_dissemination(documents[1], 2)
        clock[0] += timedelta(days=2)
        assert session.on_dissemination(documents[2], 3)  # accepted, then housekeeping
        assert session.keyring.floor(PUBLISHER) == 2
        assert session.on_dissemination(documents[0], 4) == b""  # replayed after pruning
        assert session.report.accepted == 3
        (refusal,) = [json.loads(line) for line in (tmp_path / "out" / "refused.jsonl").open()]
        assert refusal["document"] == "order-1"
        assert "sequence number 1 is at or below 2" in refusal["reason"]
        assert _lines(tmp_path / "out" / "received.jsonl") == ["order-1", "order-2", "order-3"]
    finally:
        session.close()


def test_a_held_document_still_opens_after_its_other_keys_aged_out(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    clock = [NOW]
    concepts = concepts_of(documents[0])
    session = alice_session(
        tmp_path, pki, concepts, clock=lambda: clock[0], with_keys=False,
        retention=Retention(epochs=2),
    )
    late, *others = concepts
    try:
        for concept in others:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        assert session.on_dissemination(documents[0], 1) == b""  # held: no key for `late`
        assert session.keyring.held_count() == 1
        for concept in others:  # the groups moved on by many epochs meanwhile
            for epoch in range(2, 12):
                session.keyring.put(PUBLISHER, concept, epoch, bytes([epoch]) * 32)
        session.housekeeping()
        assert session.keyring.get(PUBLISHER, others[0], 5) is None  # pruned ...
        assert session.keyring.get(PUBLISHER, others[0], 1) == GROUP_KEY  # ... but not this
        session.keyring.put(PUBLISHER, late, 1, GROUP_KEY)  # the late key arrives
        session.release_held(2, publisher=PUBLISHER, concept=late)
        assert session.report.accepted == 1
        assert session.keyring.held_count() == 0
    finally:
        session.close()


def test_retention_settings_must_keep_something() -> None:
    assert_keeps_something(Retention, periods=("days", "every_s"), counts=("documents", "epochs"))
