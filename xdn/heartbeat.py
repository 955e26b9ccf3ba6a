"""Heartbeats and failure detection of one stream end, driven on the asyncio loop.

:class:`Heartbeats` wraps the pure :class:`~xdn.liveness.Liveness` rules with a clock and
timers. A stream end uses it three ways:

* :meth:`Heartbeats.outgoing` wraps what the end sends: one heartbeat right after the
  stream's opening message (so the peer learns our interval at once), then one whenever
  nothing was sent for an interval (the site's stream handler may also end there, with
  :class:`PeerSilent`, once the peer is dead);
* :meth:`Heartbeats.receive` awaits the peer's next message, or raises :class:`PeerSilent`;
* :meth:`Heartbeats.heard` / :meth:`Heartbeats.heard_heartbeat` record what a separate reader
  task received, and :meth:`Heartbeats.silent` waits until the peer is dead.

Heartbeats are stream control only: the callers never queue, count or acknowledge them.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import Any, Generic, TypeVar

from xdn.errors import PeerError
from xdn.liveness import MAX_PEER_INTERVAL_S, Liveness, interval_ms

__all__ = ["READ_AHEAD", "Heartbeats", "PeerSilent"]

T = TypeVar("T")

_END = object()
_NOTHING = object()
#: Messages a stream's reader takes from its source before they are sent (by default).
READ_AHEAD = 16


class PeerSilent(PeerError):
    """The peer sent nothing (no message, ack or heartbeat) for too long: taken for dead."""

    def __init__(self, silence_s: float, limit_s: float) -> None:
        super().__init__(
            f"peer silent: nothing received for {silence_s:.1f}s (limit {limit_s:.1f}s)"
        )
        self.silence_s = silence_s


class Heartbeats:
    """Heartbeat sending and peer failure detection for one end of one stream."""

    def __init__(self, interval_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.interval_ms = interval_ms(interval_s)
        self.state = Liveness.start(interval_s, now=clock())
        self._reannounce = False
        self._ahead: _ReadAhead[Any] | None = None  # what outgoing() reads, while it runs
        self._waiting = False
        self._ring: asyncio.Future[None] | None = None  # see _alarm
        self._ring_at = 0.0
        self._wake_at = 0.0  # when the timer of _wait_to_send last set rings (loop time)

    @property
    def waiting(self) -> bool:
        """Whether :meth:`outgoing` has nothing ready to send and waits (for its source, its
        next heartbeat or the peer's limit): a state tests wait for rather than loop turns."""
        return self._waiting

    @property
    def read_ahead(self) -> int:
        """How many of its source's messages :meth:`outgoing` holds read and not yet sent."""
        return 0 if self._ahead is None else self._ahead.held()

    def slow_to(self, interval_s: float) -> None:
        """Send heartbeats no more often than every ``interval_s`` (at most
        :data:`~xdn.liveness.MAX_PEER_INTERVAL_S`), as a busy peer asked: one goes at once,
        announcing the new interval. Never speeds up."""
        interval_s = min(interval_s, MAX_PEER_INTERVAL_S)
        if interval_s > self.state.interval_s:
            self.state.interval_s = interval_s
            self.interval_ms = interval_ms(interval_s)
            self._reannounce = True
            if self._ahead is not None:
                self._ahead.wake()  # (the peer still judges us by the interval we announced)

    def heard(self) -> None:
        """The peer sent something (anything counts)."""
        self.state.on_heard(self._clock())

    def heard_heartbeat(self, announced_ms: int) -> None:
        """The peer sent a Heartbeat (raises ProtocolError if it announces no interval)."""
        self.state.on_heartbeat(announced_ms, self._clock())

    def _silent_error(self) -> PeerSilent:
        return PeerSilent(self.state.silence(self._clock()), self.state.silence_limit)

    async def _wait(self, future: asyncio.Future[Any], timeout: float | None) -> bool:
        """Wait for ``future`` at most ``timeout`` seconds; forgive the peer our own stalls."""
        if timeout is None:
            await asyncio.wait({future})
            return True
        meant = self._clock() + timeout
        done, _ = await asyncio.wait(
            {future, self._alarm(timeout)}, return_when=asyncio.FIRST_COMPLETED
        )
        now = self._clock()
        if self.state.overslept(meant=meant, now=now):  # (whatever woke us: the loop was held
            self.state.on_stall(now)  # up, so what the peer sent meanwhile is not read yet)
        return future in done

    async def _wait_to_send(self, ahead: _ReadAhead[Any], timeout: float | None) -> None:
        """Wait until ``ahead`` has a message, or at most ``timeout`` seconds; forgive the peer
        our own stalls.

        A stream waits here after every message it sends, so the timeout is a timer that wakes
        the very future the stream awaits (no :func:`asyncio.wait`, whose set-up and tear-down
        cost ~8 % of a site's loop at 2,000 busy streams). As in :meth:`_alarm`, a timer is set
        only when none is pending that rings at or before the moment asked for, and never
        cancelled: one that rings early wakes a stream that finds nothing to do and waits again.
        """
        arrival = ahead.arrival()
        if timeout is None:
            await arrival
            return
        loop = asyncio.get_running_loop()
        meant = self._clock() + timeout
        deadline = loop.time() + timeout
        if not (loop.time() < self._wake_at <= deadline):
            self._wake_at = deadline
            loop.call_at(deadline, ahead.wake)
        await arrival
        now = self._clock()
        if self.state.overslept(meant=meant, now=now):  # (as in _wait)
            self.state.on_stall(now)

    def _alarm(self, timeout: float) -> asyncio.Future[None]:
        """A future done in ``timeout`` seconds or sooner.

        A busy stream waits after every message, each time until a later moment; a timer per
        wait would cost the loop one timer scheduled and one cancelled per message (14 % of a
        site's loop with 10,000 streams). So a timer is set only when none is pending that rings
        at or before the moment asked for; one that rings early wakes a waiter that finds
        nothing due and waits again, at most once per interval. A timer is never cancelled: the
        two directions of a stream may wait on different ones.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        if self._ring is None or self._ring.done() or self._ring_at > deadline:
            self._ring = loop.create_future()
            self._ring_at = deadline
            loop.call_at(deadline, _ring, self._ring)
        return self._ring

    def _next_wake(self, *, beating: bool, judging: bool) -> tuple[float | None, bool]:
        """How long to wait for the next message to send, and whether to judge the peer then."""
        now = self._clock()
        beat = self.state.until_heartbeat(now) if beating else None
        judge = self.state.until_judged(now) if judging else None
        if judge is not None and (beat is None or judge <= beat):
            return judge, True
        return beat, False

    async def outgoing(
        self,
        source: AsyncIterator[T],
        heartbeat: Callable[[int], T],
        *,
        opening: int = 0,
        end_when_silent: bool = False,
        read_ahead: int = READ_AHEAD,
    ) -> AsyncGenerator[T, None]:
        """Yield ``source``'s messages, and ``heartbeat(interval_ms)`` when idle for an interval.

        The first heartbeat goes out at once after the ``opening`` messages (a stream's opening
        request must come first), so that the peer learns our interval from the start.
        The peer's silence is judged while waiting for ``source``; a stream kept busy writing
        to a dead peer soon blocks on flow control, which :meth:`silent` is there to catch.

        ``source`` is read up to ``read_ahead`` messages ahead by a task of its own
        (:class:`_ReadAhead`), so that a busy stream sends each message without a timed wait of
        its own. What is read ahead stays in memory while the peer does not read.

        Raises:
            PeerSilent: with ``end_when_silent``, once the peer is dead.
        """
        ahead = self._ahead = _ReadAhead(source, read_ahead)
        self._wake_at = 0.0  # (a timer left by an earlier call wakes that call's source)
        sent, announced = 0, False
        try:
            while True:
                if (not announced and sent >= opening) or (announced and self._reannounce):
                    announced, self._reannounce = True, False
                    self.state.on_sent(self._clock())
                    yield heartbeat(self.interval_ms)
                item = ahead.take()
                if item is not _NOTHING:
                    if item is _END:
                        return
                    sent += 1
                    self.state.on_sent(self._clock())
                    yield item
                    continue
                if announced and self._reannounce:
                    continue  # (asked to slow down while we were not waiting)
                timeout, judge = self._next_wake(beating=announced, judging=end_when_silent)
                self._waiting = True
                try:
                    await self._wait_to_send(ahead, timeout)
                finally:
                    self._waiting = False
                if ahead.ready():
                    continue
                now = self._clock()
                if judge and self.state.dead(now):
                    raise self._silent_error()
                if announced and self.state.heartbeat_due(now):
                    self._reannounce = False
                    self.state.on_sent(now)
                    yield heartbeat(self.interval_ms)
        finally:
            self._ahead = None
            ahead.close()

    async def receive(self, read: Awaitable[T]) -> T:
        """The peer's next message (``read``'s result).

        Raises:
            PeerSilent: the peer stayed silent until it was taken for dead.
        """
        task = asyncio.ensure_future(read)
        try:
            while not await self._wait(task, self.state.until_judged(self._clock())):
                if self.state.dead(self._clock()):
                    raise self._silent_error()
            self.heard()
            return task.result()
        finally:
            task.cancel()

    async def silent(self, *, grace: float = 0.0) -> float:
        """Return (the silence in seconds) once the peer was silent for its limit plus ``grace``."""
        never = asyncio.get_running_loop().create_future()
        while True:
            now = self._clock()
            if self.state.dead(now - grace):
                return self.state.silence(now)
            await self._wait(never, self.state.until_judged(now - grace) + 0.01)


def _ring(alarm: asyncio.Future[None]) -> None:
    if not alarm.done():
        alarm.set_result(None)


class _ReadAhead(Generic[T]):
    """A source read by a task of its own, at most ``limit`` messages ahead.

    The reader ends with ``_END`` after the source's last message, or with the exception
    that ended the source, raised by :meth:`take` in its turn.
    """

    def __init__(self, source: AsyncIterator[T], limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a stream reads at least one message ahead, not {limit}")
        self._source = source
        self._limit = limit
        self._items: collections.deque[Any] = collections.deque()
        self._arrived = asyncio.get_running_loop().create_future()
        self._room = asyncio.Event()
        self._failure: BaseException | None = None
        self._task = asyncio.ensure_future(self._read())

    async def _read(self) -> None:
        try:
            async for item in self._source:
                self._put(item)
                while len(self._items) >= self._limit:
                    self._room.clear()
                    await self._room.wait()
        except BaseException as exc:  # raised to the stream in its turn, by take
            self._failure = exc
            self._put(_END)
            if not isinstance(exc, Exception):
                raise  # (cancelled: by close, or with whatever ran the source)
            return
        self._put(_END)

    def _put(self, item: Any) -> None:
        self._items.append(item)
        if not self._arrived.done():
            self._arrived.set_result(None)

    def take(self) -> Any:
        """The next message, ``_END`` after the last, or ``_NOTHING`` if none is ready yet.

        Raises:
            Exception: what ended the source, once its messages before it were taken.
        """
        if not self._items:
            return _NOTHING
        item = self._items.popleft()
        if item is _END:
            self._items.appendleft(_END)
            if self._failure is not None:
                raise self._failure
        if len(self._items) < self._limit:
            self._room.set()
        return item

    def ready(self) -> bool:
        """Whether a message (or the end) is ready to take."""
        return bool(self._items)

    def held(self) -> int:
        """How many messages were read and not yet taken."""
        return sum(1 for item in self._items if item is not _END)

    def wake(self) -> None:
        """Wake whoever waits on :meth:`arrival`, though nothing arrived."""
        if not self._arrived.done():
            self._arrived.set_result(None)

    def arrival(self) -> asyncio.Future[None]:
        """A future done once a message (or the end) is ready to take."""
        if self._arrived.cancelled() or (self._arrived.done() and not self._items):
            self._arrived = asyncio.get_running_loop().create_future()  # (cancelled: with
            if self._items:  # the stream that awaited it)
                self._arrived.set_result(None)
        return self._arrived

    def close(self) -> None:
        self._task.cancel()
