"""How requests reach the servicer: size limits and the memory budget before parsing, then a
parse that never raises.

The site's other services (Dht, Admin: small unary requests under the channel's limit) are
registered through :func:`add_lenient`, which keeps their generated handlers but answers a
request that does not decode with ``INVALID_ARGUMENT`` instead of gRPC's ``INTERNAL`` and a
logged traceback.

grpc.aio turns a failing request deserializer into status ``UNKNOWN`` before any handler runs,
and would parse any message of up to the channel's maximum size. So the Disseminator service is
registered here (:func:`add_to_server`) with deserializers that first check the message's size
against the site's limits and reserve large ones in the memory budget shared by all calls
(:mod:`disseminator.limits`), then decode leniently: a handler receives the message, a
:class:`Refused` (over a limit) or a :class:`Malformed` marker, and :func:`well_formed` turns
the markers into the typed errors the servicer maps to ``RESOURCE_EXHAUSTED`` and
``INVALID_ARGUMENT``. A large message keeps its share of the budget until its handler is done
with it.

``PublishParts`` is the exception to "large": a part of any size counts against the budget as
it arrives (before it is parsed), and the call keeps the shares of all its parts until its
handler returns, since the parts are held (joined, then parsed) until the request they make has
been handled (:mod:`disseminator.publish_parts`). A part is at most one gRPC message
(:data:`xdn.grpc_tls.MAX_MESSAGE_BYTES`, the server's receive limit); ``stream_message_bytes``
does not apply to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import grpc
from google.protobuf.message import DecodeError

from disseminator.limits import LARGE_MESSAGE_BYTES, LimitExceeded, Limits, MemoryBudget
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = [
    "KeptStream",
    "Malformed",
    "Refused",
    "Service",
    "add_lenient",
    "add_to_server",
    "well_formed",
]


class Service(Protocol):
    """What :func:`add_to_server` needs of the servicer (``DisseminatorService``)."""

    budget: MemoryBudget
    limits: Limits

    def Publish(self, request: Any, context: Any) -> Any: ...
    def PublishParts(self, requests: Any, context: Any) -> Any: ...
    def GetMembership(self, request: Any, context: Any) -> Any: ...
    def Subscribe(self, requests: Any, context: Any) -> Any: ...
    def Link(self, requests: Any, context: Any) -> Any: ...
    def Unsubscribe(self, request: Any, context: Any) -> Any: ...
    def Receipts(self, request: Any, context: Any) -> Any: ...
    def Notices(self, request: Any, context: Any) -> Any: ...
    def GetReceipts(self, request: Any, context: Any) -> Any: ...


class Malformed:
    """A request whose bytes are not a valid protobuf message.

    grpc.aio turns a failing request deserializer into status UNKNOWN before any handler runs;
    :func:`add_to_server` decodes leniently instead and hands the handler this marker, so the
    caller gets INVALID_ARGUMENT with a clear message.
    """

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


class Refused:
    """A request refused before it was parsed (too large for a limit); the handler says so."""

    def __init__(self, error: LimitExceeded) -> None:
        self.error = error


class _Held:
    """A large parsed request and its share of the memory budget, given back when dropped."""

    __slots__ = ("_budget", "_size", "message")

    def __init__(self, message: Any, budget: MemoryBudget, size: int) -> None:
        self.message, self._budget, self._size = message, budget, size

    def take(self) -> int:
        """Hand this message's share over to the caller (who releases it); return its size."""
        size, self._size = self._size, 0
        return size

    def __del__(self) -> None:
        self._budget.release(self._size)


def _lenient(
    message_type: Any, budget: MemoryBudget, check: Callable[[int, str], None] | None = None,
    *, large: int = LARGE_MESSAGE_BYTES,
) -> Any:
    """A request deserializer: cheap size checks first, then a parse that never raises.

    A message of ``large`` bytes or more is reserved in ``budget`` before it is parsed.
    """
    type_name = message_type.DESCRIPTOR.full_name

    def parse(data: bytes) -> Any:
        size = len(data)  # after any gRPC decompression
        try:
            if check is not None:
                check(size, type_name)
            if size >= large:
                budget.reserve(size, type_name)
        except LimitExceeded as exc:
            return Refused(exc)
        try:
            message = message_type.FromString(data)
        except DecodeError:
            message = Malformed(type_name)
        return _Held(message, budget, size) if size >= large else message

    return parse


def _unary(handler: Any) -> Any:
    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        held = request  # a _Held keeps its budget share until the handler is done
        return await handler(held.message if isinstance(held, _Held) else held, context)

    return call


