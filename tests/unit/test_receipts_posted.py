"""Receipts posted to a site's inbox (in process: real mutual TLS, a real site node).

d2 serves alice and carol (registered); alice posts the receipt of d2's hop to her. The inbox
checks it as :meth:`SiteReceipts.from_subscriber` does, and answers 201 (queued, logged,
listed), 200 (known), 400 (does not verify, not of this site: counted) or 403 (someone else's).
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import aiohttp
import pyoxigraph as ox
import pytest

from disseminator.limits import Limits
from disseminator.node import SiteIdentity, SiteNode
from disseminator.receipts import SiteReceipts
from disseminator.routing import Registration
from disseminator.store import Store
from disseminator.web import WebConfig, WebServer, WebSite, client_context, server_context
from tests.unit.receipt_fixtures import (
    BLOCKS,
    NOW,
    PUBLISHER,
    Pki,
    chain,
    make_pki,
    published,
    receipted,
    relay,
)
from tests.unit.test_message_archive import route_and_flush
from xdn import certs, provenance
from xdn import linked_data as ld
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet
from xdn.rdf import Literal, Quad
from xdn.receipts import read_receipt

ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
NOTE = b'{"@context": "https://www.w3.org/ns/activitystreams", "@id": "", "type": "Announce"}'


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture
def d2(pki: Pki, tmp_path: Path) -> Iterator[SiteNode]:
    tls, signer = pki.tls("d2"), pki.signer("d2")
    node = SiteNode(
        site=SiteIdentity(name="d2", block=BLOCKS["d2"], uplink="d1", tls=tls, signer=signer),
        ontology=ONTOLOGY,
        engine=PolicyEngine(PolicySet.of(ONTOLOGY, [])),
        store=Store(tmp_path / "d2.sqlite", messages_of=certs.node_uri("d2")),
        log_sink=provenance.ProvenanceLog(tmp_path / "d2.nq", node_uri=signer.node_uri,
                                          cert_pem=tls.cert_pem),
        clock=lambda: NOW,
    )
    for name in ("alice", "carol"):
        member = certs.credential_from_pem(pki.parties[name][0]).member_id
        node.table.local[member] = Registration(
            subscriber=member, certificate=pki.parties[name][0],
            grants={PUBLISHER: frozenset({"WorkOrder"})},
        )
    for name, (cert, key) in pki.parties.items():
        (tmp_path / f"{name}.pem").write_bytes(cert)
        (tmp_path / f"{name}.key").write_bytes(key)
    yield node
    node.store.close()


Scenario = Callable[[aiohttp.ClientSession, str, Callable[[str], ssl.SSLContext]], Awaitable[None]]


def _run(pki: Pki, node: SiteNode, folder: Path, scenario: Scenario) -> None:
    ids = itertools.count(1)
    site = WebSite(
        node_uri=certs.node_uri("d2"), cert_pem=pki.parties["d2"][0],
        notifications=node.store.notifications, messages=node.store.messages,
        log_path=folder / "d2.nq",
        config=WebConfig(listen="127.0.0.1:0"), clock=lambda: NOW, revoked=frozenset,
        new_id=lambda: f"n{next(ids)}", receipts=SiteReceipts(node, Limits(), inbox=True),
    )

    def client(name: str) -> ssl.SSLContext:
        context = client_context(cert=folder / f"{name}.pem", key=folder / f"{name}.key",
                                 ca_pem=pki.ca)
        context.check_hostname = False  # (the fixtures' site certificates name no host)
        return context

    async def main() -> None:
        server = WebServer(site, server_context(cert=folder / "d2.pem", key=folder / "d2.key",
                                                ca_pem=pki.ca))
        port = await server.start()
        try:
            async with aiohttp.ClientSession() as http:
                await scenario(http, f"https://127.0.0.1:{port}/", client)
        finally:
            await server.stop()

    asyncio.run(main())


def _trig(nquads: bytes) -> bytes:
    written = ox.serialize(ox.parse(nquads, format=ox.RdfFormat.N_QUADS),
                           format=ox.RdfFormat.TRIG)
    assert written is not None
    return written


def _refused(node: SiteNode, reason: str) -> float:
    return float(node.metrics.refused_receipts.labels(source="inbox", reason=reason)._value.get())


def test_a_posted_receipt_is_accepted_queued_and_listed_once(
    pki: Pki, d2: SiteNode, tmp_path: Path
) -> None:
    data = chain(pki, "d1", "d2")
    receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
    location = f"/inbox/{receipt.notification_id}"

    async def scenario(http: aiohttp.ClientSession, base: str,
                       client: Callable[[str], ssl.SSLContext]) -> None:
        for status in (201, 200):  # then known: the same notification
            async with http.post(base + "inbox/", data=_trig(data), ssl=client("alice"),
                                 headers={"Content-Type": "application/trig"}) as reply:
                assert reply.status == status, await reply.text()
                assert reply.headers["Location"] == location
        # a generic notification stays generic
        async with http.post(base + "inbox/", data=NOTE, ssl=client("alice"),
                             headers={"Content-Type": "application/ld+json"}) as reply:
            assert reply.status == 201 and reply.headers["Location"].startswith("/inbox/n")
            generic = reply.headers["Location"]
        async with http.get(base + "inbox/", ssl=client("eve"),
                            headers={"Accept": "application/n-quads"}) as reply:
            listed = await reply.text()
        assert listed.count(receipt.notification_id) == 1 and f"{generic}>" in listed
        # the receipt's named graphs, in every RDF type the inbox offers for them
        expected = set(ox.parse(data, format=ox.RdfFormat.N_QUADS))
        for media_type in (ld.JSON_LD, ld.TRIG, ld.N_QUADS):
            async with http.get(base + location.lstrip("/"), ssl=client("eve"),
                                headers={"Accept": media_type}) as reply:
                assert reply.status == 200 and reply.content_type == media_type
                fmt = ox.RdfFormat.from_media_type(media_type)
                assert fmt is not None
                assert set(ox.parse(await reply.read(), format=fmt)) == expected
        async with http.get(base + location.lstrip("/"), ssl=client("eve"),
                            headers={"Accept": "text/turtle"}) as reply:
            assert reply.status == 406  # named graphs
        async with http.get(base + location.lstrip("/"), ssl=client("eve"),
                            headers={"Accept": "text/html"}) as reply:
            assert reply.status == 200 and "received#e4" in await reply.text()

    _run(pki, d2, tmp_path, scenario)
    (queued,) = d2.store.queued_receipts(limit=10)
    assert queued.data == data  # queued upstream once
    stored = d2.store.notifications.get(receipt.notification_id)
    assert stored is not None and stored.receipt and stored.sender == "alice"
    assert d2.metrics.receipts.labels(source="subscriber")._value.get() == 1
    d2.flush_log()
    logged = (tmp_path / "d2.nq").read_bytes()
    assert logged.count(b"received#e4> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>") == 1


def test_a_receipt_of_a_kept_message_is_stored_by_reference_and_served_whole(
    pki: Pki, d2: SiteNode, tmp_path: Path,
) -> None:
    upstream = relay(pki, published(pki), "d1", "d2")
    hop = relay(pki, upstream, "d2", "alice")
    route_and_flush(d2.store, tmp_path / "d2.nq", upstream, hop)  # d2 keeps the message
    data = receipted(pki, hop, "alice").to_nquads()
    receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
    location = f"/inbox/{receipt.notification_id}"

    async def get(http: aiohttp.ClientSession, url: str, media_type: str,
                  ssl_context: ssl.SSLContext) -> tuple[int, bytes]:
        async with http.get(url, ssl=ssl_context, headers={"Accept": media_type}) as reply:
            return reply.status, await reply.read()

    async def scenario(http: aiohttp.ClientSession, base: str,
                       client: Callable[[str], ssl.SSLContext]) -> None:
        async with http.post(base + "inbox/", data=data, ssl=client("alice"),
                             headers={"Content-Type": ld.N_QUADS}) as reply:
            assert reply.status == 201, await reply.text()
        stored = d2.store.notifications.get(receipt.notification_id)
        assert stored is not None and (stored.via, stored.digest) == (hop.uri, receipt.id)
        assert len(stored.nquads) * 3 < len(data), (len(stored.nquads), len(data))
        # served whole: the canonical N-Quads the receipt has, byte for byte
        assert await get(http, base + location.lstrip("/"), ld.N_QUADS, client("eve")) == (
            200, data)
        status, html = await get(http, base + location.lstrip("/"), "text/html",
                                 client("eve"))
        assert status == 200 and b"received#e4" in html
        # the message pruned: the notification is gone, and says why
        assert d2.store.messages is not None and d2.store.messages.prune(10**15) == 2
        status, body = await get(http, base + location.lstrip("/"), ld.N_QUADS,
                                 client("eve"))
        assert status == 410 and hop.uri.encode() in body
        async with http.get(base + "inbox/", ssl=client("eve"),
                            headers={"Accept": ld.N_QUADS}) as reply:
            assert receipt.notification_id in await reply.text()  # listed still

    _run(pki, d2, tmp_path, scenario)
    (queued,) = d2.store.queued_receipts(limit=10)
    assert queued.data == data  # queued upstream whole


def test_a_receipt_whose_message_is_not_kept_is_stored_whole(
    pki: Pki, d2: SiteNode, tmp_path: Path,
) -> None:
    data = chain(pki, "d1", "d2")  # a hop d2 signed, but never routed through this store
    receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
    assert SiteReceipts(d2, Limits(), inbox=True).from_subscriber(
        certs.credential_from_pem(pki.parties["alice"][0]).member_id, receipt)
    stored = d2.store.notifications.get(receipt.notification_id)
    assert stored is not None and stored.nquads == data and stored.via is None


def _altered(data: bytes) -> bytes:
    message = provenance.Message.from_nquads(data)
    stamp = next(q for q in message.quads if q.p.value.endswith("hasReceivedTimestamp"))
    assert isinstance(stamp.o, Literal)
    altered = (message.quads - {stamp}) | {Quad(stamp.s, stamp.p,
                                                Literal("1201", stamp.o.datatype), stamp.g)}
    return provenance.Message(quads=frozenset(altered)).to_nquads()


@pytest.mark.parametrize("who, data, status, reason, says", [
    ("alice", "altered", 400, "SignatureError", r"does not verify graph <[^>]*received#e4>"),
    ("alice", "other site", 400, "ReceiptError", "not a hop of this site 'd2'"),
    ("carol", "alice's", 403, "ReceiptError", "not by you, 'carol'"),
    ("d1", "alice's", 403, "ReceiptError", "not by you, 'd1'"),
])
def test_a_receipt_that_is_not_the_clients_own_good_one_is_refused_and_counted(
    pki: Pki, d2: SiteNode, tmp_path: Path, who: str, data: str, status: int, reason: str,
    says: str,
) -> None:
    import re

    body = {
        "altered": _altered(chain(pki, "d1", "d2")),
        "other site": chain(pki, "d1", "d3"),
        "alice's": chain(pki, "d1", "d2"),
    }[data]

    async def scenario(http: aiohttp.ClientSession, base: str,
                       client: Callable[[str], ssl.SSLContext]) -> None:
        async with http.post(base + "inbox/", data=body, ssl=client(who),
                             headers={"Content-Type": "application/n-quads"}) as reply:
            assert reply.status == status
            assert re.search(says, await reply.text()), await reply.text()

    _run(pki, d2, tmp_path, scenario)
    assert _refused(d2, reason) == 1
    assert d2.store.notifications.count() == 0 and d2.store.receipts_queued() == 0


def test_a_receipt_is_read_by_its_parties_and_auditors_not_by_another_subscriber(
    pki: Pki, d2: SiteNode, tmp_path: Path,
) -> None:
    """Issue #16's proof: carol, another subscriber of d2, gets 403 reading alice's receipt
    and does not see it listed; its publisher, the sites on its path (d1, d2), alice and an
    auditor read it and see it listed; d3, a site off its path, does not."""
    data = chain(pki, "d1", "d2")
    receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
    location = f"/inbox/{receipt.notification_id}"
    expected = set(ox.parse(data, format=ox.RdfFormat.N_QUADS))

    async def scenario(http: aiohttp.ClientSession, base: str,
                       client: Callable[[str], ssl.SSLContext]) -> None:
        async with http.post(base + "inbox/", data=data, ssl=client("alice"),
                             headers={"Content-Type": ld.N_QUADS}) as reply:
            assert reply.status == 201, await reply.text()
        async with http.post(base + "inbox/", data=NOTE, ssl=client("carol"),
                             headers={"Content-Type": ld.JSON_LD}) as reply:
            assert reply.status == 201  # carol's own notification: she lists that one
            carols = reply.headers["Location"].removeprefix("/inbox/")
        for who, may in ((PUBLISHER, True), ("d1", True), ("d2", True), ("alice", True),
                         ("eve", True), ("carol", False), ("d3", False)):
            async with http.get(base + location.lstrip("/"), ssl=client(who),
                                headers={"Accept": ld.N_QUADS}) as reply:
                body = await reply.read()
                if may:
                    assert reply.status == 200, (who, body)
                    assert set(ox.parse(body, format=ox.RdfFormat.N_QUADS)) == expected
                else:
                    assert reply.status == 403, (who, body)
                    assert b"may not read" in body and b"sites on its path" in body
            async with http.get(base + "inbox/", ssl=client(who),
                                headers={"Accept": ld.N_QUADS}) as reply:
                assert reply.status == 200
                listed = await reply.text()
            assert (receipt.notification_id in listed) == may, who
            # carol's note: hers, the site's and the auditor's only (it names no one)
            assert (carols in listed) == (who in ("carol", "d2", "eve")), who

    _run(pki, d2, tmp_path, scenario)
