"""A document that comes in parts is staged in the store in chunks, never held whole
(disseminator.body_chunks, disseminator.store): read back span by span exactly, shared by the
deliveries and the retained copy like any body, deleted with the last row using it, deleted
at once when staging fails, and deleted at restart when a site stopped before routing it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from disseminator.body_chunks import StoredBytes
from disseminator.store import Append, Body, Retained, Store
from xdn.errors import ProtocolError
from xdn.parts import Joiner, PartData, cut

DATA = bytes(range(256)) * 40  # 10,240 bytes
CHUNK = 1_000  # chunks smaller than a part, so parts and chunks straddle each other


def _staged(store: Store, data: bytes = DATA, part_bytes: int = 1_500) -> StoredBytes:
    staging = store.stage(len(data), chunk_bytes=CHUNK)
    for part in cut([data], part_bytes):
        staging.write(part.data)
    return staging.finish()


def _chunk_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM body_chunks").fetchone()
        return int(count)


@pytest.mark.parametrize("part_bytes", [1_024, 1_500, 4_096, 20_000])
def test_a_staged_body_reads_back_exactly_span_by_span(tmp_path: Path, part_bytes: int) -> None:
    store = Store(tmp_path / "site.sqlite")
    stored = _staged(store, part_bytes=part_bytes)
    assert len(stored) == len(DATA)
    for start, end in [(0, len(DATA)), (0, 1), (999, 1_001), (1_000, 3_000), (10_239, 10_240),
                       (5, 5)]:  # fmt: skip
        assert stored.read(start, end) == DATA[start:end]
    span = stored.span(990, 2_010)
    assert len(span) == 1_020 and span.read(5, 20) == DATA[995:1_010]
    with pytest.raises(ValueError, match="not within"):
        stored.read(0, len(DATA) + 1)
    with pytest.raises(ValueError, match="not within"):
        span.read(0, 1_021)


def test_staging_checks_the_announced_size(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    staging = store.stage(10, chunk_bytes=CHUNK)
    with pytest.raises(ValueError, match="more bytes"):
        staging.write(b"x" * 11)
    staging.write(b"x" * 9)
    with pytest.raises(ValueError, match="9 of the 10"):
        staging.finish()


def test_a_staged_body_serves_every_destination_and_goes_with_the_last_row(
    tmp_path: Path,
) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path, retain=2)
    body = Body(_staged(store))
    views = {"alice": (b"<a>", (0, 100), (2_000, 9_000)), "bob": ((0, 100), (9_000, 10_240))}
    store.commit_routing(
        document=("pub", "doc", 1),
        appends=[Append(kind="subscriber", name=n, body=body, pieces=p) for n, p in views.items()],
        retained=Retained(publisher="pub", document="doc", version=1, body=body,
                          pieces=((0, 10_240), b"<prov>")),
    )  # fmt: skip
    store.let_go(body.data)  # type: ignore[arg-type]  # referenced: kept
    for reopened in (store, Store(path, retain=2)):  # (a restart keeps what is referenced)
        for name, pieces in views.items():
            ((seq, chunks),) = reopened.pending_chunks("subscriber", name, after=0, limit=5)
            expected = b"".join(p if isinstance(p, bytes) else DATA[p[0]:p[1]] for p in pieces)
            assert seq == 1 and b"".join(
                c if isinstance(c, bytes) else c.read(0, len(c)) for c in chunks
            ) == expected
            assert reopened.pending("subscriber", name, after=0, limit=5) == [(1, expected)]
        (kept,) = reopened.retained()
        assert isinstance(kept.body.data, StoredBytes)  # type: ignore[union-attr]
        assert kept.dissemination() == DATA + b"<prov>"
    assert _chunk_rows(path) == 11
    store.ack_many({("subscriber", "alice"): 1, ("subscriber", "bob"): 1})
    assert _chunk_rows(path) == 11  # the retained copy still uses it
    store.commit_routing(  # a newer version replaces the retained copy
        document=("pub", "doc", 2), appends=[],
        retained=Retained(publisher="pub", document="doc", version=2, payload=b"v2"),
    )
    assert _chunk_rows(path) == 0 and store.staged_bodies() == 0


def test_a_staged_body_nothing_refers_to_is_let_go(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    stored = _staged(store)
    assert store.staged_bodies() == 1 and _chunk_rows(path) == 11
    store.let_go(stored)
    assert store.staged_bodies() == 0 and _chunk_rows(path) == 0


def test_parts_that_do_not_follow_leave_nothing_staged(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    joiner: Joiner[StoredBytes] = Joiner(
        100_000, "a test message", lambda size: store.stage(size, chunk_bytes=CHUNK)
    )
    joiner.add(PartData(DATA[:3_000], len(DATA), True))
    assert _chunk_rows(path) == 3
    with pytest.raises(ProtocolError, match="states a size"):
        joiner.add(PartData(DATA[3_000:6_000], len(DATA), True))
    assert store.staged_bodies() == 0 and _chunk_rows(path) == 0


def test_a_site_that_stopped_mid_document_deletes_it_when_it_opens(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    staging = store.stage(len(DATA), chunk_bytes=CHUNK)
    staging.write(DATA[:5_500])  # five chunks committed, then the site dies
    _staged(store)  # and one staged whole but never routed
    store.commit_routing(
        document=("pub", "doc", 1), appends=[],
        retained=Retained(publisher="pub", document="doc", version=1, payload=b"kept"),
    )
    assert store.staged_bodies() == 2 and _chunk_rows(path) == 16
    reopened = Store(path)
    assert reopened.staged_bodies() == 0 and _chunk_rows(path) == 0
    assert reopened.retained() == []  # (retain is 0 here: nothing else was touched)


def test_a_chunk_gone_is_a_lookup_error(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    stored = _staged(store)
    store.let_go(stored)
    with pytest.raises(LookupError, match="not in the store"):
        stored.read(0, 10)
