"""The shape of a group's key tree, and which nodes a batch of joins and leaves replaces.

Theory of operation. The tree is a full binary tree: every internal node has two children,
every leaf is one member. Node ids are never reused, and a node's children always have smaller
ids than the node (so rows sorted by id are bottom-up). A node's key never changes: to
"refresh" a key the controller *retires* the node and creates a new one with a new id.

A batch (the joins and leaves of one epoch) is planned in four steps:

1. **Affected nodes** — every leaver's leaf and all its ancestors (the leaver knew their keys).
   A batch without leaves (joins only, or a bare refresh) instead affects the path from the
   root to the shallowest leaf, where joiners will be placed.
2. **Pieces** — the maximal subtrees that contain no affected node: the children of affected
   nodes that are not affected. Their keys are unknown to every leaver, and every joiner, so
   they are kept as they are.
3. **Repair** — a piece whose height exceeds ``⌈log2 size⌉`` (it lost members since it was
   built) may be split into its two children, at the price of one more new node (two more
   wrapped keys), while the batch stays within its budget of ``2⌈log2 N⌉`` wrapped keys per
   member that joins or leaves (``N`` the larger group size, before or after). Splitting the
   most unbalanced piece first keeps the tree's height at ``⌈log2 n⌉ + 1`` at most in every
   sequence we have searched (exhaustively for small groups, and by property tests).
4. **Merge** — pieces and joiners' new leaves are joined under new internal nodes, always
   merging the two lowest subtrees first, which gives the least height possible for those
   pieces (Golumbic's minimax merge).

Every affected node is retired; every new node is created exactly once. A node that must be
wrapped is wrapped under each child, except a child whose members all joined in this batch
(joiners receive their path by enrolment instead). A single leave of a member at depth ``d``
therefore costs ``2(d - 1)`` wrapped keys plus any repair; a single join at the shallowest
depth ``d`` costs ``2d + 1``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Merge",
    "Node",
    "Shape",
    "build_balanced",
    "ceil_log2",
    "link",
    "plan_shape",
    "wrap_edges",
]


def ceil_log2(n: int) -> int:
    """``⌈log2 n⌉`` for ``n ≥ 1`` (0 for n ≤ 1)."""
    return 0 if n <= 1 else (n - 1).bit_length()


class Node:
    """A node of the controller's tree (mutable state private to :class:`GroupController`)."""

    __slots__ = ("height", "key", "left", "low", "member", "parent", "right", "size")

    def __init__(
        self, key: bytes, *, member: str | None = None, left: int = 0, right: int = 0
    ) -> None:
        self.key = key
        self.member = member
        self.left = left
        self.right = right
        self.parent = 0
        self.height = 0  # longest path down to a leaf
        self.size = 1  # members below
        self.low = 0  # shortest path down to a leaf


def link(nodes: dict[int, Node], node_id: int, node: Node) -> None:
    """Insert internal ``node`` above its two (present) children and compute its summary."""
    left, right = nodes[node.left], nodes[node.right]
    left.parent = right.parent = node_id
    node.height = max(left.height, right.height) + 1
    node.size = left.size + right.size
    node.low = min(left.low, right.low) + 1
    nodes[node_id] = node


def build_balanced(
    nodes: dict[int, Node], members: Sequence[str], keys: Callable[[], bytes], first_id: int
) -> tuple[int, int]:
    """Add a balanced tree over ``members`` (halving); return ``(root id, next free id)``."""
    next_id = first_id

    def build(lo: int, hi: int) -> int:
        nonlocal next_id
        if hi - lo == 1:
            node_id, next_id = next_id, next_id + 1
            nodes[node_id] = Node(keys(), member=members[lo])
            return node_id
        mid = (lo + hi + 1) // 2
        left = build(lo, mid)
        right = build(mid, hi)
        node_id, next_id = next_id, next_id + 1
        link(nodes, node_id, Node(keys(), left=left, right=right))
        return node_id

    root = build(0, len(members))
    return root, next_id


@dataclass(frozen=True, slots=True)
class Merge:
    """A new internal node over two existing or new nodes."""

    node_id: int
    left: int
    right: int
    joiners_only: bool  # every member below joined in this batch


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """The planned structure of the next epoch (no keys)."""

    retired: tuple[int, ...]
    joiners: tuple[tuple[int, str], ...]  # (new leaf id, member)
    merges: tuple[Merge, ...]  # bottom-up
    root: int | None
    next_id: int

    def wrap_edges(self) -> list[tuple[int, int]]:
        """``(node, child)`` pairs needing a wrapped key, bottom-up."""
        return wrap_edges(self.merges, [leaf for leaf, _ in self.joiners])


