"""Stream responses handed to gRPC once (:class:`disseminator.intake.Handed`): what gRPC's
handler loop keeps of an idle stream's last delivery is an empty box."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from disseminator.intake import Handed, _serialized
from xdn.wire.v1 import dissemination_pb2 as pb


def test_handed_bytes_are_taken_once() -> None:
    box = Handed(b"delivery")
    assert _serialized(box) == b"delivery"
    assert box.take() == b""  # what stays behind holds nothing


def test_messages_and_plain_bytes_are_serialized_as_before() -> None:
    message = pb.ServerMessage(heartbeat=pb.Heartbeat(interval_ms=5))
    assert _serialized(message) == message.SerializeToString()
    assert _serialized(b"stored") == b"stored"


@pytest.mark.timeout(60)
def test_a_stream_sends_handed_bytes_and_leaves_empty_boxes() -> None:
    """Through a real grpc.aio stream: the client gets each message whole; every box the
    server yielded is empty once the stream is done."""
    sent = [pb.ServerMessage(heartbeat=pb.Heartbeat(interval_ms=i)) for i in range(1, 4)]
    boxes = [Handed(m.SerializeToString()) for m in sent]

    async def stream(request: Any, context: Any) -> AsyncIterator[Handed]:
        for box in boxes:
            yield box

    async def run() -> list[pb.ServerMessage]:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "t.T", {"S": grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=bytes, response_serializer=_serialized
            )},
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                call = channel.unary_stream(
                    "/t.T/S", request_serializer=bytes,
                    response_deserializer=pb.ServerMessage.FromString,
                )(b"")
                return [m async for m in call]
        finally:
            await server.stop(None)

    assert asyncio.run(run()) == sent
    assert [box.take() for box in boxes] == [b"", b"", b""]
