"""The gRPC fuzz targets' inputs over the wire: a real server, mutual TLS, a few inputs each.

The campaign (``make fuzz``) and :mod:`test_fuzz_replay` call the servicers in-process
(:mod:`fuzz_grpc`), which is what makes a million executions per target affordable. This test
keeps the path they skip covered: gRPC's framing, TLS and the peer certificate as the server
hands it over, the deserializers and handlers as registered on a real ``grpc.aio`` server.
Per target it sends the first :data:`PER_TARGET` inputs (seeds made under this process's PKI,
then past findings), as raw bytes, as the caller's certificate, and checks that the call ends
with a reply or a status the handler chose — never ``UNKNOWN`` (an exception escaped) or
``INTERNAL``. A streaming call that stays open (a subscription) ends at its deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest
from fuzz_grpc import MAX_STREAM_MESSAGES, RPCS, SEPARATOR, build_site, site
from fuzz_seeds import all_seeds
from fuzz_targets import REGRESSIONS_DIR, pki_dir

from xdn.grpc_tls import TlsFiles, channel_credentials, server_credentials

pytestmark = [pytest.mark.fuzz, pytest.mark.integration]

PER_TARGET = 3
UNARY_DEADLINE_S = 10.0
STREAM_DEADLINE_S = 1.0  # a subscription or a link stays open: the caller hangs up then
FAILURES = (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL)


def _inputs(name: str) -> list[bytes]:
    found = list(all_seeds()[name].values())
    folder = REGRESSIONS_DIR / name
    if folder.is_dir():
        found += [path.read_bytes() for path in sorted(folder.iterdir())]
    return found[:PER_TARGET]


def _parts(data: bytes) -> Iterator[bytes]:
    yield from data.split(SEPARATOR, MAX_STREAM_MESSAGES)


Outcome = tuple[grpc.StatusCode, str]


async def _status(
    channel: grpc.aio.Channel, path: str, handler: grpc.RpcMethodHandler, data: bytes
) -> Outcome:
    """Send ``data`` (raw bytes) the way ``handler`` reads it; the status the call ended with."""
    request_streaming, response_streaming = handler.request_streaming, handler.response_streaming
    try:
        if request_streaming and response_streaming:
            call = channel.stream_stream(path)(_parts(data), timeout=STREAM_DEADLINE_S)
            async for _ in call:
                pass
        elif request_streaming:
            await channel.stream_unary(path)(_parts(data), timeout=UNARY_DEADLINE_S)
        else:
            await channel.unary_unary(path)(data, timeout=UNARY_DEADLINE_S)
    except grpc.aio.AioRpcError as error:
        return error.code(), error.details() or ""
    return grpc.StatusCode.OK, ""


async def _over_the_wire() -> dict[str, Outcome]:
    pki = pki_dir()
    server = grpc.aio.server()
    build_site(server, name="wire")
    port = server.add_secure_port("localhost:0", server_credentials(TlsFiles.from_dir(pki, "d1")))
    await server.start()
    here = site()  # the in-process harness: which handler each target calls, and how
    outcomes: dict[str, Outcome] = {}
    try:
        for peer in sorted({peer for _, _, peer in RPCS.values()}):
            credentials = channel_credentials(TlsFiles.from_dir(pki, peer))
            async with grpc.aio.secure_channel(f"localhost:{port}", credentials) as channel:
                for name, (service, method, caller) in RPCS.items():
                    if caller != peer:
                        continue
                    path = f"/{here.full_names[service]}/{method}"
                    handler = here.handlers[service, method]
                    for index, data in enumerate(_inputs(name)):
                        outcomes[f"{name}#{index}"] = await _status(channel, path, handler, data)
    finally:
        await server.stop(None)
    return outcomes


def test_each_grpc_target_ends_with_a_reply_or_a_chosen_status_over_the_wire() -> None:
    outcomes = asyncio.run(_over_the_wire())
    assert {name.partition("#")[0] for name in outcomes} == set(RPCS)
    failed = {name: status for name, (status, _) in outcomes.items() if status in FAILURES}
    assert not failed
    answered = {RPCS[n.partition("#")[0]][0] for n, (s, _) in outcomes.items() if s.name == "OK"}
    assert answered == {"Disseminator", "Dht", "Admin"}  # the wire path works: not all refused
