"""The HTTPS endpoint in process: real mutual TLS on loopback, a store in memory.

The LDN receiver checks against a real site process are in
tests/integration/test_linked_data.py; here the limits and refusals that need a controlled
clock, CRL or client (a revoked certificate, a trickled body, a flood).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from disseminator.metrics import WebRefusals
from disseminator.store import Store
from disseminator.web import (
    NoRefusals,
    Refusals,
    WebConfig,
    WebServer,
    WebSite,
    client_context,
    server_context,
)
from tests.unit.chain_fixtures import BLOCK
from xdn import certs, provenance

NOW = datetime.now(UTC)
NOTE = b'{"@context": "https://www.w3.org/ns/activitystreams", "@id": "", "type": "Announce"}'


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("pki")
    ca = certs.create_ca("test-ca", now=NOW)
    (directory / "ca.pem").write_bytes(ca[0])
    parties: dict[str, tuple[bytes, bytes]] = {
        "d1": certs.issue(*ca, name="d1", role="site", attributes={certs.BLOCK_FIELD: BLOCK},
                          hosts=("127.0.0.1",), now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
        "mallory": certs.issue(*ca, name="mallory", role="subscriber", now=NOW),
        "bob": certs.issue(*ca, name="bob", role="subscriber", now=NOW),
        "eve": certs.issue(*ca, name="eve", role="auditor", now=NOW),
        "stranger": certs.issue(*certs.create_ca("other-ca", now=NOW), name="stranger",
                                role="subscriber", now=NOW),
    }
    for name, (cert, key) in parties.items():
        (directory / f"{name}.pem").write_bytes(cert)
        (directory / f"{name}.key").write_bytes(key)
    return directory


def _client(pki: Path, name: str | None) -> ssl.SSLContext:
    ca = (pki / "ca.pem").read_bytes()
    if name is None:
        return ssl.create_default_context(cadata=ca.decode())
    return client_context(cert=pki / f"{name}.pem", key=pki / f"{name}.key", ca_pem=ca)


@contextlib.asynccontextmanager
async def _serving(
    pki: Path, config: WebConfig, *, revoked: Callable[[], frozenset[int]] = frozenset,
    monotonic: Callable[[], float] = lambda: 0.0, refusals: Refusals | None = None,
) -> AsyncIterator[tuple[str, Store]]:
    store = Store(":memory:", messages_of=certs.node_uri("d1"))
    ids = itertools.count(1)
    site = WebSite(
        node_uri=certs.node_uri("d1"), cert_pem=(pki / "d1.pem").read_bytes(),
        notifications=store.notifications, messages=store.messages, log_path=pki / "d1.nq",
        config=config,
        clock=lambda: NOW, revoked=revoked,
        new_id=lambda: f"n{next(ids)}", monotonic=monotonic,
        refusals=refusals or NoRefusals(),
    )
    server = WebServer(site, server_context(
        cert=pki / "d1.pem", key=pki / "d1.key", ca_pem=(pki / "ca.pem").read_bytes()))
    port = await server.start()
    try:
        yield f"https://127.0.0.1:{port}/", store
    finally:
        await server.stop()
        store.close()


class _Counted:
    """The site's refusal counters, as Prometheus exports them (a registry of its own)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.refusals = WebRefusals(self.registry)

    def requests(self, status: int, limit: str) -> float:
        value = self.registry.get_sample_value(
            "xdn_web_requests_refused_total", {"status": str(status), "limit": limit})
        return value or 0.0

    def connections(self, reason: str) -> float:
        value = self.registry.get_sample_value(
            "xdn_web_connections_refused_total", {"reason": reason})
        return value or 0.0


def _run(pki: Path, scenario: Callable[[str, Store], Any], config: WebConfig | None = None,
         **kwargs: Any) -> None:
    async def main() -> None:
        async with _serving(pki, config or WebConfig(listen="127.0.0.1:0"), **kwargs) as (
            base, store,
        ):
            await scenario(base, store)

    asyncio.run(main())


