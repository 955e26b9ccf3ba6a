"""The logical key hierarchy: who can derive which epoch's key, what it costs, what it stores.

The adversary model: every rekey message is broadcast to everyone (members, former members,
people who join later, disseminators). Each person keeps every key it ever held and tries to
unwrap every wrapped key of every message with them, to a fixed point (:func:`closure`).
"""

from __future__ import annotations

import collections
import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xdn import crypto
from xdn.errors import DecryptError, ProtocolError, UsageError
from xdn.lkh import (
    Enrolment,
    EpochGapError,
    GroupController,
    MemberKeys,
    MemberPath,
    RekeyMessage,
    WrappedKey,
    ceil_log2,
    group_key_of,
    open_enrolment,
)
from xdn.lkh._messages import unwrap

PUB, CONCEPT = "pub", "urn:c#Order"
PEOPLE = [f"s{i}" for i in range(9)]
PRIVATE = {name: crypto.generate_private_key() for name in PEOPLE}
PUBLIC = {name: key.public_key() for name, key in PRIVATE.items()}


def seeded(seed: int = 0) -> random.Random:
    return random.Random(seed)


def closure(known: dict[int, bytes], messages: Iterable[RekeyMessage]) -> dict[int, bytes]:
    """Every node key obtainable from ``known`` by unwrapping, repeatedly, any wrapped key."""
    known = dict(known)
    wraps = [(m, w) for m in messages for w in m.wraps]
    grew = True
    while grew:
        grew = False
        for m, w in wraps:
            if w.node_id in known or w.wrapping_node_id not in known:
                continue
            known[w.node_id] = unwrap(
                w.ciphertext,
                under=known[w.wrapping_node_id],
                publisher=m.publisher,
                concept=m.concept,
                epoch=m.epoch,
                node=w.node_id,
                child=w.wrapping_node_id,
            )
            grew = True
    return known


def derivable_epochs(known: dict[int, bytes], messages: list[RekeyMessage]) -> set[int]:
    keys = closure(known, messages)
    return {m.epoch for m in messages if m.root is not None and m.root in keys}


@dataclass
class World:
    """A controller, honest members applying every message, and everyone's hoard of keys."""

    group: GroupController = field(
        default_factory=lambda: GroupController(publisher=PUB, concept=CONCEPT)
    )
    states: dict[str, MemberKeys] = field(default_factory=dict)
    hoard: dict[str, dict[int, bytes]] = field(
        default_factory=lambda: collections.defaultdict(dict)
    )
    member_epochs: dict[str, set[int]] = field(default_factory=lambda: collections.defaultdict(set))
    messages: list[RekeyMessage] = field(default_factory=list)
    enrolments: list[Enrolment] = field(default_factory=list)
    group_keys: dict[int, bytes] = field(default_factory=dict)

    def batch(self, joins: list[str], leaves: list[str], rand: random.Random) -> int:
        change = self.group.rekey(joins=joins, leaves=leaves, rand=rand.randbytes)
        message = RekeyMessage.from_bytes(change.message.to_bytes())
        assert message == change.message
        self.messages.append(message)
        for name in PEOPLE:  # the broadcast reaches everyone who has state
            if name not in self.states:
                continue
            try:
                self.states[name] = self.states[name].apply_rekey(message)
            except DecryptError:
                assert name not in self.group, f"member {name} could not follow"
                del self.states[name]
            else:
                assert name in self.group, f"former member {name} followed"
        for enrolment in change.enrolments(PUBLIC):
            wire = Enrolment.from_bytes(enrolment.to_bytes())
            self.enrolments.append(wire)
            self.states[wire.member] = MemberKeys.enrol(wire, PRIVATE[wire.member])
        self.group_keys[change.epoch] = self.group.group_key
        for name, state in self.states.items():
            assert state.group_key == self.group.group_key
            assert state.epoch == change.epoch
            self.hoard[name].update(state.path.keys)
            self.member_epochs[name].add(change.epoch)
        assert set(self.states) == self.group.members()
        return change.wrapped_keys


@st.composite
def batches(draw: st.DrawFn) -> list[tuple[list[str], list[str]]]:
    members: set[str] = set()
    out = []
    for _ in range(draw(st.integers(1, 12))):
        outsiders = sorted(set(PEOPLE) - members)
        joins = (
            draw(st.lists(st.sampled_from(outsiders), unique=True, max_size=3)) if outsiders else []
        )
        leaves = (
            draw(st.lists(st.sampled_from(sorted(members)), unique=True, max_size=3))
            if members
            else []
        )
        members = (members - set(leaves)) | set(joins)
        out.append((joins, leaves))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plan=batches(), seed=st.integers(0, 2**32))
