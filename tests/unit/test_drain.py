"""Graceful drain: what is left, what was acknowledged, and when the wait ends."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import grpc

from disseminator.drain import DrainReport, acknowledged_since, backlog, drain
from disseminator.routing import Destination
from disseminator.server import DisseminatorService, add_to_server
from tests.unit.site_fixtures import site_node
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

ALICE = Destination("subscriber", "alice")
BOB = Destination("subscriber", "bob")
D2 = Destination("link", "d2")


def test_backlog_lists_only_destinations_with_unacknowledged_deliveries() -> None:
    assert backlog({ALICE: (7, 4), BOB: (3, 3), D2: (0, 0)}) == {ALICE: 3}


def test_acknowledged_since_counts_progress_of_the_same_destinations() -> None:
    before = {ALICE: (7, 4), D2: (2, 0)}
    after = {ALICE: (9, 9), D2: (0, 0)}  # d2 was dropped meanwhile: no progress to count
    assert acknowledged_since(before, after) == 5


def test_report_says_what_was_drained_and_what_stays_on_disk() -> None:
    report = DrainReport(drained=5, left={D2: 1, ALICE: 2}, queued_on_disk=12, seconds=0.84)
    assert report.describe() == (
        "drained 5 deliveries in 0.8s; 12 stay queued on disk for the next start "
        "(connected but not acknowledged: link d2 (1), subscriber alice (2))"
    )
    assert DrainReport(drained=0).describe().endswith("0 stay queued on disk for the next start")


@dataclass
class _Store:
    cursors: dict[Destination, tuple[int, int]]
    elsewhere: int = 0  # queued for destinations that are not connected

    def cursor(self, kind: str, name: str) -> tuple[int, int]:
        return self.cursors.get(Destination(kind, name), (0, 0))

    def queued_total(self) -> int:
        return self.elsewhere + sum(n for n in backlog(self.cursors).values())


@dataclass
class _Node:
    store: _Store
    online: set[Destination] = field(default_factory=set)

    def connected(self) -> frozenset[Destination]:
        return frozenset(self.online)


def test_drain_waits_until_every_connected_destination_acknowledged() -> None:
    node = _Node(_Store({ALICE: (3, 0), BOB: (5, 1)}, elsewhere=4), online={ALICE})

    async def run() -> DrainReport:
        async def acknowledge() -> None:
            for seq in (1, 2, 3):
                await asyncio.sleep(0.1)
                node.store.cursors[ALICE] = (3, seq)

        acking = asyncio.ensure_future(acknowledge())
        report = await drain(node, timeout=30)  # type: ignore[arg-type]
        await acking
        return report

    report = asyncio.run(run())
    assert report.drained == 3
    assert report.left == {}
    assert report.queued_on_disk == 4 + 4  # bob is not connected: his queue stays on disk
    assert report.seconds < 30


def test_drain_gives_up_at_its_timeout_and_reports_what_is_left() -> None:
    node = _Node(_Store({ALICE: (3, 1)}), online={ALICE})
    report = asyncio.run(drain(node, timeout=0.3))  # type: ignore[arg-type]
    assert report.left == {ALICE: 2}
    assert 0.3 <= report.seconds < 10


def test_drain_stops_waiting_for_a_destination_that_disconnects() -> None:
    node = _Node(_Store({ALICE: (3, 1)}), online={ALICE})

    async def run() -> DrainReport:
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, node.online.clear)
        return await drain(node, timeout=30)  # type: ignore[arg-type]

    report = asyncio.run(run())
    assert report.left == {}
    assert report.queued_on_disk == 2
    assert report.seconds < 30


def test_a_second_signal_cuts_the_drain_short() -> None:
    node = _Node(_Store({ALICE: (3, 1)}), online={ALICE})

    async def run() -> DrainReport:
        hurry = asyncio.Event()
        asyncio.get_running_loop().call_later(0.2, hurry.set)
        return await drain(node, timeout=30, interrupted=hurry)  # type: ignore[arg-type]

    report = asyncio.run(run())
    assert report.left == {ALICE: 2}
    assert report.seconds < 30


def test_a_draining_site_refuses_new_publish_subscribe_and_link_calls() -> None:
    async def run() -> list[tuple[grpc.StatusCode, str]]:
        service = DisseminatorService(SimpleNamespace(site=SimpleNamespace(name="d9")))
        service.stop_taking_work()
        server = grpc.aio.server()
        add_to_server(service, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        refusals = []
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = pb_grpc.DisseminatorStub(channel)
                calls = [
                    stub.Publish(pb.PublishRequest(), timeout=10),
                    stub.Subscribe(iter([pb.ClientMessage()]), timeout=10).read(),
                    stub.Link(iter([pb.LinkMessage()]), timeout=10).read(),
                ]
                for call in calls:
                    try:
                        await call
                    except grpc.aio.AioRpcError as exc:
                        refusals.append((exc.code(), exc.details() or ""))
        finally:
            await server.stop(0)
        return refusals

    refusals = asyncio.run(run())
    assert refusals == [(grpc.StatusCode.UNAVAILABLE, "site d9 is shutting down")] * 3


def test_a_stream_the_site_ended_is_not_connected_once_it_disconnects(tmp_path: Path) -> None:
    """``end_stream`` (an invalid request, a revocation) moves the generation on so that the
    stream finishes; its ``disconnect`` with the generation it started with must still take
    it off the connected list, or a drain waits its whole timeout for a stream long gone."""
    node = site_node(tmp_path, "d2", "WorkOrder", lambda: datetime.now(UTC))
    node.connect(ALICE, 0, 8)
    started = node.generation(ALICE)
    node.end_stream(ALICE)
    assert node.connected() == {ALICE}  # ending, until its handler returns
    node.disconnect(ALICE, started)
    assert node.connected() == frozenset()


def test_a_superseded_stream_does_not_disconnect_its_successor(tmp_path: Path) -> None:
    node = site_node(tmp_path, "d2", "WorkOrder", lambda: datetime.now(UTC))
    node.connect(ALICE, 0, 8)
    first = node.generation(ALICE)
    node.connect(ALICE, 0, 8)  # the subscriber reconnected before the old handler ended
    node.disconnect(ALICE, first)
    assert node.connected() == {ALICE}
