"""A full state directory: SQLITE_FULL and ENOSPC become StorageFull (rolled back, counted),
new work is refused below the free-space floor, and a downlink acknowledges nothing it could
not store. Space "returns" by raising SQLite's page limit or lowering the floor."""

from __future__ import annotations

import asyncio
import errno
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from disseminator.limits import Limits
from disseminator.node import SiteNode
from disseminator.routing import Destination
from disseminator.storage import StorageGuard, free_bytes, is_full_error
from disseminator.store import Store
from disseminator.uplink import Uplink, applied_counter
from tests.unit.site_fixtures import site_node
from xdn.errors import ConfigError, StorageFull
from xdn.wire.v1 import dissemination_pb2 as pb

_NEVER = 2**62  # a floor no disk reaches: the directory is "full"


@pytest.fixture
def node(tmp_path: Path) -> SiteNode:
    site = site_node(tmp_path, "d4", "Production", lambda: datetime.now(UTC))
    site.storage.directory = tmp_path  # (what the daemon gives it: [site] state_dir)
    return site


def _fill(store: Store) -> None:
    """Let the store's file grow no more (what a full disk does to SQLite)."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    store._db.execute(f"PRAGMA max_page_count={pages}")


def test_sqlite_full_is_recognised_and_other_errors_are_not(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    _fill(store)
    with pytest.raises(sqlite3.OperationalError) as caught:
        store.save_crl(1, b"x" * 1_000_000)
    assert "full" in str(caught.value)
    assert is_full_error(caught.value)
    assert is_full_error(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_full_error(OSError(errno.EACCES, "Permission denied"))
    assert not is_full_error(sqlite3.OperationalError("no such table: nothing"))


def test_a_failed_transaction_is_rolled_back_and_the_next_works_once_space_returns(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "site.sqlite")
    counted: list[str] = []
    guard = StorageGuard(
        tmp_path, min_free_bytes=1, rollback=store.rollback, counted=counted.append
    )
    _fill(store)
    with pytest.raises(StorageFull) as caught, guard.mapped("publish"):
        store._db.execute("BEGIN IMMEDIATE")  # a transaction the failure leaves open
        store._db.execute("INSERT INTO crl (id, number, pem) VALUES (1, '1', ?)",
                          (b"x" * 1_000_000,))
    assert not store._db.in_transaction  # rolled back: nothing half-written, nothing locked
    assert str(tmp_path) in str(caught.value) and "bytes free" in str(caught.value)
    assert caught.value.free_bytes is not None and caught.value.directory == tmp_path
    assert counted == ["publish"]
    assert store.saved_crl() is None
    store._db.execute("PRAGMA max_page_count=1073741823")  # space returns
    store.save_crl(1, b"x" * 1_000_000)
    assert store.saved_crl() == (1, b"x" * 1_000_000)


def test_enospc_from_a_file_write_becomes_storage_full(tmp_path: Path) -> None:
    guard = StorageGuard(tmp_path, min_free_bytes=1)
    with pytest.raises(StorageFull) as caught, guard.mapped("log", "writing the log"):
        raise OSError(errno.ENOSPC, "No space left on device")
    assert isinstance(caught.value.__cause__, OSError)
    assert str(caught.value).startswith("writing the log refused")
    with pytest.raises(PermissionError), guard.mapped("log"):  # not a full disk: unchanged
        raise PermissionError(errno.EACCES, "Permission denied")


def test_new_work_is_refused_below_the_floor(tmp_path: Path) -> None:
    free = free_bytes(tmp_path)
    StorageGuard(tmp_path, min_free_bytes=1).check("publish")
    StorageGuard(None, min_free_bytes=_NEVER).check("publish")  # a store in memory
    with pytest.raises(StorageFull, match="min_free_bytes"):
        StorageGuard(tmp_path, min_free_bytes=free + 2**40).check("publish")


def test_the_floor_is_a_site_limit() -> None:
    assert Limits().min_free_bytes == 64 * 1024 * 1024
    assert Limits.from_mapping({"min_free_bytes": 4096}, source="t").min_free_bytes == 4096
    with pytest.raises(ConfigError, match="min_free_bytes"):
        Limits.from_mapping({"min_free_bytes": 0}, source="t")


def test_a_site_counts_refusals_by_operation(node: SiteNode) -> None:
    node.storage.min_free_bytes = _NEVER
    with pytest.raises(StorageFull):
        node.storage.check("subscription")
    counter = node.metrics.storage_full.labels(operation="subscription")
    assert counter._value.get() == 1


def test_a_downlink_acknowledges_nothing_it_could_not_store(node: SiteNode) -> None:
    uplink = Uplink(node, "127.0.0.1:1")
    uplink.resume_after()
    node.storage.min_free_bytes = _NEVER
    with pytest.raises(StorageFull), uplink._storing(1):
        uplink._apply(pb.Delivery(sequence=1))
    assert uplink._outgoing.empty()  # no ack: the uplink keeps it and sends it again
    assert node.store.counter(applied_counter("127.0.0.1:1")) == 0
    node.storage.min_free_bytes = 1  # space returns
    with uplink._storing(1):
        uplink._apply(pb.Delivery(sequence=1))
    assert uplink._outgoing.get_nowait().ack.sequence == 1
    assert node.store.counter(applied_counter("127.0.0.1:1")) == 1



def test_the_write_ahead_log_stays_small(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    for number in range(1, 40):  # 39 MB written, one transaction each
        store.save_crl(number, bytes([number]) * 1_000_000)
    assert (tmp_path / "site.sqlite-wal").stat().st_size <= 9 * 1024 * 1024


def test_acknowledgements_not_committed_for_want_of_space_are_kept_and_retried_slowly(
    node: SiteNode,
) -> None:
    async def commit_fails() -> tuple[dict[Destination, int], float, float]:
        loop = asyncio.get_running_loop()
        failed: asyncio.Future[int] = loop.create_future()
        failed.set_exception(sqlite3.OperationalError("database or disk is full"))
        node._acks_committed({("subscriber", "alice"): 3}, failed)
        assert node._ack_flush is not None
        when = node._ack_flush.when()
        node._ack_flush.cancel()
        return dict(node._acks), when, loop.time()

    kept, when, now = asyncio.run(commit_fails())
    assert kept == {Destination("subscriber", "alice"): 3}  # kept, to commit later
    assert when - now >= 0.9  # not a busy loop while the disk is full
    assert node.metrics.storage_full.labels(operation="ack")._value.get() == 1
