"""A subscriber checks publishers against the CRL its site relays, not the sites' word (#13).

The root d1 is dishonest (or lagging): it keeps the CRL it started with, so it goes on taking
documents from a publisher the CA has since revoked (its key stolen, say). alice's site d2
reloads the new CRL and relays it; alice then refuses the revoked publisher's next document
although it is genuinely signed with the publisher's key and routed by both sites. An honest
d2 would refuse that document itself (it checks every provenance chain against its CRL), so d2
here relays documents without checking them: alice's refusal is hers alone. The honest d2's
refusal is the second test.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from dishonest_site import launcher  # tests/integration is on sys.path (pytest's rootdir)

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, SiteSpec, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]

PUBLISHER = "production-dept"


class _LaggingRoot(LocalNetwork):
    """d1 reads a copy of the CRL taken when it first starts, never the CA's new one."""

    def site_config(self, site: SiteSpec, *, port: int = 0) -> Path:
        path = super().site_config(site, port=port)
        if site.name == "d1":
            frozen = self.certs / "crl-d1.pem"
            if not frozen.exists():
                shutil.copyfile(self.certs / "crl.pem", frozen)
            text = path.read_text()
            assert 'crl = "certs/crl.pem"' in text
            path.write_text(text.replace('"certs/crl.pem"', '"certs/crl-d1.pem"'))
        return path


@pytest.fixture(params=["unchecking", "honest"])
def network(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalNetwork]:
    net = _LaggingRoot(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    if request.param == "unchecking":
        net.sites["d2"] = dataclasses.replace(
            net.sites["d2"], launcher=launcher("relay-unverified")
        )
    try:
        net.start_sites()
        yield net
    finally:
        net.stop()


def _refusals(network: LocalNetwork, name: str) -> list[dict[str, object]]:
    path = network.inbox(name) / "refused.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _revoke_publisher(network: LocalNetwork) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "certs", "revoke", "--dir", str(network.certs),
         "--name", PUBLISHER],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("network", ["unchecking"], indirect=True)
def test_a_revoked_publishers_document_is_refused_by_the_subscriber(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    assert wait_until(lambda: "from the site in force (0 certificates revoked" in
                      network.output("alice"), timeout=10)  # the CRL came with Subscribed
    network.publish(PUBLISHER, [SAMPLE_DOCUMENTS[PUBLISHER]], wait_for=("alice",))
    assert wait_until(lambda: len(network.received("alice")) == 1)

    _revoke_publisher(network)
    # d2 notices the rewritten crl.pem by itself and relays it to alice, who puts it in force.
    assert wait_until(lambda: "from the site in force (1 certificates revoked" in
                      network.output("alice"), timeout=30)

    # d1 still takes the publisher (its CRL is the old one) and routes the next version.
    network.publish(PUBLISHER, [SAMPLE_DOCUMENTS[PUBLISHER]], extra=("--again",))
    assert wait_until(lambda: _refusals(network, "alice"), timeout=60), network.output("alice")
    (refusal,) = _refusals(network, "alice")
    assert refusal["kind"] == "revoked" and refusal["publisher"] == PUBLISHER
    assert refusal["version"] == 2 and "is revoked by the CRL in force" in str(refusal["reason"])
    assert len(network.received("alice")) == 1  # the refusal came after the document's turn
    assert f"refused {PUBLISHER}/" in network.output("alice")

    assert network.stop_subscriber("alice") == 2  # a run with a refusal exits with 2
    assert "(refusals: 1 revoked;" in network.output("alice")


@pytest.mark.parametrize("network", ["honest"], indirect=True)
def test_a_site_refuses_the_chain_of_a_publisher_its_crl_revokes(network: LocalNetwork) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    network.publish(PUBLISHER, [SAMPLE_DOCUMENTS[PUBLISHER]], wait_for=("alice",))
    _revoke_publisher(network)
    assert wait_until(lambda: "from the site in force (1 certificates revoked" in
                      network.output("alice"), timeout=30)  # d2 has the new CRL in force
    network.publish(PUBLISHER, [SAMPLE_DOCUMENTS[PUBLISHER]], extra=("--again",))  # d1 takes it
    assert wait_until(
        lambda: network.metric("d2", "xdn_documents_refused_total", kind="provenance") >= 1,
        timeout=60,
    ), network.output("d2")
    assert "was revoked" in network.output("d2")
    assert len(network.received("alice")) == 1  # version 2 never reached her
