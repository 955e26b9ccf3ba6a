"""A publish request with too many key messages for one, as several that keep its order.

Theory of operation. Before a document the key service sends its key outbox with it: group
rekeys, enrolments, retained documents' keys, entitlements. After a thousand members join, that
outbox outgrows one gRPC message (64 MiB), however small the document. A site routes the parts
of one ``PublishRequest`` in a fixed order (rekeys, then the addressed key messages and
entitlements, then the document, then the checkpoint), and a request may carry key messages
alone. So :func:`split_request` leaves a request whose key messages fit one request as it is,
and otherwise sends the addressed parts first, in that same order, in key-only requests of at
most ``max_bytes`` each, then the document and checkpoint in a last one: the site receives the
same messages in the same order. Only the document's request is atomic with the document, which
is all the order needs: keys are never behind the document that needs them.

The document's request has no size limit here: a request larger than the publisher's part size
travels in parts (:mod:`xdn.parts`, ``PublishParts``), up to the site's ``document_bytes``.

A part also holds at most ``max_messages`` key messages: a site routes one request in one step
of its event loop, so thousands of enrolments in one request would hold every stream of the
site still while they are routed (~20 s for 10,000 members); in parts, streams run between them.
"""

from __future__ import annotations

from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["split_request"]

_ADDRESSED = ("rekeys", "keys", "document_keys", "entitlements")  # the site's order
_FIELD_OVERHEAD = 6  # a field's tag and length prefix, at most


def split_request(
    request: pb.PublishRequest, max_bytes: int, max_messages: int
) -> list[pb.PublishRequest]:
    """``request`` as requests of at most ``max_messages`` key messages and ``max_bytes`` of
    them each (key messages first), the document and checkpoint, of any size, in the last.

    Raises:
        ValueError: one key message is larger than ``max_bytes`` on its own.
    """
    count = sum(len(getattr(request, name)) for name in _ADDRESSED)
    if count <= max_messages and _addressed_bytes(request, max_bytes) <= max_bytes:
        return [request]  # (the document is not measured: that would serialize it)
    out: list[pb.PublishRequest] = []
    chunk, size, count = pb.PublishRequest(), 0, 0
    for name in _ADDRESSED:
        for message in getattr(request, name):
            needed = message.ByteSize() + _FIELD_OVERHEAD
            if needed > max_bytes:
                raise ValueError(f"a {name} message of {needed} bytes is over {max_bytes}")
            if size + needed > max_bytes or count == max_messages:
                out.append(chunk)
                chunk, size, count = pb.PublishRequest(), 0, 0
            getattr(chunk, name).append(message)
            size += needed
            count += 1
    if size:
        out.append(chunk)
    last = pb.PublishRequest()
    if request.HasField("dissemination"):
        last.dissemination.CopyFrom(request.dissemination)
    if request.HasField("checkpoint"):
        last.checkpoint.CopyFrom(request.checkpoint)
    if last.HasField("dissemination") or last.HasField("checkpoint"):
        out.append(last)
    return out


def _addressed_bytes(request: pb.PublishRequest, enough: int) -> int:
    """The encoded size of ``request``'s key messages, counted until it passes ``enough``."""
    total = 0
    for name in _ADDRESSED:
        for message in getattr(request, name):
            size: int = message.ByteSize()
            total += size + _FIELD_OVERHEAD
            if total > enough:
                return total
    return total
