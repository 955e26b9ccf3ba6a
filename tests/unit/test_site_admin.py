"""A site's status (disseminator.admin): who may see what, the answer assembled, pages bounded."""

from __future__ import annotations

from dataclasses import replace

import pytest

from disseminator.admin import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    AdminRefused,
    DownlinkRow,
    Neighbour,
    SiteFacts,
    SubscriberRow,
    UplinkState,
    page_of,
    status_for,
    subscribers_for,
    viewer_of,
)
from xdn import certs

ALICE, BOB, CAROL = (f"{n}@{d * 32}" for n, d in (("alice", "a"), ("bob", "b"), ("carol", "c")))
GRANTS = {
    ALICE: {"production-dept": frozenset({"Product", "Price"})},
    BOB: {"production-dept": frozenset({"Product"}), "sales-dept": frozenset({"Order"})},
    CAROL: {"sales-dept": frozenset({"Order"})},
}


def _facts(subscribers: dict[str, dict[str, frozenset[str]]] = GRANTS) -> SiteFacts:
    built: list[str] = []

    def row(name: str) -> SubscriberRow:
        built.append(name)
        return SubscriberRow(
            name=name, grants=subscribers[name], queue_depth=len(name), connected=name != BOB
        )

    return SiteFacts(
        site="d2", block="Product",
        uplink=UplinkState(address="127.0.0.1:5001", connected=True, root=False),
        downlinks=(DownlinkRow(site="d3", block="Price", connected=True, members=2,
                               queue_depth=1, address="127.0.0.1:5003"),),
        subscribers=subscribers, row=row,
        policies={"production-dept": (3, "ab" * 32), "sales-dept": (1, "cd" * 32)},
        neighbours=(Neighbour(node_id=b"\x01" * 32, address="127.0.0.1:5001"),),
        queued_total=9, address="127.0.0.1:5002",
    )


def _no_rows(facts: SiteFacts) -> SiteFacts:
    def refuse(name: str) -> SubscriberRow:
        raise AssertionError(f"the row of {name} was built")

    return replace(facts, row=refuse)


@pytest.mark.parametrize("role", ["site", "auditor", "admin"])
def test_sites_auditors_and_admins_see_everything(role: str) -> None:
    view = status_for(viewer_of("someone", role), _facts())
    assert view.view == "full"
    assert view.uplink == UplinkState(address="127.0.0.1:5001", connected=True, root=False)
    assert [(d.site, d.address) for d in view.downlinks] == [("d3", "127.0.0.1:5003")]
    assert view.address == "127.0.0.1:5002"
    assert [r.name for r in view.subscribers] == [ALICE, BOB, CAROL]
    assert view.subscribers_total == 3
    assert view.subscribers[1].grants["sales-dept"] == {"Order"}
    assert [r.queue_depth for r in view.subscribers] == [38, 36, 38]
    assert set(view.policies) == {"production-dept", "sales-dept"}
    assert view.neighbours[0].address == "127.0.0.1:5001"
    assert view.queued_total == 9
    page = subscribers_for(viewer_of("someone", role), _facts())
    assert [r.name for r in page.subscribers] == [ALICE, BOB, CAROL]


def test_a_publisher_sees_its_own_policy_and_how_many_subscribers_it_has_nothing_more() -> None:
    view = status_for(viewer_of("sales-dept", "publisher"), _no_rows(_facts()))
    assert view.view == "publisher"
    assert dict(view.policies) == {"sales-dept": (1, "cd" * 32)}
    assert view.subscribers_total == 2  # bob and carol have a grant of sales-dept
    assert (view.subscribers, view.downlinks, view.neighbours, view.uplink) == ((), (), (), None)
    assert (view.queued_total, view.address) == (0, "")


def test_a_publisher_may_not_list_subscribers() -> None:
    with pytest.raises(AdminRefused, match=r"publisher certificate.*not who they are"):
        subscribers_for(viewer_of("sales-dept", "publisher"), _no_rows(_facts()))


def test_a_subscriber_sees_its_own_row_only() -> None:
    page = subscribers_for(viewer_of("bob", "subscriber", member=BOB), _facts())
    assert [r.name for r in page.subscribers] == [BOB]
    assert page.total == 1 and page.next_after == ""


@pytest.mark.parametrize("member", ["mallory@" + "d" * 32, "bob@" + "e" * 32, "bob", ""])
def test_a_subscriber_not_registered_here_sees_no_row_not_even_a_namesakes(member: str) -> None:
    page = subscribers_for(viewer_of("bob", "subscriber", member=member), _no_rows(_facts()))
    assert (page.subscribers, page.total) == ((), 0)


def test_a_subscriber_is_refused_the_status_of_a_site() -> None:
    with pytest.raises(AdminRefused, match="subscriber certificate: it may see only its own row"):
        status_for(viewer_of("alice", "subscriber"), _no_rows(_facts()))


def test_a_role_without_an_admin_view_is_refused() -> None:
    with pytest.raises(AdminRefused, match="role 'janitor'"):
        viewer_of("x", "janitor")


def test_admin_is_a_role_certificates_can_be_issued_for() -> None:
    assert {"admin", "auditor"} <= certs.ROLES


def test_pages_are_bounded_and_continue_after_the_last_name() -> None:
    names = [f"s{i:05d}" for i in range(10_000)]
    first, after = page_of(names, after="", limit=0)
    assert len(first) == DEFAULT_LIMIT and after == first[-1]
    second, _ = page_of(names, after=after, limit=250)
    assert second[0] == "s00100" and len(second) == 250
    big, _ = page_of(names, after="", limit=50_000)
    assert len(big) == MAX_LIMIT
    last, after = page_of(names, after="s09990", limit=100)
    assert last == names[9991:] and after == ""
    with pytest.raises(ValueError, match="negative"):
        page_of(names, after="", limit=-1)


def test_a_status_of_ten_thousand_subscribers_builds_only_the_rows_it_shows() -> None:
    many = {f"s{i:05d}": {"production-dept": frozenset({"Product"})} for i in range(10_000)}
    facts = _facts(many)
    built: list[str] = []
    row = facts.row

    def counting(name: str) -> SubscriberRow:
        built.append(name)
        return row(name)

    view = status_for(viewer_of("d1", "site"), replace(facts, row=counting), limit=10)
    assert view.subscribers_total == 10_000 and len(view.subscribers) == 10
    assert built == [f"s{i:05d}" for i in range(10)]
    page = subscribers_for(viewer_of("d1", "site"), facts, after="s09000", limit=1000)
    assert len(page.subscribers) == 999 and page.next_after == ""
