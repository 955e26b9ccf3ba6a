"""A downlink that moved below another downlink is handed over by the uplink it left: nothing
new is queued for it, and once it acknowledged what was, its link ends and is freed
(issue #18, finding 1)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from disseminator.moves import HANDED_OVER, claimed_elsewhere, lease_site, moved_below
from disseminator.node import SiteNode
from disseminator.routing import Destination, Registration
from disseminator.store import Append
from tests.unit.site_fixtures import site_node
from xdn import crypto, lease

CARL, DORA = "carl@" + "c" * 32, "dora@" + "d" * 32


@pytest.fixture
def node(tmp_path: Path) -> SiteNode:
    return site_node(tmp_path, "d1", "ProductionProcess", lambda: datetime.now(UTC))


def _leased(node: SiteNode, name: str, site: str) -> Registration:
    signed = lease.sign(
        lease.issue(member=name, site=site, block="Production", now_ms=node.now_ms(),
                    period_ms=3_600_000),
        crypto.load_private_key_pem(node.site.tls.key_pem),
    )
    return Registration(subscriber=name, certificate=f"certificate {name}".encode(),
                        grants={"production-dept": {"Production"}}, lease=signed.to_bytes())


def test_pure_parts(node: SiteNode) -> None:
    carl, dora = _leased(node, CARL, "d4"), _leased(node, DORA, "d5")
    assert lease_site(carl) == "d4" and lease_site(Registration(
        subscriber="x", certificate=b"c", grants={}, lease=b"junk")) is None
    links = {"d4": {CARL: carl}, "d2": {}}
    assert moved_below(links, "d2", [carl, dora]) == {"d4": {CARL}}
    assert moved_below(links, "d4", [carl]) == {}  # its own member, stated by itself
    relayed = {"d2": {CARL: carl}}
    assert claimed_elsewhere(relayed, "d4", [carl, dora], connected=["d2"]) == {CARL}
    assert claimed_elsewhere(relayed, "d4", [carl, dora], connected=[]) == set()  # d2 down
    assert claimed_elsewhere({"d4": {CARL: carl}}, "d4", [carl], connected=["d4"]) == set()


def _queue(node: SiteNode, site: str, count: int) -> None:
    node.store.commit_routing(
        document=None, appends=[Append(kind="link", name=site, payload=b"x")] * count
    )


def test_the_left_uplink_hands_a_moved_downlink_over_once_it_acknowledged_all(
    node: SiteNode,
) -> None:
    carl = _leased(node, CARL, "d4")
    d4 = Destination("link", "d4")
    node.set_link_members("d4", [carl])  # d4 linked here directly (a fallback)
    cursor = node.connect(d4, 0, 16)
    _queue(node, "d4", 3)  # three deliveries routed to d4 before it moved
    # d4 moved below d2: d2 now relays carl, with carl's lease naming d4.
    node.connect(Destination("link", "d2"), 0, 16)
    node.set_link_members("d2", [carl])
    assert CARL not in node.table.links.get("d4", {})  # nothing new is queued for d4
    assert node.ended("d4") is None  # it has three deliveries to acknowledge first
    for seq in (1, 2, 3):
        cursor.on_sent(seq)
    node.on_ack(d4, cursor, 2)
    assert node.ended("d4") is None and node.store.cursor("link", "d4") != (0, 0)
    node.on_ack(d4, cursor, 3)  # all acknowledged: handed over, link ended and freed
    reason = node.ended("d4")
    assert reason is not None and HANDED_OVER in reason and "d2" in reason
    assert "d4" not in node.table.links
    assert node.store.cursor("link", "d4") == (0, 0)
    assert {r.owner for r in node.store.registrations()} == {"d2"}
    assert node.table.member(CARL) is not None  # still a member, through d2


def test_a_drained_downlink_is_handed_over_at_once_and_not_taken_back(node: SiteNode) -> None:
    carl = _leased(node, CARL, "d4")
    node.set_link_members("d4", [carl])
    node.connect(Destination("link", "d4"), 0, 16)
    node.connect(Destination("link", "d2"), 0, 16)
    node.change_link_members("d2", [carl])  # (by a delta too)
    assert node.ended("d4") is not None and "d4" not in node.table.links
    # d4 (its old Uplink reconnecting) states carl again: d2's relay wins, d4 gets nothing.
    node.set_link_block("d4", "Production", 1)
    node.set_link_members("d4", [carl])
    assert not node.table.links.get("d4")
    assert node.ended("d4") is not None  # handed over again: nothing was queued for it
    assert [r.owner for r in node.store.registrations()] == ["d2"]


def test_members_a_downlink_relays_for_itself_are_no_move(node: SiteNode) -> None:
    carl = _leased(node, CARL, "d4")
    node.set_link_members("d4", [carl])
    node.set_link_members("d4", [carl])
    node.set_link_members("d2", [_leased(node, DORA, "d5")])
    assert node.ended("d4") is None and CARL in node.table.links["d4"]


def test_a_relay_by_a_downlink_that_is_down_does_not_take_members_away(
    node: SiteNode,
) -> None:
    """d4 left d2 while d2 was down and linked here directly: d2's old relay (d2 offline)
    does not keep carl from d4; once d2 is back and states carl again, d4 is handed over."""
    carl = _leased(node, CARL, "d4")
    node.set_link_members("d2", [carl])  # d2 relayed carl, then went down (not connected)
    d4 = Destination("link", "d4")
    node.connect(d4, 0, 16)
    node.set_link_members("d4", [carl])
    assert CARL in node.table.links["d4"] and node.ended("d4") is None
    node.connect(Destination("link", "d2"), 0, 16)
    node.set_link_members("d2", [carl])
    assert node.ended("d4") is not None and "d4" not in node.table.links
