"""Delivery receipts in the sites' LDN inboxes, and posted to them (a real d1 → d2 network).

alice and carol are registered at d2 and granted production-dept's concepts; carol is stopped
before the document is published. alice's receipt (sent with her acknowledgement) lands in
d2's inbox as sent by alice, and in d1's — the publisher's root site — as sent by d2, once in
each. carol, back later, takes the message d2 minted for her from d2's endpoint, signs her
receipt and posts it to d2's inbox: accepted, it reaches the publisher
(``xdn provenance receipts``). An altered receipt is 400 and counted; someone else's, 403.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pyoxigraph as ox
import pytest

from deploy.network import LocalNetwork, wait_until
from tests.integration.test_linked_data import Client
from tests.integration.test_receipts import (
    _network,
    _published_while_carol_is_away,
    _receipts,
    _report_once_alice_is_in,
)
from xdn import certs, crypto, provenance
from xdn import linked_data as ld
from xdn.rdf import Literal, Quad
from xdn.receipts import Receipt, read_receipt

pytestmark = [pytest.mark.integration, pytest.mark.long]

DOC = "order-i1"


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    net = _network(tmp_path_factory.mktemp("inbox-receipts") / "net")
    try:
        net.start_sites()
        _published_while_carol_is_away(net, DOC)
        yield net
    finally:
        net.stop()


def _client(network: LocalNetwork, who: str, site: str) -> Client:
    client = Client(network, who)
    client.base = network.web_url(site)
    return client


def _listing(network: LocalNetwork, site: str) -> list[str]:
    """Every notification URI of ``site``'s inbox, page after page."""
    client, target, found = _client(network, "production-dept", site), "/inbox/", []
    while target:
        status, headers, body = client.request("GET", target, Accept="application/n-quads")
        assert status == 200, body
        found += [q.object.value for q in ox.parse(body, format=ox.RdfFormat.N_QUADS)
                  if q.predicate.value == ld.LDP + "contains"]
        target = ld.parse_links(headers.get_all("Link") or ()).get("next", "")
    return found


def _senders(network: LocalNetwork, site: str) -> dict[str, str]:
    """Who sent each receipt notification ``site`` holds (its store, read-only)."""
    path = network.workdir / "state" / site / "site.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT id, sender FROM notifications WHERE receipt = 1").fetchall()
    finally:
        db.close()
    return {f"{certs.node_uri(site)}inbox/{i}": sender for i, sender in rows}


def _stored(network: LocalNetwork, site: str) -> dict[str, tuple[int, str | None, str | None]]:
    """Each receipt notification ``site`` holds: the bytes of its row's statements, the
    message it refers to and the digest of the whole chain (its store, read-only)."""
    path = network.workdir / "state" / site / "site.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT id, length(nquads), via, digest FROM notifications WHERE receipt = 1"
        ).fetchall()
    finally:
        db.close()
    return {f"{certs.node_uri(site)}inbox/{i}": (n, via, digest) for i, n, via, digest in rows}


def _receipts_listed(network: LocalNetwork, site: str) -> dict[str, Receipt]:
    """The receipt notifications of ``site``'s inbox, read and verified under the CA; each
    served byte for byte as the receipt's canonical N-Quads, rebuilt from a row that holds
    only the graphs after the message ``site`` minted (a few KB of 20 to 30)."""
    verifier = provenance.ChainVerifier((network.certs / "ca.pem").read_bytes())
    client, found = _client(network, "production-dept", site), {}
    stored = _stored(network, site)
    for uri in _listing(network, site):
        if "/inbox/receipt-" not in uri:
            continue
        status, _, body = client.request("GET", urlsplit(uri).path, Accept="application/n-quads")
        assert status == 200, body
        receipt = read_receipt(body, verifier, at=datetime.now(UTC), max_bytes=10**7)
        size, via, digest = stored[uri]
        assert body == receipt.to_nquads() and digest == receipt.id
        assert via is not None and via.startswith(certs.node_uri(site) + "msg/")
        assert size * 2 < len(body), (size, len(body))
        print(f"{site} {uri.rsplit('/', 1)[1][:16]}: {len(body)} bytes whole, {size} stored")
        found[uri] = receipt
    return found


