"""The disseminator's pure routing core: subscription decisions and fragment plans."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from disseminator.routing import (
    Accept,
    Destination,
    NotReady,
    Redirect,
    Refuse,
    Registration,
    RoutingTable,
    decide_subscription,
)

SERVED = frozenset({"WorkOrder", "Production", "QualityInspection"})


@pytest.mark.parametrize(
    ("grants", "requested", "uplink", "expected"),
    [
        ({"p": frozenset({"Production"})}, frozenset(), None, Accept),
        ({"p": frozenset({"Production", "Machine"})}, frozenset(), "up:1", Redirect),
        ({"p": frozenset({"Production", "Machine"})}, frozenset(), None, Refuse),
        ({"p": frozenset({"Production", "Machine"})}, frozenset({"Production"}), None, Accept),
        ({"p": frozenset()}, frozenset(), "up:1", Refuse),
        ({}, frozenset(), None, Refuse),
        ({"p": frozenset({"Production"})}, frozenset({"Machine"}), None, Refuse),
    ],
)
def test_subscription_decisions(
    grants: dict[str, frozenset[str]],
    requested: frozenset[str],
    uplink: str | None,
    expected: type,
) -> None:
    decision = decide_subscription(grants, requested=requested, served=SERVED, uplink=uplink)
    assert type(decision) is expected


def test_a_site_that_does_not_know_its_uplink_yet_is_not_ready() -> None:
    """Not a refusal: a site restarted while its uplink was down says "not yet" (issue #18)."""
    grants = {"p": frozenset({"Production", "Machine"})}
    decision = decide_subscription(
        grants, requested=frozenset(), served=SERVED, uplink=None, uplink_pending=True
    )
    assert decision == NotReady(unserved=frozenset({"Machine"}))
    # What it serves is accepted, what no policy grants refused, ready or not ...
    served = {"p": frozenset({"Production"})}
    assert type(decide_subscription(
        served, requested=frozenset(), served=SERVED, uplink=None, uplink_pending=True
    )) is Accept  # fmt: skip
    assert type(decide_subscription(
        {}, requested=frozenset(), served=SERVED, uplink=None, uplink_pending=True
    )) is Refuse  # fmt: skip
    # ... and a root (no uplink to wait for) refuses what nothing serves.
    assert type(decide_subscription(
        grants, requested=frozenset(), served=SERVED, uplink=None, uplink_pending=False
    )) is Refuse  # fmt: skip


def test_redirect_names_uplink_and_unserved_concepts() -> None:
    decision = decide_subscription(
        {"p": frozenset({"Production", "Machine"})},
        requested=frozenset(),
        served=SERVED,
        uplink="127.0.0.1:9",
    )
    assert decision == Redirect(uplink="127.0.0.1:9", unserved=frozenset({"Machine"}))


def test_requested_concepts_narrow_the_grants() -> None:
    decision = decide_subscription(
        {"p": frozenset({"Production", "QualityInspection"}), "q": frozenset({"Production"})},
        requested=frozenset({"Production"}),
        served=SERVED,
        uplink=None,
    )
    assert isinstance(decision, Accept)
    assert dict(decision.grants) == {"p": {"Production"}, "q": {"Production"}}


def _reg(name: str, **grants: set[str]) -> Registration:
    return Registration(
        subscriber=name, certificate=b"", grants={p: frozenset(c) for p, c in grants.items()}
    )


def test_plan_sends_each_fragment_only_where_granted() -> None:
    table = RoutingTable()
    table.local["alice"] = _reg("alice", p={"A"})
    table.local["carol"] = _reg("carol", q={"A"})
    table.set_link_members("d2", [_reg("bob", p={"B"}), _reg("dave", p={"A", "B"})])
    plan = table.plan("p", [("doc#0", "A"), ("doc#1", "B"), ("doc#2", "C")])
    assert plan == {
        Destination("subscriber", "alice"): ("doc#0",),
        Destination("link", "d2"): ("doc#0", "doc#1"),
    }


def test_plan_never_lists_a_fragment_twice_for_one_destination() -> None:
    table = RoutingTable()
    table.set_link_members("d2", [_reg("bob", p={"A"}), _reg("dave", p={"A"})])
    plan = table.plan("p", [("doc#0", "A")])
    assert plan == {Destination("link", "d2"): ("doc#0",)}


def test_key_messages_follow_members() -> None:
    table = RoutingTable()
    table.local["alice"] = _reg("alice", p={"A"})
    table.set_link_members("d3", [_reg("bob", p={"B"})])
    assert table.route_key("alice") == Destination("subscriber", "alice")
    assert table.route_key("bob") == Destination("link", "d3")
    assert table.route_key("eve") is None
    table.drop_link("d3")
    assert table.route_key("bob") is None


def test_members_merge_local_and_links_sorted() -> None:
    table = RoutingTable()
    table.local["zed"] = _reg("zed", p={"A"})
    table.set_link_members("d2", [_reg("amy", p={"B"})])
    assert [r.subscriber for r in table.members()] == ["amy", "zed"]


_NAMES = st.sampled_from(["amy", "bob", "cat", "dan"])
_GRANTS = st.dictionaries(
    st.sampled_from(["p", "q"]), st.frozensets(st.sampled_from(["A", "B", "C"]), max_size=2),
    max_size=2,
)
_REGS = st.lists(st.tuples(_NAMES, _GRANTS), max_size=4)


@given(
    _REGS, st.dictionaries(st.sampled_from(["d2", "d3"]), _REGS, max_size=2),
    st.lists(st.tuples(st.sampled_from(["d2", "d3"]), _REGS), max_size=3),
    st.frozensets(st.sampled_from(["A", "B", "C"])),
)
def test_reach_and_grants_follow_the_members_however_links_change(
    local: list[tuple[str, dict[str, frozenset[str]]]],
    links: dict[str, list[tuple[str, dict[str, frozenset[str]]]]],
    updates: list[tuple[str, list[tuple[str, dict[str, frozenset[str]]]]]],
    concepts: frozenset[str],
) -> None:
    # What is kept per downlink between documents is the same as reading every member.
    table = RoutingTable()
    for name, grants in local:
        table.local[name] = Registration(subscriber=name, certificate=b"", grants=grants)
    for step in [list(links.items()), updates]:
        for site, regs in step:
            table.reach("p", concepts), table.granted("p", concepts)  # (cached before the change)
            table.set_link_members(
                site, [Registration(subscriber=n, certificate=b"", grants=g) for n, g in regs]
            )
        for publisher in ("p", "q"):
            expected = sum(
                1 for r in table.members() if r.grants.get(publisher, frozenset()) & concepts
            )
            assert table.reach(publisher, concepts) == expected
            for site, regs in table.links.items():
                wants = frozenset().union(
                    *(r.grants.get(publisher, frozenset()) for r in regs.values())
                )
                assert table.granted(publisher, concepts).get(Destination("link", site)) == (
                    wants & concepts or None
                )
