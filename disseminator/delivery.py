"""The delivery/acknowledgement protocol of one stream, as a pure state machine.

Every destination (a subscriber, a downlink) has one queue with sequence numbers assigned in
order. A connection to it is a :class:`StreamCursor`: it sends deliveries after ``sent`` while
fewer than ``window`` are unacknowledged (flow control: a slow receiver stops its own stream,
nobody else's), and moves ``acked`` forward on acknowledgements. Illegal events raise
:class:`~xdn.errors.ProtocolError` before any state changes.

Resuming (after a reconnect or a restart of either side): the receiver says which sequence it
last *applied*; the queue says which it last saw *acknowledged*. Deliveries up to the larger of
the two are done; sending resumes after it. A receiver claiming more than was ever assigned has
lost track of this queue (e.g. the site's state was rebuilt): it is resumed after the queue's
acknowledgement instead, and told so, and dedupes by document identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdn.errors import ProtocolError

__all__ = ["StreamCursor", "resume_point"]


def resume_point(*, acked: int, assigned: int, applied: int) -> int:
    """The sequence after which a (re)connected receiver continues."""
    if not 0 <= acked <= assigned:
        raise ValueError("queue cursor out of order")
    if applied < 0:
        raise ProtocolError("resume point must not be negative")
    if applied > assigned:
        return acked
    return max(acked, applied)


@dataclass(slots=True)
class StreamCursor:
    """What one connection has sent and had acknowledged."""

    sent: int
    acked: int
    window: int = 1024

    def __post_init__(self) -> None:
        if self.window < 1 or self.sent < self.acked or self.acked < 0:
            raise ValueError("invalid stream cursor")

    @property
    def room(self) -> int:
        """How many more deliveries may be sent before an acknowledgement is needed."""
        return max(0, self.window - (self.sent - self.acked))

    def on_sent(self, seq: int) -> None:
        if seq <= self.sent:
            raise ProtocolError(f"delivery {seq} sent out of order (last sent {self.sent})")
        if self.room == 0:
            raise ProtocolError("flow-control window exceeded")
        self.sent = seq

    def on_ack(self, seq: int) -> bool:
        """Record an acknowledgement; return whether it moved the cursor."""
        if seq > self.sent:
            raise ProtocolError(f"acknowledgement of {seq}, but only {self.sent} were sent")
        if seq <= self.acked:
            return False
        self.acked = seq
        return True
