"""The inbox's table in the site store: durable, bounded, ordered; added to older stores."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import pytest

from disseminator.notifications import InboxFull, StoredNotification
from disseminator.store import Store


def _note(i: int) -> StoredNotification:
    return StoredNotification(
        id=f"n{i}", received_ms=1000 + i, sender="alice", sender_fingerprint="ab" * 32,
        media_type="application/ld+json",
        nquads=f'<https://a.example/{i}> <https://a.example/p> "{i}" .\n'.encode(),
    )


def test_notifications_survive_a_reopen_in_order(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    for i in (3, 1, 2):
        store.notifications.add(_note(i), capacity=10)
    store.close()
    again = Store(path)
    try:
        assert again.notifications.ids() == ["n3", "n1", "n2"]
        assert again.notifications.get("n1") == _note(1)
        assert again.notifications.get("missing") is None
        assert again.notifications.count() == 3
    finally:
        again.close()


def test_a_full_inbox_refuses_and_writes_nothing() -> None:
    store = Store(":memory:")
    store.notifications.add(_note(1), capacity=2)
    store.notifications.add(_note(2), capacity=2)
    with pytest.raises(InboxFull, match="holds 2 notifications"):
        store.notifications.add(_note(3), capacity=2)
    assert store.notifications.ids() == ["n1", "n2"]
    with pytest.raises(sqlite3.IntegrityError):
        store.notifications.add(_note(1), capacity=10)
    assert store.notifications.count() == 2


def test_a_store_written_before_the_inbox_gains_its_table(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE notifications")  # as a store of the previous release was
    db.commit()
    db.close()
    store = Store(path)
    try:
        store.notifications.add(_note(1), capacity=1)
        assert store.notifications.ids() == ["n1"]
    finally:
        store.close()


def test_pages_walk_every_notification_once_by_cursor() -> None:
    store = Store(":memory:")
    for i in range(7):
        store.notifications.add(_note(i), capacity=10)
    walked, after, pages = [], 0, 0
    while True:
        rows, more = store.notifications.page(after=after, limit=3)
        walked += [i for _, i in rows]
        pages += 1
        if not more:
            break
        after = rows[-1][0]
    assert walked == [f"n{i}" for i in range(7)] and pages == 3
    assert store.notifications.page(after=after, limit=3) == ([(7, "n6")], False)
    assert store.notifications.page(after=99, limit=3) == ([], False)
    with pytest.raises(ValueError, match="at least one"):
        store.notifications.page(after=0, limit=0)


def test_a_store_whose_inbox_predates_receipts_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE notifications")
    db.execute(  # the table as the previous release wrote it
        "CREATE TABLE notifications (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL "
        "UNIQUE, received_ms INTEGER NOT NULL, sender TEXT NOT NULL, sender_fingerprint TEXT "
        "NOT NULL, media_type TEXT NOT NULL, nquads BLOB NOT NULL)"
    )
    db.execute("INSERT INTO notifications (id, received_ms, sender, sender_fingerprint, "
               "media_type, nquads) VALUES ('old', 1, 'bob', '00', 'text/turtle', x'00')")
    db.commit()
    db.close()
    store = Store(path)
    try:
        old = store.notifications.get("old")
        assert old is not None and not old.receipt
        receipt = dataclasses.replace(_note(1), id="r1", receipt=True)
        assert store.notifications.add_receipt(receipt) is True
        assert store.notifications.add_receipt(receipt) is False  # once
        assert store.notifications.count(receipts=False) == 1
        with pytest.raises(ValueError, match="not a receipt"):
            store.notifications.add_receipt(_note(2))
    finally:
        store.close()


def test_a_store_whose_receipts_hold_whole_chains_gains_the_reference_columns(
    tmp_path: Path,
) -> None:
    path = tmp_path / "site.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE notifications")
    db.execute(  # the table as the release before receipts by reference wrote it
        "CREATE TABLE notifications (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL "
        "UNIQUE, received_ms INTEGER NOT NULL, sender TEXT NOT NULL, sender_fingerprint TEXT "
        "NOT NULL, media_type TEXT NOT NULL, nquads BLOB NOT NULL, receipt INTEGER NOT NULL "
        "DEFAULT 0)"
    )
    db.execute("INSERT INTO notifications (id, received_ms, sender, sender_fingerprint, "
               "media_type, nquads, receipt) VALUES ('whole', 1, 'd2', '00', "
               "'application/n-quads', x'0a', 1)")
    db.commit()
    db.close()
    store = Store(path)
    try:
        whole = store.notifications.get("whole")
        assert whole is not None and whole.receipt and whole.nquads == b"\n"
        assert (whole.via, whole.digest) == (None, None)  # served as it is
        by_reference = dataclasses.replace(
            _note(1), id="r1", receipt=True, via="https://d1.xdn.example/msg/d/v1/to-d2",
            digest="ab" * 32,
        )
        assert store.notifications.add_receipt(by_reference) is True
        assert store.notifications.get("r1") == by_reference
    finally:
        store.close()


@pytest.mark.parametrize("changes", [
    {"via": "https://d1.xdn.example/msg/d/v1/to-d2"},  # no digest
    {"digest": "ab" * 32},  # no message
    {"via": "https://d1.xdn.example/msg/d/v1/to-d2", "digest": "ab" * 32, "receipt": False},
])
def test_only_a_receipt_is_kept_by_reference_with_its_message_and_digest(
    changes: dict[str, object],
) -> None:
    with pytest.raises(ValueError, match="by reference"):
        dataclasses.replace(_note(1), **{"receipt": True, **changes})  # type: ignore[arg-type]


def _for(i: int, *readers: str) -> StoredNotification:
    return dataclasses.replace(_note(i), readers=frozenset(readers))


def test_a_party_pages_through_what_it_may_read_only() -> None:
    store = Store(":memory:")
    for i in range(9):  # carol may read every third
        store.notifications.add(_for(i, "https://alice.xdn.example/",
                                     *(["https://carol.xdn.example/"] if i % 3 == 0 else [])),
                                capacity=20)
    walked, after = [], 0
    while True:
        rows, more = store.notifications.page(after=after, limit=2,
                                              reader="https://carol.xdn.example/")
        walked += [i for _, i in rows]
        if not more:
            break
        after = rows[-1][0]
    assert walked == ["n0", "n3", "n6"]
    assert store.notifications.page(after=0, limit=20, reader="https://bob.xdn.example/") == (
        [], False)
    assert len(store.notifications.page(after=0, limit=20)[0]) == 9  # the site, auditors
    assert store.notifications.get("n3") == _for(3, "https://alice.xdn.example/",
                                                 "https://carol.xdn.example/")
    # the listing of one party is a range of the readers' key, not a scan of the inbox
    plan = " ".join(str(row[-1]) for row in store._db.execute(
        "EXPLAIN QUERY PLAN SELECT r.notification, n.id FROM notification_readers AS r "
        "JOIN notifications AS n ON n.seq = r.notification "
        "WHERE r.party = ? AND r.notification > ? ORDER BY r.notification LIMIT ?",
        ("x", 0, 3)))
    assert "SEARCH r USING PRIMARY KEY (party=? AND notification>?)" in plan, plan
    assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan


def test_readers_go_with_their_notification() -> None:
    store = Store(":memory:")
    with store._db:
        store._db.execute("BEGIN IMMEDIATE")
        store.notifications.add_receipt(dataclasses.replace(
            _for(1, "https://carol.xdn.example/"), receipt=True))
    store.notifications.add(_for(2, "https://carol.xdn.example/"), capacity=5)
    assert store.notifications.prune_receipts(before_ms=10**9) == 1
    assert store.notifications.page(after=0, limit=5, reader="https://carol.xdn.example/") == (
        [(2, "n2")], False)
    assert store._db.execute("SELECT COUNT(*) FROM notification_readers").fetchone() == (1,)


def test_notifications_stored_before_readers_are_their_senders_only(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    store.notifications.add(_note(1), capacity=5)
    store.notifications.add(dataclasses.replace(_note(2), sender="bob"), capacity=5)
    store.close()
    db = sqlite3.connect(path)
    db.execute("DROP TABLE notification_readers")  # as a store of the previous release was
    db.commit()
    db.close()
    again = Store(path)
    try:
        for who, ids in (("alice", ["n1"]), ("bob", ["n2"]), ("carol", [])):
            rows, _ = again.notifications.page(after=0, limit=5,
                                               reader=f"https://{who}.xdn.example/")
            assert [i for _, i in rows] == ids, who
        stored = again.notifications.get("n1")
        assert stored is not None and stored.readers == {"https://alice.xdn.example/"}
    finally:
        again.close()
