"""``xdn site status|subscribers`` against real sites: d1 → d2 with alice and bob at d2.

What an operator sees of d2 (its uplink, block, subscribers with grants and queue depths,
policy versions, DHT neighbours), and what the site refuses: a subscriber sees only its own
row and is refused the status; a publisher sees counts only (disseminator.admin).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
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


@pytest.fixture
def net(tmp_path: Path) -> Iterator[LocalNetwork]:
    network = LocalNetwork(
        tmp_path / "net",
        sites=(SiteSpec(name="d1", block="ProductionProcess"),
               SiteSpec(name="d2", block="WorkOrder", uplink="d1")),
        subscribers=(SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"}),
                     SubscriberSpec(name="bob", site="d2", attributes={"OU": "Cred1"})),
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    issue_party(network.certs, Party(name="ops", role="admin"), now=datetime.now(UTC))
    try:
        network.start_sites()
        for name in ("alice", "bob"):
            network.start_subscriber(name)
        for name in ("alice", "bob"):
            assert network.wait_subscribed(name)["served_by"] == "d2"
        yield network
    finally:
        network.stop()


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

    # d1 sees d2 as its downlink, with alice and bob behind it
    assert wait_until(lambda: [(d["site"], d["block"], d["members"]) for d in
                               _json(net, "status", "d1", "d2")["downlinks"]]
                      == [("d2", "WorkOrder", 2)], timeout=30)

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