def test_post_then_read_back(pki: Path) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            ctx = _client(pki, "alice")
            async with http.post(base + "inbox/", data=NOTE, ssl=ctx,
                                 headers={"Content-Type": "application/ld+json"}) as reply:
                assert reply.status == 201, await reply.text()
                assert reply.headers["Location"] == "/inbox/n1"
            stored = store.notifications.get("n1")
            assert stored is not None and stored.sender == "alice"
            async with http.get(base + "inbox/n1", ssl=ctx,
                                headers={"Accept": "application/n-quads"}) as reply:
                assert reply.status == 200
                assert "<https://d1.xdn.example/inbox/n1>" in await reply.text()
            # an id the inbox does not hold: 404 to whoever reads every notification, and to
            # anyone else the 403 a notification of someone else's gets (no existence oracle)
            async with http.get(base + "inbox/zz", ssl=_client(pki, "eve")) as reply:
                assert reply.status == 404
            async with http.get(base + "inbox/zz", ssl=ctx) as reply:
                assert reply.status == 403 and "may not read" in await reply.text()
            async with http.get(base + "inbox/..%2f", ssl=ctx) as reply:
                assert reply.status == 404

    _run(pki, scenario)


def test_a_revoked_certificate_is_refused(pki: Path) -> None:
    mallory = certs.credential_from_pem((pki / "mallory.pem").read_bytes()).serial

    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(base, ssl=_client(pki, "mallory")) as reply:
                assert reply.status == 403
                assert "'mallory' was revoked" in await reply.text()
            async with http.post(base + "inbox/", data=NOTE, ssl=_client(pki, "mallory"),
                                 headers={"Content-Type": "application/ld+json"}) as reply:
                assert reply.status == 403
            async with http.get(base, ssl=_client(pki, "alice")) as reply:
                assert reply.status == 200
        assert store.notifications.count() == 0

    _run(pki, scenario, revoked=lambda: frozenset({mallory}))


@pytest.mark.parametrize("who", [None, "stranger"])
def test_no_certificate_of_the_ca_no_connection(pki: Path, who: str | None) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            with pytest.raises((aiohttp.ClientOSError, aiohttp.ServerDisconnectedError,
                                aiohttp.ClientConnectorError)):
                async with http.get(base, ssl=_client(pki, who)) as reply:
                    await reply.read()

    _run(pki, scenario)


async def _endless(started: asyncio.Event) -> AsyncIterator[bytes]:
    yield b'{"@context": {}, "@id": "", "https://ex.example/p": "'
    started.set()
    while True:  # a client that trickles: the server must not wait for it forever
        await asyncio.Event().wait()
        yield b"x"


def test_a_body_that_never_ends_gets_408(pki: Path) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            started = asyncio.Event()
            async with http.post(base + "inbox/", data=_endless(started), ssl=_client(pki, "alice"),
                                 headers={"Content-Type": "application/ld+json"}) as reply:
                assert reply.status == 408
                assert "over 0.3s" in await reply.text()
        assert counted.requests(408, "request_seconds") == 1

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", request_seconds=0.3),
         refusals=counted.refusals)


def test_oversized_bodies_get_413_declared_or_streamed(pki: Path) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(64):  # 64 KiB, no Content-Length: refused once 1 KiB is read
            yield b"#" * 1024

    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            ctx = _client(pki, "alice")
            headers = {"Content-Type": "text/turtle"}
            async with http.post(base + "inbox/", data=b"#" * 2048, ssl=ctx,
                                 headers=headers) as reply:
                assert reply.status == 413
                assert "2048 bytes, over the inbox's limit of 1024" in await reply.text()
            async with http.post(base + "inbox/", data=chunks(), ssl=ctx,
                                 headers=headers) as reply:
                assert reply.status == 413
                assert "over the inbox's limit of 1024 bytes" in await reply.text()
        assert store.notifications.count() == 0
        assert counted.requests(413, "notification_bytes") == 2

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", notification_bytes=1024),
         refusals=counted.refusals)


def test_a_flood_of_posts_gets_429(pki: Path) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            ctx = _client(pki, "alice")
            headers = {"Content-Type": "application/ld+json"}
            started = asyncio.Event()
            slow = asyncio.ensure_future(http.post(
                base + "inbox/", data=_endless(started), ssl=ctx, headers=headers))
            await started.wait()
            async with asyncio.timeout(10):
                while True:  # the slow POST holds the only slot once its headers are read
                    async with http.post(base + "inbox/", data=NOTE, ssl=ctx,
                                         headers=headers) as reply:
                        if reply.status == 429:
                            assert reply.headers["Retry-After"] == "1"
                            assert counted.requests(429, "posts_in_flight") == 1
                            break
                        assert reply.status == 201
            slow.cancel()
            with contextlib.suppress(asyncio.CancelledError, aiohttp.ClientError):
                await slow

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", posts_in_flight=1),
         refusals=counted.refusals)


