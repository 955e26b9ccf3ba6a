"""Acknowledgements are committed on a worker thread while the loop goes on, one flush at a
time, and what arrives meanwhile is committed by the next (disseminator.node)."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime
from pathlib import Path

from disseminator.routing import Destination
from disseminator.store import Append, Store
from tests.unit.eventually import eventually
from tests.unit.site_fixtures import site_node

CAROL = Destination("subscriber", "carol")


def _queued(store: Store, count: int) -> None:
    store.commit_routing(
        document=None, appends=[Append(kind="subscriber", name="carol", payload=b"%d" % i)
                                for i in range(count)],
    )


def test_acknowledgements_are_committed_on_the_worker_thread_then_accounted_on_the_loop(
    tmp_path: Path,
) -> None:
    node = site_node(tmp_path, "d1", "ProductionProcess", lambda: datetime.now(UTC))
    _queued(node.store, 6)
    committing_threads: list[str] = []
    commit = node.store.commit_acks_aside
    release = threading.Event()

    def held(acks: dict[tuple[str, str], int]) -> int:
        committing_threads.append(threading.current_thread().name)
        release.wait(30)  # the loop must go on while this commit is under way
        return commit(acks)

    node.store.commit_acks_aside = held  # type: ignore[method-assign]

    async def run() -> tuple[int, int, int]:
        cursor = node.connect(CAROL, 0, 6)
        pump = node.pump(CAROL, cursor, node.generation(CAROL))
        for _ in range(6):
            await anext(pump)
        node.on_ack(CAROL, cursor, 2)
        node._flush_acks_aside()  # (what the ack window's timer does)
        under_way = node._acks_committing
        assert under_way is not None
        node.on_ack(CAROL, cursor, 5)  # meanwhile: kept for the next flush
        node._flush_acks_aside()  # one flush at a time: this one waits
        assert node._acks_committing is under_way and node.store.queued_total() == 6
        release.set()
        await asyncio.wait_for(asyncio.shield(under_way), 30)
        after_first = node.store.queued_total()
        await eventually(lambda: node.store.queued_total() == 1, timeout=30)  # the next flush
        await node.settle_acks()
        return after_first, node.store.queued_total(), len(committing_threads)

    after_first, after_all, commits = asyncio.run(run())
    assert (after_first, after_all, commits) == (4, 1, 2)
    assert set(committing_threads) != {threading.current_thread().name}
    assert all(name.startswith("acks") for name in committing_threads)
    node.store.close()
    reopened = Store(tmp_path / "site.sqlite")  # committed for good
    assert reopened.cursor("subscriber", "carol")[1] == 5
    assert reopened.queued_total() == 1


def test_a_failed_commit_keeps_its_acknowledgements_for_the_next(tmp_path: Path) -> None:
    node = site_node(tmp_path, "d1", "ProductionProcess", lambda: datetime.now(UTC))
    _queued(node.store, 3)
    commit = node.store.commit_acks_aside
    failures = [RuntimeError("database is locked")]

    def flaky(acks: dict[tuple[str, str], int]) -> int:
        if failures:
            raise failures.pop()
        return commit(acks)

    node.store.commit_acks_aside = flaky  # type: ignore[method-assign]

    async def run() -> int:
        cursor = node.connect(CAROL, 0, 3)
        pump = node.pump(CAROL, cursor, node.generation(CAROL))
        for _ in range(3):
            await anext(pump)
        node.on_ack(CAROL, cursor, 3)
        node._flush_acks_aside()
        failed = node._acks_committing
        assert failed is not None
        await asyncio.gather(failed, return_exceptions=True)
        await eventually(lambda: node.store.queued_total() == 0, timeout=30)  # taken again
        await node.settle_acks()
        return node.store.cursor("subscriber", "carol")[1]

    assert asyncio.run(run()) == 3
