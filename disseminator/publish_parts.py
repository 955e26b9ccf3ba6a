"""A publish request sent in parts (``PublishParts``), taken under the site's limits.

Theory of operation. A publisher whose serialized ``PublishRequest`` is larger than its part
size sends the bytes as consecutive ``Part`` messages on one ``PublishParts`` call
(:mod:`xdn.parts`); joined, they are the serialized request. The site takes them with a
:class:`~xdn.parts.Joiner` whose limit is ``[limits] document_bytes``, into a sink: the site
stages them in its store as they come (:meth:`disseminator.store.Store.stage`), never joining
them in memory, and reads the request from the stored bytes
(:mod:`disseminator.stored_documents`); tests may join them in memory.

* the first part states the joined size, so a request over the limit is refused before any
  more of it is read (:class:`~disseminator.limits.LimitExceeded` naming ``document_bytes``);
* a part that does not follow (no size on the first, a size on a later one, more bytes than
  announced, a last part short of them), a call that half-closes before its last part, and
  joined bytes that are not a ``PublishRequest`` are each a
  :class:`~xdn.errors.ProtocolError` saying which;
* the call ends at its last part: nothing after it is read.

Memory: each part counts against the site's memory budget from the moment it arrives until
it is in the sink (``on_part`` releases it: :meth:`disseminator.intake.KeptStream.release`),
so a publish holds about one part at a time, whatever the document's size; a part the budget
cannot hold reaches :func:`joined_request` as a refusal.

No gRPC here: the parts come as an async iterator of ``Part`` messages (or the intake's
markers), so the joining is tested without sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from google.protobuf.message import DecodeError

from disseminator.intake import well_formed
from disseminator.limits import LimitExceeded
from xdn.errors import ProtocolError
from xdn.parts import Joiner, MemorySink, PartData, PartLimitError, Sink
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["WHAT", "Joined", "joined_request", "parsed_request"]

WHAT = "a PublishRequest sent in parts"

_M = TypeVar("_M")


@dataclass(frozen=True, slots=True, kw_only=True)
class Joined(Generic[_M]):
    """A request taken from its parts."""

    message: _M  # as the sink keeps it (joined bytes, staged bytes)
    parts: int  # how many parts it came in
    size: int  # its serialized size in bytes


async def joined_request(
    first: Any,
    rest: AsyncIterator[Any],
    *,
    limit: int,
    open_sink: Callable[[int], Sink[_M]] = MemorySink,  # type: ignore[assignment]
    on_part: Callable[[], None] = lambda: None,
) -> Joined[_M]:
    """The ``PublishRequest`` whose parts are ``first`` and the messages of ``rest``, as
    ``open_sink``'s sink keeps it.

    Args:
        first: the call's first message (``None``: the caller half-closed without one).
        rest: the messages after it; read up to the last part, no further.
        limit: the largest joined request taken, in bytes (``[limits] document_bytes``).
        open_sink: where the parts go (:class:`~xdn.parts.Joiner`; default: in memory).
        on_part: called once each part is in the sink (to release its memory share).

    Raises:
        LimitExceeded: the first part announces more than ``limit`` bytes, or a part does not
            fit the memory budget.
        ProtocolError: a part is malformed or does not follow, the call ended before the last
            part, or the joined bytes are not a ``PublishRequest``.
    """
    joiner: Joiner[_M] = Joiner(limit, WHAT, open_sink)
    message, count, announced = first, 0, 0
    try:
        while message is not None:
            well_formed(message)  # a part the budget refused, or one that is not a Part
            count += 1
            announced = announced or message.size
            taken = _add(joiner, message)
            on_part()
            if taken is not None:
                return Joined(message=taken, parts=count, size=announced)
            message = await anext(rest, None)
        held = joiner.held_bytes
    finally:
        joiner.reset()  # (a call cut short: what its parts left in the sink goes)
    if not count:
        raise ProtocolError("a PublishParts call ended without any part")
    raise ProtocolError(
        f"the PublishParts call ended after {count} parts, holding {held} of the "
        f"{announced} bytes announced: its last part (more = false) never came"
    )


def _add(joiner: Joiner[_M], message: pb.Part) -> _M | None:
    """Give ``joiner`` one part; the joined bytes at the last one."""
    try:
        return joiner.add(PartData(message.data, message.size, message.more))
    except PartLimitError as exc:
        raise LimitExceeded(
            f"{WHAT} announces {exc.size} bytes", limit="document_bytes", value=exc.limit,
            advice="publish a smaller document; sites take larger ones only if their "
            "operator raises [limits] document_bytes",
        ) from None


def parsed_request(data: bytes | bytearray) -> pb.PublishRequest:
    """Joined bytes read as the ``PublishRequest`` they should be.

    Raises:
        ProtocolError: they are not one.
    """
    try:
        request: pb.PublishRequest = pb.PublishRequest.FromString(data)
    except DecodeError:
        raise ProtocolError(
            f"the {len(data)} bytes joined from the parts of a PublishParts call are not a "
            "valid PublishRequest"
        ) from None
    return request