def test_alices_receipt_lands_in_d2s_and_d1s_inboxes_once(network: LocalNetwork) -> None:
    for site in ("d2", "d1"):
        assert wait_until(lambda: bool(_receipts_listed(network, site)), 60), (  # noqa: B023
            network.output(site)
        )
    at_d2, at_d1 = _receipts_listed(network, "d2"), _receipts_listed(network, "d1")
    ((uri2, alice2),) = at_d2.items()  # once: carol has not received it
    ((uri1, alice1),) = at_d1.items()
    assert alice1.id == alice2.id and alice1.subscriber.name == "alice"
    assert (alice1.document_id, alice1.version, alice1.sites) == (DOC, 1, ("d1", "d2"))
    assert uri2.removeprefix(certs.node_uri("d2")) == uri1.removeprefix(certs.node_uri("d1"))
    for site, uri in (("d2", uri2), ("d1", uri1)):
        assert _listing(network, site).count(uri) == 1
    # each inbox records who sent it: alice to d2, d2 to d1
    assert _senders(network, "d2") == {uri2: "alice"}
    assert _senders(network, "d1") == {uri1: "d2"}
    _report_once_alice_is_in(network, DOC)  # and it reached the publisher, over gRPC


def _carols_receipt(network: LocalNetwork) -> provenance.Message:
    """carol's receipt of the message d2 minted for her, taken from d2's endpoint."""
    d2 = certs.node_uri("d2")
    pattern = re.compile(rf"<({re.escape(d2)}msg/{DOC}/v1/subscriber-carol[^>#]*)#")
    log = network.logs / "d2.nq"
    assert wait_until(lambda: pattern.search(log.read_text()) is not None, 30)
    found = pattern.search(log.read_text())
    assert found is not None
    status, _, body = _client(network, "carol", "d2").request(
        "GET", urlsplit(found.group(1)).path, Accept="application/n-quads"
    )
    assert status == 200, body
    message = provenance.Message.from_nquads(body)
    signer = provenance.Signer(
        node_uri=certs.node_uri("carol"),
        private_key=crypto.load_private_key_pem((network.certs / "carol.key").read_bytes()),
        certificate=(network.certs / "carol.pem").read_bytes(),
    )
    return provenance.receipt(
        message, signer,
        message_uri=provenance.message_uri(signer.node_uri, DOC, "v1", "received"),
        timestamp_ms=int(datetime.now(UTC).timestamp() * 1000),
    )


def _trig(message: provenance.Message) -> bytes:
    written = ox.serialize(ox.parse(message.to_nquads(), format=ox.RdfFormat.N_QUADS),
                           format=ox.RdfFormat.TRIG)
    assert written is not None
    return written


def test_someone_elses_receipt_is_403_and_an_altered_one_400_and_counted(
    network: LocalNetwork,
) -> None:
    receipt = _carols_receipt(network)
    status, _, body = _client(network, "alice", "d2").post(_trig(receipt), "application/trig")
    assert status == 403 and b"not by you, 'alice'" in body
    stamp = next(q for q in receipt.quads if q.p.value.endswith("hasReceivedTimestamp"))
    assert isinstance(stamp.o, Literal)
    altered = provenance.Message(quads=frozenset(
        (receipt.quads - {stamp}) | {Quad(stamp.s, stamp.p, Literal("1", stamp.o.datatype),
                                          stamp.g)}
    ))
    status, _, body = _client(network, "carol", "d2").post(altered.to_nquads(),
                                                           "application/n-quads")
    assert status == 400 and re.search(rb"does not verify graph <[^>]*received#e4>", body), body
    assert network.metric("d2", "xdn_receipts_refused_total", source="inbox",
                          reason="SignatureError") == 1
    assert network.metric("d2", "xdn_receipts_refused_total", source="inbox",
                          reason="ReceiptError") == 1
    assert all(r.subscriber.name == "alice" for r in _receipts_listed(network, "d2").values())


def test_carols_posted_receipt_is_accepted_and_reaches_the_publisher(
    network: LocalNetwork,
) -> None:
    receipt = _carols_receipt(network)
    client = _client(network, "carol", "d2")
    status, headers, body = client.post(_trig(receipt), "application/trig")
    assert status == 201, body
    location = headers["Location"]
    assert location.startswith("/inbox/receipt-")
    status, _, _ = client.post(_trig(receipt), "application/trig")
    assert status == 200  # known: neither queued nor listed again
    assert network.metric("d2", "xdn_receipts_total", source="subscriber") == 2

    def carol_received() -> bool:
        done = _receipts(network, DOC, "--json")
        assert done.returncode == 0, done.stderr
        (version,) = json.loads(done.stdout)["versions"]
        return any(r["subscriber"] == "carol" for r in version["received"])

    assert wait_until(carol_received, 90), (network.output("d2"), network.output("d1"))
    # listed at d2 (sent by carol) and at the root (sent by d2), once each
    for site in ("d2", "d1"):
        assert wait_until(lambda: len(_receipts_listed(network, site)) == 2, 30)  # noqa: B023
        names = sorted(r.subscriber.name for r in _receipts_listed(network, site).values())
        assert names == ["alice", "carol"]
    assert sorted(_senders(network, "d2").values()) == ["alice", "carol"]
    assert sorted(_senders(network, "d1").values()) == ["d2", "d2"]
