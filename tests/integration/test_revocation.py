"""Revoking a certificate (a CRL reloaded without restart) stops delivery to it at once."""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deploy.network import LocalNetwork, SiteSpec, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party, write_crl
from xdn import certs
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _xdn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, check=False
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

    network.publish("production-dept", [SAMPLE], wait_for=("carol",), extra=("--again",))
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

    refusal = "certificate of 'd2' was revoked; reconnecting"  # d1 refused d2's link again
    refused_before = network.full_output("d2").count(refusal)
    network.publish("production-dept", [SAMPLE], wait_for=("carol",), extra=("--again",))
    assert wait_until(lambda: len(network.received("carol")) == 2)
    # d1 has routed the document (carol has it). The link was cut before it was published, and
    # once d1 has refused d2 again after that, no link could have carried it to d2.
    assert wait_until(lambda: network.full_output("d2").count(refusal) > refused_before, 60)
    assert len(network.received("alice")) == 1  # nothing reached d2 after the revocation


# ---- revocation cannot be rolled back or go stale; site-to-site trust (issue #13) ------------
def _started(network: LocalNetwork) -> LocalNetwork:
    network.workdir.mkdir(parents=True)
    network.prepare()
    network.start_sites()
    return network


def _refused_again(network: LocalNetwork, name: str, reason: str) -> None:
    """Start ``name``; wait until the site refuses it and it exits, saying ``reason``."""
    before = network.full_output(name).count(reason)
    network.start_subscriber(name)
    site = network.subscribers[name].site
    assert wait_until(lambda: not network.subscriber_running(name), timeout=60), (
        f"{name} still runs:\n{network.output(name)}\n{site}:\n{network.output(site)}"
    )
    assert network.full_output(name).count(reason) > before, network.output(name)


@pytest.mark.long
def test_an_older_or_stale_crl_cannot_bring_a_revoked_subscriber_back(tmp_path: Path) -> None:
    """The CA's previous CRL is refused, also across a restart; a stale CRL raises the alarm,
    and past the grace new registrations are refused until a fresh CRL is installed."""
    with LocalNetwork(tmp_path / "net", site_settings={"crl_grace_seconds": 2}) as network:
        _started(network)
        older = (network.certs / "crl.pem").read_bytes()  # the CA's CRL revoking nobody
        network.start_subscriber("alice")
        network.wait_subscribed("alice")
        done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "alice")
        assert done.returncode == 0, done.stderr
        assert wait_until(lambda: not network.subscriber_running("alice"), timeout=30)

        (network.certs / "crl.pem").write_bytes(older)  # roll back to the previous CRL
        assert wait_until(lambda: "is older than CRL number" in network.output("d2"), 10)
        assert "CRL reload refused" in network.output("d2")
        assert network.metric("d2", "xdn_crl_refused_total", reason="CrlRollbackError") >= 1
        _refused_again(network, "alice", "certificate of 'alice' was revoked")

        network.kill_site("d2")  # a restart with the older CRL file in place
        network.restart_site("d2")
        assert "refused, the CRL enforced before stays in force" in network.output("d2")
        _refused_again(network, "alice", "certificate of 'alice' was revoked")

        # The CA's newer CRL (still revoking alice) is installed, but it is already stale.
        write_crl(network.certs, now=datetime.now(UTC) - timedelta(days=3), days=1)
        assert wait_until(
            lambda: "ALARM: the CRL in force is stale" in network.output("d3"), timeout=30
        )
        # bob's site d3 sends it to its uplink d1 (it does not serve all bob asks for): every
        # site must have taken the stale CRL up, not only d3.
        for site in network.sites:
            refusing = functools.partial(network.metric, site, "xdn_crl_refusing_new")
            assert wait_until(lambda: refusing() == 1, 30), site  # noqa: B023
            assert network.metric(site, "xdn_crl_stale") == 1
        _refused_again(network, "bob", "the site's CRL is stale")
        assert "FAILED_PRECONDITION" in network.output("bob")

        done = _xdn("certs", "crl", "--dir", str(network.certs))  # a fresh CRL ends it
        assert done.returncode == 0, done.stderr
        assert wait_until(lambda: network.metric("d3", "xdn_crl_stale") == 0, 30)
        network.start_subscriber("bob")
        network.wait_subscribed("bob")


def _short_lived(network: LocalNetwork, name: str, block: str, seconds: int) -> None:
    """Reissue ``name``'s site certificate so that it expires ``seconds`` from now."""
    ca = network.certs / "ca.pem", network.certs / "ca.key"
    start = datetime.now(UTC) - timedelta(days=1) + timedelta(seconds=seconds)
    cert, key = certs.issue(
        ca[0].read_bytes(), ca[1].read_bytes(), name=name, role="site",
        attributes={certs.BLOCK_FIELD: block}, hosts=("localhost", "127.0.0.1"),
        now=start, days=1,
    )
    (network.certs / f"{name}.pem").write_bytes(cert)
    (network.certs / f"{name}.key").write_bytes(key)


@pytest.mark.long
def test_site_links_end_when_a_site_certificate_is_revoked_or_expires(tmp_path: Path) -> None:
    """d2 serves d4 and d5. d4's certificate expires: its link is cut. d2 is revoked: d5 cuts
    its uplink and links to d1 instead, and after a restart the DHT no longer offers d2."""
    sites = (
        SiteSpec(name="d1", block="ProductionProcess"),
        SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
        SiteSpec(name="d4", block="Production", uplink="d2"),
        SiteSpec(name="d5", block="QualityInspection", uplink="d2"),
    )
    with LocalNetwork(tmp_path / "net", sites=sites, subscribers=(), verbose=True) as network:
        network.workdir.mkdir(parents=True)
        network.prepare()
        _short_lived(network, "d4", "Production", seconds=45)
        network.start_sites()
        for downlink in ("d4", "d5"):
            assert wait_until(
                lambda d=downlink: f"downlink {d} connected" in network.full_output("d2"), 30
            )

        done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "d2")
        assert done.returncode == 0, done.stderr
        cut = "cut off: certificate of uplink 'd2' was revoked"
        assert wait_until(lambda: cut in network.full_output("d5"), 15)
        assert wait_until(lambda: "downlink d5 connected" in network.full_output("d1"), 30)
        assert "uplink found through the DHT: d1" in network.full_output("d5")

        network.kill_site("d5")
        network.restart_site("d5")
        assert wait_until(lambda: network.full_output("d1").count("downlink d5 connected") == 2)
        found = network.full_output("d5")
        assert found.count("uplink found through the DHT: d2") == 1  # before the revocation only
        assert found.count("uplink found through the DHT: d1") == 2

        expired = "downlink d4 cut off: its certificate expired"
        assert wait_until(
            lambda: expired in network.full_output("d1") + network.full_output("d2"), 90
        )
