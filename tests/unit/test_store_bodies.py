"""A document's bytes are stored once, however many deliveries (and a retained copy) share them
(disseminator.store): each destination gets exactly its own bytes, from memory or from disk;
the body goes with the last row that refers to it; an older store keeps working."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from disseminator.store import Append, Body, Piece, Retained, Store

BODY = Body(b"MANIFEST" + b"A" * 1000 + b"B" * 500 + b"C" * 200)
MANIFEST, A, B, C = (0, 8), (8, 1008), (1008, 1508), (1508, 1708)
VIEWS: dict[str, tuple[Piece, ...]] = {  # destination → its pieces (head, spans, provenance)
    "alice": (b"<head-a>", MANIFEST, A, b"<prov-a>"),
    "bob": (b"<head-b>", MANIFEST, (8, 1508), b"<prov-b>"),
    "d2": (b"<head-d2>", MANIFEST, C),
}


def _expected(name: str) -> bytes:
    return b"".join(p if isinstance(p, bytes) else BODY.data[p[0]:p[1]] for p in VIEWS[name])


def _route(store: Store, body: Body = BODY, *, document: str = "doc", version: int = 1) -> None:
    store.commit_routing(
        document=("pub", document, version),
        appends=[Append(kind="link" if name == "d2" else "subscriber", name=name, body=body,
                        pieces=pieces) for name, pieces in VIEWS.items()],
        retained=Retained(publisher="pub", document=document, version=version, body=body,
                          pieces=((0, len(body.data)), b"<prov-in>")),
    )  # fmt: skip


def _bodies(path: Path) -> list[tuple[int, int]]:
    """(size, rows using it) of each stored body."""
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT length(data), (SELECT COUNT(*) FROM deliveries WHERE body = b.id) "
            "+ (SELECT COUNT(*) FROM retained WHERE body = b.id) FROM bodies b ORDER BY id"
        )
        return [(int(n), int(r)) for n, r in rows]


def _kind(name: str) -> str:
    return "link" if name == "d2" else "subscriber"


def test_one_body_serves_every_destination_from_memory_and_from_disk(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path, retain=2)
    _route(store)
    assert _bodies(path) == [(len(BODY.data), 4)]  # three deliveries and the retained copy
    for name in VIEWS:  # just queued: from memory
        assert store.pending(_kind(name), name, after=0, limit=5) == [(1, _expected(name))]
    reopened = Store(path, retain=2)  # after a restart: read back and assembled
    for name in VIEWS:
        assert reopened.pending(_kind(name), name, after=0, limit=5) == [(1, _expected(name))]
    (kept,) = reopened.retained()
    assert kept.dissemination() == BODY.data + b"<prov-in>"


def test_the_body_goes_with_the_last_row_that_uses_it(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path, retain=1)
    _route(store)
    store.ack("subscriber", "alice", 1)
    assert _bodies(path) == [(len(BODY.data), 3)]
    assert store.drop_destination("link", "d2") == 1
    store.ack("subscriber", "bob", 1)
    assert _bodies(path) == [(len(BODY.data), 1)]  # the retained copy still needs it
    _route(store, Body(b"MANIFEST" + b"x" * 1700), document="doc", version=2)  # replaces it
    assert [refs for _, refs in _bodies(path)] == [4]
    for name in VIEWS:  # each up to what it was assigned (d2's queue started again at 1)
        store.ack(_kind(name), name, store.cursor(_kind(name), name)[0])
    assert [refs for _, refs in _bodies(path)] == [1]


def test_a_full_queue_takes_no_reference(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path, max_queue=1)
    _route(store)
    _route(store, document="other")  # every queue is full: nothing queued, nothing kept
    assert _bodies(path) == [(len(BODY.data), 3)]


def test_a_store_written_before_shared_bodies_still_serves_its_queue(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    with sqlite3.connect(path) as db:
        db.executescript(
            "CREATE TABLE deliveries (kind TEXT NOT NULL, name TEXT NOT NULL, "
            "seq INTEGER NOT NULL, payload BLOB NOT NULL, PRIMARY KEY (kind, name, seq)) "
            "WITHOUT ROWID;"
            "CREATE TABLE destinations (kind TEXT NOT NULL, name TEXT NOT NULL, "
            "next_seq INTEGER NOT NULL DEFAULT 1, acked INTEGER NOT NULL DEFAULT 0, "
            "PRIMARY KEY (kind, name));"
            "INSERT INTO destinations VALUES ('subscriber', 'alice', 2, 0);"
            "INSERT INTO deliveries VALUES ('subscriber', 'alice', 1, x'6f6c64');"
        )
    store = Store(path)
    _route(store)
    assert store.pending("subscriber", "alice", after=0, limit=5) == [
        (1, b"old"), (2, _expected("alice"))
    ]
    store.ack("subscriber", "alice", 2)
    assert store.pending("subscriber", "alice", after=0, limit=5) == []


def test_a_store_that_counted_references_in_the_body_row_is_migrated(tmp_path: Path) -> None:
    """Counting in the row rewrote the whole multi-megabyte row at every acknowledgement."""
    path = tmp_path / "counted.sqlite"
    Store(path, retain=1).close()  # today's tables, then the body table as it was
    with sqlite3.connect(path) as db:
        db.executescript(
            "DROP TABLE bodies;"
            "CREATE TABLE bodies (id INTEGER PRIMARY KEY, data BLOB NOT NULL, "
            "refs INTEGER NOT NULL);"
        )
    store = Store(path, retain=1)
    _route(store)
    assert _bodies(path) == [(len(BODY.data), 4)]
    for name in VIEWS:
        store.ack(_kind(name), name, 1)
    _route(store, Body(b"MANIFEST" + b"y" * 900), version=2)  # the retained copy is replaced
    assert [size for size, _ in _bodies(path)] == [len(b"MANIFEST") + 900]
    with sqlite3.connect(path) as db:
        assert "refs" not in {row[1] for row in db.execute("PRAGMA table_info(bodies)")}
