"""A bare grpc.aio streaming server over mutual TLS: the baseline of the fan-out benchmark.

It answers the ``Subscribe`` method with bytes captured from the real site: to each stream, the
``Subscribed`` message of the subscriber's profile, then on ``go`` the messages a subscriber of
that profile received from the site during the measured documents, as they were (identity
serialisers: no protobuf work here). It reads and drops what the clients send (acks,
heartbeats). No policy, no queue, no disk, no signature: the floor of streaming the same bytes
to the same streams.

Driven by stdin (``go`` — stream the captured messages to every connected stream; ``quit``) and
answering JSON lines on stdout: ``{"port": P}`` once listening, ``{"connected": N}`` after ``go``
with the number of streams served, and ``{"started_at": T}`` (monotonic) as it starts sending.

Run: ``python -m benchmarks.bare_fanout CERTS_DIR SITE_NAME CAPTURE_DIR PROFILES.json`` where
``PROFILES.json`` maps each subscriber's common name to its profile number.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc

from xdn.collector import tune_for_service
from xdn.grpc_tls import (
    CHANNEL_OPTIONS,
    TlsFiles,
    server_credentials,
)
from xdn.wire.v1 import dissemination_pb2 as pb

_SERVICE = pb.DESCRIPTOR.services_by_name["Disseminator"].full_name


def _read_capture(path: Path) -> list[bytes]:
    data, out, at = path.read_bytes(), [], 0
    while at < len(data):
        (size,) = struct.unpack_from(">I", data, at)
        out.append(data[at + 4:at + 4 + size])
        at += 4 + size
    return out


class _Bare:
    def __init__(self, captured: dict[int, list[bytes]], profiles: dict[str, int]) -> None:
        self.captured = captured
        self.profiles = profiles
        self.streams: list[tuple[asyncio.Queue[bytes], list[bytes]]] = []

    async def subscribe(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        name = context.auth_context()["x509_common_name"][0].decode()
        subscribed, *messages = self.captured[self.profiles[name]]
        queue: asyncio.Queue[bytes] = asyncio.Queue()
        self.streams.append((queue, messages))
        drain = asyncio.ensure_future(_drop(requests))
        try:
            yield subscribed
            while True:
                yield await queue.get()
        finally:
            drain.cancel()

    def go(self) -> None:
        """Queue every stream's messages (each stream's handler sends them as it can)."""
        for queue, messages in self.streams:
            for message in messages:
                queue.put_nowait(message)


async def _drop(requests: AsyncIterator[Any]) -> None:
    async for _ in requests:
        pass


async def _serve(certs: Path, site: str, capture: Path, profiles_file: Path) -> None:
    profiles = json.loads(profiles_file.read_text())
    captured = {
        int(path.stem): _read_capture(path) for path in sorted(capture.glob("*.bin"))
    }
    bare = _Bare(captured, profiles)
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(_SERVICE, {
        "Subscribe": grpc.stream_stream_rpc_method_handler(bare.subscribe),
    }),))
    port = server.add_secure_port("localhost:0", server_credentials(TlsFiles.from_dir(certs, site)))
    await server.start()
    print(json.dumps({"port": port}), flush=True)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode().strip():
        if line == "go":
            print(json.dumps({"connected": len(bare.streams)}), flush=True)
            started = time.monotonic()
            print(json.dumps({"started_at": started}), flush=True)
            bare.go()
        elif line == "quit":
            break
    await server.stop(grace=None)


def main() -> None:
    certs, site, capture, profiles = sys.argv[1:5]
    tune_for_service()  # as the site does
    asyncio.run(_serve(Path(certs), site, Path(capture), Path(profiles)))


if __name__ == "__main__":
    main()
