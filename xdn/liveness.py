"""When to send a heartbeat and when a silent peer is dead: the pure rules of one stream end.

Theory of operation. Each end of a long-lived stream (Subscribe, Link) announces an interval
and promises to send *something* — a delivery, an ack, or at least a ``Heartbeat`` — at least
that often. :class:`Liveness` keeps, on one end, the time it last sent and the time it last
heard anything from the peer (seconds on a monotonic clock the caller supplies):

* a heartbeat is due when we have sent nothing for one of our own intervals;
* the peer is dead when it has been silent for :data:`MISSED_INTERVALS` of *its* announced
  intervals (our own interval until its first heartbeat says otherwise; an announced interval
  is held to at most :data:`MAX_PEER_INTERVAL_S`, so no peer can buy itself days of silence);
* when our own event loop was stalled (we woke up much later than we meant to), messages the
  peer sent meanwhile may still be waiting to be read: its silence is then not held against it
  (:meth:`Liveness.on_stall` restarts its clock); likewise, a verdict is never given without
  having listened for a quarter interval first (:meth:`Liveness.until_judged`), so that what
  arrived while we were busy elsewhere is read before the peer is judged.

No I/O and no clock here; :mod:`xdn.heartbeat` drives it on an asyncio loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdn.errors import ProtocolError

__all__ = ["MAX_PEER_INTERVAL_S", "MISSED_INTERVALS", "Liveness", "interval_ms"]

MISSED_INTERVALS = 3
MAX_PEER_INTERVAL_S = 300.0
# The largest interval a Heartbeat can announce (uint32 milliseconds).
_MAX_INTERVAL_MS = 2**32 - 1


def interval_ms(seconds: float) -> int:
    """The wire form (``Heartbeat.interval_ms``) of a heartbeat interval in seconds.

    Raises:
        ValueError: not a positive interval a Heartbeat can announce.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise TypeError("a heartbeat interval is a number of seconds")
    milliseconds = round(seconds * 1000)
    if not 1 <= milliseconds <= _MAX_INTERVAL_MS:
        raise ValueError(f"heartbeat interval {seconds!r}s is out of range")
    return milliseconds


@dataclass(slots=True)
class Liveness:
    """Heartbeat bookkeeping of one end of one stream."""

    interval_s: float
    last_sent: float
    last_heard: float
    peer_interval_s: float | None = None

    def __post_init__(self) -> None:
        interval_ms(self.interval_s)  # validates

    @classmethod
    def start(cls, interval_s: float, *, now: float) -> Liveness:
        """A stream that opened at ``now``: counts as having just sent and just heard."""
        return cls(interval_s=interval_s, last_sent=now, last_heard=now)

    @property
    def silence_limit(self) -> float:
        """How long the peer may stay silent before it is taken for dead."""
        return MISSED_INTERVALS * (self.peer_interval_s or self.interval_s)

    def on_sent(self, now: float) -> None:
        self.last_sent = max(self.last_sent, now)

    def on_heard(self, now: float) -> None:
        self.last_heard = max(self.last_heard, now)

    def on_heartbeat(self, announced_ms: int, now: float) -> None:
        """The peer sent a Heartbeat announcing its interval.

        Raises:
            ProtocolError: the announced interval is zero.
        """
        if announced_ms <= 0:
            raise ProtocolError("a Heartbeat must announce a positive interval_ms")
        self.peer_interval_s = min(announced_ms / 1000, MAX_PEER_INTERVAL_S)
        self.on_heard(now)

    def on_stall(self, now: float) -> None:
        """Our own loop was stalled until ``now``: do not count that time as the peer's silence."""
        self.on_heard(now)

    def heartbeat_due(self, now: float) -> bool:
        return self.until_heartbeat(now) == 0

    def until_heartbeat(self, now: float) -> float:
        """Seconds until a heartbeat is due (0 when it is)."""
        return max(0.0, self.last_sent + self.interval_s - now)

    def silence(self, now: float) -> float:
        """Seconds since the peer last sent anything."""
        return max(0.0, now - self.last_heard)

    def dead(self, now: float) -> bool:
        return self.until_dead(now) == 0

    def until_dead(self, now: float) -> float:
        """Seconds until the peer is taken for dead if it stays silent (0 when it is)."""
        return max(0.0, self.last_heard + self.silence_limit - now)

    def until_judged(self, now: float) -> float:
        """How long to listen before judging the peer: until it is due to be dead, but at least
        a quarter of our interval (what it sent while we were busy may not be read yet)."""
        return max(self.until_dead(now), self.interval_s / 4)

    def overslept(self, *, meant: float, now: float) -> bool:
        """Whether a wake-up meant for ``meant`` came so late that our loop was stalled."""
        return now - meant > self.interval_s / 2
