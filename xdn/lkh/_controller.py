"""The group controller: one key tree per (publisher, concept), rekeyed in batches.

The controller is the key service's in-memory model of one group. :meth:`GroupController.plan`
turns a batch of joins and leaves into an :class:`~xdn.lkh.EpochChange` without touching the
controller (pure apart from the injectable ``rand``); :meth:`GroupController.apply` then moves
the controller to the new epoch. A durable key service plans, commits the change to its store,
applies it, and sends the change's messages: if the commit fails, nothing happened.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

from xdn import crypto
from xdn.errors import ProtocolError, UsageError
from xdn.lkh._bytes import Reader, Writer, check_name
from xdn.lkh._epoch import Rand, make_change
from xdn.lkh._messages import Enrolment, MemberPath, group_key_of, seal_path
from xdn.lkh._state import EpochChange, GroupHeader, NodeRow
from xdn.lkh._tree import Node, build_balanced, link, plan_shape

__all__ = ["GroupController"]

_STATE_MAGIC = b"XLG1"


def _names(what: str, names: Iterable[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise TypeError(f"{what} must be an iterable of names, not a str")
    out = tuple(check_name(what, n) for n in names)
    if len(set(out)) != len(out):
        raise UsageError(f"{what} name a member twice")
    return out


class GroupController:
    """The logical key hierarchy of one (publisher, concept) group, at its current epoch."""

    def __init__(self, *, publisher: str, concept: str) -> None:
        """An empty group at epoch 0 (no key yet: the first batch starts epoch 1)."""
        self._publisher = check_name("publisher", publisher)
        self._concept = check_name("concept", concept)
        self._epoch = 0
        self._root = 0
        self._next_id = 1
        self._lone_key: bytes | None = None
        self._nodes: dict[int, Node] = {}
        self._leaf_of: dict[str, int] = {}

    @classmethod
    def bulk(
        cls,
        *,
        publisher: str,
        concept: str,
        members: Sequence[str],
        rand: Rand = crypto.random_bytes,
    ) -> GroupController:
        """A group whose epoch 1 holds ``members`` in a balanced tree.

        No rekey message exists for this epoch: each member gets its keys with
        :meth:`path_refresh` (for example when it next connects).
        """
        self = cls(publisher=publisher, concept=concept)
        names = _names("members", members)
        if not names:
            return self
        pool = rand(crypto.KEY_BYTES * (2 * len(names) - 1))
        if len(pool) != crypto.KEY_BYTES * (2 * len(names) - 1):
            raise UsageError("rand(n) must return n bytes")
        keys = (pool[i : i + crypto.KEY_BYTES] for i in range(0, len(pool), crypto.KEY_BYTES))
        root, self._next_id = build_balanced(self._nodes, names, lambda: next(keys), 1)
        self._root, self._epoch = root, 1
        self._leaf_of = {node.member: i for i, node in self._nodes.items() if node.member}
        return self

    # -- the current epoch ---------------------------------------------------------------------

    @property
    def publisher(self) -> str:
        return self._publisher

    @property
    def concept(self) -> str:
        return self._concept

    @property
    def epoch(self) -> int:
        return self._epoch

    def __len__(self) -> int:
        return len(self._leaf_of)

    def __contains__(self, member: object) -> bool:
        return member in self._leaf_of

    def members(self) -> frozenset[str]:
        """The current members."""
        return frozenset(self._leaf_of)

    @property
    def height(self) -> int:
        """The length of the longest leaf-to-root path (0 for one member or none)."""
        return self._nodes[self._root].height if self._root else 0

    def depth_of(self, member: str) -> int:
        """How many ancestors ``member``'s leaf has."""
        node_id, depth = self._leaf_of[member], 0
        while node_id != self._root:
            node_id, depth = self._nodes[node_id].parent, depth + 1
        return depth

    @property
    def group_key(self) -> bytes:
        """The key of the current epoch (raises :class:`UsageError` before epoch 1)."""
        if self._epoch == 0:
            raise UsageError(f"group {self._concept!r} has no epoch yet")
        root_key = self._nodes[self._root].key if self._root else self._lone_key
        assert root_key is not None
        return group_key_of(
            root_key, publisher=self._publisher, concept=self._concept, epoch=self._epoch
        )

    def member_path(self, member: str) -> MemberPath:
        """``member``'s keys in the current epoch (raises :class:`UsageError` if not a member)."""
        if member not in self._leaf_of:
            raise UsageError(f"{member!r} is not a member of {self._concept!r}")
        node_id, keys = self._leaf_of[member], []
        while node_id:
            keys.append((node_id, self._nodes[node_id].key))
            node_id = self._nodes[node_id].parent
        return MemberPath(
            publisher=self._publisher,
            concept=self._concept,
            epoch=self._epoch,
            member=member,
            keys=tuple(keys),
        )

    def path_refresh(self, member: str, public_key: crypto.PublicKey) -> Enrolment:
        """``member``'s current path sealed to its certificate key: how it catches up."""
        return seal_path(self.member_path(member), public_key)

    # -- batches -------------------------------------------------------------------------------

    def plan(
        self,
        *,
        joins: Iterable[str] = (),
        leaves: Iterable[str] = (),
        rand: Rand = crypto.random_bytes,
    ) -> EpochChange:
        """Plan the next epoch: add ``joins``, remove ``leaves`` (an empty batch refreshes).

        Raises:
            UsageError: a joiner is already a member, a leaver is not, or a name is in both.
        """
        joins, leaves = _names("joins", joins), _names("leaves", leaves)
        if already := [m for m in joins if m in self._leaf_of]:
            raise UsageError(f"already members of {self._concept!r}: {already}")
        if strangers := [m for m in leaves if m not in self._leaf_of]:
            raise UsageError(f"not members of {self._concept!r}: {strangers}")
        shape = plan_shape(
            self._nodes,
            root=self._root or None,
            leaf_of=self._leaf_of,
            next_id=self._next_id,
            joins=joins,
            leaves=leaves,
        )
        return make_change(self.header(), self._nodes, shape, joins=joins, leaves=leaves, rand=rand)

    def plan_members(
        self, wanted: Iterable[str], *, rand: Rand = crypto.random_bytes
    ) -> EpochChange | None:
        """Plan the epoch that makes the members exactly ``wanted``; ``None`` if they are.

        Joins and leaves are taken in sorted order, so the plan depends only on the sets.
        """
        if isinstance(wanted, str):
            raise TypeError("wanted must be an iterable of names, not a str")
        target = wanted if isinstance(wanted, frozenset) else frozenset(wanted)
        # Names already members were checked when they joined: only the new ones are checked.
        joins = sorted(_names("wanted", target.difference(self._leaf_of)))
        leaves = sorted(set(self._leaf_of).difference(target))
        if self._epoch and not joins and not leaves:
            return None
        return self.plan(joins=joins, leaves=leaves, rand=rand)

    def apply(self, change: EpochChange) -> None:
        """Move to ``change``'s epoch (it must have been planned from the current one)."""
        if (change.publisher, change.concept) != (self._publisher, self._concept):
            raise UsageError("the change belongs to another group")
        if change.base_epoch != self._epoch:
            raise UsageError(f"change from epoch {change.base_epoch}, group is at {self._epoch}")
        for node_id in change.retired:
            node = self._nodes.pop(node_id)
            if node.member is not None:
                del self._leaf_of[node.member]
        for row in change.added:
            self._add(row)
        self._set_header(change.header)

    def rekey(
        self,
        *,
        joins: Iterable[str] = (),
        leaves: Iterable[str] = (),
        rand: Rand = crypto.random_bytes,
    ) -> EpochChange:
        """:meth:`plan` and :meth:`apply` in one step (for callers without a store)."""
        change = self.plan(joins=joins, leaves=leaves, rand=rand)
        self.apply(change)
        return change

    def join(self, members: Iterable[str], *, rand: Rand = crypto.random_bytes) -> EpochChange:
        """Add ``members`` in one new epoch."""
        return self.rekey(joins=members, rand=rand)

    def leave(self, members: Iterable[str], *, rand: Rand = crypto.random_bytes) -> EpochChange:
        """Remove ``members`` in one new epoch."""
        return self.rekey(leaves=members, rand=rand)

    # -- state ---------------------------------------------------------------------------------

    def _add(self, row: NodeRow) -> None:
        if row.member is not None:
            if row.member in self._leaf_of:
                raise UsageError(f"member {row.member!r} has two leaves")
            self._nodes[row.node_id] = Node(row.key, member=row.member)
            self._leaf_of[row.member] = row.node_id
        else:
            link(self._nodes, row.node_id, Node(row.key, left=row.left, right=row.right))

    def _set_header(self, header: GroupHeader) -> None:
        self._epoch, self._root = header.epoch, header.root or 0
        self._next_id, self._lone_key = header.next_id, header.lone_key
        if self._root:
            self._nodes[self._root].parent = 0

    def header(self) -> GroupHeader:
        """The group's header row."""
        return GroupHeader(
            publisher=self._publisher,
            concept=self._concept,
            epoch=self._epoch,
            root=self._root or None,
            next_id=self._next_id,
            lone_key=self._lone_key,
        )

    def rows(self) -> Iterator[NodeRow]:
        """Every node as a row, by id (children before parents)."""
        for node_id in sorted(self._nodes):
            node = self._nodes[node_id]
            yield NodeRow(
                node_id=node_id,
                key=node.key,
                member=node.member,
                left=node.left,
                right=node.right,
            )

    @classmethod
    def from_rows(cls, header: GroupHeader, rows: Iterable[NodeRow]) -> GroupController:
        """Rebuild a controller from its header and rows, checking that they form one tree.

        Raises:
            UsageError: the rows are not one full binary tree under ``header.root``.
        """
        self = cls(publisher=header.publisher, concept=header.concept)
        try:
            for row in sorted(rows, key=lambda r: r.node_id):
                if row.node_id in self._nodes or row.node_id >= header.next_id:
                    raise UsageError(f"node {row.node_id} is duplicated or unallocated")
                if row.member is None and (
                    self._nodes[row.left].parent or self._nodes[row.right].parent
                ):
                    raise UsageError(f"node {row.node_id} shares a child")
                self._add(row)
        except KeyError as exc:
            raise UsageError(f"a node's child {exc} is missing") from None
        orphans = [i for i, n in self._nodes.items() if not n.parent]
        if orphans != ([header.root] if header.root else []):
            raise UsageError("the rows do not form one tree under the root")
        self._set_header(header)
        return self

    def to_bytes(self) -> bytes:
        """The whole state (secret: node keys included)."""
        h = self.header()
        out = Writer(_STATE_MAGIC).text(h.publisher).text(h.concept).u64(h.epoch)
        out.u64(h.root or 0).u64(h.next_id).blob(h.lone_key or b"").u64(len(self._nodes))
        for row in self.rows():
            out.u64(row.node_id).blob(row.key).text(row.member or "").u64(row.left).u64(row.right)
        return out.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> GroupController:
        """Invert :meth:`to_bytes` (raises :class:`ProtocolError` or :class:`UsageError`)."""
        inp = Reader(data, _STATE_MAGIC)
        try:
            publisher, concept, epoch = inp.text(), inp.text(), inp.u64()
            root, next_id, lone = inp.u64(), inp.u64(), inp.blob()
            header = GroupHeader(
                publisher=publisher,
                concept=concept,
                epoch=epoch,
                root=root or None,
                next_id=next_id,
                lone_key=lone or None,
            )
            rows = [
                NodeRow(
                    node_id=inp.u64(),
                    key=inp.blob(),
                    member=inp.text() or None,
                    left=inp.u64(),
                    right=inp.u64(),
                )
                for _ in range(inp.count(60))
            ]
            inp.done()
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed group state: {exc}") from None
        return cls.from_rows(header, rows)
