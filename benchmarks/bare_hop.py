"""A bare grpc.aio hop over mutual TLS, storing each message once: the baseline of a site's CPU.

What a disseminator hop must do at the least, with none of xdn's work: receive a serialized
message over mutual TLS, write it once to SQLite with the durability a site's store uses
(:class:`disseminator.store.Store`: WAL journal, ``synchronous=NORMAL``, autocommit, one
``INSERT`` per message), and forward the same bytes to each of its destinations, each over its
own mutually authenticated stream. Messages are raw bytes (identity serialisers): no protobuf
parsing, no verification, no signature.

One process per role, certificates from a :mod:`deploy.pki` directory:

* hop: ``python -m benchmarks.bare_hop hop --certs DIR --name NAME --port-file FILE
  --db FILE --next HOST:PORT [--next HOST:PORT ...]``; one incoming stream at a time is
  forwarded on one stream per destination, and answers with the count every destination
  acknowledged (the smallest);
* sink: ``python -m benchmarks.bare_hop sink --certs DIR --name NAME --port-file FILE``;
  counts the messages of each stream.

:func:`drive` sends the messages from the benchmark's own process. The benchmark reads the
hop's CPU time from ``/proc/<pid>/stat`` around a stream.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import struct
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import grpc

from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, server_credentials

__all__ = ["drive", "open_store"]

_SERVICE = "bare.Hop"
_METHOD = f"/{_SERVICE}/Stream"
_DONE = None


def _identity(data: bytes) -> bytes:
    return data


def open_store(path: Path) -> sqlite3.Connection:
    """A SQLite file opened as a site opens its store (WAL, ``synchronous=NORMAL``, autocommit)."""
    db = sqlite3.connect(str(path), isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS messages (seq INTEGER PRIMARY KEY, payload BLOB NOT NULL)"
    )
    return db


async def _sink(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
    count = 0
    async for _ in requests:
        count += 1
    return struct.pack(">Q", count)


def _hop_handler(db: sqlite3.Connection, destinations: Sequence[str], tls: TlsFiles) -> object:
    channels = [
        grpc.aio.secure_channel(d, channel_credentials(tls), options=CHANNEL_OPTIONS)
        for d in destinations
    ]
    calls = [
        c.stream_unary(_METHOD, request_serializer=_identity, response_deserializer=_identity)
        for c in channels
    ]

    async def hop(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
        queues: list[asyncio.Queue[bytes | None]] = [asyncio.Queue() for _ in calls]

        async def onward(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
            while (message := await queue.get()) is not _DONE:
                yield message

        pairs = zip(calls, queues, strict=True)
        sent = [asyncio.ensure_future(call(onward(q))) for call, q in pairs]
        async for message in requests:
            db.execute("INSERT INTO messages (payload) VALUES (?)", (message,))
            for queue in queues:
                queue.put_nowait(message)
        for queue in queues:
            queue.put_nowait(_DONE)
        counts = [struct.unpack(">Q", bytes(answer))[0] for answer in await asyncio.gather(*sent)]
        return struct.pack(">Q", min(counts))

    return hop


async def serve(
    role: str, tls: TlsFiles, port_file: Path, *, db: Path | None, destinations: Sequence[str]
) -> None:
    """Run a hop (``db`` and ``destinations`` given) or a sink until terminated."""
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    if role == "hop":
        if db is None or not destinations:
            raise SystemExit("a hop needs --db and at least one --next")
        behaviour = _hop_handler(open_store(db), destinations, tls)
    else:
        behaviour = _sink
    handler = grpc.method_handlers_generic_handler(
        _SERVICE,
        {
            "Stream": grpc.stream_unary_rpc_method_handler(
                behaviour, request_deserializer=_identity, response_serializer=_identity
            )
        },
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    await server.start()
    tmp = port_file.with_suffix(".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, port_file)
    await server.wait_for_termination()


async def drive(address: str, tls: TlsFiles, messages: Sequence[bytes]) -> int:
    """Send ``messages`` to the hop at ``address`` on one stream; return the count delivered
    to every destination."""
    async with grpc.aio.secure_channel(
        address, channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        call = channel.stream_unary(
            _METHOD, request_serializer=_identity, response_deserializer=_identity
        )

        async def source() -> AsyncIterator[bytes]:
            for message in messages:
                yield message

        answer = await call(source())
    (count,) = struct.unpack(">Q", answer)
    return int(count)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("role", choices=("hop", "sink"))
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--name", required=True, help="the party whose certificate to present")
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--next", action="append", default=[])
    args = parser.parse_args()
    tls = TlsFiles.from_dir(args.certs, args.name)
    asyncio.run(serve(args.role, tls, args.port_file, db=args.db, destinations=args.next))


if __name__ == "__main__":
    main()
