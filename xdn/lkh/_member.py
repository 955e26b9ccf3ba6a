"""A member's side of a group: the keys on its path, moved from epoch to epoch.

:class:`MemberKeys` is an immutable value: every operation returns a new one (or raises and
leaves the old one as it was), so a subscriber can persist the result and the group keys it
yields in one step. Its keys are always its path, leaf first and root last.

How a member moves to epoch ``e + 1`` (:meth:`MemberKeys.apply_rekey`): forget the retired
nodes, then walk the wrapped keys in message order (bottom-up) and unwrap each one whose
wrapping node it holds. If it now holds the root, it derives the group key; if not — it was
removed, or the message is not for it — it raises :class:`~xdn.errors.DecryptError`. A member
that missed an epoch cannot follow (the wrapping keys of the missed epoch are unknown to it)
and gets :class:`EpochGapError`: it asks the key service for a path refresh, an enrolment
sealed to its certificate holding its current path.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdn import crypto
from xdn.errors import DecryptError, ProtocolError
from xdn.lkh._messages import (
    Enrolment,
    MemberPath,
    RekeyMessage,
    group_key_of,
    open_enrolment,
    unwrap,
)

__all__ = ["EpochGapError", "MemberKeys"]


class EpochGapError(ProtocolError):
    """A rekey message skips epochs this member has not seen: it needs a path refresh."""

    def __init__(self, *, have: int, got: int) -> None:
        super().__init__(f"member is at epoch {have}, message starts epoch {got}")
        self.have = have
        self.got = got


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberKeys:
    """One member's keys in one group, at its current epoch."""

    path: MemberPath

    def __post_init__(self) -> None:
        if not isinstance(self.path, MemberPath):
            raise TypeError("path must be a MemberPath")

    @classmethod
    def enrol(cls, enrolment: Enrolment, private_key: crypto.PrivateKey) -> MemberKeys:
        """Open a (join or path refresh) enrolment; raise :class:`DecryptError` if not ours."""
        return cls(path=open_enrolment(enrolment, private_key))

    @property
    def publisher(self) -> str:
        return self.path.publisher

    @property
    def concept(self) -> str:
        return self.path.concept

    @property
    def member(self) -> str:
        return self.path.member

    @property
    def epoch(self) -> int:
        return self.path.epoch

    @property
    def group_key(self) -> bytes:
        """The group key of :attr:`epoch`."""
        return group_key_of(
            self.path.keys[-1][1],
            publisher=self.publisher,
            concept=self.concept,
            epoch=self.epoch,
        )

    def node_ids(self) -> tuple[int, ...]:
        """The ids of the nodes whose keys this member holds, leaf first."""
        return tuple(node for node, _ in self.path.keys)

    def _check_group(self, publisher: str, concept: str) -> None:
        if (publisher, concept) != (self.publisher, self.concept):
            raise ProtocolError(f"key message for group {publisher}/{concept}")

    def apply_enrolment(self, enrolment: Enrolment, private_key: crypto.PrivateKey) -> MemberKeys:
        """Adopt a path refresh for a later (or the same) epoch; an older one is ignored."""
        self._check_group(enrolment.publisher, enrolment.concept)
        if enrolment.member != self.member:
            raise ProtocolError("enrolment for another member")
        if enrolment.epoch < self.epoch:
            return self
        return MemberKeys.enrol(enrolment, private_key)

    def apply_rekey(self, message: RekeyMessage) -> MemberKeys:
        """Move to ``message``'s epoch; a message for an epoch we already have is ignored.

        Raises:
            EpochGapError: the message is more than one epoch ahead.
            DecryptError: this member cannot derive the new root (it was removed), or a
                wrapped key addressed to it does not open.
            ProtocolError: the message is for another group.
        """
        self._check_group(message.publisher, message.concept)
        if message.epoch <= self.epoch:
            return self
        if message.epoch != self.epoch + 1:
            raise EpochGapError(have=self.epoch, got=message.epoch)
        retired = set(message.retired)
        held = [(node, key) for node, key in self.path.keys if node not in retired]
        index = dict(held)
        for w in message.wraps:
            under = index.get(w.wrapping_node_id)
            if under is None or w.node_id in index:
                continue
            key = unwrap(
                w.ciphertext,
                under=under,
                publisher=self.publisher,
                concept=self.concept,
                epoch=message.epoch,
                node=w.node_id,
                child=w.wrapping_node_id,
            )
            index[w.node_id] = key
            held.append((w.node_id, key))
        if not held or message.root is None or held[-1][0] != message.root:
            raise DecryptError()
        return MemberKeys(
            path=MemberPath(
                publisher=self.publisher,
                concept=self.concept,
                epoch=message.epoch,
                member=self.member,
                keys=tuple(held),
            )
        )

    def to_bytes(self) -> bytes:
        """The member's state (secret), for its own keyring."""
        return self.path.to_bytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> MemberKeys:
        """Invert :meth:`to_bytes`; raise :class:`ProtocolError` if malformed."""
        return cls(path=MemberPath.from_bytes(data))
