"""Batch signatures: one ECDSA signature over the Merkle root of many graphs.

A site that routes one document to many destinations signs one envelope per destination. Instead
of one ECDSA signature each, it may sign a batch: the RFC 9162 Merkle tree whose leaves are the
graphs' signing inputs (their RDFC-1.0 canonical N-Quads), at most :data:`MAX_BATCH` of them, and
give each graph's signature graph the same signature value plus its leaf index, the batch size
and its inclusion path. A verifier rebuilds the root from the graph and the path and checks the
one signature over it; a cache of checked (key, size, root, signature) entries makes that once per
batch (:class:`BatchCache`).

The signed bytes are :data:`_DOMAIN`, the batch size (8 bytes, big-endian) and the root. No
canonical N-Quads document can equal them (N-Quads lines start with ``<`` or ``_``), so a batch
signature can never pass for a plain one or the other way round. The size is signed because an
RFC 9162 root does not bind it: the same path leads to the same root in trees of several sizes
(leaf 0 of 5 or of 6, say), and a signature graph's ``xdn:batchSize`` could otherwise be
changed without breaking the signature.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from xdn import crypto
from xdn.codec import InclusionProof, MerkleTree, leaf_hash, root_from_inclusion
from xdn.errors import SignatureError

__all__ = [
    "MAX_BATCH",
    "BatchCache",
    "BatchProof",
    "SignerKey",
    "batch_root",
    "sign_batch",
    "signed_root",
]

#: The largest batch a signer makes (issue: up to 1,024 envelopes per signature).
MAX_BATCH = 1024
_DOMAIN = b"xdn provenance batch v1\x00"


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchProof:
    """Where one graph sits in a signed batch."""

    index: int
    size: int
    path: tuple[bytes, ...]

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.size <= MAX_BATCH:
            raise ValueError(f"batch leaf {self.index} of {self.size} is out of range")


@dataclass(frozen=True, slots=True)
class SignerKey:
    """A public key with its identity (its SubjectPublicKeyInfo PEM), written once: what
    :class:`BatchCache` files its entries under. Serialising the key for every signature
    checked cost more than the cache lookup it keys (~0.05 ms each, several per chain)."""

    key: crypto.PublicKey
    id: bytes

    @classmethod
    def of(cls, key: crypto.PublicKey) -> SignerKey:
        return cls(key, crypto.public_key_to_pem(key))


def signed_root(root: bytes, size: int) -> bytes:
    """The bytes a batch signature covers: domain, batch size, root."""
    return _DOMAIN + size.to_bytes(8, "big") + root


def sign_batch(
    key: crypto.PrivateKey, inputs: Sequence[bytes]
) -> tuple[bytes, list[BatchProof]]:
    """Sign the Merkle root of ``inputs`` (each a graph's signing input) once.

    Returns:
        The DER signature and, per input in order, its :class:`BatchProof`.
    """
    if not 1 <= len(inputs) <= MAX_BATCH:
        raise ValueError(f"a batch holds 1 to {MAX_BATCH} graphs, not {len(inputs)}")
    tree = MerkleTree.from_entries(inputs)
    signature = crypto.sign(key, signed_root(tree.root, len(inputs)))
    proofs = []
    for index in range(len(inputs)):
        proof = tree.inclusion_proof(index)
        proofs.append(BatchProof(index=index, size=len(inputs), path=proof.path))
    return signature, proofs


def batch_root(signing_input: bytes, proof: BatchProof) -> bytes:
    """The batch root that ``proof`` leads to from a graph's signing input.

    Raises:
        SignatureError: the path does not fit a batch of ``proof.size`` graphs.
    """
    try:
        inclusion = InclusionProof(leaf_index=proof.index, tree_size=proof.size, path=proof.path)
    except (TypeError, ValueError) as exc:
        raise SignatureError(f"malformed batch inclusion path: {exc}") from None
    root = root_from_inclusion(leaf_hash(signing_input), inclusion)
    if root is None:
        raise SignatureError(f"the inclusion path does not fit a batch of {proof.size}")
    return root


class BatchCache:
    """Remembers signatures already checked, so that a verifier checks each one once: a batch
    signature once per batch, and a plain signature once however many chains carry it (a site
    meets the chain it routed again in the receipts that come back).

    Keyed by (public key, batch size, root, signature), a plain signature by (public key, 0,
    SHA-256 of the signed bytes, signature): a hit means this exact signature over these exact
    bytes verified under this exact key before. Bounded; the oldest entries go first.
    Thread-safe: a site checks receipts in worker threads while its event loop routes.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._seen: dict[tuple[bytes, int, bytes, bytes], None] = {}
        self._lock = threading.Lock()  # (two threads evicting the same oldest entry)

    def verify(
        self, key: crypto.PublicKey | SignerKey, root: bytes, signature: bytes, *, size: int
    ) -> None:
        """Check ``signature`` over ``root`` of a batch of ``size`` under ``key`` (or recall
        that it held).

        Raises:
            SignatureError: it does not verify.
        """
        known = _known(key)
        self._check((known.id, size, root, signature), known.key, signed_root(root, size))

    def verify_plain(
        self, key: crypto.PublicKey | SignerKey, data: bytes, signature: bytes
    ) -> None:
        """Check a plain ``signature`` over ``data`` under ``key`` (or recall that it held).

        Raises:
            SignatureError: it does not verify.
        """
        known = _known(key)
        self._check((known.id, 0, crypto.sha256(data), signature), known.key, data)

    def remember(
        self, key: crypto.PublicKey | SignerKey, signed: bytes, signature: bytes, *, size: int = 0
    ) -> None:
        """Record a signature this party made itself (``signed``: the batch root, or for a
        plain signature the signed bytes) as checked."""
        digest = signed if size else crypto.sha256(signed)
        self._add((_known(key).id, size, digest, signature))

    def _check(
        self, entry: tuple[bytes, int, bytes, bytes], key: crypto.PublicKey, data: bytes
    ) -> None:
        if entry in self._seen:
            return
        crypto.verify(key, entry[3], data)
        self._add(entry)

    def _add(self, entry: tuple[bytes, int, bytes, bytes]) -> None:
        with self._lock:
            if len(self._seen) >= self._capacity:
                del self._seen[next(iter(self._seen))]
            self._seen[entry] = None


def _known(key: crypto.PublicKey | SignerKey) -> SignerKey:
    return key if isinstance(key, SignerKey) else SignerKey.of(key)
