"""Subscriber-side checks shared by both decoders: keys, headers, ranges, proofs, freshness.

Theory of operation
-------------------
A delivery is accepted only if all of these hold, checked before anything is decrypted into a
view (every failure is the one opaque :class:`~xdn.errors.DecryptError`; the reason goes to the
debug log only):

1. *Authentic*: the manifest's ECDSA signature verifies under the publisher's key.
2. *Fresh*: its version is newer than the last one accepted for (publisher, document), when the
   caller says which that was (``seen``) — a replayed old version is refused.
3. *Headers*: each fragment names the manifest's document and publisher, the key name its
   (publisher, concept, epoch, document) imply, a concept of the range table and that concept's
   epoch; no position twice.
4. *Whole concepts*: a concept delivered at all is delivered entirely (as many fragments as its
   range-table row says); its fragments, sorted by position, are its leaves in order.
5. *In place and unaltered*: the proofs are disjoint runs covering exactly the delivered leaves,
   and each run's leaf hashes (header ‖ ciphertext hash) rebuild the signed root.
6. *Complete*: every concept the subscriber expects and the table lists was delivered. Expected
   concepts are the caller's ``concepts`` (its grants), or by default every listed concept whose
   key the caller holds (:class:`KeySource`).

GCM tags are checked when fragments are decrypted; both decoders do that after these checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from xdn import crypto
from xdn.codec._keys import document_key, key_name
from xdn.codec._manifest import Manifest, SignedManifest
from xdn.codec._ranges import RangeProof, verify_range
from xdn.errors import DecryptError, SignatureError, UsageError

__all__ = [
    "Claim",
    "DocumentKeyLookup",
    "KeyLookup",
    "KeySource",
    "check_fresh",
    "check_signature",
    "claim_of",
    "expected_concepts",
    "fail",
    "verify_claims",
]

log = logging.getLogger(__name__)

KeyLookup = Mapping[tuple[str, str, int], bytes] | Callable[[str, str, int], bytes | None]
"""Group keys by (publisher, concept, epoch): a mapping, or a function returning None if absent."""

DocumentKeyLookup = Mapping[str, bytes] | Callable[[str], bytes | None]
"""Per-document keys by XML Encryption ``KeyName`` (see :func:`xdn.codec.key_name`)."""


def fail(reason: str, *args: object) -> DecryptError:
    """Log ``reason`` at debug level and return the opaque error to raise."""
    log.debug("delivery rejected: " + reason, *args)
    return DecryptError()


class KeySource:
    """The per-document keys a decoder may use for one document.

    At least one of ``keys`` (group keys; per-document keys are derived) and ``document_keys``
    (per-document keys by key name: files written by ``xdn encode --keys-out``, or a member's
    grant for retained documents) is given; a document key, when held, is used first.
    """

    __slots__ = ("_cache", "_document_id", "_document_keys", "_keys", "_names", "_publisher")

    def __init__(
        self,
        *,
        publisher: str,
        document_id: str,
        keys: KeyLookup | None,
        document_keys: DocumentKeyLookup | None,
    ) -> None:
        if keys is None and document_keys is None:
            raise TypeError("give keys= (group keys), document_keys= or both")
        self._publisher = publisher
        self._document_id = document_id
        self._keys = keys
        self._document_keys = document_keys
        self._cache: dict[tuple[str, int], bytes | None] = {}
        self._names: dict[tuple[str, int], str] = {}

    def name(self, concept: str, epoch: int) -> str:
        """The key name of (concept, epoch) in this document (see :func:`key_name`)."""
        wanted = (concept, epoch)
        found = self._names.get(wanted)
        if found is None:
            found = key_name(self._publisher, concept, epoch, self._document_id)
            self._names[wanted] = found
        return found

    def _lookup(self, concept: str, epoch: int) -> bytes | None:
        if self._document_keys is not None:
            name = self.name(concept, epoch)
            lookup = self._document_keys
            raw = lookup.get(name) if isinstance(lookup, Mapping) else lookup(name)
            if raw is not None and (not isinstance(raw, bytes) or len(raw) != crypto.KEY_BYTES):
                raise UsageError(f"document key {name} must be {crypto.KEY_BYTES} bytes")
            if raw is not None or self._keys is None:
                return raw
        wanted = (self._publisher, concept, epoch)
        group = self._keys
        found: bytes | None = None
        if isinstance(group, Mapping):
            found = group.get(wanted)
        elif group is not None:
            try:
                found = group(*wanted)
            except LookupError:
                found = None
        if found is None:
            return None
        return document_key(
            found,
            publisher=self._publisher,
            concept=concept,
            epoch=epoch,
            document_id=self._document_id,
        )

    def doc_key(self, concept: str, epoch: int) -> bytes | None:
        """The per-document key of (concept, epoch), or ``None`` if the caller has none."""
        wanted = (concept, epoch)
        if wanted not in self._cache:
            self._cache[wanted] = self._lookup(concept, epoch)
        return self._cache[wanted]


@dataclass(frozen=True, slots=True)
class Claim:
    """What a fragment's header claims, with the Merkle leaf hash it must have."""

    concept: str
    position: int
    parent: int | None
    epoch: int
    leaf: bytes


