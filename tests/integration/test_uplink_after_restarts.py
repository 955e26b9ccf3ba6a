"""A leaf restarted after the root links to its proper uplink again, and its subscriber gets
every version exactly once, in order (issue #18, finding 1).

Root d1 (ProductionProcess) ⊃ relay d2 (WorkOrder) ⊃ leaf d4 (Production); carl subscribes at
d4. The root is killed and restarted, then the leaf. The leaf joins the DHT through the root,
which — before DHT records outlived a restart — knew nothing but itself and named itself as
the leaf's uplink: d4 linked to d1 and d2 kept d4's queue for a day.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, SiteSpec, SubscriberSpec, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)

SITES = (
    SiteSpec(name="d1", block="ProductionProcess"),
    SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
    SiteSpec(name="d4", block="Production", uplink="d2"),
)
CARL = SubscriberSpec(name="carl", site="d4", attributes={"OU": "Contractors"})


def _versions(network: LocalNetwork) -> list[object]:
    return [r["version"] for r in network.received("carl") if r["document"] == "order"]


def test_a_leaf_restarted_after_the_root_returns_to_its_uplink(tmp_path: Path) -> None:
    order = tmp_path / "order.xml"
    shutil.copyfile(SAMPLE_DOCUMENTS["production-dept"], order)
    with LocalNetwork(
        tmp_path / "net", sites=SITES, subscribers=(CARL,), verbose=True
    ) as network:
        network.workdir.mkdir(parents=True)
        network.prepare()
        network.start_sites()
        assert wait_until(lambda: "downlink d4 connected" in network.full_output("d2"))
        network.start_subscriber("carl")
        assert network.wait_subscribed("carl")["served_by"] == "d4"

        def publish(version: int) -> None:
            network.publish("production-dept", [order], wait_for=("carl",), extra=("--again",))
            assert wait_until(lambda: len(_versions(network)) >= version, 60), (
                network.output("carl")
            )

        publish(1)
        publish(2)

        network.kill_site("d1")
        network.restart_site("d1")
        assert wait_until(lambda: network.full_output("d1").count("downlink d2 connected") == 2)
        publish(3)

        linked_at_d2 = network.full_output("d2").count("downlink d4 connected")
        network.kill_site("d4")
        # v4, while d4 is down
        network.publish("production-dept", [order], wait_for=("carl",), extra=("--again",))
        network.restart_site("d4")
        assert wait_until(
            lambda: network.full_output("d2").count("downlink d4 connected") > linked_at_d2, 60
        ), network.output("d4")
        assert wait_until(lambda: len(_versions(network)) >= 4, 60), network.output("carl")
        publish(5)
        publish(6)

        d4 = network.full_output("d4")
        assert d4.count("uplink found through the DHT: d2") == 2, d4  # before and after
        assert "FALLBACK" not in d4 and "leaving uplink" not in d4
        assert "downlink d4 connected" not in network.full_output("d1")
        # Once a later marker is in, anything due (and any duplicate) has arrived.
        network.publish_marker("production-dept", ["carl"], timeout=90)
        assert _versions(network) == [1, 2, 3, 4, 5, 6], network.output("carl")


def test_a_leaf_that_fell_back_to_the_root_moves_to_its_uplink_when_it_returns(
    tmp_path: Path,
) -> None:
    """d2 stops (politely: its record is withdrawn) and d4 restarts meanwhile: the DHT names
    d1 only, a fallback, logged as such. d2 comes back: d4 re-checks, moves to d2, and d1 hands
    d4 over once d4 acknowledged all d1 queued for it. carl gets every version once, in order."""
    order = tmp_path / "order.xml"
    shutil.copyfile(SAMPLE_DOCUMENTS["production-dept"], order)
    with LocalNetwork(
        tmp_path / "net", sites=SITES, subscribers=(CARL,), verbose=True
    ) as network:
        network.workdir.mkdir(parents=True)
        network.prepare()
        network.start_sites()
        network.start_subscriber("carl")
        assert network.wait_subscribed("carl")["served_by"] == "d4"

        def publish(version: int) -> None:
            network.publish("production-dept", [order], wait_for=("carl",), extra=("--again",))
            assert wait_until(lambda: len(_versions(network)) >= version, 60), (
                network.output("carl")
            )

        publish(1)
        network.signal_site("d2", signal.SIGTERM)
        assert network.wait_site("d2") == 0
        network.kill_site("d4")
        network.restart_site("d4")
        assert wait_until(lambda: "FALLBACK" in network.full_output("d4")), network.output("d4")
        assert wait_until(lambda: "downlink d4 connected" in network.full_output("d1"))
        publish(2)
        publish(3)

        network.restart_site("d2")
        assert wait_until(lambda: "leaving uplink d1" in network.full_output("d4"), 60), (
            network.output("d4")
        )
        assert wait_until(lambda: "handed over" in network.full_output("d1"), 60), (
            network.output("d1")
        )
        publish(4)
        publish(5)
        network.publish_marker("production-dept", ["carl"], timeout=90)
        assert _versions(network) == [1, 2, 3, 4, 5], network.output("carl")
        d2 = network.full_output("d2")
        assert d2.count("downlink d4 connected") == 2, d2  # before, and after the move
        # Resume points per uplink; d1's went with the queue d1 freed (a queue d1 makes for
        # d4 anew numbers from 1 again: the old point would acknowledge what was not applied).
        db = sqlite3.connect(network.workdir / "state" / "d4" / "site.sqlite")
        try:
            points = {k for (k,) in db.execute("SELECT key FROM meta WHERE key LIKE 'uplink%'")}
        finally:
            db.close()
        assert points == {"uplink_applied/d2"}
