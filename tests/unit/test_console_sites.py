"""The console's sites page against a real site's Admin service (in process, mutual TLS)."""

from __future__ import annotations

import asyncio
import html
import re
import socket
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from aiohttp.test_utils import TestClient, TestServer

from console import build_app
from deploy.site_admin import fetch_status, fetch_subscribers
from disseminator.admin_service import AdminService, add_admin_to_server
from disseminator.routing import Registration
from tests.unit.console_fixtures import ONTOLOGY, console_config, console_world
from tests.unit.site_fixtures import site_node
from xdn.errors import PeerError, UsageError, XdnError
from xdn.grpc_tls import TlsFiles, server_credentials
from xdn.ontology import load_ontology


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _site(
    certs: Path, subscribers: tuple[str, ...] = ("alice",)
) -> tuple[grpc.aio.Server, str]:
    node = site_node(certs, "d1", "ProductionProcess", lambda: datetime.now(UTC))
    for name in subscribers:
        pem = (certs / f"{name}.pem").read_bytes()
        node.register_local(
            Registration(subscriber=name, certificate=pem, grants=node.grants(pem)), frozenset()
        )
    server = grpc.aio.server()
    add_admin_to_server(server, AdminService(node, uplink_connected=lambda: False, dht=None))
    port = server.add_secure_port("127.0.0.1:0", server_credentials(TlsFiles.from_dir(certs, "d1")))
    await server.start()
    return server, f"localhost:{port}"


def test_the_sites_page_shows_each_sites_subscribers_queues_and_policies(tmp_path: Path) -> None:
    world = console_world(tmp_path)
    ontology = load_ontology([ONTOLOGY])
    down = f"127.0.0.1:{_closed_port()}"

    async def run() -> str:
        server, address = await _site(world.certs)
        config = console_config(world, ontology, sites=(address, down))
        try:
            async with TestClient(TestServer(build_app(config))) as client:
                assert config.gate.token  # type: ignore[attr-defined]
                await client.get(f"/login?token={config.gate.token}")  # type: ignore[attr-defined]
                answer = await client.get("/sites")
                assert answer.status == 200
                return await answer.text()
        finally:
            await server.stop(None)

    page = asyncio.run(run())
    assert "<h2>d1 <small>localhost:" in page
    assert "Block ProductionProcess; uplink none: a root site; 0 deliveries queued" in page
    row = page.split("<td>alice</td>")[1].split("</tr>")[0]
    assert "production-dept: " in row and "WorkOrder" in row and "<td>0</td><td>no</td>" in row
    assert "<td>production-dept</td><td>1</td>" in page and "<td>same</td>" in page
    assert f"<h2>{down}</h2>" in page and "UNAVAILABLE" in page


def test_the_admin_client_pages_subscribers_and_passes_on_a_refusal(tmp_path: Path) -> None:
    world = console_world(tmp_path)

    async def run() -> None:
        server, address = await _site(world.certs)
        try:
            page = await fetch_subscribers(address, TlsFiles.from_dir(world.certs, "ops"), limit=1)
            assert [r.name for r in page.subscribers] == ["alice"] and page.total == 1
            assert page.next_after == ""
            refusal = r"PERMISSION_DENIED: 'alice' holds a subscriber certificate"
            with pytest.raises(PeerError, match=refusal):
                await fetch_status(address, TlsFiles.from_dir(world.certs, "alice"))
            with pytest.raises(UsageError, match="between 1 and 1000"):
                await fetch_status(address, TlsFiles.from_dir(world.certs, "ops"), limit=0)
        finally:
            await server.stop(None)
        with pytest.raises(XdnError, match="UNAVAILABLE"):
            await fetch_status(address, TlsFiles.from_dir(world.certs, "ops"), timeout=5)

    asyncio.run(run())


def test_every_subscriber_of_a_site_a_page_at_a_time_and_only_of_the_sites_given(
    tmp_path: Path,
) -> None:
    world = console_world(tmp_path)
    ontology = load_ontology([ONTOLOGY])

    async def run() -> list[str]:
        server, address = await _site(world.certs, ("alice", "carl"))
        config = replace(console_config(world, ontology, sites=(address,)), page_size=1)
        try:
            async with TestClient(TestServer(build_app(config))) as client:
                await client.get(f"/login?token={config.gate.token}")  # type: ignore[attr-defined]
                texts = [await (await client.get("/sites")).text()]
                for _ in range(2):  # the link on the sites page, then "Next page"
                    link = re.findall(r'href="(/sites/subscribers\?[^"]+)"', texts[-1])
                    answer = await client.get(html.unescape(link[0]))
                    assert answer.status == 200
                    texts.append(await answer.text())
                elsewhere = await client.get("/sites/subscribers?site=127.0.0.1:1")
                assert elsewhere.status == 404
                return texts
        finally:
            await server.stop(None)

    status, first, second = asyncio.run(run())
    assert "subscribers (first 1 of 2)" in status and "a page at a time" in status
    assert "1 of 2, from the first" in first and "<td>alice</td>" in first
    assert "<td>carl</td>" not in first and "Next page" in first
    assert "1 of 2, after alice" in second and "<td>carl</td>" in second
    assert "Next page" not in second
