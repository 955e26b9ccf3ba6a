"""Node URIs resolve to endpoints through any site, which is trusted with nothing.

Three in-process endpoints on loopback (real mutual TLS): d1, asked (``GET /nodes/NAME``),
whose DHT lookup is a seam this test controls — honest, or dishonest in every way a site
could be: someone else's record, an altered one, one forged under another site's
certificate, a stale one, a withdrawal, garbage — and d2 and d3, the sites resolved to. The
client (:func:`deploy.web_client.resolve`, :func:`cli.admin._web.client_for`) must accept only
d2's own live record, and then only an endpoint presenting d2's certificate.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest

from cli.admin._web import client_for
from deploy.web_client import Reply, ResolveError, WebClient, node_name, resolve
from disseminator.dht import SiteCredentials, SiteRecord, sign_site_record
from disseminator.store import Store
from disseminator.web import WebConfig, WebServer, WebSite, client_context, server_context
from tests.unit.chain_fixtures import BLOCK
from xdn import certs
from xdn.errors import PeerError, UsageError

NOW = datetime.now(UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000
SITES = ("d1", "d2", "d3")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    ca = certs.create_ca("test-ca", now=NOW)
    (directory / "ca.pem").write_bytes(ca[0])
    parties = {
        name: certs.issue(*ca, name=name, role="site", attributes={certs.BLOCK_FIELD: BLOCK},
                          hosts=("127.0.0.1",), now=NOW)
        for name in SITES
    }
    parties["alice"] = certs.issue(*ca, name="alice", role="subscriber", now=NOW)
    for name, (cert, key) in parties.items():
        (directory / f"{name}.pem").write_bytes(cert)
        (directory / f"{name}.key").write_bytes(key)
    return directory


def _credentials(pki: Path, name: str) -> SiteCredentials:
    return SiteCredentials.from_pem((pki / f"{name}.pem").read_bytes(),
                                    (pki / f"{name}.key").read_bytes())


def _record(pki: Path, name: str, web: str, *, at: int = NOW_MS, ttl: int = HOUR_MS
            ) -> SiteRecord:
    return sign_site_record(_credentials(pki, name), address="127.0.0.1:5001", block=BLOCK,
                            issued_at_ms=at, ttl_ms=ttl, web=web)


class _Directory:
    """d1's DHT lookup, as this test has it answer."""

    def __init__(self) -> None:
        self.answer: Callable[[str], Awaitable[SiteRecord | None]] | None = None
        self.asked: list[str] = []

    async def find_site(self, name: str) -> SiteRecord | None:
        self.asked.append(name)
        assert self.answer is not None
        return await self.answer(name)


@contextlib.asynccontextmanager
async def _endpoint(pki: Path, name: str, directory: _Directory | None = None
                    ) -> AsyncIterator[int]:
    store = Store(":memory:", messages_of=certs.node_uri(name))
    ids = itertools.count(1)
    site = WebSite(
        node_uri=certs.node_uri(name), cert_pem=(pki / f"{name}.pem").read_bytes(),
        notifications=store.notifications, messages=store.messages,
        log_path=pki / f"{name}.nq", config=WebConfig(listen="127.0.0.1:0"),
        clock=lambda: NOW, revoked=frozenset, new_id=lambda: f"n{next(ids)}",
        nodes=directory,
    )
    server = WebServer(site, server_context(
        cert=pki / f"{name}.pem", key=pki / f"{name}.key", ca_pem=(pki / "ca.pem").read_bytes()))
    port = await server.start()
    try:
        yield port
    finally:
        await server.stop()
        store.close()


Scenario = Callable[[int, dict[str, int], _Directory], Awaitable[None]]


def _run(pki: Path, scenario: Scenario) -> None:
    async def main() -> None:
        directory = _Directory()
        async with (_endpoint(pki, "d1", directory) as d1, _endpoint(pki, "d2") as d2,
                    _endpoint(pki, "d3") as d3):
            await scenario(d1, {"d1": d1, "d2": d2, "d3": d3}, directory)

    asyncio.run(main())


def _via(pki: Path, port: int) -> WebClient:
    return WebClient(f"https://127.0.0.1:{port}/", certs=pki, name="alice")


async def _resolve(pki: Path, port: int, name: str) -> str:
    """Resolve ``name`` through d1 (the client is blocking: on a thread)."""
    found = await asyncio.to_thread(resolve, _via(pki, port), name,
                                    ca_pem=(pki / "ca.pem").read_bytes(), now=NOW)
    return found.endpoint


def test_an_honest_answer_resolves_and_the_site_there_is_asked(pki: Path) -> None:
    async def scenario(d1: int, ports: dict[str, int], directory: _Directory) -> None:
        genuine = _record(pki, "d2", f"127.0.0.1:{ports['d2']}")

        async def honest(name: str) -> SiteRecord | None:
            return genuine if name == "d2" else None

        directory.answer = honest
        assert await _resolve(pki, d1, "d2") == f"https://127.0.0.1:{ports['d2']}/"
        assert directory.asked == ["d2"]
        # as the commands do it: --via d1, a node URI of d2 → a client of d2's endpoint
        args = argparse.Namespace(web=None, via=f"https://127.0.0.1:{d1}/", certs=pki,
                                  name="alice")
        client = await asyncio.to_thread(client_for, args, certs.node_uri("d2") + "inbox/x",
                                         quiet=True)
        assert client.base == f"https://127.0.0.1:{ports['d2']}/" and client.server == "d2"
        reply = await asyncio.to_thread(client.request, "GET", certs.node_uri("d2"),
                                        accept="application/n-quads")
        assert certs.node_uri("d2").encode() in reply.body  # d2's own description
        # unknown to the DHT: d1 says so, nothing is asked elsewhere
        with pytest.raises(PeerError, match=r"404 .* no live record of a site 'd9'"):
            await _resolve(pki, d1, "d9")

    _run(pki, scenario)