def test_a_full_inbox_answers_507(pki: Path) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            ctx = _client(pki, "alice")
            statuses = []
            for _ in range(3):
                async with http.post(base + "inbox/", data=NOTE, ssl=ctx,
                                     headers={"Content-Type": "application/ld+json"}) as reply:
                    statuses.append(reply.status)
        assert statuses == [201, 201, 507]
        assert store.notifications.count() == 2
        assert counted.requests(507, "inbox_notifications") == 1

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", inbox_notifications=2),
         refusals=counted.refusals)


def test_the_listing_pages_every_notification_once(pki: Path) -> None:
    import pyoxigraph as ox

    from xdn import linked_data as ld

    inbox = ld.inbox_uri(certs.node_uri("d1"))

    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            ctx = _client(pki, "alice")
            for _ in range(7):
                async with http.post(base + "inbox/", data=NOTE, ssl=ctx,
                                     headers={"Content-Type": "application/ld+json"}) as reply:
                    assert reply.status == 201
            listed, target, pages = [], "/inbox/", []
            while target is not None:
                async with http.get(base + target.lstrip("/"), ssl=ctx,
                                    headers={"Accept": "application/n-quads"}) as reply:
                    assert reply.status == 200
                    raw = ",".join(reply.headers.getall("Link"))
                    links = ld.parse_links([raw])
                    quads = list(ox.parse(await reply.read(), format=ox.RdfFormat.N_QUADS))
                pages.append((links, raw))
                listed += [q.object.value for q in quads
                           if q.predicate.value == ld.LDP + "contains"]
                following = links.get("next")
                if following is not None:  # the same link as a statement of the page
                    assert any(q.predicate.value == ld.IANA_RELATION + "next"
                               and q.object.value == inbox + following.removeprefix("/inbox/")
                               for q in quads)
                target = following
            assert listed == [inbox + f"n{i}" for i in range(1, 8)]
            assert len(pages) == 3 and "first" not in pages[0][0]
            assert f"<{ld.LDP}Page>" not in pages[0][1] and "BasicContainer" in pages[0][1]
            assert pages[1][0]["first"] == "/inbox/"
            assert f'<{ld.LDP}Page>; rel="type"' in pages[1][1]
            assert "next" not in pages[2][0]
            async with http.get(base + "inbox/?after=x", ssl=ctx) as reply:
                assert reply.status == 400
                assert "a page cursor is a whole number" in await reply.text()

    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", inbox_page=3))


def test_the_command_line_lists_every_page(pki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xdn import linked_data as ld

    inbox = ld.inbox_uri(certs.node_uri("d1"))

    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            for _ in range(5):
                async with http.post(base + "inbox/", data=NOTE, ssl=_client(pki, "alice"),
                                     headers={"Content-Type": "application/ld+json"}) as reply:
                    assert reply.status == 201
        from cli.main import main

        who = ["--web", base, "--certs", str(pki), "--name", "alice"]
        assert await asyncio.to_thread(main, ["inbox", "list", *who]) == 0
        assert capsys.readouterr().out.split() == [inbox + f"n{i}" for i in range(1, 6)]
        assert await asyncio.to_thread(main, ["inbox", "list", "--first-page", *who]) == 0
        assert capsys.readouterr().out.split() == [inbox + f"n{i}" for i in range(1, 3)]

    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", inbox_page=2))


def test_a_client_trickling_its_headers_is_cut_off(pki: Path) -> None:
    async def scenario(base: str, store: Store) -> None:
        port = int(base.rstrip("/").rpartition(":")[2])
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=_client(pki, "alice"), server_hostname="127.0.0.1"
        )
        writer.write(b"GET / HTTP/1.1\r\nHost: d1\r\n")  # and never the blank line
        await writer.drain()
        async with asyncio.timeout(10):  # the server closes it after connection_seconds
            assert await reader.read() == b""
        writer.close()

    _run(pki, scenario,
         WebConfig(listen="127.0.0.1:0", connection_seconds=0.5, request_seconds=0.5))


