"""A publish request sent in parts (``PublishParts``), joined under the site's limits.

Theory of operation. A publisher whose serialized ``PublishRequest`` is larger than its part
size sends the bytes as consecutive ``Part`` messages on one ``PublishParts`` call
(:mod:`xdn.parts`); joined, they are the serialized request. The site joins them with a
:class:`~xdn.parts.Joiner` whose limit is ``[limits] document_bytes``:

* the first part states the joined size, so a request over the limit is refused before any
  more of it is read (:class:`~disseminator.limits.LimitExceeded` naming ``document_bytes``);
* a part that does not follow (no size on the first, a size on a later one, more bytes than
  announced, a last part short of them), a call that half-closes before its last part, and
  joined bytes that are not a ``PublishRequest`` are each a
  :class:`~xdn.errors.ProtocolError` saying which;
* the call ends at its last part: nothing after it is read.

Memory: each part counts against the site's memory budget from the moment it arrives until
the request it makes has been handled (the intake keeps the parts' shares for the whole call,
:mod:`disseminator.intake`), so concurrent large publishes never hold more than
``memory_bytes``; a part the budget cannot hold reaches :func:`joined_request` as a refusal.

No gRPC here: the parts come as an async iterator of ``Part`` messages (or the intake's
markers), so the joining is tested without sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError

from disseminator.intake import well_formed
from disseminator.limits import LimitExceeded
from xdn.errors import ProtocolError
from xdn.parts import Joiner, PartData, PartLimitError
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["Joined", "joined_request"]

WHAT = "a PublishRequest sent in parts"


@dataclass(frozen=True, slots=True, kw_only=True)
class Joined:
    """A request joined from its parts."""

    request: pb.PublishRequest
    parts: int  # how many parts it came in
    size: int  # its serialized size in bytes


async def joined_request(first: Any, rest: AsyncIterator[Any], *, limit: int) -> Joined:
    """The ``PublishRequest`` whose parts are ``first`` and the messages of ``rest``.

    Args:
        first: the call's first message (``None``: the caller half-closed without one).
        rest: the messages after it; read up to the last part, no further.
        limit: the largest joined request taken, in bytes (``[limits] document_bytes``).

    Raises:
        LimitExceeded: the first part announces more than ``limit`` bytes, or a part does not
            fit the memory budget.
        ProtocolError: a part is malformed or does not follow, the call ended before the last
            part, or the joined bytes are not a ``PublishRequest``.
    """
    joiner = Joiner(limit, WHAT)
    message, count, announced = first, 0, 0
    while message is not None:
        well_formed(message)  # a part the budget refused, or one that is not a Part
        count += 1
        announced = announced or message.size
        data = _add(joiner, message)
        if data is not None:
            return Joined(request=_parsed(data), parts=count, size=len(data))
        message = await anext(rest, None)
    if not count:
        raise ProtocolError("a PublishParts call ended without any part")
    raise ProtocolError(
        f"the PublishParts call ended after {count} parts, holding {joiner.held_bytes} of the "
        f"{announced} bytes announced: its last part (more = false) never came"
    )


def _add(joiner: Joiner, message: pb.Part) -> bytearray | None:
    """Give ``joiner`` one part; the joined bytes at the last one."""
    try:
        return joiner.add(PartData(message.data, message.size, message.more))
    except PartLimitError as exc:
        raise LimitExceeded(
            f"{WHAT} announces {exc.size} bytes", limit="document_bytes", value=exc.limit,
            advice="publish a smaller document; sites take larger ones only if their "
            "operator raises [limits] document_bytes (at most memory_bytes)",
        ) from None


def _parsed(data: bytearray) -> pb.PublishRequest:
    try:
        request: pb.PublishRequest = pb.PublishRequest.FromString(data)
    except DecodeError:
        raise ProtocolError(
            f"the {len(data)} bytes joined from the parts of a PublishParts call are not a "
            "valid PublishRequest"
        ) from None
    return request
