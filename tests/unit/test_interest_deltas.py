"""A downlink's members travel upstream as numbered deltas (issue #15).

The downlink's sender states the whole set once, then only what changed (a burst of changes
as one delta); the uplink's end of the stream applies a delta only on top of the version in
force (a gap is refused: the stream ends and the whole set comes again); the site node changes
the table, the store and the membership journal by the changed members only.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disseminator.interest import InterestGap, InterestSender, LinkInterest
from disseminator.limits import LimitExceeded, Limits
from disseminator.members import to_pb_member
from disseminator.node import SiteNode
from disseminator.routing import Registration, RoutingTable
from disseminator.uplink import Uplink
from tests.unit.site_fixtures import site_node
from xdn import crypto, lease
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

SMALL = Limits(interest_members=4, link_members=50)


def _reg(name: str, cert: int = 0, concepts: tuple[str, ...] = ("Order",)) -> Registration:
    return Registration(
        subscriber=name, certificate=f"certificate {name} #{cert}".encode(),
        grants={"production-dept": frozenset(concepts)}, lease=f"lease {name}".encode(),
    )


def _wire(reg: Registration) -> pb.Member:
    return to_pb_member(reg)


def _sender(limits: Limits = SMALL) -> InterestSender[Registration]:
    return InterestSender(limits, _wire, view=7)


def _updates(messages: list[pb.LinkMessage]) -> list[pb.InterestUpdate]:
    return [m.interest for m in messages]


def _receive(interest: LinkInterest, messages: list[pb.LinkMessage]) -> list[pb.Member]:
    """Feed one update's chunks, "checking" every member (each passes); return them."""
    listed = []
    for message in messages:
        members = interest.take(message.interest)
        listed += members
        interest.add_verified(_from_wire(m) for m in members)
    return listed


def _from_wire(member: pb.Member) -> Registration:
    return Registration(
        subscriber=member.subscriber, certificate=member.certificate,
        grants={g.publisher: frozenset(g.concepts) for g in member.grants}, lease=member.lease,
    )


class _Uplink:
    """The uplink's side of one downlink: a stream's end and the routing table it feeds."""

    def __init__(self, limits: Limits = SMALL) -> None:
        self.limits = limits
        self.stream = LinkInterest(limits)
        self.table = RoutingTable()
        self.checked = 0

    def receive(self, messages: list[pb.LinkMessage]) -> None:
        self.checked += len(_receive(self.stream, messages))
        change = self.stream.finish()
        if change.whole:
            self.table.set_link_members("d2", change.verified)
        else:
            self.table.change_link_members("d2", change.verified, removed=change.removed)

    def relink(self) -> None:
        """A new stream (the old one ended): its state starts empty, the table stays."""
        self.stream = LinkInterest(self.limits)

    def members(self) -> dict[str, Registration]:
        return dict(self.table.links.get("d2", {}))


# ---------------------------------------------------------------------------- the sender
def test_the_whole_set_first_then_only_what_changed() -> None:
    sender = _sender()
    members = {"a": _reg("a"), "b": _reg("b")}
    (whole,) = _updates(sender.whole(members))
    assert (whole.view, whole.version, whole.base, whole.more) == (7, 1, 0, False)
    assert [m.subscriber for m in whole.members] == ["a", "b"] and not whole.gone

    assert sender.delta(dict(members)) == []  # nothing changed: nothing sent
    members["c"] = _reg("c")
    members["a"] = _reg("a", concepts=("Order", "Product"))  # grants changed (equal name)
    del members["b"]
    (delta,) = _updates(sender.delta(members))
    assert (delta.view, delta.version, delta.base) == (7, 2, 1)
    assert [m.subscriber for m in delta.members] == ["a", "c"] and list(delta.gone) == ["b"]
    assert sender.delta(members) == []


def test_an_equal_member_made_anew_is_no_change() -> None:
    sender = _sender()
    sender.whole({"a": _reg("a")})
    assert sender.delta({"a": _reg("a")}) == []


