"""Record the exact bytes a site receives and sends on its Disseminator service.

A launcher for :class:`deploy.network.SiteSpec` (``launcher=tap_launcher(path)``): it runs
``xdn`` unchanged in the same process, after giving every ``grpc.aio`` server a
server interceptor that records, for each call of the ``Disseminator`` service, each request
as the site received it (before parsing) and each response as the site serialized it (after
serializing). The baselines of :mod:`benchmarks.bench_network` replay these bytes.

Records are appended to one file per site (flushed after each one), each framed as
``>BHQQI``: kind (:data:`REQUEST` / :data:`RESPONSE`), method index in :data:`METHODS`, call
number (per site, from 1), ``time.time_ns()`` and length, then the bytes.
"""

from __future__ import annotations

import itertools
import struct
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

__all__ = [
    "METHODS",
    "REQUEST",
    "RESPONSE",
    "Record",
    "TapWriter",
    "read_tap",
    "tap_launcher",
    "write_records",
]

SERVICE = "/xdn.wire.v1.Disseminator/"
METHODS = (
    "Publish",
    "PublishParts",
    "GetMembership",
    "Subscribe",
    "Link",
    "Unsubscribe",
    "Receipts",
    "Notices",
    "GetReceipts",
)
REQUEST, RESPONSE = 0, 1
_HEADER = struct.Struct(">BHQQI")


@dataclass(frozen=True, slots=True)
class Record:
    """One message of one call, as it crossed the site's boundary."""

    kind: int
    method: str
    call: int
    at_ns: int
    data: bytes


def tap_launcher(path: Path) -> tuple[str, ...]:
    """The command prefix that runs ``xdn`` with its Disseminator traffic recorded to ``path``."""
    return (sys.executable, "-m", "benchmarks.wire_tap", str(path))


def write_records(path: Path, records: Sequence[Record]) -> None:
    """Write ``records`` as a tap file (what :func:`read_tap` reads back)."""
    with open(path, "wb") as out:
        for r in records:
            out.write(_HEADER.pack(r.kind, METHODS.index(r.method), r.call, r.at_ns, len(r.data)))
            out.write(r.data)


def read_tap(path: Path) -> list[Record]:
    """Every complete record of a tap file, in the order written."""
    data = path.read_bytes() if path.exists() else b""
    records, offset = [], 0
    while offset + _HEADER.size <= len(data):
        kind, method, call, at_ns, length = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        if start + length > len(data):
            break  # (being written)
        records.append(Record(kind, METHODS[method], call, at_ns, data[start : start + length]))
        offset = start + length
    return records


class TapWriter:
    """Appends records to a tap file (thread-safe; flushed after each record)."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()  # (serializers may run on gRPC's threads)
        self._calls = itertools.count(1)

    def next_call(self) -> int:
        return next(self._calls)

    def write(self, kind: int, method: int, call: int, data: bytes) -> None:
        """Append one record (``method``: an index in :data:`METHODS`), stamped now."""
        with self._lock:
            self._out.write(_HEADER.pack(kind, method, call, time.time_ns(), len(data)))
            self._out.write(data)
            self._out.flush()


def _install(path: Path) -> None:
    """Give every ``grpc.aio`` server made from now on the recording interceptor."""
    import grpc  # (only now: xdn disables gRPC's fork handlers before it loads)

    writer = TapWriter(open(path, "ab"))  # noqa: SIM115 (open for the life of the process)

    class Tap(grpc.aio.ServerInterceptor):  # type: ignore[misc]
        async def intercept_service(
            self,
            continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
            details: grpc.HandlerCallDetails,
        ) -> grpc.RpcMethodHandler:
            handler = await continuation(details)
            name = details.method
            if handler is None or not name.startswith(SERVICE):
                return handler
            method, call = METHODS.index(name.removeprefix(SERVICE)), writer.next_call()
            parse, serialize = handler.request_deserializer, handler.response_serializer

            def request(data: bytes) -> Any:
                writer.write(REQUEST, method, call, data)
                return parse(data)

            def response(message: Any) -> bytes:
                data: bytes = serialize(message)
                writer.write(RESPONSE, method, call, data)
                return data

            return handler._replace(request_deserializer=request, response_serializer=response)

    make_server = grpc.aio.server

    def tapped_server(*args: Any, interceptors: Any = (), **kwargs: Any) -> grpc.aio.Server:
        return make_server(*args, interceptors=(*interceptors, Tap()), **kwargs)

    grpc.aio.server = tapped_server


def main() -> int:
    path, *argv = sys.argv[1:]
    from xdn.grpc_fork import disable_grpc_fork_handlers

    disable_grpc_fork_handlers()  # (as cli.main does, before grpc loads)
    _install(Path(path))
    from cli.main import main as xdn_main

    return xdn_main(argv)


if __name__ == "__main__":
    sys.exit(main())
