"""Encrypted fragments, their Merkle leaves, the encoded document and deliveries.

The Merkle leaf of a fragment is :func:`fragment_leaf`: its framed header (document, publisher,
concept, position, parent, epoch, key name) followed by ``SHA-256(cipher_value)``. An
:class:`EncodedDocument` holds every fragment of a document in leaf order (sorted by concept,
then position) and one range proof per concept; a :class:`Delivery` is what one subscriber
receives: some fragments and one range proof per run of leaves they fill. The encoders are in
:mod:`xdn.codec._encode` and :mod:`xdn.codec._stream_encode`.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import struct
import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from xdn import crypto
from xdn.binary import U64_MAX
from xdn.codec._encoding import check_u64, frame, opt_u64, u64
from xdn.codec._keys import check_name
from xdn.codec._manifest import Manifest, SignedManifest
from xdn.codec._plaintext import fragment_id
from xdn.codec._ranges import RangeProof

__all__ = [
    "Delivery",
    "EncodedDocument",
    "Fragment",
    "fragment_leaf",
    "fragment_leaf_hash",
    "reference_leaf",
]

_LEAF_LABEL = b"xdn/fragment-leaf/v1"
_U64_FIELD = struct.Struct(">IQ").pack  # a framed u64: length 8, then the value
_NO_PARENT = frame(b"")
_HASH_FIELD = struct.pack(">I", 32)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fragment:
    """One encrypted fragment and its clear header.

    Attributes:
        fragment_id: ``f"{document_id}#{position}"``.
        document_id: the document the fragment belongs to.
        publisher: the publisher of the document.
        concept: the concept the fragment is labelled with (routing uses it).
        position: index of the fragment in document order among mapped nodes.
        parent: position of the nearest mapped ancestor, or ``None``.
        epoch: the epoch of the concept group key.
        key_name: the XML Encryption ``KeyName`` of the per-document key.
        cipher_value: ``IV ‖ ciphertext ‖ tag`` (AES-256-GCM).
    """

    fragment_id: str
    document_id: str
    publisher: str
    concept: str
    position: int
    parent: int | None
    epoch: int
    key_name: str
    cipher_value: bytes

    def __post_init__(self) -> None:
        # (a fragment is made per mapped node on both sides: the names, which repeat for a
        # concept's fragments, are checked once; plain ints in range skip the full checks)
        names = (self.document_id, self.publisher, self.concept, self.key_name)
        try:
            _checked_names(*names)
        except TypeError:  # (unhashable: not a str; the uncached checks say which)
            _check_names(*names)
        position, parent, epoch = self.position, self.parent, self.epoch
        if not (type(position) is int and 0 <= position <= U64_MAX):
            check_u64("position", position)
        if not (type(epoch) is int and 0 <= epoch <= U64_MAX):
            check_u64("epoch", epoch)
        in_order = parent is None or (type(parent) is int and 0 <= parent < position)
        if not in_order and check_u64("parent", parent) >= position:
            raise ValueError("a fragment's parent must come before it in document order")
        if self.fragment_id != fragment_id(self.document_id, position):
            raise ValueError("fragment_id must be DOCUMENT#POSITION")
        if not isinstance(self.cipher_value, bytes):
            raise TypeError("cipher_value must be bytes")


def _check_names(document_id: str, publisher: str, concept: str, key_name: str) -> None:
    """The name checks of a fragment."""
    check_name("document_id", document_id)
    check_name("publisher", publisher)
    check_name("concept", concept)
    check_name("key_name", key_name)


_checked_names = functools.lru_cache(maxsize=256)(_check_names)  # (errors are not cached)


def fragment_leaf(fragment: Fragment) -> bytes:
    """The Merkle leaf entry of ``fragment``: framed header ‖ SHA-256 of its ciphertext.

    That is ``frame(b"xdn/fragment-leaf/v1", document_id, publisher, concept, u64(position),
    opt_u64(parent), u64(epoch), key_name, SHA-256(cipher_value))``, built here from a cached
    prefix (the first four fields repeat for every fragment of a concept).
    """
    f = fragment
    parent = _NO_PARENT if f.parent is None else _U64_FIELD(8, f.parent)
    return b"".join(
        (
            _leaf_prefix(f.document_id, f.publisher, f.concept),
            _U64_FIELD(8, f.position),
            parent,
            _U64_FIELD(8, f.epoch),
            frame(f.key_name),
            _HASH_FIELD,
            crypto.sha256(f.cipher_value),
        )
    )


@functools.lru_cache(maxsize=256)
def _leaf_prefix(document_id: str, publisher: str, concept: str) -> bytes:
    return frame(_LEAF_LABEL, document_id, publisher, concept)


@functools.lru_cache(maxsize=256)
def _leaf_suffix(key_name: str) -> bytes:
    return frame(key_name) + _HASH_FIELD


def fragment_leaf_hash(fragment: Fragment, cipher_digest: bytes | None = None) -> bytes:
    """``leaf_hash(fragment_leaf(fragment))``, hashed incrementally (no entry is built).

    ``cipher_digest`` is the SHA-256 of the ciphertext when it is kept elsewhere (too large to
    hold; ``cipher_value`` is then not read).
    """
    f = fragment
    digest = hashlib.sha256(b"\x00")
    digest.update(_leaf_prefix(f.document_id, f.publisher, f.concept))
    digest.update(_U64_FIELD(8, f.position))
    digest.update(_NO_PARENT if f.parent is None else _U64_FIELD(8, f.parent))
    digest.update(_U64_FIELD(8, f.epoch))
    digest.update(_leaf_suffix(f.key_name))
    if cipher_digest is None:
        cipher_digest = hashlib.sha256(f.cipher_value).digest()
    digest.update(cipher_digest)
    return digest.digest()


def reference_leaf(fragment: Fragment) -> bytes:
    """:func:`fragment_leaf` spelt out with :func:`~xdn.codec._encoding.frame` (for tests)."""
    return frame(
        _LEAF_LABEL,
        fragment.document_id,
        fragment.publisher,
        fragment.concept,
        u64(fragment.position),
        opt_u64(fragment.parent),
        u64(fragment.epoch),
        fragment.key_name,
        crypto.sha256(fragment.cipher_value),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodedDocument:
    """A whole encoded document: signed manifest, every fragment, each concept's range proof.

    Attributes:
        signed_manifest: the signed manifest (root and range table).
        fragments: every fragment, in leaf order.
        range_proofs: concept → the range proof of its run of leaves (read-only mapping).
    """

    signed_manifest: SignedManifest
    fragments: tuple[Fragment, ...]
    range_proofs: Mapping[str, RangeProof]
    _by_fragment: Mapping[str, RangeProof] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.signed_manifest, SignedManifest):
            raise TypeError("signed_manifest must be a SignedManifest")
        m = self.signed_manifest.manifest
        if not isinstance(self.fragments, tuple) or not all(
            isinstance(f, Fragment) for f in self.fragments
        ):
            raise TypeError("fragments must be a tuple of Fragment")
        if sorted(f.position for f in self.fragments) != list(range(m.leaf_count)):
            raise ValueError("fragments must be positions 0..leaf_count-1")
        proofs = dict(self.range_proofs)
        if set(proofs) != {row.concept for row in m.ranges}:
            raise ValueError("there must be exactly one range proof per concept")
        for row in m.ranges:
            run = self.fragments[row.first : row.end]
            if any((f.concept, f.epoch) != (row.concept, row.epoch) for f in run):
                raise ValueError(f"fragments {row.first}..{row.end - 1} must be {row.concept}'s")
            if any(a.position >= b.position for a, b in itertools.pairwise(run)):
                raise ValueError("a concept's fragments must be in position order")
            p = proofs[row.concept]
            if not isinstance(p, RangeProof) or (p.start, p.end, p.tree_size) != (
                row.first,
                row.end,
                m.leaf_count,
            ):
                raise ValueError(f"the range proof of {row.concept} must prove its run")
        for f in self.fragments:
            if (f.document_id, f.publisher) != (m.document_id, m.publisher):
                raise ValueError(f"fragment {f.fragment_id} is not of the manifest's document")
        by_fragment = {f.fragment_id: proofs[f.concept] for f in self.fragments}
        object.__setattr__(self, "range_proofs", types.MappingProxyType(proofs))
        object.__setattr__(self, "_by_fragment", types.MappingProxyType(by_fragment))

    @property
    def manifest(self) -> Manifest:
        """The (signed) manifest."""
        return self.signed_manifest.manifest

    @property
    def proofs(self) -> Mapping[str, RangeProof]:
        """fragment id → the range proof covering it (its concept's run)."""
        return self._by_fragment


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What one subscriber receives of a document: the signed manifest, fragments, run proofs.

    ``fragments`` may come in any order; ``proofs`` holds one range proof per run of leaves the
    fragments fill. Nothing here is trusted until :func:`xdn.codec.decode` has verified it.
    """

    signed_manifest: SignedManifest
    fragments: tuple[Fragment, ...]
    proofs: tuple[RangeProof, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.signed_manifest, SignedManifest):
            raise TypeError("signed_manifest must be a SignedManifest")
        if not isinstance(self.fragments, tuple) or not all(
            isinstance(f, Fragment) for f in self.fragments
        ):
            raise TypeError("fragments must be a tuple of Fragment")
        if not isinstance(self.proofs, tuple) or not all(
            isinstance(p, RangeProof) for p in self.proofs
        ):
            raise TypeError("proofs must be a tuple of RangeProof")