def test_a_burst_of_changes_goes_as_one_delta() -> None:
    sender = _sender(Limits())
    members = {f"m{i}": _reg(f"m{i}") for i in range(10)}
    sender.whole(members)
    for i in range(10, 30):  # twenty joins and ten leaves before the stream comes to it
        members[f"m{i}"] = _reg(f"m{i}")
    for i in range(10):
        del members[f"m{i}"]
    (delta,) = _updates(sender.delta(members))
    assert len(delta.members) == 20 and len(delta.gone) == 10 and delta.base == 1


def test_a_large_delta_travels_in_numbered_chunks_within_the_limits() -> None:
    sender = _sender()
    members = {f"m{i:02d}": _reg(f"m{i:02d}") for i in range(10)}
    sender.whole(members)
    for i in range(10, 17):
        members[f"m{i:02d}"] = _reg(f"m{i:02d}")
    for i in range(4):
        del members[f"m{i:02d}"]
    updates = _updates(sender.delta(members))
    assert len(updates) == 3
    assert all(len(u.members) + len(u.gone) <= SMALL.interest_members for u in updates)
    assert [u.more for u in updates] == [True, True, False]
    assert {(u.view, u.version, u.base) for u in updates} == {(7, 2, 1)}
    assert sorted(m.subscriber for u in updates for m in u.members) == sorted(
        f"m{i:02d}" for i in range(10, 17)
    )
    assert sorted(n for u in updates for n in u.gone) == [f"m{i:02d}" for i in range(4)]


def test_every_stream_starts_with_the_whole_set_under_a_new_version() -> None:
    sender = _sender()
    sender.whole({"a": _reg("a")})
    sender.delta({"a": _reg("a"), "b": _reg("b")})
    (again,) = _updates(sender.whole({"a": _reg("a"), "b": _reg("b")}))
    assert (again.version, again.base, len(again.members)) == (3, 0, 2)


# ---------------------------------------------------------------------------- the receiver
def test_a_delta_changes_only_the_members_it_lists() -> None:
    uplink, sender = _Uplink(), _sender()
    members = {n: _reg(n) for n in "abcdef"}
    uplink.receive(sender.whole(members))
    assert uplink.checked == 6
    kept = uplink.members()["b"]
    members["g"] = _reg("g")
    del members["a"]
    uplink.receive(sender.delta(members))
    assert uplink.checked == 7  # g and nothing else: a's removal checks nothing
    assert sorted(uplink.members()) == list("bcdefg")
    assert uplink.members()["b"] is kept  # untouched, not rebuilt
    assert (uplink.stream.view, uplink.stream.version) == (7, 2)