async def _unwrapped(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for held in requests:  # held until the consumer asks for the next message
        yield held.message if isinstance(held, _Held) else held


def _stream(handler: Any) -> Any:
    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        async with contextlib.aclosing(handler(_unwrapped(requests), context)) as replies:
            async for reply in replies:
                yield reply

    return call


class KeptStream:
    """The messages of a client stream, each keeping its share of the memory budget until the
    call is done (:meth:`release`) or the handler lets go of them (:meth:`let_go`)."""

    def __init__(self, requests: AsyncIterator[Any], budget: MemoryBudget) -> None:
        self._requests = aiter(requests)
        self._budget = budget
        self._keeping = True
        self.size = 0  # bytes kept

    def __aiter__(self) -> KeptStream:
        return self

    async def __anext__(self) -> Any:
        held = await anext(self._requests)
        if not isinstance(held, _Held):
            return held
        if self._keeping:
            self.size += held.take()
        return held.message  # (not kept: its share goes when the caller drops it)

    def let_go(self) -> None:
        """Release what is kept, and keep nothing more (the messages are dropped as read)."""
        self._keeping = False
        self.release()

    def release(self) -> None:
        self._budget.release(self.size)
        self.size = 0


def _kept(handler: Any, budget: MemoryBudget) -> Any:
    """A stream-unary handler whose messages keep their budget shares until it returns,
    whichever way (a reply, a refusal, a cancelled call)."""

    async def call(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        kept = KeptStream(requests, budget)
        try:
            return await handler(kept, context)
        finally:
            kept.release()

    return call


def well_formed(message: Any) -> None:
    if isinstance(message, Refused):
        raise message.error
    if isinstance(message, Malformed):
        raise ProtocolError(
            f"malformed {message.type_name}: the bytes are not a valid protobuf message"
        )


class Handed:
    """Bytes of a stream response that gRPC takes once (by :func:`_serialized`).

    gRPC copies a response when it serializes it, but its handler loop keeps the object
    yielded until the next one is asked for, after the write completed, and so does the
    stream's own frame meanwhile: at 1,000 streams, ~35 MB of last deliveries. Yielded in a
    ``Handed``, what stays behind is an empty box.
    """

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        self._data = data

    def take(self) -> bytes:
        """The bytes, once; empty afterwards."""
        data, self._data = self._data, b""
        return data


def _serialized(message: Any) -> bytes:
    """A stream response: bytes already serialized (a queued delivery, sent as stored:
    :class:`~disseminator.payloads.Outgoing`, in a :class:`Handed`, or as bytes) or a message
    (a heartbeat, a Subscribed)."""
    if isinstance(message, Handed):
        return message.take()
    return message if isinstance(message, bytes) else bytes(message.SerializeToString())


def add_to_server(service: Service, server: grpc.aio.Server) -> None:
    """Register the Disseminator service with lenient request decoding under the site limits."""
    budget, stream_check = service.budget, service.limits.check_stream_message
    handlers = {
        "Publish": grpc.unary_unary_rpc_method_handler(
            _unary(service.Publish),
            request_deserializer=_lenient(pb.PublishRequest, budget),
            response_serializer=pb.PublishAck.SerializeToString,
        ),
        "PublishParts": grpc.stream_unary_rpc_method_handler(
            _kept(service.PublishParts, budget),
            request_deserializer=_lenient(pb.Part, budget, large=0),
            response_serializer=pb.PublishAck.SerializeToString,
        ),
        "GetMembership": grpc.unary_unary_rpc_method_handler(
            _unary(service.GetMembership),
            request_deserializer=_lenient(pb.MembershipRequest, budget),
            response_serializer=pb.Membership.SerializeToString,
        ),
        "Subscribe": grpc.stream_stream_rpc_method_handler(
            _stream(service.Subscribe),
            request_deserializer=_lenient(pb.ClientMessage, budget, stream_check),
            response_serializer=_serialized,
        ),
        "Link": grpc.stream_stream_rpc_method_handler(
            _stream(service.Link),
            request_deserializer=_lenient(pb.LinkMessage, budget, stream_check),
            response_serializer=_serialized,
        ),
        "Unsubscribe": grpc.unary_unary_rpc_method_handler(
            _unary(service.Unsubscribe),
            request_deserializer=_lenient(pb.UnsubscribeRequest, budget),
            response_serializer=pb.UnsubscribeAck.SerializeToString,
        ),
        "Receipts": grpc.unary_unary_rpc_method_handler(
            _unary(service.Receipts),
            request_deserializer=_lenient(pb.ReceiptBatch, budget, stream_check),
            response_serializer=pb.ReceiptBatchAck.SerializeToString,
        ),
        "Notices": grpc.unary_unary_rpc_method_handler(
            _unary(service.Notices),
            request_deserializer=_lenient(pb.NoticeBatch, budget, stream_check),
            response_serializer=pb.ReceiptBatchAck.SerializeToString,
        ),
        "GetReceipts": grpc.unary_unary_rpc_method_handler(
            _unary(service.GetReceipts),
            request_deserializer=_lenient(pb.ReceiptsRequest, budget, stream_check),
            response_serializer=pb.ReceiptsReply.SerializeToString,
        ),
    }
    name = pb.DESCRIPTOR.services_by_name["Disseminator"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
    server.add_registered_method_handlers(name, handlers)


def _lenient_unary(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``handler`` (unary-unary) with a request that does not decode refused, not raised."""
    parse = handler.request_deserializer
    type_name = parse.__self__.DESCRIPTOR.full_name  # (a message class's FromString)

    def decode(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError:
            return Malformed(type_name)

    async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
        if isinstance(request, Malformed):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"malformed {type_name}: the bytes are not a valid protobuf message",
            )
        return await handler.unary_unary(request, context)

    return grpc.unary_unary_rpc_method_handler(
        call, request_deserializer=decode, response_serializer=handler.response_serializer
    )


class _Lenient:
    """What a generated ``add_*Servicer_to_server`` registers on, passing on to ``server`` the
    same methods with lenient decoding (unary-unary methods; others as they are)."""

    def __init__(self, server: Any) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass  # (the same handlers come to add_registered_method_handlers, rewritten there)

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        lenient = {
            method: _lenient_unary(h) if not (h.request_streaming or h.response_streaming) else h
            for method, h in handlers.items()
        }
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(name, lenient),)
        )
        self._server.add_registered_method_handlers(name, lenient)


def add_lenient(add: Callable[[Any, Any], None], servicer: Any, server: Any) -> None:
    """Register ``servicer`` with a generated ``add`` function (``add_DhtServicer_to_server``),
    its requests decoded leniently: malformed bytes get ``INVALID_ARGUMENT``."""
    add(servicer, _Lenient(server))
