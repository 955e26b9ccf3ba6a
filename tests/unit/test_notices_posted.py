"""Failure notices posted to a site's inbox (in process: real mutual TLS, a real site node).

d2 serves alice and carol (registered). alice posts her failure notice: the inbox checks it
with the one check of notices (:meth:`SiteNotices.from_subscriber`, as over gRPC) and answers
201 (logged, listed, queued), 200 (known), 400 (does not verify, names another site: counted)
or 403 (someone else's: counted).
"""

from __future__ import annotations

import asyncio
import itertools
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from disseminator.limits import Limits
from disseminator.node import SiteNode
from disseminator.notices import SiteNotices
from disseminator.receipts import SiteReceipts
from disseminator.web import WebConfig, WebServer, WebSite, client_context, server_context
from tests.unit.receipt_fixtures import NOW, PUBLISHER, Pki
from tests.unit.test_receipts_posted import d2, pki  # noqa: F401  (fixtures)
from tests.unit.test_site_notices import notice
from xdn import certs, provenance
from xdn.notices import read_notice

Scenario = Callable[[aiohttp.ClientSession, str, Callable[[str], ssl.SSLContext]], Awaitable[None]]


def _run(pki: Pki, node: SiteNode, folder: Path, scenario: Scenario) -> None:  # noqa: F811
    ids = itertools.count(1)
    receipts = SiteReceipts(node, Limits(), inbox=True)
    site = WebSite(
        node_uri=certs.node_uri("d2"), cert_pem=pki.parties["d2"][0],
        notifications=node.store.notifications, messages=node.store.messages,
        log_path=folder / "d2.nq",
        config=WebConfig(listen="127.0.0.1:0"), clock=lambda: NOW, revoked=frozenset,
        new_id=lambda: f"n{next(ids)}", receipts=receipts,
        notices=SiteNotices(node, Limits(), wake=receipts.queued, inbox=True),
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


def _refused(node: SiteNode, reason: str) -> float:
    return float(node.metrics.refused_notices.labels(source="inbox", reason=reason)._value.get())


def test_a_subscriber_posts_its_notice_once_and_someone_elses_is_forbidden(
    pki: Pki, d2: SiteNode, tmp_path: Path  # noqa: F811
) -> None:
    data = notice(pki)
    expected = read_notice(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**5)
    n_quads = {"Content-Type": "application/n-quads"}
    answers: list[tuple[int, str]] = []

    async def scenario(http: aiohttp.ClientSession, base: str,
                       client: Callable[[str], ssl.SSLContext]) -> None:
        for who, body in (("alice", data), ("alice", data), ("carol", data),
                          ("alice", notice(pki, site="d3")), ("alice", data[:-40] + b"\n")):
            async with http.post(base + "inbox/", data=body, headers=n_quads,
                                 ssl=client(who)) as r:
                answers.append((r.status, r.headers.get("Location", "")))
        for who in ("alice", "carol"):  # carol may not read alice's refusal
            async with http.get(base + f"inbox/{expected.notification_id}",
                                headers={"Accept": "application/n-quads"},
                                ssl=client(who)) as r:
                answers.append((r.status, (await r.read()).decode()))

    _run(pki, d2, tmp_path, scenario)
    location = f"/inbox/{expected.notification_id}"
    assert answers[:5] == [(201, location), (200, location), (403, ""), (400, ""), (400, "")]
    status, served = answers[5]
    assert status == 200
    assert answers[6][0] == 403
    assert provenance.Message.from_nquads(served.encode()) == expected.message  # as sent
    assert _refused(d2, "ForeignNoticeError") == 1
    assert _refused(d2, "NoticeError") == 1  # it names d3
    assert d2.store.notifications.ids() == [expected.notification_id]  # once, as a refusal
    stored = d2.store.notifications.get(expected.notification_id)
    assert stored is not None and stored.refusal and stored.sender == "alice"
    (queued,) = d2.store.queued_receipts(limit=10)
    assert (queued.publisher, queued.data) == (PUBLISHER, data)