def _delta(*, view: int = 7, version: int = 3, base: int = 2, **fields: object) -> pb.LinkMessage:
    return pb.LinkMessage(
        interest=pb.InterestUpdate(view=view, version=version, base=base, **fields)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(
    ("view", "base"), [(7, 1), (7, 3), (8, 2)], ids=["older base", "newer base", "other view"]
)
def test_a_delta_that_does_not_follow_the_version_in_force_is_a_gap(view: int, base: int) -> None:
    uplink, sender = _Uplink(), _sender()
    uplink.receive(sender.whole({"a": _reg("a")}))
    uplink.receive(sender.delta({"a": _reg("a"), "b": _reg("b")}))  # version 2 in force
    with pytest.raises(InterestGap, match="link again and send the whole set"):
        uplink.stream.take(_delta(view=view, version=base + 1, base=base).interest)
    assert sorted(uplink.members()) == ["a", "b"]  # nothing applied


def test_a_delta_before_any_numbered_whole_set_is_a_gap() -> None:
    stream = LinkInterest(SMALL)
    with pytest.raises(InterestGap):
        stream.take(_delta(view=7, version=2, base=1).interest)
    stream.take(pb.InterestUpdate(members=[_wire(_reg("a"))]))  # unnumbered: a whole set
    stream.finish()
    assert stream.names == {"a"}
    with pytest.raises(InterestGap):
        stream.take(_delta(view=7, version=2, base=1).interest)


def test_an_unnumbered_delta_or_one_going_back_is_refused() -> None:
    stream = LinkInterest(SMALL)
    with pytest.raises(ProtocolError, match="needs a view and a version past base"):
        stream.take(_delta(view=0, version=2, base=1).interest)
    with pytest.raises(ProtocolError, match="needs a view and a version past base"):
        stream.take(_delta(view=7, version=1, base=1).interest)


def _in_force(*names: str) -> LinkInterest:
    stream = LinkInterest(SMALL)
    _receive(stream, _sender().whole({n: _reg(n) for n in names}))
    stream.finish()
    return stream


def test_duplicates_within_a_delta_are_refused_as_the_chunk_arrives() -> None:
    with pytest.raises(ProtocolError, match="lists 'b' twice"):
        _in_force("a").take(_delta(
            version=2, base=1, members=[_wire(_reg("b")), _wire(_reg("b", cert=1))]
        ).interest)
    with pytest.raises(ProtocolError, match="one certificate twice"):
        _in_force("a").take(_delta(version=2, base=1, members=[
            _wire(_reg("b")), pb.Member(subscriber="c", certificate=_reg("b").certificate)
        ]).interest)
    with pytest.raises(ProtocolError, match="lists 'a' twice"):
        _in_force("a").take(_delta(
            version=2, base=1, members=[_wire(_reg("a", cert=1))], gone=["a"]
        ).interest)
    with pytest.raises(ProtocolError, match="removes 'z', not in the set"):
        _in_force("a").take(_delta(version=2, base=1, gone=["z"]).interest)
    with pytest.raises(ProtocolError, match="carry different versions"):
        stream = _in_force("a")
        stream.take(_delta(version=2, base=1, more=True).interest)
        stream.take(_delta(version=3, base=1).interest)


def test_a_certificate_of_the_set_in_force_under_a_new_name_is_refused() -> None:
    stream = _in_force("a", "b")
    taken = pb.Member(subscriber="c", certificate=_reg("a").certificate)
    stream.take(_delta(version=2, base=1, members=[taken]).interest)
    with pytest.raises(ProtocolError, match=r"one certificate twice \(as 'c', and as 'a'"):
        stream.finish()


def test_a_certificate_moves_with_its_holder_gone_or_changed() -> None:
    stream = _in_force("a", "b")
    moved = pb.Member(subscriber="c", certificate=_reg("a").certificate)
    stream.take(_delta(version=2, base=1, members=[moved], gone=["a"]).interest)
    stream.finish()
    swapped = [
        pb.Member(subscriber="b", certificate=_reg("c").certificate),
        pb.Member(subscriber="c", certificate=_reg("b").certificate),
    ]
    stream.take(_delta(version=3, base=2, members=swapped).interest)
    stream.finish()
    assert stream.names == {"b", "c"}
    stream.take(_delta(version=4, base=3, members=[_wire(_reg("d", cert=9))]).interest)
    stream.finish()  # (a's certificate went with a: free)
    assert stream.names == {"b", "c", "d"}


def test_the_link_limit_counts_the_set_in_force_and_the_delta() -> None:
    limits = Limits(interest_members=4, link_members=6)
    stream = LinkInterest(limits)
    _receive(stream, InterestSender(limits, _wire, view=7).whole(
        {n: _reg(n) for n in "abcde"}
    ))
    stream.finish()
    stream.take(_delta(version=2, base=1, members=[_wire(_reg("a", cert=1))]).interest)
    stream.finish()  # a change: still five
    with pytest.raises(LimitExceeded, match="link_members = 6"):
        stream.take(_delta(version=3, base=2, members=[
            _wire(_reg("f")), _wire(_reg("g"))
        ]).interest)
    stream = LinkInterest(limits)  # (a new stream)
    _receive(stream, InterestSender(limits, _wire, view=7).whole(
        {n: _reg(n) for n in "abcdef"}
    ))
    stream.finish()
    stream.take(_delta(version=2, base=1, members=[_wire(_reg("g"))], gone=["a"]).interest)
    assert stream.finish().removed == {"a", "g"}


# ---------------------------------------------------------------------------- the property
@dataclass(frozen=True)
class _Op:
    kind: str  # join | leave | change | same (equal, made anew) | send | drop | break
    name: str
    value: int


_NAMES = [f"s{i}" for i in range(12)]
_ops = st.lists(
    st.builds(
        _Op,
        st.sampled_from(["join", "leave", "change", "same", "send", "send", "drop", "break"]),
        st.sampled_from(_NAMES),
        st.integers(0, 3),
    ),
    max_size=60,
)


def _apply(members: dict[str, Registration], op: _Op) -> None:
    if op.kind == "join" or (op.kind == "change" and op.name in members):
        concepts = ("Order", "Product")[: 1 + op.value % 2]
        members[op.name] = _reg(op.name, cert=op.value, concepts=concepts)
    elif op.kind == "leave":
        members.pop(op.name, None)
    elif op.kind == "same" and op.name in members:
        old = members[op.name]
        members[op.name] = Registration(  # equal, made anew
            subscriber=old.subscriber, certificate=old.certificate, grants=old.grants,
            lease=old.lease,
        )


@settings(max_examples=150, deadline=None)
@given(_ops)
def test_deltas_give_the_set_a_whole_resend_gives_and_a_lost_one_a_resync(ops: list[_Op]) -> None:
    """Any joins, leaves and changes, sent as deltas, leave the uplink with the set a whole
    resend gives it. A delta lost (``drop``: as if the stream had lost it, which gRPC never
    does) makes the next one a gap, which ends the stream, and the next stream starts with the
    whole set (as after ``break``); until then the uplink holds a set the downlink stated
    before: never one it never had."""
    limits = Limits(interest_members=3, link_members=50)
    sender, uplink = InterestSender(limits, _wire), _Uplink(limits)
    members: dict[str, Registration] = {}
    stated: dict[int, dict[str, Registration]] = {}  # version → the set stated under it

    def send(messages: list[pb.LinkMessage], changed: int) -> None:
        checked = uplink.checked
        try:
            uplink.receive(messages)
        except InterestGap:  # the stream ends; the next starts with the whole set
            relink()
            return
        assert uplink.checked - checked == changed  # only the members added or changed

    def changes() -> int:
        before = stated[sender.version]
        return sum(1 for name, reg in members.items() if before.get(name) != reg)

    def relink() -> None:
        uplink.relink()
        messages = sender.whole(members)
        stated[sender.version] = dict(members)
        uplink.receive(messages)

    relink()
    lost = False
    for op in ops:
        if op.kind == "break":
            relink()
            lost = False
        elif op.kind in ("send", "drop"):
            changed = changes()
            messages = sender.delta(members)
            if not messages:
                continue
            stated[sender.version] = dict(members)
            if op.kind == "drop":
                lost = True
                continue
            send(messages, changed)
            lost = False
        else:
            _apply(members, op)
            continue
        assert uplink.members() == members
        assert uplink.stream.version == sender.version
    assert uplink.members() == stated[uplink.stream.version]  # stale at worst, never wrong
    assert not lost or uplink.stream.version < sender.version
    members["late"] = _reg("late")  # one more change: its delta finds any gap
    changed = changes()
    send(sender.delta(members), changed)
    assert uplink.members() == members
    whole = _Uplink(Limits())
    whole.receive(InterestSender(Limits(), _wire).whole(members))
    assert uplink.members() == whole.members()


# ---------------------------------------------------------------------------- the site node


class _Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> _Clock:
    return _Clock()


@pytest.fixture
def node(tmp_path: Path, clock: _Clock) -> SiteNode:
    return site_node(tmp_path, "d1", "ProductionProcess", clock)


def _rows(node: SiteNode) -> dict[str, int]:
    return {r.subscriber: r.seen_ms for r in node.store.registrations() if r.owner == "d2"}


def test_a_delta_stores_only_the_rows_it_changes(node: SiteNode, clock: _Clock) -> None:
    node.set_link_members("d2", [_reg(n) for n in "abcd"])
    first = node.now_ms()
    assert _rows(node) == dict.fromkeys("abcd", first)
    clock.now += timedelta(seconds=5)
    node.change_link_members("d2", [_reg("e"), _reg("b", cert=1)], removed={"a", "b"})
    later = node.now_ms()
    assert _rows(node) == {"b": later, "c": first, "d": first, "e": later}
    assert sorted(node.table.links["d2"]) == list("bcde")


def test_a_delta_moves_routing_and_the_journal_by_its_members(node: SiteNode) -> None:
    publisher = "production-dept"
    node.set_link_members("d2", [_reg("a")])
    assert node.table.granted(publisher, frozenset({"Product"})) == {}
    journal = node.membership_journal
    node.membership(publisher)  # settles the journal
    view, version = journal.view, journal.version
    node.change_link_members("d2", [_reg("b", concepts=("Product",))])
    assert set(node.table.granted(publisher, frozenset({"Product"})).values()) == {
        frozenset({"Product"})
    }
    node.membership(publisher)
    assert journal.since(view, version) == {"b"}
    node.change_link_members("d2", [], removed={"a"})
    node.membership(publisher)
    assert journal.since(view, version + 1) == {"a"}


def test_a_delta_keeps_the_other_members_path_refreshes(node: SiteNode) -> None:
    def asking(name: str, concept: str) -> pb.Member:
        member = _wire(_reg(name, concepts=(concept,)))
        member.refresh.append(pb.Grant(publisher="production-dept", concepts=[concept]))
        return member

    node.set_link_members("d2", [_reg("a"), _reg("b")])
    node.set_link_refreshes("d2", [asking("a", "Order"), asking("b", "Order")])
    node.change_link_members("d2", [_reg("c", concepts=("Product",))], removed={"b"})
    node.change_link_refreshes("d2", [asking("c", "Product")], gone={"b"})
    assert node.refreshes.of("a") == {("production-dept", "Order")}
    assert node.refreshes.of("b") == set()
    assert node.refreshes.of("c") == {("production-dept", "Product")}


# ---------------------------------------------------------------------------- the downlink
def _leased(node: SiteNode, name: str) -> Registration:
    """A registration with a lease that holds (signed by the site's key: only its window is
    read here, as a site reads its members' checked leases)."""
    signed = lease.sign(
        lease.issue(member=name, site="d3", block="Production", now_ms=node.now_ms(),
                    period_ms=3_600_000),
        crypto.load_private_key_pem(node.site.tls.key_pem),
    )
    return Registration(subscriber=name, certificate=f"certificate {name}".encode(),
                        grants={"production-dept": {"Production"}}, lease=signed.to_bytes())


def _id(i: int) -> str:
    return f"m{i}@{i:032x}"


def test_a_burst_of_joins_in_one_turn_is_one_delta_of_the_joiners(node: SiteNode) -> None:
    uplink = Uplink(node, "127.0.0.1:1")
    node.set_link_members("d3", [_leased(node, _id(i)) for i in range(5)])
    (whole,) = _updates(uplink._interest(whole=True))  # what a stream starts with
    assert len(whole.members) == 5
    for i in range(5, 25):  # twenty joins before the stream comes to them
        node.change_link_members("d3", [_leased(node, _id(i))])
        uplink.interest_changed()
    assert uplink._outgoing.qsize() == 1  # one mark, however many changes
    (delta,) = _updates(uplink._interest(whole=False))
    assert sorted(m.subscriber for m in delta.members) == sorted(_id(i) for i in range(5, 25))
    assert (delta.base, delta.version) == (whole.version, whole.version + 1)
    node.change_link_members("d3", [], removed={_id(0)})
    (gone,) = _updates(uplink._interest(whole=False))
    assert (list(gone.gone), list(gone.members)) == ([_id(0)], [])
    assert uplink._interest(whole=False) == []
