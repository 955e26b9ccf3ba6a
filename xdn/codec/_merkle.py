"""Merkle trees with RFC 9162 (Certificate Transparency v2) hashing and inclusion proofs.

Theory of operation
-------------------
RFC 9162 §2.1.1 defines the Merkle Tree Hash of ``n`` entries recursively: the empty tree
hashes to ``SHA-256("")``, one entry ``d`` to ``SHA-256(0x00 ‖ d)`` (a *leaf hash*), and
``n > 1`` entries split at ``k``, the largest power of two smaller than ``n``, into
``SHA-256(0x01 ‖ MTH(D[0:k]) ‖ MTH(D[k:n]))`` (a *node hash*). The distinct prefixes keep a
leaf from ever passing for an interior node.

That left-heavy split is the same tree as building level by level from the leaves, pairing
neighbours and carrying an unpaired last node up unchanged; :class:`MerkleTree` builds it that
way (linear time, every level kept) so that an inclusion proof (§2.1.3.1, the sibling hashes
from the leaf up to the root) is a walk up the stored levels. :func:`verify_inclusion` is the
verification algorithm of §2.1.3.2 verbatim. The tests check both against a naive recursive
transcription of the RFC's definitions and against the published RFC 6962 test vectors.
Range proofs over runs of leaves (what deliveries carry) are in :mod:`xdn.codec._ranges`.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from xdn.codec._encoding import check_u64

__all__ = [
    "HASH_BYTES",
    "InclusionProof",
    "MerkleTree",
    "empty_root",
    "leaf_hash",
    "node_hash",
    "root_from_inclusion",
    "verify_inclusion",
]

HASH_BYTES = 32
_MAX_PATH = 64  # a tree of fewer than 2**64 leaves has at most 64 levels above its leaves


def empty_root() -> bytes:
    """Merkle Tree Hash of the empty list: ``SHA-256("")``."""
    return hashlib.sha256(b"").digest()


def leaf_hash(entry: bytes) -> bytes:
    """RFC 9162 leaf hash ``SHA-256(0x00 ‖ entry)``."""
    return hashlib.sha256(b"\x00" + entry).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 9162 interior node hash ``SHA-256(0x01 ‖ left ‖ right)``."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _check_hash(name: str, value: object) -> bytes:
    if not isinstance(value, bytes):
        raise TypeError(f"{name} must be bytes, not {type(value).__name__}")
    if len(value) != HASH_BYTES:
        raise ValueError(f"{name} must be {HASH_BYTES} bytes, got {len(value)}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class InclusionProof:
    """An RFC 9162 inclusion proof: leaf ``leaf_index`` of a tree of ``tree_size`` leaves.

    Attributes:
        leaf_index: zero-based index of the leaf.
        tree_size: number of leaves in the tree.
        path: sibling hashes from the leaf level up to (not including) the root.
    """

    leaf_index: int
    tree_size: int
    path: tuple[bytes, ...]

    def __post_init__(self) -> None:
        check_u64("leaf_index", self.leaf_index)
        check_u64("tree_size", self.tree_size)
        if self.leaf_index >= self.tree_size:
            raise ValueError("leaf_index must be smaller than tree_size")
        if not isinstance(self.path, tuple):
            raise TypeError("path must be a tuple of hashes")
        if len(self.path) > _MAX_PATH:
            raise ValueError(f"path longer than {_MAX_PATH} hashes")
        for item in self.path:
            _check_hash("path hash", item)


class MerkleTree:
    """An immutable Merkle tree over given leaf hashes (see the module docstring).

    Args:
        leaf_hashes: the leaves' :func:`leaf_hash` values, in leaf order.
    """

    __slots__ = ("_levels",)

    def __init__(self, leaf_hashes: Sequence[bytes]) -> None:
        level = [_check_hash("leaf hash", h) for h in leaf_hashes]
        levels = [level]
        while len(level) > 1:
            upper = [node_hash(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
            if len(level) % 2:
                upper.append(level[-1])
            levels.append(upper)
            level = upper
        self._levels: tuple[tuple[bytes, ...], ...] = tuple(tuple(lv) for lv in levels)

    @classmethod
    def from_entries(cls, entries: Sequence[bytes]) -> MerkleTree:
        """Build the tree over raw entries, hashing each with :func:`leaf_hash`."""
        return cls([leaf_hash(entry) for entry in entries])

    @property
    def size(self) -> int:
        """Number of leaves."""
        return len(self._levels[0])

    @property
    def root(self) -> bytes:
        """The Merkle Tree Hash (``SHA-256("")`` for an empty tree)."""
        return self._levels[-1][0] if self.size else empty_root()

    def subtree_hash(self, start: int, end: int) -> bytes:
        """``MTH(D[start:end])`` for a subtree of the RFC 9162 decomposition of this tree.

        Such a subtree starts at a multiple of the largest power of two not smaller than its
        size (or is the ragged right edge), so it is one stored node: level ``L`` with
        ``2**L >= end - start``, index ``start >> L``.

        Raises:
            ValueError: ``[start, end)`` is not a subtree of this tree.
        """
        size = end - start
        if not 0 <= start < end <= self.size:
            raise ValueError(f"[{start}, {end}) is not a run of leaves of a tree of {self.size}")
        level = (size - 1).bit_length()
        if start % (1 << level) or (size != 1 << level and end != self.size):
            raise ValueError(f"[{start}, {end}) is not a subtree of a tree of {self.size}")
        return self._levels[level][start >> level]

    def inclusion_proof(self, leaf_index: int) -> InclusionProof:
        """The RFC 9162 §2.1.3.1 inclusion proof of leaf ``leaf_index``.

        Raises:
            IndexError: there is no such leaf.
        """
        check_u64("leaf_index", leaf_index)
        if leaf_index >= self.size:
            raise IndexError(f"leaf {leaf_index} not in a tree of {self.size} leaves")
        path: list[bytes] = []
        index = leaf_index
        for level in self._levels[:-1]:
            sibling = index ^ 1
            if sibling < len(level):
                path.append(level[sibling])
            index >>= 1
        return InclusionProof(leaf_index=leaf_index, tree_size=self.size, path=tuple(path))


def verify_inclusion(leaf: bytes, proof: InclusionProof, *, root: bytes, tree_size: int) -> bool:
    """Check that ``leaf`` (a leaf hash) is in the tree with ``root`` (RFC 9162 §2.1.3.2).

    ``root`` and ``tree_size`` are the trusted, signed values. The size is checked against the
    proof's because a proof can also verify for another size whose tree has the same shape
    along the path.

    Args:
        leaf: the leaf hash (``leaf_hash(entry)``).
        proof: the inclusion proof to check.
        root: the trusted root hash.
        tree_size: the trusted number of leaves under ``root``.

    Returns:
        Whether the proof verifies. Never raises for a well-typed but wrong proof.
    """
    _check_hash("root", root)
    if proof.tree_size != check_u64("tree_size", tree_size):
        return False
    result = root_from_inclusion(leaf, proof)
    return result is not None and hmac.compare_digest(result, root)


def root_from_inclusion(leaf: bytes, proof: InclusionProof) -> bytes | None:
    """The root that ``proof`` leads to from ``leaf`` (a leaf hash), or ``None`` when the path
    does not fit a tree of ``proof.tree_size`` leaves (RFC 9162 §2.1.3.2, steps 1 to 6).

    For a verifier that holds a signature over the root rather than the root itself (a batch
    signature): it computes the root this way, then checks the signature over it.
    """
    _check_hash("leaf", leaf)
    fn, sn = proof.leaf_index, proof.tree_size - 1
    result = leaf
    for sibling in proof.path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            result = node_hash(sibling, result)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            result = node_hash(result, sibling)
        fn >>= 1
        sn >>= 1
    return result if sn == 0 else None
