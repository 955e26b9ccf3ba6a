"""``xdn site status|subscribers`` against real sites: d1 → d2 with alice and bob at d2.

What an operator sees of d2 (its uplink, block, subscribers with grants and queue depths,
policy versions, DHT neighbours), and what the site refuses: a subscriber sees only its own
row and is refused the status; a publisher sees counts only (disseminator.admin). Then
``status --tree`` on d1 → d2 → d3: every site found, proven and agreeing; d3 killed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, SiteSpec, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from tests.integration.raw_calls import site_channel
from xdn.identity import person
from xdn.wire.v1 import admin_pb2, admin_pb2_grpc

pytestmark = pytest.mark.integration


@contextmanager
def _started(workdir: Path, sites: tuple[SiteSpec, ...],
             subscribers: tuple[SubscriberSpec, ...]) -> Iterator[LocalNetwork]:
    """The sites (each finding its uplink through the DHT, as started by hand), an ``ops``
    admin certificate, and the subscribers, each subscribed at its site."""
    network = LocalNetwork(workdir, sites=sites, subscribers=subscribers)
    network.workdir.mkdir(parents=True)
    network.prepare()
    issue_party(network.certs, Party(name="ops", role="admin"), now=datetime.now(UTC))
    try:
        network.start_sites()
        for spec in subscribers:
            network.start_subscriber(spec.name)
        for spec in subscribers:
            assert network.wait_subscribed(spec.name)["served_by"] == spec.site
        yield network
    finally:
        network.stop()


@pytest.fixture
def net(tmp_path: Path) -> Iterator[LocalNetwork]:
    with _started(
        tmp_path / "net",
        (SiteSpec(name="d1", block="ProductionProcess"),
         SiteSpec(name="d2", block="WorkOrder", uplink="d1")),
        (SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"}),
         SubscriberSpec(name="bob", site="d2", attributes={"OU": "Cred1"})),
    ) as network:
        yield network


def _site(net: LocalNetwork, action: str, site: str, name: str,
          *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "site", action, "--connect", net.address(site),
         "--certs", str(net.certs), "--name", name, *extra],
        cwd=net.workdir, capture_output=True, text=True, timeout=60, check=False,
    )


def _json(net: LocalNetwork, action: str, site: str, name: str, *extra: str) -> Any:
    done = _site(net, action, site, name, "--json", *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def _rows(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {person(r["name"]): r for r in status["subscribers"]}


def test_status_of_d2_as_an_admin_then_queues_as_bob_is_away(net: LocalNetwork) -> None:
    seen: dict[str, Any] = {}

    def settled() -> bool:  # the uplink linked and the DHT found d1
        seen["status"] = status = _json(net, "status", "d2", "ops")
        return bool(status["uplink"]["connected"] and status["neighbours"])

    assert wait_until(settled, timeout=60), seen
    status = seen["status"]
    assert (status["site"], status["block"], status["view"]) == ("d2", "WorkOrder", "full")
    assert status["address"] == net.address("d2")  # as it announces itself in the DHT
    assert status["uplink"]["address"] == net.address("d1")
    assert status["uplink"]["root"] is False
    assert net.address("d1") in {n["address"] for n in status["neighbours"]}
    assert status["subscribers_total"] == 2
    rows = _rows(status)
    assert sorted(rows) == ["alice", "bob"]
    assert "WorkOrder" in rows["alice"]["grants"]["production-dept"]
    assert set(status["policies"]) == {"production-dept", "qa-company"}
    assert status["policies"]["production-dept"]["version"] >= 1
    assert status["downlinks"] == []

    # d1 sees d2 as its downlink, with alice and bob behind it, at d2's address
    assert wait_until(lambda: [(d["site"], d["block"], d["members"], d["address"]) for d in
                               _json(net, "status", "d1", "d2")["downlinks"]]
                      == [("d2", "WorkOrder", 2, net.address("d2"))], timeout=30)

    # bob goes away; a document for both queues for bob, and alice takes hers
    net.stop_subscriber("bob")
    net.publish("production-dept", [SAMPLE_DOCUMENTS["production-dept"]])

    def queued() -> bool:
        seen["rows"] = rows = _rows(_json(net, "status", "d2", "ops"))
        return (rows["bob"]["queue_depth"] >= 1 and not rows["bob"]["connected"]
                and rows["alice"]["queue_depth"] == 0 and rows["alice"]["connected"])

    assert wait_until(queued, timeout=60), seen

    text = _site(net, "status", "d2", "ops")
    assert text.returncode == 0, text.stderr
    assert "site d2 serving block WorkOrder" in text.stdout
    assert f"uplink: {net.address('d1')} (connected)" in text.stdout
    assert "alice" in text.stdout and "bob" in text.stdout


def test_subscribers_are_paged_and_a_subscriber_sees_only_its_own_row(net: LocalNetwork) -> None:
    first = _json(net, "subscribers", "d2", "ops", "--limit", "1")
    assert [person(r["name"]) for r in first["subscribers"]] == ["alice"]
    assert first["total"] == 2 and person(first["next_after"]) == "alice"
    second = _json(net, "subscribers", "d2", "ops", "--limit", "1", "--after",
                   first["next_after"])
    assert [person(r["name"]) for r in second["subscribers"]] == ["bob"]
    assert second["next_after"] == ""

    own = _json(net, "subscribers", "d2", "alice")
    assert [person(r["name"]) for r in own["subscribers"]] == ["alice"] and own["total"] == 1
    assert "production-dept" in own["subscribers"][0]["grants"]


def test_refusals_say_why(net: LocalNetwork) -> None:
    refused = _site(net, "status", "d2", "alice")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "PERMISSION_DENIED" in refused.stderr
    assert "subscriber certificate: it may see only its own row" in refused.stderr

    listed = _site(net, "subscribers", "d2", "production-dept")
    assert listed.returncode == 2
    assert "PERMISSION_DENIED" in listed.stderr and "not who they are" in listed.stderr

    counts = _json(net, "status", "d2", "production-dept")
    assert counts["view"] == "publisher"
    assert list(counts["policies"]) == ["production-dept"]
    assert counts["subscribers_total"] == 2
    assert "subscribers" not in counts and "neighbours" not in counts


def test_the_site_itself_sees_everything_and_a_page_is_bounded_at_the_site(
    net: LocalNetwork,
) -> None:
    own = _json(net, "status", "d2", "d2")
    assert own["view"] == "full" and own["subscribers_total"] == 2

    async def too_big() -> grpc.StatusCode:
        async with site_channel(net, "d2", "ops") as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.Subscribers(admin_pb2.SubscribersRequest(limit=5000), timeout=10)
        assert "at most 1000" in (caught.value.details() or "")
        return caught.value.code()

    assert asyncio.run(too_big()) == grpc.StatusCode.INVALID_ARGUMENT


# ----------------------------------------------------------------------------- --tree


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[LocalNetwork]:
    """d1 → d2 → d3: alice at d2, carol (a contractor: Production only) at d3."""
    with _started(
        tmp_path / "chain",
        (SiteSpec(name="d1", block="ProductionProcess"),
         SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
         SiteSpec(name="d3", block="Production", uplink="d2")),
        (SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"}),
         SubscriberSpec(name="carol", site="d3", attributes={"OU": "Contractors"})),
    ) as network:
        yield network


def _tree(net: LocalNetwork, *extra: str) -> subprocess.CompletedProcess[str]:
    return _site(net, "status", "d1", "ops", "--tree", *extra)


def _tree_json(net: LocalNetwork) -> tuple[int, dict[str, Any]]:
    done = _tree(net, "--json")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, json.loads(done.stdout)


def test_the_tree_below_d1_then_d3_stopped_is_shown_unreachable(chain: LocalNetwork) -> None:
    seen: dict[str, Any] = {}

    def whole() -> bool:  # every link up, every downlink's DHT record found
        code, seen["tree"] = _tree_json(chain)
        return code == 0 and seen["tree"]["sites"] == 3

    assert wait_until(whole, timeout=60), seen
    root = seen["tree"]["tree"]
    (d2,) = root["below"]
    (d3,) = d2["below"]
    assert [s["site"] for s in (root, d2, d3)] == ["d1", "d2", "d3"]
    assert [s["address"] for s in (root, d2, d3)] == [chain.address(n) for n in ("d1", "d2", "d3")]
    assert root["listed"] is None and root["status"]["uplink"]["root"] is True
    # each answer proven by its site's signed ping, and agreeing with its uplink's
    assert [s["proven"]["site"] for s in (root, d2, d3)] == ["d1", "d2", "d3"]
    assert all(s["disagreements"] == [] for s in (root, d2, d3))
    assert d2["status"]["uplink"]["address"] == chain.address("d1")
    assert d3["status"]["uplink"]["address"] == chain.address("d2")
    assert (d2["listed"]["block"], d2["listed"]["members"]) == ("WorkOrder", 2)  # alice, carol
    assert (d3["listed"]["block"], d3["listed"]["connected"]) == ("Production", True)
    assert [person(r["name"]) for r in d3["status"]["subscribers"]] == ["carol"]

    text = _tree(chain)
    assert text.returncode == 0, text.stdout + text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == (
        f"d1 at {chain.address('d1')}: block ProductionProcess, uplink none: a root site"
    )
    assert (f"└─ d2 at {chain.address('d2')}: block WorkOrder, uplink {chain.address('d1')} "
            "(connected)") in lines
    assert (f"   └─ d3 at {chain.address('d3')}: block Production, uplink "
            f"{chain.address('d2')} (connected)") in lines
    assert lines[-1] == "3 site(s): 3 answered, 0 unreachable, 0 with disagreements"

    chain.kill_site("d3")  # a crash: its DHT record stays, its port is closed

    def d3_unreachable() -> bool:
        code, seen["tree"] = _tree_json(chain)
        return code == 1 and seen["tree"]["unreachable"] == 1

    assert wait_until(d3_unreachable, timeout=60), seen
    (d2,) = seen["tree"]["tree"]["below"]
    (d3,) = d2["below"]
    assert d2["status"] is not None and d2["disagreements"] == []  # the walk went on past d3
    assert d3["status"] is None and "UNAVAILABLE" in d3["unreachable"]
    assert d3["listed"]["site"] == "d3"
    text = _tree(chain)
    assert text.returncode == 1
    assert f"d3 at {chain.address('d3')}: UNREACHABLE: " in text.stdout
    assert text.stdout.splitlines()[-1] == (
        "3 site(s): 2 answered, 1 unreachable, 0 with disagreements"
    )
