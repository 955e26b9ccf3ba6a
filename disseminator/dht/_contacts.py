"""Admitting contacts to the routing table: verification pings and LRU-eviction pings.

A peer that answered us, or called us (its id then comes from its TLS certificate), is only a
*claim* about an ``id → address`` pair until we have pinged that address and checked the
answer (:mod:`disseminator.dht._proof`). :class:`ContactKeeper` turns such claims into
verified contacts, feeds them to the pure :class:`RoutingTable`, and performs the pings the
table asks for when a bucket is full. All pings run as bounded background tasks, so no answer
to a peer ever waits on them; a known contact at a known address is simply refreshed.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from disseminator.dht._errors import PeerUnavailableError
from disseminator.dht._ids import Contact, NodeId
from disseminator.dht._table import Outcome, RoutingTable
from disseminator.dht._transport import Transport
from xdn.errors import PeerError

__all__ = ["ContactKeeper", "with_timeout"]

log = logging.getLogger(__name__)

T = TypeVar("T")
_VERIFIED_CACHE = 4096


async def with_timeout(call: Coroutine[Any, Any, T], seconds: float) -> T:
    """Await ``call``; a timeout becomes :class:`PeerUnavailableError`."""
    try:
        async with asyncio.timeout(seconds):
            return await call
    except TimeoutError:
        raise PeerUnavailableError(f"the peer did not answer within {seconds:g} s") from None


class ContactKeeper:
    """Keeps one node's routing table fed with verified, live contacts."""

    def __init__(
        self,
        *,
        own: Contact,
        table: RoutingTable,
        transport: Transport,
        now_ms: Callable[[], int],
        timeout_s: float,
        max_tasks: int,
        reverify_ms: int = 300_000,
    ) -> None:
        self.own = own
        self.table = table
        self._transport = transport
        self._now_ms = now_ms
        self._timeout_s = timeout_s
        self._max_tasks = max_tasks
        self.reverify_ms = reverify_ms
        self._verified: OrderedDict[Contact, int] = OrderedDict()
        self._verifying: set[str] = set()
        self._pinging: set[NodeId] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def ping(self, address: str) -> Contact:
        """Ping ``address`` with the RPC timeout; the verified contact answering there."""
        return await with_timeout(self._transport.ping(address), self._timeout_s)

    def heard_from(self, peer: Contact | None, *, verify: bool = True) -> None:
        """``peer`` answered or called us: refresh it, or verify it in the background.

        With ``verify=False`` (a Ping: answering a verification ping with another would let two
        nodes ping each other forever) only contacts already verified are refreshed.
        """
        if peer is None or peer.node_id == self.own.node_id:
            return
        known = self.table.get(peer.node_id)
        now = self._now_ms()
        if known is not None and known.address == peer.address:
            self.table.observe(known, now)
        elif now - self._verified.get(peer, -self.reverify_ms) < self.reverify_ms:
            self._admit(peer)
        elif (
            verify
            and peer.address not in self._verifying
            and peer.address != self.own.address
            and len(self._tasks) < self._max_tasks
        ):
            self._verifying.add(peer.address)
            self._spawn(self._verify(peer.address))

    def failed(self, peer: Contact) -> None:
        """An RPC to ``peer`` failed (the table evicts it after repeated failures)."""
        self.table.rpc_failed(peer.node_id, self._now_ms())
        self._verified.pop(peer, None)

    async def _verify(self, address: str) -> None:
        try:
            contact = await self.ping(address)
        except PeerError as exc:
            log.debug("contact at %s not verified: %s", address, exc)
            return
        finally:
            self._verifying.discard(address)
        self.admit(contact)

    def admit(self, contact: Contact) -> None:
        """Put a verified contact in the table; if its bucket is full, ping the oldest first."""
        self._verified[contact] = self._now_ms()
        self._verified.move_to_end(contact)
        while len(self._verified) > _VERIFIED_CACHE:
            self._verified.popitem(last=False)
        self._admit(contact)

    def _admit(self, contact: Contact) -> None:
        seen = self.table.observe(contact, self._now_ms())
        oldest = seen.ping
        if (
            seen.outcome is Outcome.PING_OLDEST
            and oldest is not None
            and oldest.node_id not in self._pinging
            and len(self._tasks) < self._max_tasks
        ):
            self._pinging.add(oldest.node_id)
            self._spawn(self._ping_oldest(oldest))

    async def _ping_oldest(self, oldest: Contact) -> None:
        try:
            answer = await self.ping(oldest.address)
        except PeerError:
            self.table.ping_failed(oldest.node_id, self._now_ms())
        else:
            if answer.node_id == oldest.node_id:
                self.table.ping_answered(oldest.node_id, self._now_ms())
            else:
                self.table.ping_failed(oldest.node_id, self._now_ms())
        finally:
            self._pinging.discard(oldest.node_id)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("DHT background task failed", exc_info=task.exception())

    @property
    def busy(self) -> bool:
        """Whether background pings are running."""
        return bool(self._tasks)

    async def settle(self, *, rounds: int = 16) -> None:
        """Wait for the background pings (and the ones they start), up to ``rounds`` waves."""
        for _ in range(rounds):
            if not self._tasks:
                return
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def cancel(self) -> None:
        """Stop every background ping."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
