"""Group keys of (publisher, concept) groups: epochs, rekeying, sealing to members.

Theory of operation. Each publisher runs a key service that is the controller of one group per
concept it publishes. A group's state is ``(epoch, key, members)``. Before a document is
published, the key service compares each concept's current members with the group's: any
change — a join or a leave — starts a new epoch with a fresh random key (a joiner cannot read
earlier epochs, a leaver cannot read later ones). The new key is sealed with HPKE to every
member's certificate key, bound to ``(publisher, concept, epoch, subscriber)`` so a key message
cannot be replayed for another group, epoch or member. Disseminators carry sealed keys and can
open none.

This first version seals the key to each member (O(n) per rekey); the logical key hierarchy of a
later step replaces :func:`plan_rekey`'s sealing while keeping the epoch rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from xdn import crypto

__all__ = [
    "GroupState",
    "KeyGrant",
    "open_group_key",
    "plan_rekey",
    "seal_group_key",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupState:
    """The current epoch of one (publisher, concept) group."""

    publisher: str
    concept: str
    epoch: int
    key: bytes
    members: frozenset[str]

    def __post_init__(self) -> None:
        if self.epoch < 1:
            raise ValueError("epochs start at 1")
        if len(self.key) != crypto.KEY_BYTES:
            raise ValueError("group keys are 32 bytes")

    def __repr__(self) -> str:  # never print key material
        return (
            f"GroupState(publisher={self.publisher!r}, concept={self.concept!r}, "
            f"epoch={self.epoch}, members={sorted(self.members)!r})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyGrant:
    """A group key sealed to one member."""

    publisher: str
    concept: str
    epoch: int
    subscriber: str
    sealed: bytes


def _info(publisher: str, concept: str, epoch: int, subscriber: str) -> bytes:
    fields = (publisher, concept, str(epoch), subscriber)
    if any("\x00" in f for f in fields):
        raise ValueError("identifiers must not contain NUL")
    return b"xdn/group-key/v1\x00" + "\x00".join(fields).encode()


def seal_group_key(
    group: GroupState, subscriber: str, public_key: crypto.PublicKey
) -> KeyGrant:
    """Seal ``group``'s key to ``subscriber``'s certificate key."""
    info = _info(group.publisher, group.concept, group.epoch, subscriber)
    return KeyGrant(
        publisher=group.publisher,
        concept=group.concept,
        epoch=group.epoch,
        subscriber=subscriber,
        sealed=crypto.hpke_seal(public_key, group.key, info=info),
    )


def open_group_key(grant: KeyGrant, subscriber: str, private_key: crypto.PrivateKey) -> bytes:
    """Open a key message addressed to ``subscriber``; raise DecryptError if it is not ours."""
    info = _info(grant.publisher, grant.concept, grant.epoch, subscriber)
    return crypto.hpke_open(private_key, grant.sealed, info=info)


def plan_rekey(
    *,
    publisher: str,
    current: Mapping[str, GroupState],
    members: Mapping[str, frozenset[str]],
    new_key: Callable[[], bytes] = lambda: crypto.random_bytes(crypto.KEY_BYTES),
) -> dict[str, GroupState]:
    """Return the groups whose membership changed, each in a new epoch with a fresh key.

    Args:
        publisher: the group controller.
        current: concept → current group state (absent: the group has no epoch yet).
        members: concept → the subscribers that must hold the key now.
        new_key: source of fresh keys (injectable for tests).
    """
    changed: dict[str, GroupState] = {}
    for concept, wanted in members.items():
        group = current.get(concept)
        if group is not None and group.members == wanted:
            continue
        changed[concept] = GroupState(
            publisher=publisher,
            concept=concept,
            epoch=1 if group is None else group.epoch + 1,
            key=new_key(),
            members=wanted,
        )
    return changed