def test_a_message_is_served_to_its_parties_and_auditors_only(pki: Path) -> None:
    from tests.unit.test_message_archive import chain_and_hop, route_and_flush

    published, hop = chain_and_hop()
    path = "/" + hop.uri.removeprefix(certs.node_uri("d1"))

    async def scenario(base: str, store: Store) -> None:
        route_and_flush(store, pki / "d1.nq", published, hop)
        async with aiohttp.ClientSession() as http:
            for who, status in (("alice", 200), ("eve", 200), ("mallory", 403)):
                async with http.get(base + path.lstrip("/"), ssl=_client(pki, who),
                                    headers={"Accept": "application/n-quads"}) as reply:
                    assert reply.status == status, who
                    body = await reply.read()
                    if status == 200:
                        assert provenance.Message.from_nquads(body) == hop
                    else:
                        refusal = body
                        assert b"may not read this message" in body
            # a message this site does not keep: to anyone but the site and auditors the very
            # 403 a message it may not read gets (message URIs are guessable: no oracle of
            # who received what); the site and auditors learn it is not here
            for who, status in (("mallory", 403), ("alice", 403), ("d1", 404), ("eve", 404)):
                async with http.get(base + "msg/order%201/v1/to-bob",
                                    ssl=_client(pki, who)) as reply:
                    assert reply.status == status, who
                    if who == "mallory":
                        assert await reply.read() == refusal
            # a path that is no message URI at all: 404 for everyone, nothing to probe
            async with http.get(base + "msg/" + "x" * 2100, ssl=_client(pki, "mallory")) as reply:
                assert reply.status == 404
            async with http.get(base + path.lstrip("/"), ssl=_client(pki, "alice"),
                                headers={"Accept": "text/turtle"}) as reply:
                assert reply.status == 406  # named graphs: no Turtle

    _run(pki, scenario)


def _addressed(*to: str) -> bytes:
    import json

    return json.dumps({"@context": "https://www.w3.org/ns/activitystreams", "@id": "",
                       "type": "Announce", "to": list(to)}).encode()


def test_a_notification_is_read_by_its_sender_those_it_names_the_site_and_auditors(
    pki: Path,
) -> None:
    async def scenario(base: str, store: Store) -> None:
        async with aiohttp.ClientSession() as http:
            headers = {"Content-Type": "application/ld+json"}
            # to mallory (a node URI of the network) and to a page outside it (not a reader)
            async with http.post(base + "inbox/", ssl=_client(pki, "alice"), headers=headers,
                                 data=_addressed(certs.node_uri("mallory"),
                                                 "https://example.org/mallory")) as reply:
                assert reply.status == 201
            stored = store.notifications.get("n1")
            assert stored is not None
            assert stored.readers == {certs.node_uri("alice"), certs.node_uri("mallory")}
            for who, may in (("alice", True), ("mallory", True), ("d1", True), ("eve", True),
                             ("bob", False)):
                async with http.get(base + "inbox/n1", ssl=_client(pki, who)) as reply:
                    assert reply.status == (200 if may else 403), who
                async with http.get(base + "inbox/", ssl=_client(pki, who),
                                    headers={"Accept": "application/n-quads"}) as reply:
                    assert ("/inbox/n1>" in await reply.text()) == may, who
            # naming more parties than the inbox lets a notification name: 400, not stored
            async with http.post(base + "inbox/", ssl=_client(pki, "alice"), headers=headers,
                                 data=_addressed(*(certs.node_uri(f"p{i}") for i in range(3)))
                                 ) as reply:
                assert reply.status == 400
                assert "names 3 parties" in await reply.text()
            assert store.notifications.count() == 1

    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", notification_parties=2))


# ---- per-client request rate, concurrent connections ---------------------------------------

async def _status(http: aiohttp.ClientSession, url: str, ctx: ssl.SSLContext,
                  method: str = "GET", **kwargs: Any) -> tuple[int, str]:
    async with http.request(method, url, ssl=ctx, **kwargs) as reply:
        return reply.status, reply.headers.get("Retry-After", "")


