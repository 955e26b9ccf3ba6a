"""Which of a site's commits wait for the disk (disseminator.store, "Durability"): everything an
acknowledgement follows is synced; dropping what the log or the uplink already has is not."""

from __future__ import annotations

from pathlib import Path

from disseminator.store import Append, Store


def _commits(store: Store, action: object) -> list[str]:
    """The synchronous level in force at each COMMIT the store's main connection runs."""
    db = store._db  # (the connection whose commits precede acknowledgements)
    levels: list[str] = []

    def trace(statement: str) -> None:
        if statement.strip().upper() == "COMMIT":
            levels.append({0: "OFF", 1: "NORMAL", 2: "FULL"}[_level(db)])

    db.set_trace_callback(trace)
    try:
        assert callable(action)
        action()
    finally:
        db.set_trace_callback(None)
    return levels


def _level(db: object) -> int:
    (level,) = db.execute("PRAGMA synchronous").fetchone()  # type: ignore[attr-defined]
    return int(level)


def _routed_with_graphs(store: Store) -> None:
    store.commit_routing(
        document=None,
        appends=[Append(kind="subscriber", name="alice", payload=b"doc")],
        log_graphs=[b"<a> <b> <c> .\n"],
    )


def test_routing_and_receipts_commit_synced_their_cleanup_does_not(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    assert _commits(store, lambda: _routed_with_graphs(store)) == ["FULL"]
    staged = store.take_log_outbox()
    assert len(staged) == 1
    assert _commits(store, lambda: store.clear_log_outbox([i for i, _ in staged])) == ["NORMAL"]
    assert store.take_log_outbox() == []

    def accept() -> None:
        store.accept_receipt(
            receipt_id="r1", publisher="p", data=b"receipt", log_graphs=b"", at_ms=1
        )

    assert _commits(store, accept) == ["FULL"]
    queued = store.queued_receipts(limit=10)
    assert _commits(store, lambda: store.drop_receipts(r.seq for r in queued)) == ["NORMAL"]
    assert store.receipts_queued() == 0
    # and the connection is back to syncing for what comes next
    assert _commits(store, lambda: _routed_with_graphs(store)) == ["FULL"]


def test_a_store_that_never_syncs_stays_so(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite", durable=False)
    _routed_with_graphs(store)
    staged = store.take_log_outbox()
    assert _commits(store, lambda: store.clear_log_outbox([i for i, _ in staged])) == ["NORMAL"]
    assert _commits(store, lambda: _routed_with_graphs(store)) == ["NORMAL"]
