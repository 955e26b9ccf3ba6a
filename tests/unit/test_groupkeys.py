"""Group epochs and sealed key messages."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import crypto
from xdn.errors import DecryptError
from xdn.groupkeys import GroupState, open_group_key, plan_rekey, seal_group_key


def _keys() -> object:
    counter = itertools.count(1)
    return lambda: next(counter).to_bytes(32, "big")


def test_first_publication_starts_epoch_one() -> None:
    changed = plan_rekey(
        publisher="p", current={}, members={"A": frozenset({"alice"})}, new_key=_keys()
    )
    assert changed["A"].epoch == 1
    assert changed["A"].members == {"alice"}


@given(
    before=st.frozensets(st.sampled_from("abcdef")),
    after=st.frozensets(st.sampled_from("abcdef")),
)
def test_any_membership_change_rekeys_and_no_change_keeps_key(
    before: frozenset[str], after: frozenset[str]
) -> None:
    current = {"A": GroupState(publisher="p", concept="A", epoch=3, key=b"k" * 32, members=before)}
    changed = plan_rekey(publisher="p", current=current, members={"A": after}, new_key=_keys())
    if before == after:
        assert changed == {}
    else:
        assert changed["A"].epoch == 4
        assert changed["A"].key != b"k" * 32
        assert changed["A"].members == after


def test_sealed_key_opens_only_for_its_member_and_binding() -> None:
    alice, bob = crypto.generate_private_key(), crypto.generate_private_key()
    group = GroupState(publisher="p", concept="A", epoch=2, key=b"\x07" * 32, members=frozenset())
    grant = seal_group_key(group, "alice", alice.public_key())
    assert open_group_key(grant, "alice", alice) == b"\x07" * 32
    with pytest.raises(DecryptError):
        open_group_key(grant, "alice", bob)  # another member's key
    with pytest.raises(DecryptError):
        open_group_key(grant, "bob", alice)  # re-addressed to another subscriber
    moved = type(grant)(
        publisher=grant.publisher,
        concept="B",
        epoch=grant.epoch,
        subscriber=grant.subscriber,
        sealed=grant.sealed,
    )
    with pytest.raises(DecryptError):
        open_group_key(moved, "alice", alice)  # replayed for another concept


def test_group_state_repr_hides_the_key() -> None:
    group = GroupState(publisher="p", concept="A", epoch=1, key=b"S" * 32, members=frozenset())
    assert "SSSS" not in repr(group)
