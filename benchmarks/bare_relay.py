"""A bare grpc.aio relay chain: the baseline of the network benchmarks.

No TLS, no crypto, no persistence: each relay forwards every message of an incoming stream to
the next hop's stream as it arrives, one 300-byte message per gRPC message, and hands the
sink's answer (how many messages arrived) back up the chain. Messages are raw bytes (identity
serialisers), so not even protobuf is involved.

Run a hop: ``python -m benchmarks.bare_relay --listen 127.0.0.1:0 [--next HOST:PORT]
--port-file FILE`` (no ``--next``: the sink).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

_METHOD = "/bare.Relay/Stream"
_OPTIONS = (("grpc.max_receive_message_length", 16 * 1024 * 1024),)


def _identity(data: bytes) -> bytes:
    return data


async def _sink(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
    count = 0
    async for _ in requests:
        count += 1
    return struct.pack(">Q", count)


def _relay_handler(next_address: str) -> object:
    channel = grpc.aio.insecure_channel(next_address, options=_OPTIONS)
    forward = channel.stream_unary(
        _METHOD, request_serializer=_identity, response_deserializer=_identity
    )

    async def relay(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        async def onward() -> AsyncIterator[bytes]:
            async for message in requests:
                yield message

        return bytes(await forward(onward()))

    return relay


async def serve(listen: str, next_address: str | None, port_file: Path) -> None:
    server = grpc.aio.server(options=_OPTIONS)
    behaviour = _sink if next_address is None else _relay_handler(next_address)
    handler = grpc.method_handlers_generic_handler(
        "bare.Relay",
        {
            "Stream": grpc.stream_unary_rpc_method_handler(
                behaviour, request_deserializer=_identity, response_serializer=_identity
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port(listen)
    await server.start()
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)
    await server.wait_for_termination()


async def drive(first_hop: str, messages: int, size: int = 300) -> tuple[int, float]:
    """Send ``messages`` messages through the chain; return (count at sink, seconds)."""
    payload = os.urandom(size)
    async with grpc.aio.insecure_channel(first_hop, options=_OPTIONS) as channel:
        call = channel.stream_unary(
            _METHOD, request_serializer=_identity, response_deserializer=_identity
        )

        async def source() -> AsyncIterator[bytes]:
            for _ in range(messages):
                yield payload

        start = time.perf_counter()
        answer = await call(source())
        elapsed = time.perf_counter() - start
    (count,) = struct.unpack(">Q", answer)
    return count, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--next")
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.next, args.port_file))


if __name__ == "__main__":
    main()
