"""A downlink's members travel upstream as deltas (issue #15), between real site processes.

Two sites: d1 (the root) and d2 (WorkOrder, its downlink), with alice and erin subscribed at
d2. When carol joins at d2 and leaves again, d1's view of the members behind d2 follows
(asked as the publisher's key service asks, ``GetMembership``), and d1 checks carol's
certificate and lease once, nobody else's (its ``xdn_link_members_verified`` counter): a join
costs the uplink one check, not one per member behind the downlink. A raw Link stream (as d4,
a site certificate no running site uses) sending a delta that does not follow the version in
force is ended with the reason, so that the downlink sends its whole set again.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator

import grpc
import pytest

from deploy.network import DEFAULT_SITES, LocalNetwork, SubscriberSpec, wait_until
from tests.integration.raw_calls import (
    SPARE_SITE,
    TIMEOUT,
    issue_spare_site,
    site_channel,
    spare_site_hello,
    stream_error,
)
from xdn import identity
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration

VERIFIED = "xdn_link_members_verified_total"
UPDATES = "xdn_interest_updates_total"


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    network = LocalNetwork(
        tmp_path_factory.mktemp("deltas") / "net",
        sites=DEFAULT_SITES[:2],
        subscribers=[
            SubscriberSpec(name=name, site="d2", attributes={"OU": "Cred1"})
            for name in ("alice", "erin", "carol")
        ],
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    issue_spare_site(network)
    try:
        network.start_sites()
        for name in ("alice", "erin"):
            network.start_subscriber(name)
            assert network.wait_subscribed(name)["served_by"] == "d2"
        yield network
    finally:
        network.stop()


async def _members_at(network: LocalNetwork, site: str) -> set[str]:
    async with site_channel(network, site, "production-dept") as channel:
        reply = await pb_grpc.DisseminatorStub(channel).GetMembership(
            pb.MembershipRequest(publisher="production-dept"), timeout=TIMEOUT
        )
    return {identity.person(m.subscriber) for m in reply.members}


def _d1_lists(network: LocalNetwork, expected: set[str]) -> bool:
    return asyncio.run(_members_at(network, "d1")) == expected


def test_a_join_and_a_leave_behind_a_downlink_cost_the_uplink_one_check(
    net: LocalNetwork,
) -> None:
    assert wait_until(lambda: _d1_lists(net, {"alice", "erin"}))
    verified = net.metric("d1", VERIFIED)
    deltas = net.metric("d1", UPDATES, kind="delta")

    net.start_subscriber("carol")
    assert net.wait_subscribed("carol")["served_by"] == "d2"
    assert wait_until(lambda: _d1_lists(net, {"alice", "erin", "carol"})), net.output("d1")
    assert net.metric("d1", VERIFIED) - verified == 1  # carol; not alice and erin again
    assert net.metric("d1", UPDATES, kind="delta") > deltas

    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", net.address("d2"),
         "--name", "carol", "--certs", str(net.certs)],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert wait_until(lambda: _d1_lists(net, {"alice", "erin"})), net.output("d1")
    assert net.metric("d1", VERIFIED) - verified == 1  # a leave checks nothing


def test_a_delta_that_does_not_follow_the_version_in_force_ends_the_stream(
    net: LocalNetwork,
) -> None:
    whole = pb.InterestUpdate(view=9, version=1)  # the whole set: nobody
    gap = pb.InterestUpdate(view=9, version=3, base=2, gone=[])  # version 2 never came
    error, _ = asyncio.run(stream_error(net, "d1", SPARE_SITE, "Link", [
        spare_site_hello(), pb.LinkMessage(interest=whole), pb.LinkMessage(interest=gap),
    ]))  # fmt: skip
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
    assert "link again and send the whole set" in (error.details() or ""), error.details()
    assert wait_until(lambda: _d1_lists(net, {"alice", "erin"}))  # d1 still serves
