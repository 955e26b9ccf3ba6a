"""Where a publication may go and what it reached (xdn.publication): the site's refusal, the
publisher's check of the site's standing, the words of the publisher's output."""

from __future__ import annotations

import pytest

from disseminator.routing import Registration, RoutingTable
from xdn.errors import ProtocolError, UsageError
from xdn.publication import Reach, Standing, check_standing, describe_reach, site_refusal
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import reach_from_pb, standing_from_pb, standing_to_pb

ROOT = Standing(site="d1", root=True, policy_version=2)


def _check(standing: Standing, version: int = 2, *, allow: bool = False) -> tuple[str, ...]:
    return check_standing(
        standing, publisher="acme", policy_version=version, allow_older_policy=allow
    )


# ---- the site ------------------------------------------------------------------------------
def test_a_root_site_enforcing_the_publishers_policy_accepts() -> None:
    assert site_refusal(ROOT, "acme") is None


def test_a_site_with_an_uplink_refuses_and_names_it() -> None:
    refused = site_refusal(
        Standing(site="d2", root=False, policy_version=2, uplink="10.0.0.1:7000"), "acme"
    )
    assert refused is not None and refused.uplink == "10.0.0.1:7000"
    assert "site d2 is not a root site" in refused.reason
    assert "publish at the root site (its uplink is 10.0.0.1:7000)" in refused.reason


def test_a_site_still_looking_for_its_uplink_refuses_without_a_redirect() -> None:
    refused = site_refusal(Standing(site="d2", root=False, policy_version=2), "acme")
    assert refused is not None and refused.uplink is None
    assert "still looking for its uplink" in refused.reason


def test_a_site_that_knows_no_policy_of_the_publisher_refuses() -> None:
    refused = site_refusal(Standing(site="d1", root=True, policy_version=0), "acme")
    assert refused is not None and refused.uplink is None
    assert "enforces no policy of publisher 'acme'" in refused.reason
    assert "[[publisher]]" in refused.reason


def test_not_being_a_root_is_reported_before_not_knowing_the_publisher() -> None:
    refused = site_refusal(Standing(site="d2", root=False, policy_version=0), "acme")
    assert refused is not None and "not a root site" in refused.reason


# ---- the publisher -------------------------------------------------------------------------
def test_the_same_policy_version_gives_no_warning() -> None:
    assert _check(ROOT, 2) == ()


@pytest.mark.parametrize(
    ("standing", "expected"),
    [
        (Standing(site="d2", root=False, policy_version=2, uplink="h:1"), "not a root site"),
        (Standing(site="d1", root=True, policy_version=0), "enforces no policy"),
    ],
)
def test_the_publisher_refuses_where_the_site_would(standing: Standing, expected: str) -> None:
    with pytest.raises(UsageError, match=expected):
        _check(standing)


def test_an_older_policy_than_the_sites_is_refused_with_what_to_do() -> None:
    with pytest.raises(UsageError) as info:
        _check(ROOT, 1)
    message = str(info.value)
    assert "site d1 enforces version 2 of acme's policy" in message
    assert "evaluates version 1" in message
    assert "--policy" in message and "--allow-older-policy" in message


def test_an_older_policy_may_be_allowed_explicitly_with_a_warning() -> None:
    (warning,) = _check(ROOT, 1, allow=True)
    assert "enforces version 2" in warning and "--allow-older-policy" in warning


def test_allowing_an_older_policy_does_not_allow_a_non_root_site() -> None:
    with pytest.raises(UsageError, match="not a root site"):
        _check(Standing(site="d2", root=False, policy_version=2), 1, allow=True)


def test_a_newer_policy_than_the_sites_is_a_warning() -> None:
    (warning,) = _check(ROOT, 3)
    assert "site d1 still enforces version 2" in warning and "version 3" in warning


# ---- what the output says ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reach", "expected"),
    [
        (
            Reach(fragments=5, destinations=2, subscribers=3),
            "reached 3 subscribers (2 destinations at d1)",
        ),
        (
            Reach(fragments=5, destinations=1, subscribers=1),
            "reached 1 subscriber (1 destination at d1)",
        ),
        (
            Reach(fragments=5, retained=True),
            "no subscriber is granted any of its concepts now; d1 retains it for subscribers "
            "who join later",
        ),
        (
            Reach(fragments=5),
            "no subscriber is granted any of its concepts now, and d1 retains no documents: "
            "nobody will receive it",
        ),
        (Reach(), "d1 had routed this version before; nothing new was queued"),
    ],
)
def test_describe_reach(reach: Reach, expected: str) -> None:
    assert describe_reach(reach, "d1") == expected


# ---- values and their wire form ------------------------------------------------------------
def test_standing_is_checked_on_construction() -> None:
    with pytest.raises(ValueError):
        Standing(site="", root=True, policy_version=1)
    with pytest.raises(ValueError):
        Standing(site="d1", root=True, policy_version=-1)
    with pytest.raises(TypeError):
        Standing(site="d1", root=True, policy_version=True)


def test_standing_and_reach_round_trip_the_wire() -> None:
    for standing in (ROOT, Standing(site="d2", root=False, policy_version=0, uplink="h:1")):
        assert standing_from_pb(standing.site, standing_to_pb(standing)) == standing
    with pytest.raises(ProtocolError):
        standing_from_pb("", pb.SiteStanding(root=True))
    ack = pb.PublishAck(
        fragments_accepted=4, links_reached=2, subscribers_reached=3, retained=True
    )
    assert reach_from_pb(ack) == Reach(fragments=4, destinations=2, subscribers=3, retained=True)


def test_the_routing_table_counts_the_subscribers_a_document_reaches() -> None:
    table = RoutingTable()
    grants = {"acme": frozenset({"WorkOrder"}), "other": frozenset({"Machine"})}
    table.local["alice"] = Registration(subscriber="alice", certificate=b"", grants=grants)
    table.set_link_members("d3", [
        Registration(subscriber="bob", certificate=b"", grants={"acme": frozenset({"Machine"})}),
        Registration(subscriber="carol", certificate=b"", grants={"other": frozenset({"Machine"})}),
    ])
    assert table.reach("acme", frozenset({"WorkOrder", "Machine"})) == 2
    assert table.reach("acme", frozenset({"Machine"})) == 1
    assert table.reach("nobody", frozenset({"Machine"})) == 0