def test_exactly_the_members_of_each_epoch_can_derive_its_key(
    plan: list[tuple[list[str], list[str]]], seed: int
) -> None:
    world, rand = World(), seeded(seed)
    for joins, leaves in plan:
        before = len(world.group)
        wraps = world.batch(joins, leaves, rand)
        if leaves and not joins and len(leaves) == 1:
            assert wraps <= 2 * ceil_log2(before)
        if len(world.group):
            assert world.group.height <= ceil_log2(len(world.group)) + 1
    # Everyone, hoarding every key they ever held and reading every message of every epoch,
    # derives exactly the epochs in which they were members: joiners nothing earlier (backward
    # secrecy), leavers nothing later (forward secrecy), rejoiners nothing in between.
    for name in PEOPLE:
        assert derivable_epochs(world.hoard[name], world.messages) == world.member_epochs[name]
    assert len(set(world.group_keys.values())) == len(world.group_keys)


@settings(max_examples=25, deadline=None)
@given(plan=batches(), seed=st.integers(0, 2**32))
def test_a_disseminator_that_routes_everything_derives_nothing(
    plan: list[tuple[list[str], list[str]]], seed: int
) -> None:
    world, rand = World(), seeded(seed)
    for joins, leaves in plan:
        world.batch(joins, leaves, rand)
    seen = [m.to_bytes() for m in world.messages] + [e.to_bytes() for e in world.enrolments]
    # It holds no member key: the only node keys it can reach are those reachable from none.
    assert closure({}, world.messages) == {}
    # Its own certificate key (or any other non-member's) opens no enrolment.
    stranger = crypto.generate_private_key()
    for enrolment in world.enrolments:
        with pytest.raises(DecryptError):
            open_enrolment(enrolment, stranger)
    # No key it could use appears anywhere in what it carried.
    secrets = [k for hoard in world.hoard.values() for k in hoard.values()]
    secrets += list(world.group_keys.values())
    blob = b"".join(seen)
    assert not any(secret in blob for secret in secrets)


@settings(max_examples=30, deadline=None)
@given(plan=batches(), seed=st.integers(0, 2**32))
def test_state_round_trips_through_bytes_and_rows(
    plan: list[tuple[list[str], list[str]]], seed: int
) -> None:
    world, rand = World(), seeded(seed)
    for joins, leaves in plan:
        world.batch(joins, leaves, rand)
        data = world.group.to_bytes()
        again = GroupController.from_bytes(data)
        assert again.to_bytes() == data
        assert GroupController.from_rows(again.header(), again.rows()).to_bytes() == data
        assert again.group_key == world.group.group_key
        for state in world.states.values():
            assert MemberKeys.from_bytes(state.to_bytes()) == state


def test_single_leave_costs_at_most_two_log_n_in_a_bulk_tree() -> None:
    n = 1000
    group = GroupController.bulk(
        publisher=PUB,
        concept=CONCEPT,
        members=[f"m{i}" for i in range(n)],
        rand=seeded().randbytes,
    )
    assert group.height == ceil_log2(n)
    rng = seeded(1)
    for _ in range(50):
        before = len(group)
        change = group.leave([rng.choice(sorted(group.members()))], rand=rng.randbytes)
        assert change.wrapped_keys <= 2 * ceil_log2(before)
        assert group.height <= ceil_log2(len(group)) + 1


def _shape(group: GroupController) -> object:
    rows = {r.node_id: r for r in group.rows()}

    def shape(node_id: int) -> object:
        row = rows[node_id]
        if row.member is not None:
            return ()
        return tuple(sorted((shape(row.left), shape(row.right)), key=repr))

    root = group.header().root
    return None if root is None else shape(root)


