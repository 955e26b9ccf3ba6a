"""Heartbeats on the site's side of one Subscribe or Link stream, and the end of a dead peer's.

The servicer wraps both directions of a stream in one :class:`StreamWatch`:

* :meth:`StreamWatch.incoming` reads the peer's messages for the ack reader, noting that the
  peer is alive and consuming its heartbeats (they never reach the queue logic);
* :meth:`StreamWatch.outgoing` wraps the queue pump, sends a heartbeat when the stream was idle
  for one interval, and ends the call with ``UNAVAILABLE`` once the peer was silent for three
  of its intervals. The destination stays registered (under the site's lease) with its queue,
  so a peer that comes back resumes where it stopped.

A stream stuck writing to a peer that stopped reading never gets back to that check; a second
timer cuts such a stream one interval later by cancelling its handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from disseminator.metrics import SiteMetrics
from disseminator.routing import Destination
from xdn import identity
from xdn.heartbeat import Heartbeats, PeerSilent

__all__ = ["READ_AHEAD", "StreamWatch"]

log = logging.getLogger(__name__)

#: Deliveries a site's stream reads from its queue before gRPC takes them: enough that a busy
#: stream always has the next one ready, few enough that a peer that stops reading costs
#: little memory (with 16, ~75 KB a stream at 10,000 stalled subscribers; see docs/network.md,
#: "Memory per subscriber").
READ_AHEAD = 2

T = TypeVar("T")


class StreamWatch:
    """Heartbeats and failure detection of the site's end of one stream."""

    def __init__(
        self, destination: Destination, interval_s: float, *, site: str, metrics: SiteMetrics
    ) -> None:
        self._destination = destination
        self._site = site
        self._metrics = metrics
        self._beats = Heartbeats(interval_s)
        self._dead = False

    @property
    def _peer(self) -> str:
        kind = "downlink" if self._destination.kind == "link" else self._destination.kind
        name = self._destination.name
        person = identity.person(name)  # a subscriber: its name, then its certificate
        return f"{kind} {person}" + (f" ({name})" if person != name else "")

    async def incoming(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The peer's messages without its heartbeats, each one noted as a sign of life.

        Raises:
            ProtocolError: a heartbeat announces no interval.
        """
        async for message in requests:
            self._beats.heard()
            if isinstance(message, Message) and message.WhichOneof("kind") == "heartbeat":
                self._beats.heard_heartbeat(message.heartbeat.interval_ms)
                continue
            yield message

    async def outgoing(
        self,
        context: grpc.aio.ServicerContext,
        messages: AsyncIterator[T],
        heartbeat: Callable[[int], T],
    ) -> AsyncGenerator[T, None]:
        """``messages`` with heartbeats in between; ends the call once the peer is dead."""
        cutter = asyncio.ensure_future(self._cut_when_stuck(asyncio.current_task()))
        try:
            async with contextlib.aclosing(
                self._beats.outgoing(
                    messages, heartbeat, end_when_silent=True, read_ahead=READ_AHEAD
                )
            ) as stream:
                async for message in stream:
                    yield message
        except PeerSilent as exc:
            self._declare_dead(exc)
            await context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"site {self._site} heard nothing from {self._peer} for {exc.silence_s:.1f}s; "
                "stream ended (its queue is kept)",
            )
        finally:
            cutter.cancel()

    async def _cut_when_stuck(self, handler: asyncio.Task[Any] | None) -> None:
        """Cancel the handler of a dead peer's stream that is stuck in a write."""
        silence = await self._beats.silent(grace=self._beats.state.interval_s)
        if handler is not None and not self._dead:
            self._declare_dead(PeerSilent(silence, self._beats.state.silence_limit))
            handler.cancel()

    def _declare_dead(self, exc: PeerSilent) -> None:
        self._dead = True
        self._metrics.dead_peers.labels(kind=self._destination.kind).inc()
        log.warning(
            "%s taken for dead: %s; its stream is ended, its queue stays under the lease",
            self._peer, exc,
        )
