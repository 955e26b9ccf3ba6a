"""A publisher's key service sees its own part of each member, never another publisher's."""

from __future__ import annotations

from disseminator.members import to_pb_member
from disseminator.routing import Registration

REG = Registration(
    subscriber="alice@" + "0" * 32,
    certificate=b"pem",
    grants={"production-dept": frozenset({"Step", "Machine"}), "qa-company": frozenset({"QA"})},
)
REFRESH = {("production-dept", "Step"), ("qa-company", "QA")}


def test_a_publisher_sees_only_its_own_grants_and_refreshes() -> None:
    member = to_pb_member(REG, REFRESH, publisher="qa-company")
    assert [(g.publisher, list(g.concepts)) for g in member.grants] == [("qa-company", ["QA"])]
    assert [(g.publisher, list(g.concepts)) for g in member.refresh] == [("qa-company", ["QA"])]
    assert member.subscriber == REG.subscriber


def test_the_uplink_sees_every_publisher() -> None:
    member = to_pb_member(REG, REFRESH)
    assert [g.publisher for g in member.grants] == ["production-dept", "qa-company"]
    assert [g.publisher for g in member.refresh] == ["production-dept", "qa-company"]
