"""A bare grpc.aio relay chain carrying recorded messages: the baseline of the network benchmarks.

The chain has the shape of xdn's: a driver (the publisher's place), three relays (the sites')
and a sink (the subscriber's), each its own process, every hop over mutual TLS with the
network's own certificates. What it carries is what xdn carried: a *plan* is a directory of
``linkN.bin`` files, link 0 the requests the publisher sent to the first site, link ``N`` the
responses site ``N`` sent on its Link or Subscribe stream (recorded by
:mod:`benchmarks.wire_tap`), each split into one group per document (:mod:`benchmarks.captured`).

Relay ``N`` receives link ``N`` on one stream and, as soon as the last message of a document's
group has arrived, sends that document's group of link ``N + 1`` onward; no parsing, no crypto,
no storage. The sink notes the time each group completes and answers the whole chain with those
times. Messages are raw bytes (identity serialisers). The plan is named per call (metadata), so
one chain serves every measurement of a run on connections already warm.

Run a hop: ``python -m benchmarks.bare_relay --certs DIR --name PARTY --index N --port-file F
[--next HOST:PORT]`` (no ``--next``: the sink).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import struct
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from disseminator.limits import SERVER_OPTIONS
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, server_credentials

__all__ = ["drive", "read_link", "serve_on_loopback", "write_link"]

_SERVICE = "bare.Relay"
_METHOD = f"/{_SERVICE}/Stream"
_PLAN_KEY = "x-plan"
_FRAME = struct.Struct(">II")  # group index, length
_DONE = None

Groups = list[list[bytes]]


def write_link(path: Path, groups: Sequence[Sequence[bytes]]) -> None:
    """Write one link's messages, grouped per document, as a plan file."""
    with open(path, "wb") as out:
        for index, group in enumerate(groups):
            for message in group:
                out.write(_FRAME.pack(index, len(message)))
                out.write(message)


def read_link(path: Path) -> Groups:
    """The groups of a plan file written by :func:`write_link`."""
    data = path.read_bytes()
    groups: Groups = []
    offset = 0
    while offset < len(data):
        index, length = _FRAME.unpack_from(data, offset)
        offset += _FRAME.size
        while len(groups) <= index:
            groups.append([])
        groups[index].append(data[offset : offset + length])
        offset += length
    return groups


@functools.lru_cache(maxsize=8)
def _cached_link(path: Path) -> Groups:
    """A plan file read once per process: a measured call finds it loaded (see :func:`drive`)."""
    return read_link(path)


def _identity(data: bytes) -> bytes:
    return data


def _plan(context: grpc.aio.ServicerContext) -> Path:
    for key, value in context.invocation_metadata() or ():
        if key == _PLAN_KEY:
            return Path(value)
    raise ValueError("a call without a plan")


async def _groups_done(requests: AsyncIterator[bytes], counts: Sequence[int]) -> AsyncIterator[int]:
    """The index of each group once its last message has arrived."""
    group, left = 0, counts[0] if counts else 0
    async for _ in requests:
        left -= 1
        while left == 0 and group < len(counts):
            yield group
            group += 1
            left = counts[group] if group < len(counts) else -1


def _sink(index: int) -> object:
    async def sink(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        counts = [len(g) for g in _cached_link(_plan(context) / f"link{index}.bin")]
        times = [time.time_ns() async for _ in _groups_done(requests, counts)]
        return struct.pack(f">{len(times)}Q", *times)

    return sink


def _relay(index: int, next_address: str, tls: TlsFiles) -> object:
    credentials = channel_credentials(tls)
    channel = grpc.aio.secure_channel(next_address, credentials, options=CHANNEL_OPTIONS)
    forward = channel.stream_unary(
        _METHOD, request_serializer=_identity, response_deserializer=_identity
    )

    async def relay(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        plan = _plan(context)
        counts = [len(g) for g in _cached_link(plan / f"link{index}.bin")]
        onward = _cached_link(plan / f"link{index + 1}.bin")
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()

        async def source() -> AsyncIterator[bytes]:
            while (message := await queue.get()) is not _DONE:
                yield message

        sent = asyncio.ensure_future(forward(source(), metadata=((_PLAN_KEY, str(plan)),)))
        async for group in _groups_done(requests, counts):
            for message in onward[group]:
                queue.put_nowait(message)
        queue.put_nowait(_DONE)
        return bytes(await sent)

    return relay


async def serve(index: int, tls: TlsFiles, port_file: Path, next_address: str | None) -> None:
    behaviour = _sink(index) if next_address is None else _relay(index, next_address, tls)
    handler = grpc.method_handlers_generic_handler(
        _SERVICE,
        {
            "Stream": grpc.stream_unary_rpc_method_handler(
                behaviour, request_deserializer=_identity, response_serializer=_identity
            )
        },
    )
    await serve_on_loopback(handler, tls, port_file)


async def serve_on_loopback(
    handler: grpc.GenericRpcHandler, tls: TlsFiles, port_file: Path
) -> None:
    """Serve ``handler`` over mutual TLS on a free loopback port, written to ``port_file``
    once serving, until terminated."""
    server = grpc.aio.server(options=(*CHANNEL_OPTIONS, *SERVER_OPTIONS))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    await server.start()
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)
    await server.wait_for_termination()


async def drive(
    first_hop: str, tls: TlsFiles, plan: Path, *, rate: float | None = None
) -> tuple[list[int], list[int]]:
    """Send link 0 of ``plan`` through the chain, group after group (every ``1 / rate``
    seconds, or as fast as the chain takes them); return (the ``time.time_ns()`` each group's
    first message was handed to gRPC, the time the sink had each group).

    A first call without messages makes every hop load the plan before the measured one."""
    groups = read_link(plan / "link0.bin")
    sent: list[int] = []
    metadata = ((_PLAN_KEY, str(plan)),)
    async with grpc.aio.secure_channel(
        first_hop, channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        call = channel.stream_unary(
            _METHOD, request_serializer=_identity, response_deserializer=_identity
        )

        async def nothing() -> AsyncIterator[bytes]:
            return
            yield b""  # (an empty stream)

        await call(nothing(), metadata=metadata)

        async def source() -> AsyncIterator[bytes]:
            start = time.monotonic()
            for index, group in enumerate(groups):
                if rate is not None:
                    await asyncio.sleep(max(0.0, start + index / rate - time.monotonic()))
                sent.append(time.time_ns())
                for message in group:
                    yield message

        answer = bytes(await call(source(), metadata=metadata))
    arrived = list(struct.unpack(f">{len(answer) // 8}Q", answer))
    if len(arrived) != len(groups):
        raise RuntimeError(f"the bare chain delivered {len(arrived)} of {len(groups)} documents")
    return sent, arrived


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--name", required=True, help="the party whose certificate to present")
    parser.add_argument("--index", type=int, required=True, help="the link this hop receives")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--next")
    args = parser.parse_args()
    tls = TlsFiles.from_dir(args.certs, args.name)
    asyncio.run(serve(args.index, tls, args.port_file, args.next))


if __name__ == "__main__":
    main()
