"""A stand-in for a site that answers from a recording: the stage-alone baselines.

It serves the Disseminator service over mutual TLS with a site's certificate and does no work:
each unary call is answered with the next recorded response of its method (the last one again
once they run out), ``PublishParts`` once its parts are drained, and a ``Subscribe`` or
``Link`` stream with every recorded response of its method, as fast as the caller takes them,
while its requests are drained. Every request it receives and every response it sends is
logged in :mod:`benchmarks.wire_tap`'s format, with the time.

So a real ``xdn publish`` publishes to it as to the site it was recorded from (its replies
match the same documents in the same order), and a real ``xdn subscribe`` receives from it
what the site sent: each measures one stage alone, in its own process, as users run it.

Run: ``python -m benchmarks.replay_site --certs DIR --name SITE --script TAP --log TAP
--port-file FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from benchmarks.bare_relay import serve_on_loopback
from benchmarks.wire_tap import METHODS, REQUEST, RESPONSE, SERVICE, TapWriter, read_tap
from xdn.grpc_tls import TlsFiles

__all__ = ["serve"]

_STREAMS = ("Subscribe", "Link")


def _identity(data: bytes) -> bytes:
    return data


class _Replay(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, script: Path, log: TapWriter) -> None:
        self._answers: dict[str, deque[bytes]] = defaultdict(deque)
        for record in read_tap(script):
            if record.kind == RESPONSE:
                self._answers[record.method].append(record.data)
        self._last: dict[str, bytes] = {}
        self._log = log

    def _answer(self, method: str) -> bytes:
        answers = self._answers[method]
        if answers:
            self._last[method] = answers.popleft()
        return self._last[method]

    def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        name = details.method
        if not name.startswith(SERVICE) or name.removeprefix(SERVICE) not in METHODS:
            return None
        method = name.removeprefix(SERVICE)
        index, call, log = METHODS.index(method), self._log.next_call(), self._log

        def request(data: bytes) -> bytes:
            log.write(REQUEST, index, call, data)
            return data

        def response(data: bytes) -> bytes:
            log.write(RESPONSE, index, call, data)
            return data

        async def drain(requests: AsyncIterator[bytes]) -> None:
            async for _ in requests:
                pass

        async def unary(data: bytes, context: grpc.aio.ServicerContext) -> bytes:
            return await self._unary(method, context)

        async def parts(requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext) -> bytes:
            await drain(requests)
            return await self._unary(method, context)

        async def stream(
            requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext
        ) -> AsyncIterator[bytes]:
            draining = asyncio.ensure_future(drain(requests))
            try:
                answers, self._answers[method] = self._answers[method], deque()
                for data in answers:
                    yield data
                await draining  # (open until the caller ends the stream)
            finally:
                draining.cancel()

        if method in _STREAMS:
            return grpc.stream_stream_rpc_method_handler(
                stream, request_deserializer=request, response_serializer=response
            )
        if method == "PublishParts":
            return grpc.stream_unary_rpc_method_handler(
                parts, request_deserializer=request, response_serializer=response
            )
        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=request, response_serializer=response
        )

    async def _unary(self, method: str, context: grpc.aio.ServicerContext) -> bytes:
        if not self._answers[method] and method not in self._last:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"nothing recorded for {method}")
        return self._answer(method)


async def serve(tls: TlsFiles, script: Path, log: Path, port_file: Path) -> None:
    """Serve the recording until terminated."""
    with open(log, "ab") as out:
        await serve_on_loopback(_Replay(script, TapWriter(out)), tls, port_file)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--name", required=True, help="the site whose certificate to present")
    parser.add_argument("--script", type=Path, required=True, help="the recorded responses")
    parser.add_argument("--log", type=Path, required=True, help="where to log the traffic")
    parser.add_argument("--port-file", type=Path, required=True)
    args = parser.parse_args()
    tls = TlsFiles.from_dir(args.certs, args.name)
    asyncio.run(serve(tls, args.script, args.log, args.port_file))


if __name__ == "__main__":
    main()
