"""A 20-site network in one test: every subscriber gets exactly what its policy allows.

The topology (deploy/topologies/twenty-sites.toml) is one root and 19 downlinks over the sample
ontology's blocks, several sites per block; six subscribers connect at leaf sites and are sent
up the DAG to a site covering their grants. Every site is its own process over mutual TLS.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.cluster import load_topology
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

TOPOLOGY = REPO_ROOT / "deploy" / "topologies" / "twenty-sites.toml"
SAMPLES = {
    "production-dept": [REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"],
    "qa-company": [REPO_ROOT / "ontology" / "samples" / "qa-company-report.xml"],
}


@pytest.fixture
def twenty(tmp_path: Path) -> Iterator[LocalNetwork]:
    net = load_topology(TOPOLOGY).network(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites(timeout=60.0)
        yield net
    finally:
        net.stop()


def test_twenty_sites_deliver_exactly_the_policy_views(twenty: LocalNetwork) -> None:
    assert len(twenty.sites) == 20
    blocks = [s.block for s in twenty.sites.values()]
    assert len(set(blocks)) < len(blocks), "several sites serve the same block"
    for name in twenty.subscribers:
        twenty.start_subscriber(name)
    served_by = {name: twenty.wait_subscribed(name, timeout=60.0)["served_by"]
                 for name in twenty.subscribers}
    for name, site in served_by.items():
        assert site in twenty.sites, f"{name} registered at an unknown site {site}"
    for publisher, docs in SAMPLES.items():
        twenty.publish(publisher, docs, wait_for=twenty.granted_subscribers(publisher))

    # Once a later marker is in, anything extra (a duplicate, a fragment beyond a grant) would
    # have arrived before it.
    published = {p: [*docs, twenty.publish_marker(p)] for p, docs in SAMPLES.items()}
    ontology = load_ontology([ONTOLOGY])
    expected = {
        name: expected_deliveries(twenty, ontology, name, published)
        for name in twenty.subscribers
    }
    assert all(expected.values()), "the sample policies grant every subscriber something"
    for name, want in expected.items():
        received, refused = read_received(twenty.inbox(name))
        assert refused == 0, f"{name} refused deliveries: {twenty.output(name)}"
        assert received == want, f"{name} (served by {served_by[name]})"
        lines = (twenty.inbox(name) / "received.jsonl").read_text().splitlines()
        assert len(lines) == len(want), f"{name} received a document twice"