def test_a_flooding_client_gets_429_while_another_is_served(pki: Path) -> None:
    now = [1000.0]  # the endpoint's monotonic clock: it moves only when the test moves it

    async def scenario(base: str, store: Store) -> None:
        alice, bob = _client(pki, "alice"), _client(pki, "bob")
        # (8 connections at most: the endpoint lets one address open 32 at once)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=8)) as http:
            # a flood of 200 requests at once: its burst of 3 is served, the rest get 429
            flood = await asyncio.gather(*(_status(http, base, alice) for _ in range(200)))
            assert sorted(flood).count((200, "")) == 3
            assert [f for f in flood if f[0] != 200] == [(429, "2")] * 197  # 1 token at 0.5/s
            # nothing of a POST over the rate is read or stored
            assert await _status(http, base + "inbox/", alice, "POST", data=NOTE, headers={
                "Content-Type": "application/ld+json"}) == (429, "2")
            assert store.notifications.count() == 0
            # another client (certificate) is served all along
            assert [await _status(http, base, bob) for _ in range(3)] == [(200, "")] * 3
            now[0] += 2.0  # a token back for alice, no more
            assert await _status(http, base, alice) == (200, "")
            assert await _status(http, base, alice) == (429, "2")
        # every 429 of the rate counted where Prometheus scrapes it: 197 + the POST + 1
        assert counted.requests(429, "client_requests_per_second") == 199
        assert counted.requests(429, "posts_in_flight") == 0

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", client_burst=3,
                                  client_requests_per_second=0.5), monotonic=lambda: now[0],
         refusals=counted.refusals)


async def _tls_connection(port: int, ctx: ssl.SSLContext, source: str) -> tuple[
    asyncio.StreamReader, asyncio.StreamWriter
]:
    return await asyncio.open_connection("127.0.0.1", port, ssl=ctx, local_addr=(source, 0),
                                         server_hostname="127.0.0.1", ssl_handshake_timeout=10)


async def _refused(port: int, ctx: ssl.SSLContext, source: str) -> bool:
    """Whether a TLS connection from ``source`` is closed before its handshake completes."""
    try:
        _, writer = await _tls_connection(port, ctx, source)
    except (ConnectionError, ssl.SSLError, asyncio.IncompleteReadError):
        return True
    writer.close()
    return False


async def _health(port: int) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=10)
    return int(reply.status)


def test_connections_past_the_caps_are_closed_at_accept_and_grpc_still_answers(
    pki: Path,
) -> None:
    import grpc
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc

    async def scenario(base: str, store: Store) -> None:
        # a gRPC health service on the same event loop, as the daemon runs them
        grpc_server = grpc.aio.server()
        servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(servicer, grpc_server)
        await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
        await grpc_server.start()
        port = int(base.rstrip("/").rpartition(":")[2])
        ctx = _client(pki, "alice")
        held = []
        try:
            # two from one address: their handshakes complete; a third is closed at accept
            held += [await _tls_connection(port, ctx, "127.0.0.1") for _ in range(2)]
            assert await _refused(port, ctx, "127.0.0.1")
            assert (counted.connections("per_address"), counted.connections("total")) == (1, 0)
            # other addresses get in, up to four in all; then a fifth address is refused too
            held += [await _tls_connection(port, ctx, a) for a in ("127.0.0.2", "127.0.0.3")]
            assert await _refused(port, ctx, "127.0.0.4")
            assert (counted.connections("per_address"), counted.connections("total")) == (1, 1)
            # a flood of bare TCP connections that never start TLS: each closed by the server
            # before any byte (no handshake done), while the gRPC service answers
            flood = [await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.5", 0))
                     for _ in range(100)]
            for reader, writer in flood:
                with contextlib.suppress(ConnectionResetError):
                    assert await reader.read() == b""
                writer.close()
            assert await _health(grpc_port) == health_pb2.HealthCheckResponse.SERVING
            assert counted.connections("total") == 101  # the flood, counted where it is seen
            # a client admitted before is still served
            reader, writer = held[0]
            writer.write(b"GET / HTTP/1.1\r\nHost: d1\r\nConnection: close\r\n\r\n")
            assert (await reader.read()).startswith(b"HTTP/1.1 200 ")
            writer.close()
            # its place is free once the server has seen it go
            async with asyncio.timeout(10):
                while await _refused(port, ctx, "127.0.0.1"):
                    await asyncio.sleep(0.01)
        finally:
            for _, writer in held:
                writer.close()
            await grpc_server.stop(None)

    counted = _Counted()
    _run(pki, scenario, WebConfig(listen="127.0.0.1:0", connections=4,
                                  connections_per_address=2), refusals=counted.refusals)
