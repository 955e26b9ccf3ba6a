"""Membership by changes (issue #15): the site's journal, the key service's view, the answer.

The journal numbers what changed; the key service's view applies the answers; a site node
answers ``GetMembership`` with the changes since the version a key service holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deploy.pki import Party, issue_party
from disseminator.membership import MembershipJournal
from disseminator.node import SiteNode
from disseminator.routing import Registration
from publisher.membership import Judged, MemberView
from tests.unit.site_fixtures import site_node
from xdn import certs, crypto, lease
from xdn.grpc_tls import TlsFiles
from xdn.wire.v1 import dissemination_pb2 as pb


# ------------------------------------------------------------------------------ the journal
class _Members:
    """Members as a site holds them: registration objects (replaced on change), refreshes."""

    def __init__(self) -> None:
        self.regs: dict[str, object] = {}
        self.refresh: dict[str, frozenset[str]] = {}
        self.asked = 0

    def now(self) -> dict[str, tuple[object, frozenset[str]]]:
        self.asked += 1
        return {n: (r, self.refresh.get(n, frozenset())) for n, r in self.regs.items()}


def _settled(journal: MembershipJournal, members: _Members) -> None:
    journal.touch()
    journal.settle(members.now)


def test_the_journal_names_only_what_changed_since_a_version() -> None:
    journal, members = MembershipJournal(), _Members()
    assert journal.since(journal.view, 0) is None  # nothing held: everything
    members.regs = {"a": object(), "b": object()}
    _settled(journal, members)
    first = journal.version
    assert journal.since(journal.view, first) == set()
    members.regs["a"] = object()  # a new registration for a
    _settled(journal, members)
    assert journal.since(journal.view, first) == {"a"}
    members.refresh["b"] = frozenset({"Order"})
    del members.regs["a"]
    _settled(journal, members)
    assert journal.since(journal.view, first) == {"a", "b"}
    assert journal.since(journal.view, journal.version) == set()


def test_the_journal_looks_at_members_only_after_a_change_was_signalled() -> None:
    journal, members = MembershipJournal(), _Members()
    members.regs = {"a": object()}
    _settled(journal, members)
    asked, version = members.asked, journal.version
    for _ in range(5):  # documents with nothing changed: no pass over the members
        journal.settle(members.now)
    assert (members.asked, journal.version) == (asked, version)
    _settled(journal, members)  # a signal, but nothing changed: no new version
    assert journal.version == version


@pytest.mark.parametrize(
    ("view", "since", "why"),
    [(1, 1, "another view"), (0, 0, "no version"), (0, 99, "a version it never had")],
)
def test_the_journal_answers_everything_when_it_cannot_tell(
    view: int, since: int, why: str
) -> None:
    journal, members = MembershipJournal(), _Members()
    members.regs = {"a": object()}
    _settled(journal, members)
    asked_view = journal.view + view if view else journal.view
    assert journal.since(asked_view, since) is None, why


def test_a_version_older_than_what_the_journal_keeps_gets_everything() -> None:
    journal, members = MembershipJournal(keep=3), _Members()
    members.regs = {"a": object()}
    _settled(journal, members)
    old = journal.version
    for name in "bcdef":
        members.regs[name] = object()
        _settled(journal, members)
    assert journal.since(journal.view, old) is None
    assert journal.since(journal.view, journal.version - 1) == {"f"}


_OPS = st.lists(
    st.tuples(st.sampled_from(["put", "drop", "refresh"]), st.sampled_from("abcdef")),
    max_size=40,
)


@given(_OPS, st.data())
def test_applying_the_changes_since_any_version_gives_the_membership_now(
    ops: list[tuple[str, str]], data: st.DataObject
) -> None:
    journal, members = MembershipJournal(), _Members()
    _settled(journal, members)
    snapshots = {journal.version: members.now()}
    for op, name in ops:
        if op == "put":
            members.regs[name] = object()
        elif op == "drop":
            members.regs.pop(name, None)
        else:
            members.refresh[name] = frozenset({str(len(ops))}) - members.refresh.get(
                name, frozenset()
            )
        _settled(journal, members)
        snapshots[journal.version] = members.now()
    version = data.draw(st.sampled_from(sorted(v for v in snapshots if v)) if len(
        snapshots
    ) > 1 else st.just(0))
    changed = journal.since(journal.view, version)
    now = members.now()
    if version == 0:
        assert changed is None
        return
    assert changed is not None
    held = dict(snapshots[version])
    for name in changed:  # the key service takes each changed entry, or drops it
        if name in now:
            held[name] = now[name]
        else:
            held.pop(name, None)
    assert held == now


# ------------------------------------------------------------------------- the key service
@dataclass(frozen=True)
class _M:
    name: str
    public_key: crypto.PublicKey = field(compare=False)
    concepts: frozenset[str]
    refresh: frozenset[str] = frozenset()


_KEY = crypto.generate_private_key().public_key()


def _entry(name: str, concepts: str = "Order") -> pb.Member:
    return pb.Member(
        subscriber=name, grants=[pb.Grant(publisher="p", concepts=concepts.split())]
    )


class _Judge:
    """Judges an entry as its grants say, until ``until_ms``; counts what it judged."""

    def __init__(self, until_ms: int = 10_000) -> None:
        self.until_ms = until_ms
        self.judged: list[str] = []

    def __call__(self, entry: pb.Member) -> Judged[_M] | None:
        self.judged.append(entry.subscriber)
        concepts = frozenset(c for g in entry.grants for c in g.concepts)
        refresh = frozenset(c for g in entry.refresh for c in g.concepts)
        if not concepts:
            return None
        return Judged(_M(entry.subscriber, _KEY, concepts, refresh), self.until_ms)


def _full(*entries: pb.Member, version: int = 1) -> pb.Membership:
    return pb.Membership(members=entries, view=7, version=version)


def _changes(*entries: pb.Member, gone: tuple[str, ...] = (), version: int) -> pb.Membership:
    return pb.Membership(members=entries, view=7, version=version, changes_only=True, gone=gone)


def test_the_view_judges_only_the_entries_that_changed() -> None:
    view: MemberView[_M] = MemberView()
    judge = _Judge()
    view.apply(_full(*(_entry(f"m{i}") for i in range(100))), judge)
    assert len(judge.judged) == 100
    assert view.request("p") == pb.MembershipRequest(publisher="p", view=7, since=1)
    judge.judged.clear()
    view.apply(_changes(_entry("m5", "Order Product"), gone=("m7",), version=2), judge)
    assert judge.judged == ["m5"]
    assert "m7" not in view.current(0) and len(view.current(0)) == 99
    assert "m5" in view.holders("Product") and "m7" not in view.holders("Order")
    assert view.take_changed() >= {"m5", "m7"}
    assert view.take_changed() == set()


def test_an_entry_that_is_no_member_any_more_is_dropped() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a"), _entry("b")), _Judge())
    view.apply(_changes(_entry("a", ""), version=2), _Judge())  # no grant left
    assert list(view.current(0)) == ["b"]


def test_a_full_answer_replaces_the_view() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a"), _entry("b")), _Judge())
    restarted = pb.Membership(members=[_entry("b")], view=8, version=1)  # a new site process
    view.apply(restarted, _Judge())
    assert list(view.current(0)) == ["b"] and view.holders("Order") == {"b"}


def test_changes_for_another_view_are_taken_as_everything() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a"), _entry("b")), _Judge())
    other = pb.Membership(members=[_entry("c")], view=9, version=4, changes_only=True)
    view.apply(other, _Judge())
    assert list(view.current(0)) == ["c"]


def test_a_member_whose_judgement_ends_is_dropped_by_the_view_own_clock() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a")), _Judge(until_ms=1_000))
    view.apply(_changes(_entry("b"), version=2), _Judge(until_ms=5_000))
    assert sorted(view.current(999)) == ["a", "b"]
    assert list(view.current(1_001)) == ["b"]  # no answer said so: a's lease ran out
    assert "a" not in view.public_keys() and view.holders("Order") == {"b"}
    assert list(view.current(5_001)) == []


def test_public_keys_are_the_same_mapping_until_membership_changes() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a")), _Judge())
    keys = view.public_keys()
    view.apply(_changes(version=2), _Judge())
    assert view.public_keys() is keys
    view.apply(_changes(_entry("b"), version=3), _Judge())
    assert sorted(view.public_keys()) == ["a", "b"]
    assert sorted(keys) == ["a"]  # a document prepared before keeps what it had


def test_forgetting_asks_for_everything_and_refreshes_are_listed() -> None:
    view: MemberView[_M] = MemberView()
    asking = _entry("a")
    asking.refresh.add(publisher="p", concepts=["Order"])
    view.apply(_full(asking, _entry("b")), _Judge())
    assert [m.name for m in view.refreshing()] == ["a"]
    view.forget()
    assert view.request("p") == pb.MembershipRequest(publisher="p")


# ------------------------------------------------------------------------------- the site


@pytest.fixture
def node(tmp_path: Path) -> SiteNode:
    return site_node(tmp_path, "d2", "WorkOrder", lambda: datetime.now(UTC))


def _downlink_member(tmp: Path, name: str, publisher: str, now_ms: int) -> Registration:
    issue_party(tmp, Party(name=name, role="subscriber", attributes={"OU": "Cred1"}),
                now=datetime.now(UTC))
    files = TlsFiles.from_dir(tmp, name)
    member = certs.credential_from_pem(files.cert_pem).member_id
    signed = lease.sign(
        lease.issue(member=member, site="d3", block="Production", now_ms=now_ms,
                    period_ms=3_600_000),
        crypto.load_private_key_pem(files.key_pem),
    )
    return Registration(
        subscriber=member, certificate=files.cert_pem, grants={publisher: {"Production"}},
        lease=signed.to_bytes(),
    )


def test_a_site_answers_a_key_service_with_the_changes_since_its_version(
    node: SiteNode, tmp_path: Path
) -> None:
    publisher = "production-dept"
    now_ms = node.now_ms()
    regs = [_downlink_member(tmp_path, f"s{i}", publisher, now_ms) for i in range(4)]
    node.set_link_members("d3", regs)
    members, gone, everything = node.membership(publisher)
    assert everything and gone == [] and sorted(m.subscriber for m in members) == sorted(
        r.subscriber for r in regs
    )
    view, version = node.membership_journal.view, node.membership_journal.version

    def ask() -> tuple[list[str], list[str], bool]:
        members, gone, everything = node.membership(publisher, view=view, since=version)
        return [m.subscriber for m in members], gone, everything

    assert ask() == ([], [], False)  # nothing changed: nothing sent
    node.set_link_members("d3", [dataclasses.replace(r) for r in regs])  # equal, made anew
    assert ask() == ([], [], False)
    moved = Registration(
        subscriber=regs[1].subscriber, certificate=regs[1].certificate,
        grants={"another-publisher": {"Production"}}, lease=regs[1].lease,
    )
    node.set_link_members("d3", [regs[0], moved, regs[3]])  # s1 elsewhere, s2 gone
    assert ask() == ([], sorted([regs[1].subscriber, regs[2].subscriber]), False)
    assert ask()[2] is False and node.membership(publisher, view=view + 1, since=version)[2]


def test_a_key_service_over_many_unchanged_members_judges_none_again(
    node: SiteNode, tmp_path: Path
) -> None:
    publisher = "production-dept"
    regs = [_downlink_member(tmp_path, f"s{i}", publisher, node.now_ms()) for i in range(3)]
    node.set_link_members("d3", regs)
    view: MemberView[_M] = MemberView()
    judge = _Judge()

    def ask(judge: Callable[[pb.Member], Judged[_M] | None]) -> None:
        request = view.request(publisher)
        members, gone, everything = node.membership(
            publisher, view=request.view, since=request.since
        )
        view.apply(pb.Membership(
            members=members, gone=gone, changes_only=not everything,
            view=node.membership_journal.view, version=node.membership_journal.version,
        ), judge)

    ask(judge)
    assert len(judge.judged) == 3
    judge.judged.clear()
    for _ in range(3):
        ask(judge)
    assert judge.judged == []
    node.set_link_members("d3", regs[:2])
    ask(judge)
    assert judge.judged == [] and sorted(view.current(0)) == sorted(
        r.subscriber for r in regs[:2]
    )


def test_a_concept_generation_moves_only_when_its_holders_change() -> None:
    view: MemberView[_M] = MemberView()
    view.apply(_full(_entry("a"), _entry("b", "Product")), _Judge())
    order, product = view.generation("Order"), view.generation("Product")
    view.apply(_changes(_entry("b", "Product"), version=2), _Judge())  # judged the same
    assert (view.generation("Order"), view.generation("Product")) == (order, product)
    view.apply(_changes(_entry("c"), version=3), _Judge())
    assert view.generation("Order") != order and view.generation("Product") == product
    order = view.generation("Order")
    view.apply(_changes(gone=("a",), version=4), _Judge())
    assert view.generation("Order") != order and view.holders("Order") == {"c"}
