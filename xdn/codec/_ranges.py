"""Range proofs: one RFC 9162-style proof for a contiguous run of Merkle leaves.

Theory of operation
-------------------
RFC 9162 proves one leaf at a time. A subscriber receives runs of consecutive leaves (leaves are
sorted by concept, see :mod:`xdn.codec._order`), so each run ``[start, end)`` is proved at once.
Walk the RFC's recursive decomposition ``MTH(D[lo:hi]) = SHA-256(0x01 ‖ MTH(D[lo:lo+k]) ‖
MTH(D[lo+k:hi]))`` (``k`` the largest power of two below ``hi - lo``) from the root:

* a subtree disjoint from the run contributes its hash to the proof;
* a subtree inside the run is recomputed by the verifier from the delivered leaves;
* a subtree straddling a boundary of the run is split again.

Only the two boundary paths straddle, so a proof holds at most ``2·⌈log2 n⌉`` hashes, listed in
left-to-right order (:func:`range_nodes` says which subtrees). The walk's shape depends only on
``(start, end, tree_size)``: the verifier repeats it, must consume exactly every hash, and so a
proof cannot be reinterpreted for another run or another tree size. For a single leaf the proof
holds the same hashes as the RFC inclusion proof (in another order).

Adjacent runs merge without the tree (:func:`merge_range_proofs`): a subtree the merged run needs
lies left of the first run or right of the last, and its parent reaches into that run, so it is
in the first run's or the last run's proof. Whoever holds per-concept proofs (the publisher's
output, a disseminator) can thus send one proof per contiguous run.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdn.codec._encoding import check_u64
from xdn.codec._merkle import HASH_BYTES, MerkleTree, node_hash

__all__ = ["RangeProof", "merge_range_proofs", "range_nodes", "range_proof", "verify_range"]

_MAX_PATH = 128  # two boundary paths of at most 64 levels each


def _split(size: int) -> int:
    """The largest power of two strictly smaller than ``size`` (``size > 1``)."""
    return 1 << ((size - 1).bit_length() - 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class RangeProof:
    """Proof that leaves ``[start, end)`` of a tree of ``tree_size`` leaves hash to its root.

    Attributes:
        start: index of the first leaf of the run.
        end: index one past the last leaf of the run.
        tree_size: number of leaves in the tree.
        path: hashes of the subtrees outside the run, left to right (see :func:`range_nodes`).
    """

    start: int
    end: int
    tree_size: int
    path: tuple[bytes, ...]

    def __post_init__(self) -> None:
        check_u64("start", self.start)
        check_u64("end", self.end)
        check_u64("tree_size", self.tree_size)
        if not self.start < self.end <= self.tree_size:
            raise ValueError("a range proof needs 0 <= start < end <= tree_size")
        if not isinstance(self.path, tuple):
            raise TypeError("path must be a tuple of hashes")
        if len(self.path) > _MAX_PATH:
            raise ValueError(f"path longer than {_MAX_PATH} hashes")
        for item in self.path:
            if not isinstance(item, bytes) or len(item) != HASH_BYTES:
                raise ValueError(f"path hashes must be {HASH_BYTES} bytes")

    @property
    def count(self) -> int:
        """Number of leaves in the run."""
        return self.end - self.start


def range_nodes(start: int, end: int, tree_size: int) -> list[tuple[int, int]]:
    """The subtrees ``[lo, hi)`` whose hashes prove run ``[start, end)``, left to right."""
    if not 0 <= start < end <= tree_size:
        raise ValueError("a run needs 0 <= start < end <= tree_size")
    nodes: list[tuple[int, int]] = []
    stack = [(0, tree_size)]
    while stack:
        lo, hi = stack.pop()
        if hi <= start or end <= lo:
            nodes.append((lo, hi))
        elif not (start <= lo and hi <= end):
            k = _split(hi - lo)
            stack.append((lo + k, hi))
            stack.append((lo, lo + k))
    return nodes


def range_proof(tree: MerkleTree, start: int, end: int) -> RangeProof:
    """The proof of leaves ``[start, end)`` of ``tree``."""
    path = tuple(tree.subtree_hash(lo, hi) for lo, hi in range_nodes(start, end, tree.size))
    return RangeProof(start=start, end=end, tree_size=tree.size, path=path)


def _mth(hashes: Sequence[bytes]) -> bytes:
    """RFC 9162 root over leaf hashes that form a whole subtree (level by level, carrying)."""
    sha = hashlib.sha256
    level = list(hashes)
    while len(level) > 1:
        upper = [
            sha(b"\x01" + level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)
        ]
        if len(level) % 2:
            upper.append(level[-1])
        level = upper
    return level[0]


class _Exhausted(Exception):
    """The proof has fewer hashes than the walk needs."""


def _rebuild(
    lo: int, hi: int, proof: RangeProof, leaves: Sequence[bytes], path: Iterator[bytes]
) -> bytes:
    if hi <= proof.start or proof.end <= lo:
        item = next(path, None)
        if item is None:
            raise _Exhausted
        return item
    if proof.start <= lo and hi <= proof.end:
        return _mth(leaves[lo - proof.start : hi - proof.start])
    k = _split(hi - lo)
    left = _rebuild(lo, lo + k, proof, leaves, path)
    return node_hash(left, _rebuild(lo + k, hi, proof, leaves, path))


def verify_range(
    leaf_hashes: Sequence[bytes], proof: RangeProof, *, root: bytes, tree_size: int
) -> bool:
    """Check that ``leaf_hashes`` are exactly leaves ``[proof.start, proof.end)`` under ``root``.

    ``root`` and ``tree_size`` are the trusted, signed values.

    Returns:
        Whether the proof verifies. Never raises for a well-typed but wrong proof.
    """
    if not isinstance(root, bytes) or len(root) != HASH_BYTES:
        raise ValueError(f"root must be {HASH_BYTES} bytes")
    if proof.tree_size != check_u64("tree_size", tree_size) or len(leaf_hashes) != proof.count:
        return False
    path = iter(proof.path)
    try:
        computed = _rebuild(0, tree_size, proof, leaf_hashes, path)
    except _Exhausted:
        return False
    return next(path, None) is None and hmac.compare_digest(computed, root)


def merge_range_proofs(proofs: Sequence[RangeProof]) -> RangeProof:
    """One proof for the union of adjacent runs (``proofs`` in leaf order, end to start).

    Raises:
        ValueError: the runs are not adjacent, of different trees, or a proof is malformed.
    """
    if not proofs:
        raise ValueError("nothing to merge")
    first, last = proofs[0], proofs[-1]
    known: dict[tuple[int, int], bytes] = {}
    for before, after in itertools.pairwise(proofs):
        if before.end != after.start or before.tree_size != after.tree_size:
            raise ValueError("only adjacent runs of one tree merge")
    for proof in (first, last):
        nodes = range_nodes(proof.start, proof.end, proof.tree_size)
        if len(nodes) != len(proof.path):
            raise ValueError("malformed range proof")
        known.update(zip(nodes, proof.path, strict=True))
    try:
        path = tuple(known[n] for n in range_nodes(first.start, last.end, first.tree_size))
    except KeyError:
        raise ValueError("malformed range proof") from None
    return RangeProof(start=first.start, end=last.end, tree_size=first.tree_size, path=path)
