"""Encrypted fragments, the encoded document, deliveries, and the publisher-side encoder.

Theory of operation
-------------------
:func:`encode` turns mapped nodes into fragment plaintexts (:mod:`xdn.codec._plaintext`),
encrypts each with AES-256-GCM under its concept's per-document key
(:mod:`xdn.codec._keys`), and builds a Merkle tree (:mod:`xdn.codec._merkle`) whose leaf for a
fragment is :func:`fragment_leaf`: the framed header (document, publisher, concept, position,
parent, epoch, key name) followed by ``SHA-256(cipher_value)``. The publisher signs a
:class:`~xdn.codec._manifest.Manifest` over the root. Leaves are in position order for now (a
later version orders them so one subscriber's fragments form ranges).

:func:`select` is what a disseminator does for one subscriber: it keeps the fragments of some
concepts with their inclusion proofs, and the signed manifest, in a :class:`Delivery`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from xdn import crypto
from xdn.codec._encoding import check_u64, frame, opt_u64, u64
from xdn.codec._keys import ConceptKey, check_name
from xdn.codec._manifest import Manifest, SignedManifest, sign_manifest
from xdn.codec._merkle import InclusionProof, MerkleTree
from xdn.codec._plaintext import MappedNodeLike, canonical_fragments, fragment_id
from xdn.errors import UsageError

__all__ = ["Delivery", "EncodedDocument", "Fragment", "encode", "fragment_leaf", "select"]

_LEAF_LABEL = b"xdn/fragment-leaf/v1"


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
        check_name("document_id", self.document_id)
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_name("key_name", self.key_name)
        check_u64("position", self.position)
        check_u64("epoch", self.epoch)
        if self.parent is not None and check_u64("parent", self.parent) >= self.position:
            raise ValueError("a fragment's parent must come before it in document order")
        if self.fragment_id != fragment_id(self.document_id, self.position):
            raise ValueError("fragment_id must be DOCUMENT#POSITION")
        if not isinstance(self.cipher_value, bytes):
            raise TypeError("cipher_value must be bytes")


def fragment_leaf(fragment: Fragment) -> bytes:
    """The Merkle leaf entry of ``fragment``: framed header ‖ SHA-256 of its ciphertext."""
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
    """A whole encoded document: signed manifest, every fragment, every inclusion proof.

    ``proofs`` is stored as a read-only mapping keyed by fragment id.
    """

    signed_manifest: SignedManifest
    fragments: tuple[Fragment, ...]
    proofs: Mapping[str, InclusionProof]

    def __post_init__(self) -> None:
        if not isinstance(self.signed_manifest, SignedManifest):
            raise TypeError("signed_manifest must be a SignedManifest")
        manifest = self.signed_manifest.manifest
        if not isinstance(self.fragments, tuple) or not all(
            isinstance(f, Fragment) for f in self.fragments
        ):
            raise TypeError("fragments must be a tuple of Fragment")
        if [f.position for f in self.fragments] != list(range(manifest.leaf_count)):
            raise ValueError("fragments must be positions 0..leaf_count-1, in order")
        for f in self.fragments:
            if (f.document_id, f.publisher) != (manifest.document_id, manifest.publisher):
                raise ValueError(f"fragment {f.fragment_id} is not of the manifest's document")
        proofs = dict(self.proofs)
        if set(proofs) != {f.fragment_id for f in self.fragments}:
            raise ValueError("there must be exactly one proof per fragment")
        for proof in proofs.values():
            if not isinstance(proof, InclusionProof) or proof.tree_size != manifest.leaf_count:
                raise ValueError("proofs must be InclusionProofs for the manifest's tree")
        object.__setattr__(self, "proofs", MappingProxyType(proofs))

    @property
    def manifest(self) -> Manifest:
        """The (signed) manifest."""
        return self.signed_manifest.manifest


@dataclass(frozen=True, slots=True, kw_only=True)
class Delivery:
    """What one subscriber receives of a document: the signed manifest and some fragments.

    Nothing here is trusted until :func:`xdn.codec.decode` has verified it.
    """

    signed_manifest: SignedManifest
    items: tuple[tuple[Fragment, InclusionProof], ...]

    def __post_init__(self) -> None:
        if not isinstance(self.signed_manifest, SignedManifest):
            raise TypeError("signed_manifest must be a SignedManifest")
        if not isinstance(self.items, tuple):
            raise TypeError("items must be a tuple of (Fragment, InclusionProof)")
        for item in self.items:
            if not (
                isinstance(item, tuple)
                and len(item) == 2
                and isinstance(item[0], Fragment)
                and isinstance(item[1], InclusionProof)
            ):
                raise TypeError("items must be a tuple of (Fragment, InclusionProof)")


def _document_keys(
    concepts: set[str], keys: Mapping[str, ConceptKey], *, publisher: str, document_id: str
) -> dict[str, tuple[ConceptKey, bytes]]:
    if not isinstance(keys, Mapping):
        raise TypeError("keys must be a mapping concept → ConceptKey")
    found: dict[str, tuple[ConceptKey, bytes]] = {}
    for concept in sorted(concepts):
        key = keys.get(concept)
        if key is None:
            raise UsageError(f"no group key for concept {concept!r}")
        if not isinstance(key, ConceptKey):
            raise TypeError(f"keys[{concept!r}] must be a ConceptKey")
        if (key.publisher, key.concept) != (publisher, concept):
            raise UsageError(f"keys[{concept!r}] is the key of {key.publisher}/{key.concept}")
        found[concept] = (key, key.for_document(document_id))
    return found


def encode(
    mapped: Iterable[MappedNodeLike],
    *,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    iv_factory: Callable[[], bytes] | None = None,
) -> EncodedDocument:
    """Encode a mapped document into signed, encrypted fragments.

    Args:
        mapped: the mapped nodes (``.element``, ``.concept``) of one document.
        document_id: identifier of the document.
        publisher: identifier of the publisher (must match every key's publisher).
        version: document version.
        issued_at_ms: issue time in milliseconds since the Unix epoch (passed in).
        keys: concept → current :class:`ConceptKey` for every concept mapped.
        signer: the publisher's signing key.
        iv_factory: returns a fresh 12-byte GCM IV per fragment (tests only; random otherwise).

    Returns:
        The encoded document.

    Raises:
        UsageError: a missing or mismatched key, or a bad mapping (see ``canonical_fragments``).
        TypeError, ValueError: malformed arguments (empty identifiers, negative integers…).
    """
    check_name("document_id", document_id)
    check_name("publisher", publisher)
    check_u64("version", version)
    check_u64("issued_at_ms", issued_at_ms)
    nodes = list(mapped)
    concepts = {check_name("concept", node.concept) for node in nodes}
    doc_keys = _document_keys(concepts, keys, publisher=publisher, document_id=document_id)
    fragments = []
    for plain in canonical_fragments(nodes, document_id=document_id):
        key, doc_key = doc_keys[plain.concept]
        iv = iv_factory() if iv_factory is not None else None
        fragments.append(
            Fragment(
                fragment_id=fragment_id(document_id, plain.position),
                document_id=document_id,
                publisher=publisher,
                concept=plain.concept,
                position=plain.position,
                parent=plain.parent,
                epoch=key.epoch,
                key_name=key.name_for(document_id),
                cipher_value=crypto.aead_encrypt(doc_key, plain.content, iv=iv),
            )
        )
    tree = MerkleTree.from_entries([fragment_leaf(f) for f in fragments])
    manifest = Manifest(
        document_id=document_id,
        publisher=publisher,
        version=version,
        issued_at_ms=issued_at_ms,
        leaf_count=tree.size,
        root=tree.root,
    )
    return EncodedDocument(
        signed_manifest=sign_manifest(manifest, signer),
        fragments=tuple(fragments),
        proofs={f.fragment_id: tree.inclusion_proof(i) for i, f in enumerate(fragments)},
    )


def select(encoded: EncodedDocument, concepts: Iterable[str]) -> Delivery:
    """The fragments of ``concepts`` (exact concept match) with their proofs, in position order.

    Raises:
        TypeError: ``concepts`` is a single string rather than a collection of them.
    """
    if isinstance(concepts, str):
        raise TypeError("concepts must be a collection of concepts, not a single str")
    wanted = frozenset(concepts)
    items = tuple(
        (f, encoded.proofs[f.fragment_id]) for f in encoded.fragments if f.concept in wanted
    )
    return Delivery(signed_manifest=encoded.signed_manifest, items=items)
