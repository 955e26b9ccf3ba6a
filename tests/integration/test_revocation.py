"""Revoking a certificate (a CRL reloaded without restart) stops delivery to it at once."""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _xdn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "xdn.cli", *args], capture_output=True, text=True, check=False
    )


def _alice_and_carol(network: LocalNetwork, carol_site: str = "d2") -> None:
    """alice (at d2) and carol (same credential attributes) subscribed and receiving."""
    issue_party(
        network.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    network.subscribers["carol"] = SubscriberSpec(name="carol", site=carol_site)
    for name in ("alice", "carol"):
        network.start_subscriber(name)
        network.wait_subscribed(name)
    network.publish("production-dept", [SAMPLE], wait_for=("alice", "carol"))
    assert wait_until(
        lambda: len(network.received("alice")) == 1 and len(network.received("carol")) == 1
    )


def test_revoking_a_certificate_ends_its_live_subscription_at_once(
    network: LocalNetwork,
) -> None:
    _alice_and_carol(network)

    done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "alice")
    assert done.returncode == 0, done.stderr
    # No signal: the sites notice the rewritten crl.pem themselves (they look every second).
    assert wait_until(lambda: not network.subscriber_running("alice"), timeout=30)
    output = network.output("alice")
    assert "subscription ended by the site: its certificate was revoked" in output
    assert "CRL reloaded" in network.output("d2")

    network.publish("production-dept", [SAMPLE], wait_for=("carol",))
    assert wait_until(lambda: len(network.received("carol")) == 2)
    # Her process has ended, so her view is final: nothing published afterwards reached her.
    assert len(network.received("alice")) == 1

    # A revoked certificate cannot subscribe again, at any site.
    network.start_subscriber("alice")
    assert wait_until(lambda: not network.subscriber_running("alice"), timeout=20)
    assert "certificate of 'alice' was revoked" in network.output("alice").split(
        "its certificate was revoked"
    )[-1]
    assert len(network.received("alice")) == 1


def test_a_bad_crl_is_refused_and_the_previous_one_stays_in_force(
    network: LocalNetwork,
) -> None:
    _alice_and_carol(network)
    crl = network.certs / "crl.pem"
    crl.write_text("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n")
    for site in network.sites:
        network.signal_site(site, signal.SIGHUP)
    assert wait_until(lambda: "CRL reload refused" in network.output("d2"), timeout=10)
    assert "not a PEM X.509 CRL" in network.output("d2")
    assert network.subscriber_running("alice")

    # The CA re-signs a good CRL revoking alice: SIGHUP puts it in force at once.
    done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "alice")
    assert done.returncode == 0, done.stderr
    for site in network.sites:
        network.signal_site(site, signal.SIGHUP)
    assert wait_until(lambda: not network.subscriber_running("alice"), timeout=5)
    assert "its certificate was revoked" in network.output("alice")
    assert network.subscriber_running("carol")


def test_revoking_a_site_certificate_cuts_its_link_at_once(network: LocalNetwork) -> None:
    """d1 stops forwarding to d2 (and so to alice behind it); carol, at d1 itself, still gets
    every document."""
    _alice_and_carol(network, carol_site="d1")

    done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "d2")
    assert done.returncode == 0, done.stderr
    assert wait_until(
        lambda: "downlink d2 cut off: its certificate was revoked" in network.output("d1"), 10
    )
    assert wait_until(
        lambda: "link ended by the site: its certificate was revoked" in network.output("d2"), 10
    )

    refusal = "certificate of 'd2' was revoked; retrying"  # d1 refused d2's link again
    refused_before = network.full_output("d2").count(refusal)
    network.publish("production-dept", [SAMPLE], wait_for=("carol",))
    assert wait_until(lambda: len(network.received("carol")) == 2)
    # d1 has routed the document (carol has it). The link was cut before it was published, and
    # once d1 has refused d2 again after that, no link could have carried it to d2.
    assert wait_until(lambda: network.full_output("d2").count(refusal) > refused_before, 60)
    assert len(network.received("alice")) == 1  # nothing reached d2 after the revocation
