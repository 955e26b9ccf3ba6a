"""This site as a downlink: keep a Link stream to the uplink open and apply what arrives.

The link states the members registered here (and behind our own downlinks) whenever they
change; the uplink re-evaluates them and sends what they may receive. Each delivery is routed
on (to our subscribers and downlinks) in one transaction that also records its sequence number,
so after a crash or a reconnect the uplink resumes right after the last delivery applied here:
nothing lost, nothing applied twice.

Both ends send a heartbeat on an idle link; an uplink silent for three of its intervals is
taken for dead and the link is reconnected (see :mod:`xdn.heartbeat`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import grpc

from disseminator.node import SiteNode
from xdn.errors import PeerError
from xdn.grpc_tls import CHANNEL_OPTIONS, channel_credentials
from xdn.heartbeat import Heartbeats
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

__all__ = ["Uplink"]

log = logging.getLogger(__name__)

_APPLIED = "uplink_applied"


class Uplink:
    """The Link client of one site."""

    def __init__(self, node: SiteNode, address: str, *, heartbeat_s: float = 5.0) -> None:
        self._node = node
        self._address = address
        self._heartbeat_s = heartbeat_s
        self._outgoing: asyncio.Queue[pb.LinkMessage] = asyncio.Queue()
        self.connected = asyncio.Event()

    def interest_changed(self) -> None:
        """Send our members upstream (called by the node on every change)."""
        members = [self._node.member(r) for r in self._node.table.members()]
        self._outgoing.put_nowait(pb.LinkMessage(interest=pb.InterestUpdate(members=members)))

    async def run(self) -> None:
        """Stay linked, reconnecting with exponential backoff."""
        delay = 0.2
        while True:
            try:
                await self._link_once()
                delay = 0.2
            except (grpc.aio.AioRpcError, PeerError) as exc:
                details = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
                log.warning("uplink %s: %s; retrying in %.1fs", self._address, details, delay)
            finally:
                self.connected.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _link_once(self) -> None:
        node = self._node
        credentials = channel_credentials(node.site.tls)
        async with grpc.aio.secure_channel(
            self._address, credentials, options=CHANNEL_OPTIONS
        ) as channel:
            stub = pb_grpc.DisseminatorStub(channel)
            while not self._outgoing.empty():  # superseded by the fresh state sent below
                self._outgoing.get_nowait()

            async def outgoing() -> AsyncIterator[pb.LinkMessage]:
                yield pb.LinkMessage(
                    hello=pb.LinkHello(
                        site=node.site.name,
                        block=node.site.block,
                        resume_after=node.store.counter(_APPLIED),
                    )
                )
                members = [node.member(r) for r in node.table.members()]
                yield pb.LinkMessage(interest=pb.InterestUpdate(members=members))
                while True:
                    yield await self._outgoing.get()

            watch = Heartbeats(self._heartbeat_s)
            call = stub.Link(watch.outgoing(outgoing(), _heartbeat, opening=1))
            self.connected.set()
            log.info("linked to uplink %s", self._address)
            while (delivery := await watch.receive(call.read())) is not grpc.aio.EOF:
                if delivery.WhichOneof("body") == "heartbeat":
                    watch.heard_heartbeat(delivery.heartbeat.interval_ms)
                else:
                    self._apply(delivery)

    def _apply(self, delivery: pb.Delivery) -> None:
        counter = (_APPLIED, delivery.sequence)
        kind = delivery.WhichOneof("body")
        try:
            if kind == "key":
                self._node.route(keys=[delivery.key], counter=counter)
            elif kind == "rekey":
                self._node.route(rekeys=[delivery.rekey], counter=counter)
            elif kind == "document_keys":
                self._node.route(document_keys=[delivery.document_keys], counter=counter)
            elif kind == "checkpoint":
                self._node.route(checkpoint=delivery.checkpoint, counter=counter)
            elif kind == "entitlement":
                self._node.route(entitlements=[delivery.entitlement], counter=counter)
            else:
                self._node.route(dissemination=delivery.dissemination, counter=counter)
        except PeerError as exc:
            log.warning("refused delivery %d from uplink: %s", delivery.sequence, exc)
            self._node.route(counter=counter)  # skip it for good, and say so upstream
        self._outgoing.put_nowait(pb.LinkMessage(ack=pb.Ack(sequence=delivery.sequence)))


def _heartbeat(interval_ms: int) -> pb.LinkMessage:
    return pb.LinkMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))
