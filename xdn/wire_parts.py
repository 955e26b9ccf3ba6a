"""Deliveries that arrive in parts, joined at the receiving end of a stream (a downlink site or
a subscriber; the framing is in :mod:`xdn.parts`).

A site sends a delivery larger than its part size as consecutive ``Delivery`` messages that
carry the same sequence number and one ``Part`` each; joined, the parts are that ``Delivery``,
serialized. :class:`DeliveryJoiner` checks what a dishonest or faulty sender could get wrong:
the parts of one delivery all carry its sequence number, no other delivery comes between them
(a heartbeat may), the joined bytes are a delivery with the same sequence number and not parts
again, and they fit the receiver's limit (checked at the first part, before anything is held).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from google.protobuf.message import DecodeError

from xdn.errors import ProtocolError
from xdn.parts import Joiner, MemorySink, PartData, Sink
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["DeliveryJoiner"]


class _Sequenced(Protocol):
    @property
    def sequence(self) -> int: ...


_D = TypeVar("_D", bound=_Sequenced)
_M = TypeVar("_M")


class DeliveryJoiner(Generic[_M]):
    """Joins the parts of each delivery a stream sends in parts.

    Args:
        limit: the largest delivery accepted in parts, in bytes.
        sender: who sends them, for errors (``"the uplink"``).
        open_sink: where a delivery's parts go (:class:`~xdn.parts.Joiner`; default: joined
            in memory).
    """

    def __init__(
        self,
        limit: int,
        sender: str,
        open_sink: Callable[[int], Sink[_M]] = MemorySink,  # type: ignore[assignment]
    ) -> None:
        self._joiner: Joiner[_M] = Joiner(limit, f"a delivery from {sender}", open_sink)
        self._sender = sender
        self._sequence = 0

    @property
    def pending(self) -> bool:
        """Whether a delivery is partly received."""
        return self._joiner.pending

    def add(self, delivery: pb.Delivery, parse: Callable[[_M], _D]) -> _D | None:
        """Take a ``Delivery`` carrying a part; return the whole delivery (read by ``parse``
        from what the sink kept) once its last part came. (A ``parse`` that fails lets go of
        what the sink kept itself.)

        Raises:
            ProtocolError: the part does not follow (see the module docstring), or the joined
                bytes are not a delivery ``parse`` reads.
        """
        if self._joiner.pending and delivery.sequence != self._sequence:
            self._joiner.reset()
            raise ProtocolError(
                f"{self._sender} sent a part of delivery {delivery.sequence} amid the parts of "
                f"delivery {self._sequence}"
            )
        self._sequence = delivery.sequence
        part = delivery.part
        joined = self._joiner.add(PartData(part.data, part.size, part.more))
        if joined is None:
            return None
        try:
            whole = parse(joined)
        except DecodeError as exc:
            raise ProtocolError(
                f"the parts of delivery {delivery.sequence} from {self._sender} do not join "
                f"to a delivery: {exc}"
            ) from None
        if whole.sequence != delivery.sequence or (
            isinstance(whole, pb.Delivery) and whole.WhichOneof("body") == "part"
        ):
            raise ProtocolError(
                f"the parts of delivery {delivery.sequence} from {self._sender} join to "
                f"another message (sequence {whole.sequence}, or parts again)"
            )
        return whole

    def reset(self) -> None:
        """Forget a delivery partly received (the stream ended)."""
        self._joiner.reset()

    def check_whole(self, delivery: _Sequenced) -> None:
        """A whole delivery (not a part, not a heartbeat) arrived: none may be partly received.

        Raises:
            ProtocolError: it came amid another delivery's parts.
        """
        if self._joiner.pending:
            self._joiner.reset()
            raise ProtocolError(
                f"{self._sender} sent delivery {delivery.sequence} amid the parts of delivery "
                f"{self._sequence}"
            )