def test_every_tree_reachable_from_small_groups_keeps_the_leave_bound() -> None:
    """Exhaustive over tree shapes of up to 9 members reachable by small batches."""
    names = (f"x{i}" for i in itertools.count())
    fixed = seeded(2).randbytes
    seen: set[object] = set()
    queue: collections.deque[GroupController] = collections.deque()
    for n in range(1, 10):
        group = GroupController.bulk(
            publisher=PUB, concept=CONCEPT, members=[next(names) for _ in range(n)], rand=fixed
        )
        seen.add(_shape(group))
        queue.append(group)
    while queue:
        group = queue.popleft()
        members, n = sorted(group.members()), len(group)
        batches: list[tuple[tuple[str, ...], tuple[str, ...]]] = [((), (m,)) for m in members]
        batches += [((next(names),), ()), ((), ())]
        batches += [((), pair) for pair in itertools.combinations(members, 2)]
        batches += [((next(names),), (m,)) for m in members]
        for joins, leaves in batches:
            change = group.plan(joins=joins, leaves=leaves, rand=fixed)
            if len(leaves) == 1 and not joins:
                assert change.wrapped_keys <= 2 * ceil_log2(n)
            after = GroupController.from_bytes(group.to_bytes())
            after.apply(change)
            if not 1 <= len(after) <= 9:
                continue
            assert after.height <= ceil_log2(len(after)) + 1
            if (shape := _shape(after)) not in seen:
                seen.add(shape)
                queue.append(after)
    assert len(seen) > 20


def test_join_costs_at_most_two_log_n_plus_one() -> None:
    rng = seeded(3)
    group = GroupController.bulk(
        publisher=PUB,
        concept=CONCEPT,
        members=[f"m{i}" for i in range(300)],
        rand=rng.randbytes,
    )
    for i in range(40):
        before = len(group)
        change = group.join([f"j{i}"], rand=rng.randbytes)
        assert change.wrapped_keys <= 2 * ceil_log2(before) + 1
        assert len(change.paths) == 1
        assert change.paths[0].keys[-1][0] == change.message.root


def _enrolled(group: GroupController, name: str) -> MemberKeys:
    return MemberKeys.enrol(group.path_refresh(name, PUBLIC[name]), PRIVATE[name])


def test_an_offline_member_catches_up_with_one_path_refresh() -> None:
    rng = seeded(4)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    group.join(PEOPLE[:6], rand=rng.randbytes)
    alice = _enrolled(group, "s0")
    missed = [group.leave(["s3"], rand=rng.randbytes), group.join(["s7"], rand=rng.randbytes)]
    with pytest.raises(EpochGapError) as gap:
        alice.apply_rekey(missed[1].message)
    assert (gap.value.have, gap.value.got) == (1, 3)
    refresh = group.path_refresh("s0", PUBLIC["s0"])
    alice = alice.apply_enrolment(refresh, PRIVATE["s0"])
    assert (alice.epoch, alice.group_key) == (3, group.group_key)
    assert alice.apply_rekey(missed[0].message) is alice  # stale: ignored
    alice = alice.apply_rekey(group.leave(["s1"], rand=rng.randbytes).message)
    assert alice.group_key == group.group_key
    assert alice.apply_enrolment(refresh, PRIVATE["s0"]) is alice  # older refresh: ignored


def test_the_last_member_leaving_leaves_a_key_nobody_holds() -> None:
    rng = seeded(5)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    group.join(["s0", "s1"], rand=rng.randbytes)
    s0 = _enrolled(group, "s0")
    change = group.leave(["s1"], rand=rng.randbytes)
    assert change.wrapped_keys == 0
    s0 = s0.apply_rekey(change.message)
    assert s0.group_key == group.group_key
    last = group.leave(["s0"], rand=rng.randbytes)
    assert last.message.root is None and last.header.lone_key is not None
    with pytest.raises(DecryptError):
        s0.apply_rekey(last.message)
    assert len(group) == 0 and group.height == 0
    empty_key = group.group_key
    again = group.join(["s2"], rand=rng.randbytes)
    assert group.group_key not in (empty_key, s0.group_key)
    assert again.wrapped_keys == 0 and len(again.paths[0].keys) == 1


def test_an_empty_batch_refreshes_the_root() -> None:
    rng = seeded(6)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    group.join(PEOPLE[:4], rand=rng.randbytes)
    states = {n: _enrolled(group, n) for n in PEOPLE[:4]}
    old = group.group_key
    change = group.rekey(rand=rng.randbytes)
    assert change.wrapped_keys == 2 and change.epoch == 2
    for name, state in states.items():
        assert state.apply_rekey(change.message).group_key == group.group_key != old, name


def test_plan_checks_the_batch_and_does_not_touch_the_group() -> None:
    rng = seeded(7)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    with pytest.raises(UsageError, match="no epoch"):
        _ = group.group_key
    group.join(["s0", "s1", "s2"], rand=rng.randbytes)
    before = group.to_bytes()
    with pytest.raises(UsageError, match="already members"):
        group.plan(joins=["s0"])
    with pytest.raises(UsageError, match="not members"):
        group.plan(leaves=["s5"])
    with pytest.raises(UsageError, match="twice"):
        group.plan(joins=["s5", "s5"])
    with pytest.raises(TypeError):
        group.plan(joins="s5")
    with pytest.raises(UsageError, match="rand"):
        group.plan(joins=["s5"], rand=lambda n: b"short")
    change = group.plan(leaves=["s1"], rand=rng.randbytes)
    assert group.to_bytes() == before
    group.apply(change)
    with pytest.raises(UsageError, match="epoch"):
        group.apply(change)
    other = GroupController(publisher=PUB, concept="other")
    with pytest.raises(UsageError, match="another group"):
        other.apply(change)


