"""Durable rows of a controller's state and the description of one epoch's change.

A group's whole state is a :class:`GroupHeader` plus one :class:`NodeRow` per node; an
:class:`EpochChange` is what one batch does to it (rows added, node ids retired, the new
header) together with what must be sent (the rekey message and the joiners' paths). A store
applies a change in one transaction; the controller applies the same change in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xdn import crypto
from xdn.lkh._bytes import check_name, check_u64
from xdn.lkh._messages import Enrolment, MemberPath, RekeyMessage, seal_path

__all__ = ["EpochChange", "GroupHeader", "NodeRow"]


def _check_key(what: str, key: object) -> None:
    if not isinstance(key, bytes) or len(key) != crypto.KEY_BYTES:
        raise ValueError(f"{what} must be {crypto.KEY_BYTES} bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRow:
    """One node: a leaf (``member`` set) or an internal node over ``left`` and ``right``."""

    node_id: int
    key: bytes = field(repr=False)
    member: str | None = None
    left: int = 0
    right: int = 0

    def __post_init__(self) -> None:
        if check_u64("node_id", self.node_id) == 0:
            raise ValueError("node ids start at 1")
        _check_key("node key", self.key)
        check_u64("left", self.left)
        check_u64("right", self.right)
        if self.member is not None:
            check_name("member", self.member)
            if self.left or self.right:
                raise ValueError("a leaf has no children")
        elif not (0 < self.left < self.node_id and 0 < self.right < self.node_id):
            raise ValueError("an internal node's children are older nodes")
        elif self.left == self.right:
            raise ValueError("an internal node has two distinct children")


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupHeader:
    """Everything about a group besides its nodes.

    ``root`` is ``None`` while the group has no members; an empty group's epochs then get
    their key from ``lone_key``, which only the controller holds. ``next_id`` is the next
    unused node id (ids are never reused).
    """

    publisher: str
    concept: str
    epoch: int
    root: int | None
    next_id: int
    lone_key: bytes | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_u64("epoch", self.epoch)
        if check_u64("next_id", self.next_id) == 0:
            raise ValueError("node ids start at 1")
        if self.root is not None and not 0 < check_u64("root", self.root) < self.next_id:
            raise ValueError("root must be an allocated node id")
        if self.lone_key is not None:
            _check_key("lone key", self.lone_key)
        if self.epoch and (self.root is None) != (self.lone_key is not None):
            raise ValueError("an epoch has either a root or (empty group) a lone key")


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochChange:
    """One planned epoch: apply it to the controller and the store, then send its messages.

    Attributes:
        base_epoch: the epoch this change applies to (the new one is ``header.epoch``).
        header: the group header after the change.
        added: the new nodes, bottom-up (joiners' leaves, then new internal nodes).
        retired: the node ids the change deletes (their keys are never used again).
        joined: members added, in the order given.
        departed: members removed.
        message: the rekey message to broadcast.
        paths: each joiner's keys, to seal to its certificate (:meth:`enrolments`).
        group_key: the group key of the new epoch.
    """

    base_epoch: int
    header: GroupHeader
    added: tuple[NodeRow, ...]
    retired: tuple[int, ...]
    joined: tuple[str, ...]
    departed: tuple[str, ...]
    message: RekeyMessage
    paths: tuple[MemberPath, ...] = field(repr=False)
    group_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if check_u64("base_epoch", self.base_epoch) + 1 != self.header.epoch:
            raise ValueError("a change moves a group forward by exactly one epoch")
        if self.message.epoch != self.header.epoch:
            raise ValueError("the rekey message names another epoch")
        if tuple(p.member for p in self.paths) != self.joined:
            raise ValueError("one path per joiner, in order")
        _check_key("group key", self.group_key)

    @property
    def publisher(self) -> str:
        return self.header.publisher

    @property
    def concept(self) -> str:
        return self.header.concept

    @property
    def epoch(self) -> int:
        return self.header.epoch

    @property
    def wrapped_keys(self) -> int:
        """How many wrapped keys the rekey message carries."""
        return len(self.message.wraps)

    def enrolments(self, public_keys: Mapping[str, crypto.PublicKey]) -> tuple[Enrolment, ...]:
        """Seal each joiner's path to its certificate key (one HPKE operation per joiner).

        Raises:
            KeyError: a joiner has no entry in ``public_keys``.
        """
        return tuple(seal_path(path, public_keys[path.member]) for path in self.paths)
