"""Raw gRPC calls to a running site of a :class:`LocalNetwork`, as any of its parties.

For the tests that probe or abuse a site over the wire rather than through our clients: a
channel under a party's certificate, a bidi stream the site is expected to end, and a spare
site certificate (d4, for WorkOrder: a sub-block of d1's) that no running site uses, so that
a test can link to d1 as a downlink of its own making.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest

from deploy.network import LocalNetwork
from deploy.pki import Party, issue_party
from xdn import certs
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

TIMEOUT = 10.0
SPARE_SITE = "d4"
SPARE_BLOCK = "WorkOrder"


def site_channel(
    network: LocalNetwork, site: str, name: str, *, options: Any = CHANNEL_OPTIONS,
    tls: TlsFiles | None = None,
) -> grpc.aio.Channel:
    """A channel to ``site`` under party ``name``'s certificate (mutual TLS), or ``tls``."""
    creds = channel_credentials(tls or TlsFiles.from_dir(network.certs, name))
    return grpc.aio.secure_channel(network.address(site), creds, options=options)


async def stream_error(
    network: LocalNetwork, site: str, name: str, method: str, messages: list[Any],
    *, half_close: bool = False,
) -> tuple[grpc.aio.AioRpcError, list[Any]]:
    """Open a bidi stream, send ``messages`` and keep our side open (or half-close at once if
    ``half_close``); return how the site ends it, and its replies (a write racing the site's
    status would turn it into INTERNAL)."""
    ended = asyncio.Event()

    async def requests() -> AsyncIterator[Any]:
        for message in messages:
            yield message
        if not half_close:
            await ended.wait()

    replies: list[Any] = []
    async with site_channel(network, site, name) as channel:
        call = getattr(pb_grpc.DisseminatorStub(channel), method)(requests(), timeout=TIMEOUT)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                async for reply in call:
                    replies.append(reply)
        finally:
            ended.set()
    return info.value, replies


def issue_spare_site(network: LocalNetwork) -> None:
    """Issue :data:`SPARE_SITE`'s certificate, for :data:`SPARE_BLOCK`, from the network's CA
    (after :meth:`LocalNetwork.prepare`)."""
    issue_party(
        network.certs,
        Party(name=SPARE_SITE, role="site", hosts=("127.0.0.1",),
              attributes={certs.BLOCK_FIELD: SPARE_BLOCK}),
        now=datetime.now(UTC),
    )


def spare_site_hello() -> pb.LinkMessage:
    """The first message of a Link stream opened as :data:`SPARE_SITE`."""
    return pb.LinkMessage(hello=pb.LinkHello(site=SPARE_SITE, block=SPARE_BLOCK))