def test_member_refuses_messages_not_meant_for_it() -> None:
    rng = seeded(8)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    group.join(PEOPLE[:4], rand=rng.randbytes)
    s0 = _enrolled(group, "s0")
    change = group.leave(["s3"], rand=rng.randbytes)
    msg = change.message
    tampered = RekeyMessage(
        publisher=msg.publisher,
        concept=msg.concept,
        epoch=msg.epoch,
        root=msg.root,
        retired=msg.retired,
        wraps=tuple(
            WrappedKey(node_id=w.node_id, wrapping_node_id=w.wrapping_node_id, ciphertext=bytes(40))
            for w in msg.wraps
        ),
    )
    with pytest.raises(DecryptError):
        s0.apply_rekey(tampered)
    elsewhere = RekeyMessage(publisher=PUB, concept="other", epoch=2, root=msg.root)
    with pytest.raises(ProtocolError):
        s0.apply_rekey(elsewhere)
    refresh = group.path_refresh("s1", PUBLIC["s1"])
    with pytest.raises(DecryptError):
        MemberKeys.enrol(refresh, PRIVATE["s0"])
    with pytest.raises(ProtocolError, match="another member"):
        s0.apply_enrolment(refresh, PRIVATE["s1"])
    forged = Enrolment(
        publisher=PUB, concept=CONCEPT, epoch=refresh.epoch, member="s0", sealed=refresh.sealed
    )
    with pytest.raises(DecryptError):  # the HPKE info binds the member name
        MemberKeys.enrol(forged, PRIVATE["s1"])
    assert s0.apply_rekey(msg).group_key == group.group_key


@pytest.mark.parametrize("cut", [1, 5, 20, -1])
def test_malformed_encodings_are_protocol_errors(cut: int) -> None:
    rng = seeded(9)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    group.join(PEOPLE[:3], rand=rng.randbytes)
    change = group.leave(["s2"], rand=rng.randbytes)
    for data, decode in [
        (change.message.to_bytes(), RekeyMessage.from_bytes),
        (group.path_refresh("s0", PUBLIC["s0"]).to_bytes(), Enrolment.from_bytes),
        (group.member_path("s0").to_bytes(), MemberPath.from_bytes),
        (group.to_bytes(), GroupController.from_bytes),
    ]:
        with pytest.raises(ProtocolError):
            decode(data[:cut])
        with pytest.raises(ProtocolError):
            decode(data + b"\0")


def test_keys_stay_out_of_reprs_and_group_keys_are_bound_to_their_epoch() -> None:
    rng = seeded(10)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    change = group.join(PEOPLE[:3], rand=rng.randbytes)
    path = group.member_path("s0")
    texts = [repr(change), repr(path), repr(_enrolled(group, "s0")), repr(list(group.rows()))]
    for secret in [k for _, k in path.keys] + [group.group_key]:
        assert not any(secret.hex() in t or repr(secret) in t for t in texts)
    root_key = path.keys[-1][1]
    assert group_key_of(root_key, publisher=PUB, concept=CONCEPT, epoch=1) == group.group_key
    assert group_key_of(root_key, publisher=PUB, concept=CONCEPT, epoch=2) != group.group_key
    assert group_key_of(root_key, publisher=PUB, concept="x", epoch=1) != group.group_key


def test_plan_members_moves_to_a_wanted_set() -> None:
    rng = seeded(11)
    group = GroupController(publisher=PUB, concept=CONCEPT)
    first = group.plan_members(["s2", "s0", "s1"], rand=rng.randbytes)
    assert first is not None and first.joined == ("s0", "s1", "s2") and first.epoch == 1
    group.apply(first)
    assert group.plan_members({"s0", "s1", "s2"}) is None
    change = group.plan_members({"s0", "s3"}, rand=rng.randbytes)
    assert change is not None
    assert (change.joined, change.departed) == (("s3",), ("s1", "s2"))
    empty = GroupController(publisher=PUB, concept="nobody")
    start = empty.plan_members(())  # a group nobody may read still gets a first epoch
    assert start is not None and start.message.root is None
