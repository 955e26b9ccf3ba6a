"""Deliveries just queued go out from memory; what the streams get is always what the store
holds (disseminator.store)."""

from __future__ import annotations

from pathlib import Path

from disseminator.store import Append, Store


def _queue(store: Store, name: str, *payloads: bytes) -> None:
    store.commit_routing(
        document=None, appends=[Append(kind="subscriber", name=name, payload=p) for p in payloads]
    )


def test_pending_is_what_was_queued_from_memory_or_from_disk(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    _queue(store, "alice", b"one", b"two")
    assert store.pending("subscriber", "alice", after=0, limit=10) == [(1, b"one"), (2, b"two")]
    # sent once (taken from memory): a resend after a reconnect reads them back
    assert store.pending("subscriber", "alice", after=0, limit=10) == [(1, b"one"), (2, b"two")]
    reopened = Store(tmp_path / "site.sqlite")
    assert reopened.pending("subscriber", "alice", after=1, limit=10) == [(2, b"two")]


def test_a_dropped_queue_leaves_nothing_stale_for_its_successor(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    _queue(store, "alice", b"old")
    assert store.drop_destination("subscriber", "alice") == 1
    _queue(store, "alice", b"new")  # sequence 1 again
    assert store.pending("subscriber", "alice", after=0, limit=10) == [(1, b"new")]


def test_acknowledged_deliveries_are_forgotten(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    _queue(store, "alice", b"a", b"b", b"c")
    store.ack("subscriber", "alice", 2)
    assert store.pending("subscriber", "alice", after=0, limit=10) == [(3, b"c")]
