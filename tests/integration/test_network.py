"""End to end through real daemons: publishers → three sites → subscribers."""

from __future__ import annotations

import json

import pytest

from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, wait_until
from xdn import xmlsafe
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLES = {
    "production-dept": [REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"],
    "qa-company": [REPO_ROOT / "ontology" / "samples" / "qa-company-report.xml"],
}


def _publish_samples(network: LocalNetwork) -> None:
    for publisher, docs in SAMPLES.items():
        network.publish(publisher, docs, wait_for=network.granted_subscribers(publisher))


def test_each_subscriber_receives_exactly_what_its_policy_allows(network: LocalNetwork) -> None:
    for name in network.subscribers:
        network.start_subscriber(name)
    bob = network.wait_subscribed("bob")
    alice = network.wait_subscribed("alice")
    # alice's grants fit d2's block; bob's do not fit d3's, so d3 sent him to its uplink d1.
    assert alice["served_by"] == "d2"
    assert bob["served_by"] == "d1"
    _publish_samples(network)
    # Once a later marker is in, anything beyond the grants would have arrived before it.
    published = {p: [*docs, network.publish_marker(p)] for p, docs in SAMPLES.items()}
    ontology = load_ontology([ONTOLOGY])
    for name in network.subscribers:
        expected = expected_deliveries(network, ontology, name, published)
        assert len(expected) > 1, f"the sample policies grant {name} something"
        received, refused = read_received(network.inbox(name))
        assert refused == 0
        assert received == expected
        # Nothing withheld against the publishers' signed sequence or entitlements.
        assert not (network.inbox(name) / "gaps.jsonl").exists(), network.output(name)


def test_views_hold_the_original_content_and_sites_hold_no_plaintext(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    _publish_samples(network)
    assert wait_until(lambda: (network.inbox("alice") / "received.jsonl").exists())
    views = list((network.inbox("alice") / "views").rglob("*.xml"))
    assert views
    view_text = b"".join(v.read_bytes() for v in views)
    # Every text node of the view is text of the original document...
    sample = SAMPLES["production-dept"][0]
    original = xmlsafe.parse_file(sample).getroot()
    texts = {t.strip() for t in original.itertext() if len(t.strip()) > 6}
    seen = {t for t in texts if t.encode() in view_text}
    assert seen, "the view carries the document's text"
    # ...and none of it appears in anything a disseminator wrote (its log and output).
    for site in network.sites:
        site_bytes = (network.logs / f"{site}.nq").read_bytes()
        site_bytes += (network.workdir / f"{site}.out").read_bytes()
        leaked = [t for t in seen if t.encode() in site_bytes]
        assert leaked == [], f"site {site} saw plaintext: {leaked[:3]}"


def test_unregistered_credential_gets_nothing_and_is_told_why(network: LocalNetwork) -> None:
    from datetime import UTC, datetime

    from deploy.pki import Party, issue_party

    issue_party(
        network.certs, Party(name="eve", role="subscriber", attributes={"OU": "Nobody"}),
        now=datetime.now(UTC),
    )
    from deploy.network import SubscriberSpec

    network.subscribers["eve"] = SubscriberSpec(name="eve", site="d1")
    network.start_subscriber("eve")
    assert wait_until(lambda: "refused" in network.output("eve"))
    assert "no policy grants" in network.output("eve")
    assert not (network.inbox("eve") / "subscription.json").exists()


def test_subscription_record_lists_grants(network: LocalNetwork) -> None:
    network.start_subscriber("alice")
    info = network.wait_subscribed("alice")
    grants = info["grants"]
    assert isinstance(grants, dict)
    assert "WorkOrder" in grants["production-dept"]
    assert "qa-company" not in grants
    assert json.loads((network.inbox("alice") / "subscription.json").read_text()) == info
