"""Past its per-certificate stream limit, a call whose certificate the site refuses anyway is
told why (UNAUTHENTICATED: revoked, wrong role), not that it holds too many streams.

The servicer is driven without sockets, with the fakes of :mod:`tests.unit.test_publish_parts`.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from tests.unit.eventually import eventually
from tests.unit.test_publish_parts import PUBLISHER, _Aborted, _Context, _site, pems, pki
from xdn.grpc_tls import peer_certificate
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["pems", "pki"]  # (fixtures)


async def _never() -> AsyncIterator[Any]:
    await asyncio.Event().wait()
    yield pb.ClientMessage()


async def _opening() -> AsyncIterator[Any]:
    yield pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=["WorkOrder"]))
    await asyncio.Event().wait()


async def _drain(replies: AsyncIterator[Any]) -> None:
    async for _ in replies:
        pass


@pytest.mark.parametrize(("caller", "code", "says"), [
    (PUBLISHER, grpc.StatusCode.UNAUTHENTICATED, "has role 'publisher', expected 'subscriber'"),
    ("carol", grpc.StatusCode.RESOURCE_EXHAUSTED, "already holds 4 open Subscribe streams"),
])
def test_past_the_stream_limit_a_refused_certificate_is_told_why(
    pems: dict[str, bytes], caller: str, code: grpc.StatusCode, says: str
) -> None:
    site = _site(pems)
    service = site.service
    context = _Context(pems[caller])
    key = hashlib.sha256(peer_certificate(context.auth_context())).digest()
    limit = service.limits.streams_per_subscriber
    assert limit == 4

    async def run() -> _Aborted:
        held = [
            asyncio.ensure_future(_drain(service.Subscribe(_never(), context)))
            for _ in range(limit)
        ]
        try:
            await eventually(lambda: service._streams.count("subscriber", key) == limit)
            with pytest.raises(_Aborted) as info:
                await _drain(service.Subscribe(_opening(), context))
            return info.value
        finally:
            for call in held:
                call.cancel()

    refused = asyncio.run(asyncio.wait_for(run(), 30))
    assert refused.code == code
    assert says in refused.details
