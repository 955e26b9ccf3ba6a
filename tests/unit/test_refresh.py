"""Path refresh requests at a site: kept until an enrolment for that member and group passes."""

from __future__ import annotations

from disseminator.members import to_pb_member
from disseminator.refresh import RefreshRequests
from disseminator.routing import Registration

WO = ("production-dept", "WorkOrder")
QI = ("qa-company", "QualityInspection")


def test_a_local_request_is_new_once_and_cleared_by_its_enrolment() -> None:
    requests = RefreshRequests()
    assert requests.ask("alice", WO)
    assert not requests.ask("alice", WO)
    assert requests.of("alice") == {WO}
    assert not requests.served("alice", QI)  # another group's enrolment clears nothing
    assert requests.served("alice", WO)
    assert requests.of("alice") == set()


def test_link_requests_are_replaced_by_each_interest_and_merged_per_member() -> None:
    requests = RefreshRequests()
    requests.ask("alice", WO)
    assert requests.set_link("d2", {"bob": [QI], "carol": []})
    assert not requests.set_link("d2", {"bob": [QI]})  # the same interest again: no change
    assert requests.of("bob") == {QI}
    assert requests.set_link("d3", {"alice": [QI]})
    assert requests.of("alice") == {WO, QI}
    assert requests.served("alice", QI) and requests.of("alice") == {WO}
    requests.drop_link("d2")
    requests.forget("alice")
    assert requests.of("bob") == set() and requests.of("alice") == set()


def test_requests_travel_with_the_member_on_the_wire() -> None:
    reg = Registration(subscriber="alice", certificate=b"pem",
                       grants={"production-dept": frozenset({"WorkOrder", "Production"})})
    member = to_pb_member(reg, {WO, ("production-dept", "Production")})
    assert [(g.publisher, list(g.concepts)) for g in member.refresh] == [
        ("production-dept", ["Production", "WorkOrder"])
    ]
    assert not to_pb_member(reg).refresh
