"""The publisher-signed manifest that binds a document's fragments together.

XML Encryption's AES-GCM carries no associated data, so nothing in a ciphertext says which
document, publisher, concept or position it belongs to. The manifest does: it commits, under the
publisher's ECDSA signature (SHA-256 on P-256, SHA-384 on P-384), to

* the root of a Merkle tree whose leaves are the fragments' headers and ciphertext hashes (see
  :func:`xdn.codec._fragments.fragment_leaf`), in *leaf order*: sorted by concept, then by
  position (see :mod:`xdn.codec._order`);
* the *range table*: for every concept present, its key epoch and the run of leaves
  ``[first, first + count)`` holding its fragments. The runs partition ``[0, leaf_count)``.

The table is what makes a partial delivery checkable for completeness: a subscriber entitled to
concept C knows from the signed table exactly which leaves are C's, and a range proof
(:mod:`xdn.codec._ranges`) shows it received all of them and nothing altered.

What the table reveals: to anyone holding the manifest (every disseminator on the path, every
subscriber receiving any part of the document) the concepts present in the document, the key
epoch of each and how many fragments each has — not content, not sizes, not where withheld
fragments sit in the document, and nothing of the publisher's schema (XPaths never leave the
publisher). Disseminators already see each fragment's concept, position and parent in its clear
header to route it, so the table tells them nothing new; a subscriber learns the per-concept
fragment counts of concepts it is not entitled to. A blinded table (entries keyed by a MAC under
each concept's document key) would hide those labels, but a subscriber could then no longer tell
which concepts of the document it should have received unless it already knew every concept key
to try; we chose the plain table and document the leak.

:meth:`Manifest.signed_bytes` is the exact byte string signed: a framed sequence (each field
length-prefixed, see :mod:`xdn.codec._encoding`) starting with the label ``xdn/manifest/v2``.

The publisher's signed sequence (``xdn/manifest/v3``): a sequenced manifest also commits to the
document's ``sequence`` number (every new document version of a publisher gets the next one) and,
in each range table row, to ``previous``: the sequence number of the publisher's previous
document holding that concept (0: none). These back pointers chain, per concept, every document
of the concept, so a subscriber granted concepts S that receives document n learns, for each of
its concepts, which document came before — and sees a withheld one as a gap — without seeing any
other document (:mod:`xdn.completeness`). What they reveal beyond the v2 table: how many
documents the publisher issued, and for a concept present here when it last occurred before.
An unsequenced manifest (``sequence`` 0, every ``previous`` 0) signs exactly the v2 bytes; a
sequenced one can never be passed off as unsequenced, as the labels differ.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field

from xdn import crypto, statements
from xdn.codec._encoding import check_u64, frame, u64
from xdn.codec._keys import check_name
from xdn.codec._merkle import HASH_BYTES

__all__ = ["ConceptRange", "Manifest", "Sequencing", "SignedManifest", "sign_manifest"]

_LABEL = b"xdn/manifest/v2"
_LABEL_SEQUENCED = b"xdn/manifest/v3"


@dataclass(frozen=True, slots=True, kw_only=True)
class Sequencing:
    """A document's place in its publisher's signed sequence, for the encoders.

    Attributes:
        sequence: the document's number (at least 1).
        previous: concept → sequence number of the previous document holding it (concepts not
            listed: none, 0). Every value is below ``sequence``.
    """

    sequence: int
    previous: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_u64("sequence", self.sequence)
        if self.sequence < 1:
            raise ValueError("a sequence number is at least 1")
        if not isinstance(self.previous, Mapping):
            raise TypeError("previous must be a mapping of concept to sequence number")
        for concept, previous in self.previous.items():
            check_name("concept", concept)
            check_u64("previous", previous)
            if previous >= self.sequence:
                raise ValueError(f"previous document of {concept!r} is not before this one")
        object.__setattr__(self, "previous", types.MappingProxyType(dict(self.previous)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ConceptRange:
    """One row of the range table: concept ``concept`` owns leaves ``[first, first + count)``.

    Attributes:
        concept: the concept.
        epoch: the key epoch every fragment of the concept is encrypted under.
        first: index of the concept's first leaf.
        count: number of the concept's fragments (at least one).
        previous: sequence number of the publisher's previous document holding the concept
            (0: none, or an unsequenced manifest).
    """

    concept: str
    epoch: int
    first: int
    count: int
    previous: int = 0

    def __post_init__(self) -> None:
        check_name("concept", self.concept)
        check_u64("epoch", self.epoch)
        check_u64("first", self.first)
        check_u64("count", self.count)
        check_u64("previous", self.previous)
        if self.count < 1:
            raise ValueError("a concept range holds at least one leaf")

    @property
    def end(self) -> int:
        """One past the concept's last leaf."""
        return self.first + self.count


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What the publisher vouches for about one version of one document.

    Attributes:
        document_id: the document's identifier.
        publisher: the publisher's identifier.
        version: the document version (monotonic per document, chosen by the publisher).
        issued_at_ms: issue time, milliseconds since the Unix epoch (passed in, never read).
        leaf_count: number of fragments (Merkle leaves), at least one.
        root: the Merkle tree root over the fragment leaves.
        ranges: the range table, in leaf order; it partitions ``[0, leaf_count)``.
        sequence: the document's number in the publisher's sequence (0: unsequenced).
    """

    document_id: str
    publisher: str
    version: int
    issued_at_ms: int
    leaf_count: int
    root: bytes
    ranges: tuple[ConceptRange, ...]
    sequence: int = 0
    _by_concept: Mapping[str, ConceptRange] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_name("document_id", self.document_id)
        check_name("publisher", self.publisher)
        check_u64("version", self.version)
        check_u64("issued_at_ms", self.issued_at_ms)
        check_u64("leaf_count", self.leaf_count)
        if self.leaf_count < 1:
            raise ValueError("a manifest covers at least one fragment")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_BYTES:
            raise ValueError(f"root must be {HASH_BYTES} bytes")
        if not isinstance(self.ranges, tuple) or not all(
            isinstance(r, ConceptRange) for r in self.ranges
        ):
            raise TypeError("ranges must be a tuple of ConceptRange")
        expected = 0
        for row in self.ranges:
            if row.first != expected:
                raise ValueError("concept ranges must partition the leaves, in leaf order")
            expected = row.end
        if expected != self.leaf_count:
            raise ValueError("concept ranges must cover every leaf")
        check_u64("sequence", self.sequence)
        if any(row.previous >= max(self.sequence, 1) for row in self.ranges):
            raise ValueError("a back pointer must name an earlier document of the sequence")
        by_concept = {row.concept: row for row in self.ranges}
        if len(by_concept) != len(self.ranges):
            raise ValueError("a concept appears twice in the range table")
        object.__setattr__(self, "_by_concept", types.MappingProxyType(by_concept))

    def range_of(self, concept: str) -> ConceptRange | None:
        """The range table row of ``concept``, or ``None`` if the document has none of it."""
        return self._by_concept.get(concept)

    def signed_bytes(self) -> bytes:
        """The unambiguous, domain-separated encoding the publisher signs."""
        if self.sequence:
            return self._sequenced_bytes()
        table = frame(
            *(frame(r.concept, u64(r.epoch), u64(r.first), u64(r.count)) for r in self.ranges)
        )
        return frame(
            _LABEL,
            self.document_id,
            self.publisher,
            u64(self.version),
            u64(self.issued_at_ms),
            u64(self.leaf_count),
            self.root,
            table,
        )

    def _sequenced_bytes(self) -> bytes:
        table = frame(
            *(
                frame(r.concept, u64(r.epoch), u64(r.first), u64(r.count), u64(r.previous))
                for r in self.ranges
            )
        )
        return frame(
            _LABEL_SEQUENCED,
            self.document_id,
            self.publisher,
            u64(self.version),
            u64(self.sequence),
            u64(self.issued_at_ms),
            u64(self.leaf_count),
            self.root,
            table,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedManifest:
    """A manifest with the publisher's DER-encoded ECDSA signature (``xdn.crypto.sign``)."""

    manifest: Manifest
    signature: bytes

    def __post_init__(self) -> None:
        statements.check_signed("manifest", self.manifest, Manifest, self.signature)

    def verify(self, publisher_key: crypto.PublicKey) -> None:
        """Check the signature; raise :class:`~xdn.errors.SignatureError` if it fails."""
        statements.verify(self.manifest, self.signature, publisher_key)


def sign_manifest(manifest: Manifest, signer: crypto.PrivateKey) -> SignedManifest:
    """Sign ``manifest`` with the publisher's private key."""
    return SignedManifest(manifest=manifest, signature=statements.sign(manifest, signer))
