"""Leaf order: concepts in a depth-first order of the concept DAG, then document position.

Theory of operation
-------------------
A subscriber granted concept C receives C's *maximum conceptual block*: C and every concept it
contains (paper §III.A). The Merkle leaves are sorted by concept, then by position, with the
concepts in :func:`concept_order`, so that every block is as few runs of leaves as possible
(one run, one range proof):

1. A depth-first order of the containment DAG (each concept at its first visit) makes every
   block one contiguous run when the DAG is a tree.
2. In a DAG a concept with several parents (``ResourceSpecification`` under both
   ``ProductSpecification`` and ``ResourceDetails``) may split the blocks containing it. So four
   depth-first orders (pre- and post-order, children by name and reversed) are each improved
   greedily — move one concept elsewhere when that lowers the total number of runs over all
   blocks, for a few passes — and the order with the fewest runs wins (ties: the first, so the
   result is deterministic). The shipped ontology gets one run per block. Deciding whether such
   an order exists is the consecutive-ones problem (PQ-trees) and minimising runs in general is
   NP-hard; this bounded heuristic runs for ontologies of up to 32 concepts, larger ones keep
   the plain depth-first preorder (names ascending).

Grants that are unions of blocks give at most one run per block; adjacent runs merge.

Concepts the order does not list (an encoder called without one, or a mapping concept missing
from the ontology) sort after all listed ones, by name. The order is a parameter of the encoder
and is not signed: the signed range table says where each concept's leaves are, whatever order
produced them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from typing import Protocol

__all__ = ["ConceptGraph", "concept_order", "leaf_sort_key"]

_MAX_SEARCH = 32
_MAX_PASSES = 4


class ConceptGraph(Protocol):
    """The part of :class:`xdn.ontology.Ontology` the order needs."""

    def roots(self) -> AbstractSet[str]: ...

    def children(self, concept: str) -> AbstractSet[str]: ...

    def block(self, concept: str) -> AbstractSet[str]: ...


def _depth_first(graph: ConceptGraph, *, post: bool, reverse: bool) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, bool]] = [(r, False) for r in sorted(graph.roots(), reverse=not reverse)]
    while stack:
        concept, done = stack.pop()
        if done:
            order.append(concept)
            continue
        if concept in seen:
            continue
        seen.add(concept)
        if post:
            stack.append((concept, True))
        else:
            order.append(concept)
        children = sorted(graph.children(concept), reverse=not reverse)
        stack.extend((c, False) for c in children if c not in seen)
    return order


def _runs(order: Sequence[str], blocks: Sequence[AbstractSet[str]]) -> int:
    rank = {concept: index for index, concept in enumerate(order)}
    return sum(
        sum(1 for c in block if rank[c] == 0 or order[rank[c] - 1] not in block) for block in blocks
    )


def _improve(order: list[str], blocks: Sequence[AbstractSet[str]]) -> tuple[int, list[str]]:
    best = _runs(order, blocks)
    for _ in range(_MAX_PASSES):
        improved = False
        for concept in list(order):
            rest = [c for c in order if c != concept]
            for index in range(len(order)):
                candidate = [*rest[:index], concept, *rest[index:]]
                cost = _runs(candidate, blocks)
                if cost < best:
                    best, order, improved = cost, candidate, True
        if not improved:
            break
    return best, order


def concept_order(graph: ConceptGraph) -> tuple[str, ...]:
    """Concepts in leaf order: few runs per maximum conceptual block (see the module docstring)."""
    first = _depth_first(graph, post=False, reverse=False)
    if len(first) > _MAX_SEARCH:
        return tuple(first)
    blocks = [graph.block(c) for c in first if len(graph.block(c)) > 1]
    starts = [first] + [
        _depth_first(graph, post=post, reverse=reverse)
        for post, reverse in ((False, True), (True, False), (True, True))
    ]
    results = [_improve(start, blocks) for start in starts]
    best = min(cost for cost, _ in results)
    return tuple(next(order for cost, order in results if cost == best))


def leaf_sort_key(order: Sequence[str]) -> Callable[[str, int], tuple[int, str, int]]:
    """A sort key ``(concept, position) → …`` putting leaves in the documented leaf order.

    Raises:
        TypeError: ``order`` is a single string.
        ValueError: a concept is listed twice.
    """
    if isinstance(order, str):
        raise TypeError("concept order must be a sequence of concepts, not a single str")
    rank = {concept: index for index, concept in enumerate(order)}
    if len(rank) != len(order):
        raise ValueError("a concept is listed twice in the concept order")
    unlisted = len(rank)

    def key(concept: str, position: int) -> tuple[int, str, int]:
        listed = rank.get(concept)
        return (unlisted, concept, position) if listed is None else (listed, "", position)

    return key