def claim_of(
    *,
    document_id: str,
    publisher: str,
    concept: str,
    position: int,
    parent: int | None,
    epoch: int,
    key: str,
    leaf: bytes,
    expected: tuple[str, str],
    expected_key: str,
) -> Claim:
    """Check a fragment header against the (document, publisher) ``expected`` and the key name
    ``expected_key`` that (document, publisher, concept, epoch) imply; return its claim."""
    if (document_id, publisher) != expected:
        raise fail("fragment %s#%d is not of the manifest's document", document_id, position)
    if key != expected_key:
        raise fail("fragment %s#%d names the wrong key", document_id, position)
    return Claim(concept, position, parent, epoch, leaf)


def check_signature(signed: SignedManifest, publisher_key: crypto.PublicKey) -> None:
    """Raise the opaque error unless the manifest's signature verifies."""
    try:
        signed.verify(publisher_key)
    except SignatureError:
        raise fail(
            "manifest signature of %s does not verify", signed.manifest.document_id
        ) from None


def check_fresh(manifest: Manifest, seen: Mapping[tuple[str, str], int] | None) -> None:
    """Raise the opaque error if ``manifest`` is not newer than the version ``seen`` last."""
    if seen is None:
        return
    if not isinstance(seen, Mapping):
        raise TypeError("seen must map (publisher, document_id) to the last version accepted")
    last = seen.get((manifest.publisher, manifest.document_id))
    if last is not None and manifest.version <= last:
        raise fail(
            "version %d of %s is not newer than %d", manifest.version, manifest.document_id, last
        )


def expected_concepts(
    manifest: Manifest, concepts: Iterable[str] | None, keys: KeySource
) -> frozenset[str]:
    """The listed concepts whose delivery must be complete (see the module docstring, 6)."""
    if concepts is None:
        return frozenset(r.concept for r in manifest.ranges if keys.doc_key(r.concept, r.epoch))
    if isinstance(concepts, str):
        raise TypeError("concepts must be a collection of concepts, not a single str")
    return frozenset(concepts)


def verify_claims(
    manifest: Manifest,
    claims: Sequence[Claim],
    proofs: Sequence[RangeProof],
    *,
    expected: AbstractSet[str],
) -> None:
    """Checks 3 (ranges and epochs), 4, 5 and 6 of the module docstring."""
    by_concept: dict[str, list[Claim]] = {}
    positions: set[int] = set()
    for claim in claims:
        row = manifest.range_of(claim.concept)
        if row is None or claim.epoch != row.epoch or claim.position >= manifest.leaf_count:
            raise fail("fragment %d is not in the signed range table", claim.position)
        if claim.position in positions:
            raise fail("fragment %d delivered twice", claim.position)
        positions.add(claim.position)
        by_concept.setdefault(claim.concept, []).append(claim)
    leaves: dict[int, bytes] = {}
    for concept, group in by_concept.items():
        row = manifest.range_of(concept)
        if row is None or len(group) != row.count:
            raise fail("concept %s: %d of its fragments delivered", concept, len(group))
        group.sort(key=lambda c: c.position)
        leaves.update((row.first + i, c.leaf) for i, c in enumerate(group))
    covered = 0
    previous_end = 0
    for proof in sorted(proofs, key=lambda p: p.start):
        if proof.tree_size != manifest.leaf_count or proof.count > len(leaves):
            raise fail("range proof [%d, %d) is not for the delivery", proof.start, proof.end)
        hashes = [leaves.get(i) for i in range(proof.start, proof.end)]
        if proof.start < previous_end or any(h is None for h in hashes):
            raise fail(
                "range proof [%d, %d) overlaps or leaves the delivery", proof.start, proof.end
            )
        if not verify_range(
            [h for h in hashes if h is not None],
            proof,
            root=manifest.root,
            tree_size=manifest.leaf_count,
        ):
            raise fail("range proof [%d, %d) does not verify", proof.start, proof.end)
        covered += proof.count
        previous_end = proof.end
    if covered != len(leaves):
        raise fail("%d delivered fragments are not covered by a range proof", len(leaves) - covered)
    missing = sorted(c for c in expected if manifest.range_of(c) and c not in by_concept)
    if missing:
        raise fail("expected concepts not delivered: %s", missing)