def wrap_edges(merges: Sequence[Merge], joiners: Sequence[int]) -> list[tuple[int, int]]:
    """The ``(node, child)`` pairs of ``merges`` whose child has a member that did not join."""
    fresh = set(joiners)
    fresh.update(m.node_id for m in merges if m.joiners_only)
    return [(m.node_id, c) for m in merges for c in (m.left, m.right) if c not in fresh]


@dataclass(slots=True)
class _Item:
    height: int
    node_id: int
    joiners_only: bool


def _affected(
    nodes: Mapping[int, Node],
    root: int,
    leaf_of: Mapping[str, int],
    leaves: Sequence[str],
    joins: Sequence[str],
) -> set[int]:
    affected: set[int] = set()
    for member in leaves:
        node_id = leaf_of[member]
        while node_id and node_id not in affected:
            affected.add(node_id)
            node_id = nodes[node_id].parent
    if not leaves:
        node_id = root
        while nodes[node_id].member is None:
            affected.add(node_id)
            if not joins:
                break  # a bare refresh replaces the root only
            node = nodes[node_id]
            node_id = node.left if nodes[node.left].low <= nodes[node.right].low else node.right
    return affected


def _pieces(nodes: Mapping[int, Node], root: int, affected: set[int]) -> list[int]:
    if root not in affected:
        return [root]
    pieces: list[int] = []
    stack = [root]
    while stack:
        node = nodes[stack.pop()]
        if node.member is not None:
            continue  # a leaver's leaf
        for child in (node.right, node.left):
            (stack if child in affected else pieces).append(child)
    return pieces


def _merge(
    nodes: Mapping[int, Node], pieces: Sequence[int], joiners: Sequence[int], next_id: int
) -> tuple[list[Merge], int | None, int]:
    items = [_Item(nodes[p].height, p, False) for p in pieces]
    items += [_Item(0, j, True) for j in joiners]
    heap = [(item.height, seq, item) for seq, item in enumerate(items)]
    seq = len(heap)
    heapq.heapify(heap)
    merges: list[Merge] = []
    while len(heap) > 1:
        a = heapq.heappop(heap)[2]
        b = heapq.heappop(heap)[2]
        merge = Merge(next_id, a.node_id, b.node_id, a.joiners_only and b.joiners_only)
        merges.append(merge)
        item = _Item(max(a.height, b.height) + 1, next_id, merge.joiners_only)
        heapq.heappush(heap, (item.height, seq, item))
        seq += 1
        next_id += 1
    return merges, (heap[0][2].node_id if heap else None), next_id


def _excess(node: Node) -> int:
    return node.height - ceil_log2(node.size)


def plan_shape(
    nodes: Mapping[int, Node],
    *,
    root: int | None,
    leaf_of: Mapping[str, int],
    next_id: int,
    joins: Sequence[str],
    leaves: Sequence[str],
) -> Shape:
    """Plan the next epoch's tree for a validated batch (see the module docstring)."""
    affected = _affected(nodes, root, leaf_of, leaves, joins) if root is not None else set()
    pieces = _pieces(nodes, root, affected) if root is not None else []
    joiners = list(range(next_id, next_id + len(joins)))
    first_new = next_id + len(joins)
    size = len(leaf_of)
    budget = (
        2 * ceil_log2(max(size, size - len(leaves) + len(joins))) * max(1, len(joins) + len(leaves))
    )
    broken: list[int] = []
    merges, new_root, end = _merge(nodes, pieces, joiners, first_new)
    while True:
        splittable = [p for p in pieces if nodes[p].member is None and _excess(nodes[p]) > 0]
        if not splittable:
            break
        worst = max(splittable, key=lambda p: (_excess(nodes[p]), nodes[p].height, -p))
        trial = [p for p in pieces if p != worst] + [nodes[worst].left, nodes[worst].right]
        attempt = _merge(nodes, trial, joiners, first_new)
        if len(wrap_edges(attempt[0], joiners)) > budget:
            break
        pieces, broken = trial, [*broken, worst]
        merges, new_root, end = attempt
    return Shape(
        retired=tuple(sorted(affected)) + tuple(broken),
        joiners=tuple(zip(joiners, joins, strict=True)),
        merges=tuple(merges),
        root=new_root,
        next_id=end,
    )
