"""The site's end of a stream over real grpc.aio (in-process, loopback): heartbeats and cut-offs.

A minimal servicer wires :class:`StreamWatch` the way ``DisseminatorService`` does, so that the
peer's behaviour (silent, heartbeating, not reading) can be scripted exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from disseminator.metrics import SiteMetrics
from disseminator.routing import Destination
from disseminator.stream_watch import READ_AHEAD, StreamWatch
from xdn import heartbeat
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

INTERVAL = 0.2
BIG = b"x" * 200_000


class _Site(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """Subscribe streams ``outgoing`` (idle by default) through a StreamWatch."""

    def __init__(self, outgoing: Any = None) -> None:
        self.metrics = SiteMetrics("test")
        self.heard: list[str] = []
        self.handed = 0  # messages the stream handed to gRPC
        self.ended = asyncio.Event()
        self._outgoing = outgoing

    async def _read(self, requests: AsyncIterator[Any]) -> None:
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            async for message in requests:
                self.heard.append(message.WhichOneof("kind"))

    async def Subscribe(self, request_iterator: Any, context: Any) -> AsyncIterator[Any]:
        watch = StreamWatch(
            Destination("subscriber", "alice"), INTERVAL, site="d9", metrics=self.metrics
        )
        reader = asyncio.ensure_future(self._read(watch.incoming(request_iterator)))
        source = self._outgoing() if self._outgoing else _idle()
        try:
            async with contextlib.aclosing(watch.outgoing(context, source, _beat)) as out:
                async for message in out:
                    self.handed += 1
                    yield message
        finally:
            reader.cancel()
            self.ended.set()

    def dead(self) -> float:
        return self.metrics.registry.get_sample_value(
            "xdn_dead_peers_total", {"kind": "subscriber"}
        ) or 0.0


async def _idle() -> AsyncIterator[pb.ServerMessage]:
    await asyncio.Event().wait()
    yield pb.ServerMessage()


async def _flood() -> AsyncIterator[pb.ServerMessage]:
    for i in range(1, 10_000):
        yield pb.ServerMessage(
            delivery=pb.Delivery(sequence=i, dissemination=pb.Dissemination(provenance=BIG))
        )


def _beat(interval_ms: int) -> pb.ServerMessage:
    return pb.ServerMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))


async def _serving(site: _Site) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    pb_grpc.add_DisseminatorServicer_to_server(site, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def _requests(*, heartbeat_every: float | None) -> AsyncIterator[pb.ClientMessage]:
    yield pb.ClientMessage(subscribe=pb.SubscribeRequest())
    while True:
        await asyncio.sleep(heartbeat_every or 3600)
        yield pb.ClientMessage(heartbeat=pb.Heartbeat(interval_ms=int(INTERVAL * 1000)))


def test_a_silent_subscriber_is_cut_off_with_unavailable_and_counted() -> None:
    async def run() -> tuple[grpc.aio.AioRpcError, list[str], float]:
        site = _Site()
        server, address = await _serving(site)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                call = pb_grpc.DisseminatorStub(channel).Subscribe(
                    _requests(heartbeat_every=None)
                )
                kinds = []
                with pytest.raises(grpc.aio.AioRpcError) as failure:
                    async for message in call:
                        kinds.append(message.WhichOneof("kind"))
                return failure.value, kinds, site.dead()
        finally:
            await server.stop(0)

    error, kinds, dead = asyncio.run(asyncio.wait_for(run(), 30))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    assert "site d9 heard nothing from subscriber alice" in (error.details() or "")
    assert kinds and set(kinds) == {"heartbeat"}  # the site kept the idle stream alive
    assert dead == 1


def test_a_heartbeating_subscriber_stays_connected_and_its_heartbeats_are_swallowed() -> None:
    async def run() -> tuple[int, list[str], float]:
        site = _Site()
        server, address = await _serving(site)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                call = pb_grpc.DisseminatorStub(channel).Subscribe(
                    _requests(heartbeat_every=INTERVAL / 2)
                )
                beats = 0
                async for message in call:
                    assert message.WhichOneof("kind") == "heartbeat"
                    beats += 1
                    if beats == 12:  # about 2.4 s: four times the silence limit
                        break
                call.cancel()
                return beats, site.heard, site.dead()
        finally:
            await server.stop(0)

    beats, heard, dead = asyncio.run(asyncio.wait_for(run(), 30))
    assert beats == 12
    assert dead == 0
    assert heard == ["subscribe"]  # heartbeats never reach the ack reader


def test_a_stream_stuck_writing_to_a_peer_that_stopped_reading_is_cut_holding_few() -> None:
    """Until it is cut, the site keeps for a peer that reads nothing more the delivery gRPC is
    writing and at most :data:`READ_AHEAD` more (fewer than a stream reads ahead by
    default)."""
    produced, most_held = 0, 0

    async def counted() -> AsyncIterator[pb.ServerMessage]:
        nonlocal produced, most_held
        async for message in _flood():
            produced += 1
            most_held = max(most_held, produced - (site.handed - 1))  # (1: the heartbeat)
            yield message

    site = _Site(counted)

    async def run() -> tuple[bool, float]:
        server, address = await _serving(site)
        try:
            async with grpc.aio.insecure_channel(address) as channel:
                call = pb_grpc.DisseminatorStub(channel).Subscribe(
                    _requests(heartbeat_every=None)
                )
                await call.read()  # then read nothing more: the site's writes back up
                await asyncio.wait_for(site.ended.wait(), 20)
                call.cancel()
                return site.ended.is_set(), site.dead()
        finally:
            await server.stop(0)

    ended, dead = asyncio.run(asyncio.wait_for(run(), 30))
    assert ended
    assert dead == 1
    assert most_held == READ_AHEAD < heartbeat.READ_AHEAD
