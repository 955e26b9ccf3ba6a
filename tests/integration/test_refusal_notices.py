"""A subscriber's refusal reaches the publisher (a real d1 → d2 network, d2 dishonest).

d2 runs the dishonest-site double with fault ``forge-documents``: it drops every key message
and flips the manifest root of every document it delivers. alice, registered at d2, refuses
the document (it does not verify) and signs a failure notice; she hands it to d2 over gRPC
(``Notices``), d2 checks it, lists it in its inbox (kind refusal, once) and passes it up with
the receipts to d1, the publisher's root site, which checks it against d2's members, lists it
too and keeps it for the publisher: ``xdn provenance receipts DOC`` says alice refused v1, and
why, instead of listing her among those who have not received it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import pytest

from deploy.network import LocalNetwork, wait_until
from tests.integration.test_inbox_receipts import _client, _listing
from tests.integration.test_receipts import PUBLISHER, SAMPLE, _network, _receipts
from xdn import certs, provenance
from xdn.notices import read_notice

pytestmark = [pytest.mark.integration, pytest.mark.long]

DOC = "order-n1"


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    net = _network(tmp_path_factory.mktemp("refusal-notices") / "net", "forge-documents")
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        net.publish(PUBLISHER, [SAMPLE], wait_for=("alice",), extra=("--id", DOC))
        yield net
    finally:
        net.stop()


def _refused_here(network: LocalNetwork) -> list[dict[str, object]]:
    path = network.inbox("alice") / "refused.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _stored_refusals(network: LocalNetwork, site: str) -> dict[str, tuple[str, bytes]]:
    """Each failure notice's notification ``site`` holds: its sender and statements (its
    store, read-only), by notification URI."""
    path = network.workdir / "state" / site / "site.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT id, sender, nquads FROM notifications WHERE receipt = 2"
        ).fetchall()
    finally:
        db.close()
    return {f"{certs.node_uri(site)}inbox/{i}": (s, bytes(n)) for i, s, n in rows}


def _of_doc(network: LocalNetwork, site: str) -> dict[str, str]:
    """URI → sender of ``site``'s notifications of alice's notices refusing DOC."""
    verifier = provenance.ChainVerifier((network.certs / "ca.pem").read_bytes())
    out = {}
    for uri, (sender, nquads) in _stored_refusals(network, site).items():
        notice = read_notice(nquads, verifier, at=datetime.now(UTC), max_bytes=10**6)
        if notice.facts.document_id == DOC and notice.signer.name == "alice":
            out[uri] = sender
    return out


def test_a_refused_document_is_reported_to_the_publisher_and_listed_once(
    network: LocalNetwork,
) -> None:
    net = network
    assert wait_until(
        lambda: any(r.get("document") == DOC for r in _refused_here(net)), 60
    ), net.output("alice")
    (refusal,) = [r for r in _refused_here(net) if r.get("document") == DOC]
    # the notice travels: alice → d2 (her site) → d1 (the root), listed in both inboxes
    for site in ("d2", "d1"):
        assert wait_until(lambda: bool(_of_doc(net, site)), 60), (  # noqa: B023
            net.output(site), net.output("alice")
        )
    ((uri2, sender2),) = _of_doc(net, "d2").items()
    ((uri1, sender1),) = _of_doc(net, "d1").items()
    assert (sender2, sender1) == ("alice", "d2")
    assert uri2.removeprefix(certs.node_uri("d2")) == uri1.removeprefix(certs.node_uri("d1"))
    for site, uri in (("d2", uri2), ("d1", uri1)):
        assert _listing(net, site).count(uri) == 1  # exactly once, by HTTPS
    # served as alice signed it: it verifies under the CA alone
    status, _, body = _client(net, "production-dept", "d1").request(
        "GET", urlsplit(uri1).path, Accept="application/n-quads"
    )
    assert status == 200, body
    served = read_notice(
        body, provenance.ChainVerifier((net.certs / "ca.pem").read_bytes()),
        at=datetime.now(UTC), max_bytes=10**6,
    )
    assert (served.facts.kind, served.facts.version) == (refusal["kind"], 1)
    assert served.facts.received_from == certs.node_uri("d2")
    assert net.metric("d2", "xdn_notices_total", source="subscriber") >= 1
    assert net.metric("d1", "xdn_notices_total", source="downlink") >= 1
    # the publisher learns it: alice refused v1, and why
    found: list[dict[str, Any]] = []

    def reported() -> bool:
        done = _receipts(net, DOC, "--json")
        assert done.returncode == 0, done.stderr
        (version,) = json.loads(done.stdout)["versions"]
        found[:] = [version]
        return bool(version["refused"])

    assert wait_until(reported, 90), (found, net.output("d1"))
    (v1,) = found
    (alice,) = v1["refused"]
    assert (alice["subscriber"], alice["kind"], alice["reason"]) == (
        "alice", refusal["kind"], refusal["reason"]
    )
    assert v1["received"] == []
    assert "alice" not in {m["subscriber"] for m in v1["not_received"] or []}
    text = _receipts(net, DOC, "--no-fetch", "--version", "1")
    assert text.returncode == 0, text.stderr
    assert f"refused: {refusal['reason']} ({refusal['kind']})" in text.stdout