@pytest.mark.parametrize("lie", [
    "someone else's", "address altered", "endpoint altered", "forged by d3", "expired",
    "withdrawn", "no endpoint",
])
def test_a_dishonest_answer_is_refused(pki: Path, lie: str) -> None:
    """d1's endpoint serves what its (dishonest) DHT lookup returns for d2."""

    async def scenario(d1: int, ports: dict[str, int], directory: _Directory) -> None:
        genuine = _record(pki, "d2", f"127.0.0.1:{ports['d2']}")
        theirs = _record(pki, "d3", f"127.0.0.1:{ports['d3']}")
        answers = {
            "someone else's": theirs,
            "address altered": replace(genuine, address="10.6.6.6:5001"),
            "endpoint altered": replace(genuine, web=f"127.0.0.1:{ports['d3']}"),
            # d3 signs a record naming itself d2: its certificate is d3's
            "forged by d3": replace(theirs, site="d2"),
            "expired": _record(pki, "d2", genuine.web, at=NOW_MS - 2 * HOUR_MS),
            "withdrawn": _record(pki, "d2", genuine.web, ttl=0),
            "no endpoint": _record(pki, "d2", ""),
        }
        expected = {
            "someone else's": "answered the record of site 'd3' when asked for 'd2'",
            "address altered": "does not check out .* signature",
            "endpoint altered": "does not check out .* signature",
            "forged by d3": "does not check out .* certificate of 'd3'",
            "expired": "does not check out .* expired",
            "withdrawn": "does not check out .* withdrawal",
            "no endpoint": "announces no HTTPS endpoint",
        }

        async def dishonest(name: str) -> SiteRecord | None:
            return answers[lie]

        directory.answer = dishonest
        with pytest.raises(ResolveError, match=expected[lie]):
            await _resolve(pki, d1, "d2")
        assert directory.asked == ["d2"]

    _run(pki, scenario)


class _Answering:
    """A site's endpoint reduced to the body it answers (whatever a dishonest one sends)."""

    base = "https://dishonest.example:1/"

    def __init__(self, body: bytes) -> None:
        self.body = body

    def request(self, method: str, target: str, **_: object) -> Reply:
        assert (method, target) == ("GET", "/nodes/d2")
        return Reply(status=200, content_type="application/json", location=None,
                     body=self.body)


@pytest.mark.parametrize("body, message", [
    (b"<html>not json</html>", "answered no site record"),
    (b'{"site": "d2"}', "answered no site record .* exactly the fields"),
    (b"[]", "answered no site record"),
    (b"x" * 70_000, "bytes for a site record"),
])
def test_an_answer_that_is_no_record_is_refused(pki: Path, body: bytes, message: str) -> None:
    with pytest.raises(ResolveError, match=message):
        resolve(_Answering(body), "d2", ca_pem=(pki / "ca.pem").read_bytes(),  # type: ignore[arg-type]
                now=NOW)


def test_a_genuine_record_pointing_elsewhere_is_refused_at_the_server(pki: Path) -> None:
    """d2's own record (signed by d2) naming d3's endpoint: the record checks out, but the
    server there presents d3's certificate, not d2's, so nothing is asked of it."""

    async def scenario(d1: int, ports: dict[str, int], directory: _Directory) -> None:
        elsewhere = _record(pki, "d2", f"127.0.0.1:{ports['d3']}")

        async def answer(name: str) -> SiteRecord | None:
            return elsewhere

        directory.answer = answer
        args = argparse.Namespace(web=None, via=f"https://127.0.0.1:{d1}/", certs=pki,
                                  name="alice")
        client = await asyncio.to_thread(client_for, args, "d2", quiet=True)
        with pytest.raises(PeerError, match=r"is not site 'd2''s endpoint: .* presents 'd3'"):
            await asyncio.to_thread(client.request, "GET", "/")

    _run(pki, scenario)


def test_the_route_without_a_dht_and_when_the_dht_fails(pki: Path) -> None:
    async def scenario(d1: int, ports: dict[str, int], directory: _Directory) -> None:
        async def failing(name: str) -> SiteRecord | None:
            raise PeerError("no peer answered")

        directory.answer = failing
        ctx = client_context(cert=pki / "alice.pem", key=pki / "alice.key",
                             ca_pem=(pki / "ca.pem").read_bytes())
        async with aiohttp.ClientSession() as http:
            async with http.get(f"https://127.0.0.1:{d1}/nodes/d2", ssl=ctx) as reply:
                assert reply.status == 502 and "no peer answered" in await reply.text()
            # d2's endpoint has no DHT seam: no record of anyone
            async with http.get(f"https://127.0.0.1:{ports['d2']}/nodes/d1", ssl=ctx) as reply:
                assert reply.status == 404

    _run(pki, scenario)


def test_node_names() -> None:
    assert node_name("https://d2.xdn.example/msg/DOC/v1/x") == "d2"
    assert node_name("d2") == "d2"
    for bad in ("https://d2.example.org/", "http://d2.xdn.example/", "https://.xdn.example/"):
        with pytest.raises(UsageError):
            node_name(bad)
