"""Receipts travel upstream, site by site, to the publisher, who learns who received what.

A two-site chain: root d1 → leaf d2, with two subscribers at d2 granted production-dept's
concepts: alice, running, and carol, registered but stopped before the document is published.
``xdn provenance receipts DOC`` at the publisher lists alice (with her path d1 → d2) and carol
as not having received it. A dishonest d2 that forges carol's receipt with its own key gets it
refused by d1, and the publisher does not list it.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dishonest_site import launcher  # tests/integration is on sys.path (pytest's rootdir)

from deploy.network import (
    DEFAULT_PUBLISHERS,
    LocalNetwork,
    SiteSpec,
    SubscriberSpec,
    wait_until,
)
from xdn.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

PUBLISHER = "production-dept"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
CRED1 = {"OU": "Cred1"}  # granted production-dept's concepts
SITES = (
    SiteSpec(name="d1", block="ProductionProcess"),
    SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
)
SUBSCRIBERS = (
    SubscriberSpec(name="alice", site="d2", attributes=CRED1),
    SubscriberSpec(name="carol", site="d2", attributes=CRED1),
)


def _network(workdir: Path, d2_fault: str | None = None) -> LocalNetwork:
    sites = SITES if d2_fault is None else (
        SITES[0], dataclasses.replace(SITES[1], launcher=launcher(d2_fault))
    )
    net = LocalNetwork(
        workdir, sites=sites, publishers=DEFAULT_PUBLISHERS[:1], subscribers=SUBSCRIBERS
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    return net


def _published_while_carol_is_away(net: LocalNetwork, document_id: str) -> None:
    """alice and carol register; carol stops; the document is published to both."""
    for name in ("alice", "carol"):
        net.start_subscriber(name)
        net.wait_subscribed(name)
    net.stop_subscriber("carol")  # still registered (durable), her lease in force
    net.publish(PUBLISHER, [SAMPLE], wait_for=("alice", "carol"), extra=("--id", document_id))
    assert wait_until(
        lambda: any(r["document"] == document_id for r in net.received("alice")), 60
    ), net.output("alice")


def _receipts(net: LocalNetwork, document_id: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "provenance", "receipts", document_id,
         "--connect", net.address("d1"), "--name", PUBLISHER, "--certs", "certs",
         "--state-dir", "state", *extra],
        cwd=net.workdir, capture_output=True, text=True, timeout=120, check=False,
    )


def _report_once_alice_is_in(net: LocalNetwork, document_id: str) -> dict[str, Any]:
    """Poll the command until alice's receipt has reached the publisher; its JSON report."""
    found: list[dict[str, Any]] = []

    def arrived() -> bool:
        done = _receipts(net, document_id, "--json")
        assert done.returncode == 0, done.stderr
        (version,) = json.loads(done.stdout)["versions"]
        found[:] = [version]
        return bool(version["received"])

    assert wait_until(arrived, 90), (found, net.output("d2"), net.output("d1"))
    return found[0]


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    net = _network(tmp_path_factory.mktemp("receipts") / "net")
    try:
        net.start_sites()
        _published_while_carol_is_away(net, "order-r1")
        yield net
    finally:
        net.stop()


def test_the_publisher_learns_who_received_a_version_and_who_has_not(
    network: LocalNetwork,
) -> None:
    version = _report_once_alice_is_in(network, "order-r1")
    assert version["version"] == 1 and "WorkOrder" in version["concepts"]
    (alice,) = version["received"]
    assert alice["subscriber"] == "alice" and alice["member"].startswith("alice@")
    assert alice["path"] == ["d1", "d2"] and alice["fragments"] > 0
    (carol,) = version["not_received"]
    assert carol["subscriber"] == "carol" and carol["site"] == "d2"
    # Every site on the path logged alice's receipt envelope, once.
    for site in ("d1", "d2"):
        log = (network.logs / f"{site}.nq").read_text()
        assert log.count("/v1/received#e4> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>") == 1


def test_fetched_receipts_are_kept_by_the_publisher_and_acknowledged_at_the_root(
    network: LocalNetwork,
) -> None:
    _report_once_alice_is_in(network, "order-r1")
    again = _receipts(network, "order-r1")
    assert again.returncode == 0, again.stderr
    assert "0 receipts fetched" in again.stderr  # the root deleted what the publisher stored
    assert "alice" in again.stdout and "not received (1)" in again.stdout
    offline = _receipts(network, "order-r1", "--no-fetch", "--version", "1")
    assert offline.stdout == again.stdout
    assert network.metric("d1", "xdn_receipts_total", source="downlink") == 1
    assert network.metric("d2", "xdn_receipts_total", source="subscriber") == 1
    for site in ("d1", "d2"):  # an honest path refuses nothing
        assert network.metric(site, "xdn_receipts_refused_total") == 0


def test_an_unreachable_site_is_a_clear_error(network: LocalNetwork) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "provenance", "receipts", "order-r1",
         "--connect", "127.0.0.1:1", "--name", PUBLISHER, "--certs", "certs",
         "--state-dir", "state"],
        cwd=network.workdir, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 1
    assert "UNAVAILABLE" in done.stderr and "--no-fetch" in done.stderr


def test_a_receipt_forged_by_a_site_is_refused_upstream_and_never_listed(
    tmp_path: Path,
) -> None:
    net = _network(tmp_path / "net", d2_fault="forge-receipt:carol")
    try:
        net.start_sites()
        assert "fault forge-receipt:carol installed" in net.output("d2")
        _published_while_carol_is_away(net, "order-f1")
        version = _report_once_alice_is_in(net, "order-f1")
        assert wait_until(
            lambda: net.metric(
                "d1", "xdn_receipts_refused_total", source="downlink", reason="SignatureError"
            ) == 1, 30
        ), net.output("d1")
        version = _report_once_alice_is_in(net, "order-f1")  # whatever d1 accepted is in
        assert [r["subscriber"] for r in version["received"]] == ["alice"]
        assert [m["subscriber"] for m in version["not_received"]] == ["carol"]
        assert "carol" not in (net.logs / "d1.nq").read_text()  # d1 logged no receipt of hers
    finally:
        net.stop()


def test_a_document_held_until_its_keys_came_is_receipted_once_it_opens(tmp_path: Path) -> None:
    """carol joins after the document was published and asks for the retained one: she holds
    it until the publisher enrols her, signs her receipt only then — after her ack of it went
    without one — and that receipt still reaches the publisher."""
    net = _network(tmp_path / "net")
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        net.publish(PUBLISHER, [SAMPLE], wait_for=("alice",), extra=("--id", "order-h1"))
        net.start_subscriber("carol", extra=["--retained"])
        net.wait_subscribed("carol")
        net.publish(PUBLISHER, [])  # no document: enrols her, grants the retained one's keys
        assert wait_until(
            lambda: any(r["document"] == "order-h1" for r in net.received("carol")), 60
        ), net.output("carol")
        assert "holding production-dept/order-h1" in net.full_output("carol")
        received: list[str] = []

        def both() -> bool:
            done = _receipts(net, "order-h1", "--json")
            assert done.returncode == 0, done.stderr
            (version,) = json.loads(done.stdout)["versions"]
            received[:] = sorted(m["subscriber"] for m in version["received"])
            return received == ["alice", "carol"]

        assert wait_until(both, 90), (received, net.output("d2"))
    finally:
        net.stop()
