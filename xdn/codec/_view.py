"""Subscriber side, in memory: verify and decrypt a delivery, then rebuild the entitled view.

Theory of operation
-------------------
:func:`decode` runs the checks of :mod:`xdn.codec._verify` (signature, freshness, headers,
whole concepts, range proofs, completeness), then decrypts every fragment with AES-256-GCM,
parses it with the hardened parser and splices the view (:mod:`xdn.codec._assemble`). Any
failure of any check — or a missing key, a duplicate, a reference that contradicts the signed
structure — raises the one opaque :class:`~xdn.errors.DecryptError`, with the reason in the
debug log only (never plaintext, never keys). Authentic plaintext that is hostile XML raises
:class:`~xdn.errors.HostileXmlError`.

The view is ``<xdn:view xmlns:xdn="https://xdn.example.org/ns#" document=… publisher=…
version=…>`` holding, in position order, the received fragments whose parent was not received
(or who have none). Inside each, a reference to a received fragment is replaced by that
fragment; one to a fragment not received becomes ``<xdn:withheld fragment="DOC#POS"/>``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from lxml import etree

from xdn import crypto
from xdn.codec._assemble import (
    VIEW_END,
    Template,
    plan_view,
    view_start,
    write_view,
)
from xdn.codec._encoding import XDN_NS
from xdn.codec._fragments import Delivery, fragment_leaf_hash
from xdn.codec._keys import key_name
from xdn.codec._manifest import Manifest
from xdn.codec._opening import open_plaintexts
from xdn.codec._plaintext import canonicalize
from xdn.codec._verify import (
    DocumentKeyLookup,
    KeyLookup,
    KeySource,
    check_fresh,
    check_signature,
    claim_of,
    expected_concepts,
    fail,
    verify_claims,
)
from xdn.xmlsafe import Limits, parse_bytes

__all__ = [
    "VIEW_TAG",
    "WITHHELD_TAG",
    "HeldFragment",
    "View",
    "decode",
    "fragment_concepts",
    "required_keys",
    "verify_delivery",
]

VIEW_TAG = f"{{{XDN_NS}}}view"
WITHHELD_TAG = f"{{{XDN_NS}}}withheld"


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldFragment:
    """A fragment present in a view (for checks and demos)."""

    fragment_id: str
    concept: str
    position: int
    parent: int | None
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class View:
    """The part of a document a subscriber is entitled to, rebuilt after verification.

    Attributes:
        document_id: the document.
        publisher: its publisher.
        version: its version.
        xml: the view as reassembled (UTF-8 XML; deterministic, not canonical: a nested fragment
            repeats namespace declarations its parent makes).
        fragments: the fragments the view holds, in position order.

    Compare views by :meth:`to_bytes`.
    """

    document_id: str
    publisher: str
    version: int
    xml: bytes
    fragments: tuple[HeldFragment, ...]
    limits: Limits = field(default=Limits(), repr=False)
    _root: list[etree._Element] = field(init=False, repr=False, default_factory=list)

    @property
    def root(self) -> etree._Element:
        """The view as a live lxml element (parsed on first use)."""
        if not self._root:
            tree = parse_bytes(self.xml, source="view", limits=self._parse_limits())
            self._root.append(tree.getroot())
        return self._root[0]

    def _parse_limits(self) -> Limits:
        # Each fragment was parsed within ``limits`` and fragments nest at most ``max_depth``
        # deep (checked when assembling), so the view is within these and this parse cannot fail.
        return Limits(
            max_depth=2 * self.limits.max_depth + 1,
            max_text_bytes=self.limits.max_text_bytes,
            max_document_bytes=max(1, len(self.xml)),
        )

    def to_bytes(self) -> bytes:
        """The view as exclusive C14N 1.0 without comments (canonical bytes)."""
        return canonicalize(self.root)


def fragment_concepts(view: View) -> dict[str, str]:
    """``fragment_id → concept`` of every fragment the view holds, in position order."""
    return {held.fragment_id: held.concept for held in view.fragments}


def required_keys(delivery: Delivery) -> frozenset[tuple[str, str, int]]:
    """The (publisher, concept, epoch) group keys :func:`decode` will need for ``delivery``."""
    return frozenset((f.publisher, f.concept, f.epoch) for f in delivery.fragments)


def verify_delivery(
    delivery: Delivery,
    *,
    publisher_key: crypto.PublicKey,
    concepts: Iterable[str] = (),
    seen: Mapping[tuple[str, str], int] | None = None,
    cipher_digests: Sequence[bytes] | None = None,
) -> Manifest:
    """Run every check of :func:`decode` that needs no key; return the verified manifest.

    A subscriber that cannot open a delivery yet (its keys have not arrived) calls this before
    keeping it: the manifest's signature, freshness, every fragment header, the range table and
    the range proofs are checked (checks 1-6 of :mod:`xdn.codec._verify`), so only a delivery the
    publisher really issued, unaltered, is kept. Only the GCM tags are left for :func:`decode`.

    Args:
        delivery: what the subscriber received (untrusted).
        publisher_key: the publisher's public key (from a trusted source).
        concepts: concepts that must be delivered whole (default: none is required).
        seen: the last version accepted per (publisher, document id).
        cipher_digests: the SHA-256 of each fragment's ciphertext, in their order, when the
            ciphertexts are kept elsewhere (``cipher_value`` is then not read).

    Raises:
        DecryptError: a check failed (opaque, as in :func:`decode`).
        TypeError: misuse.
    """
    if not isinstance(delivery, Delivery):
        raise TypeError("delivery must be a Delivery")
    if isinstance(concepts, str):
        raise TypeError("concepts must be a collection of concepts, not a single str")
    check_delivery(delivery, publisher_key, frozenset(concepts), seen, cipher_digests)
    return delivery.signed_manifest.manifest


def held_fragments(delivery: Delivery) -> tuple[HeldFragment, ...]:
    """What a view keeps of each fragment of ``delivery``, in position order."""
    return tuple(
        HeldFragment(
            fragment_id=f.fragment_id,
            concept=f.concept,
            position=f.position,
            parent=f.parent,
            epoch=f.epoch,
        )
        for f in sorted(delivery.fragments, key=lambda f: f.position)
    )


def check_delivery(
    delivery: Delivery,
    publisher_key: crypto.PublicKey,
    expected: frozenset[str],
    seen: Mapping[tuple[str, str], int] | None,
    cipher_digests: Sequence[bytes] | None = None,
) -> None:
    """Signature, freshness, headers, ranges, proofs and completeness (no key needed).

    ``cipher_digests`` are the fragments' ciphertext digests, in their order, when the
    ciphertexts are kept elsewhere (:mod:`xdn.codec._stored_decode`)."""
    signed = delivery.signed_manifest
    m = signed.manifest
    check_signature(signed, publisher_key)
    check_fresh(m, seen)
    names: dict[tuple[str, int], str] = {}

    def name(concept: str, epoch: int) -> str:
        found = names.get((concept, epoch))
        if found is None:
            found = names[concept, epoch] = key_name(m.publisher, concept, epoch, m.document_id)
        return found

    claims = [
        claim_of(
            document_id=f.document_id,
            publisher=f.publisher,
            concept=f.concept,
            position=f.position,
            parent=f.parent,
            epoch=f.epoch,
            key=f.key_name,
            leaf=fragment_leaf_hash(f, None if cipher_digests is None else cipher_digests[n]),
            expected=(m.document_id, m.publisher),
            expected_key=name(f.concept, f.epoch),
        )
        for n, f in enumerate(delivery.fragments)
    ]
    verify_claims(m, claims, delivery.proofs, expected=expected)


def decode(
    delivery: Delivery,
    *,
    publisher_key: crypto.PublicKey,
    keys: KeyLookup | None = None,
    document_keys: DocumentKeyLookup | None = None,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    limits: Limits | None = None,
) -> View:
    """Verify and decrypt ``delivery`` and rebuild the subscriber's view of the document.

    Args:
        delivery: what the subscriber received (untrusted).
        publisher_key: the publisher's public key (looked up by the caller from a trusted
            source for ``delivery.signed_manifest.manifest.publisher``).
        keys: group keys by (publisher, concept, epoch); see :func:`required_keys`.
        document_keys: per-document keys by key name (used first when both are given).
        concepts: the concepts the caller is entitled to from this publisher; each one the
            document holds must be delivered whole. Default: every concept it holds a key for.
        seen: the last version accepted per (publisher, document id); the delivery must be
            newer than its entry.
        limits: bounds for parsing decrypted plaintext (xmlsafe defaults otherwise).

    Returns:
        The verified :class:`View`.

    Raises:
        DecryptError: any signature, freshness, header, range, proof, completeness, key or
            decryption check failed (opaque).
        HostileXmlError: authentic plaintext is XML the hardened parser refuses.
        TypeError: misuse (neither ``keys`` nor ``document_keys``…).
    """
    if not isinstance(delivery, Delivery):
        raise TypeError("delivery must be a Delivery")
    limits = limits or Limits()
    m = delivery.signed_manifest.manifest
    source = KeySource(
        publisher=m.publisher, document_id=m.document_id, keys=keys, document_keys=document_keys
    )
    check_delivery(delivery, publisher_key, expected_concepts(m, concepts, source), seen)
    plaintexts: list[tuple[int, int | None, bytes]] = []
    ciphers: dict[tuple[str, int], crypto.Aead] = {}  # (one key schedule per concept)
    for f in sorted(delivery.fragments, key=lambda f: f.position):
        cipher = ciphers.get((f.concept, f.epoch))
        if cipher is None:
            doc_key = source.doc_key(f.concept, f.epoch)
            if doc_key is None:
                raise fail("no key for fragment %s (epoch %d)", f.fragment_id, f.epoch)
            cipher = ciphers[f.concept, f.epoch] = crypto.Aead(doc_key)
        plaintexts.append((f.position, f.parent, cipher.decrypt(f.cipher_value)))
    opened = open_plaintexts(plaintexts, document_id=m.document_id, limits=limits)
    templates: dict[int, Template] = {p: template for p, (template, _) in opened.items()}
    bodies = {p: body for p, (_, body) in opened.items()}
    tops = plan_view(templates, leaf_count=m.leaf_count, max_depth=limits.max_depth)
    parts: list[bytes | memoryview] = [view_start(m.document_id, m.publisher, m.version)]
    write_view(
        parts.append,
        document_id=m.document_id,
        tops=tops,
        templates=templates,
        body=bodies.__getitem__,
    )
    parts.append(VIEW_END)
    held = held_fragments(delivery)
    return View(
        document_id=m.document_id,
        publisher=m.publisher,
        version=m.version,
        xml=b"".join(parts),
        fragments=held,
        limits=limits,
    )
