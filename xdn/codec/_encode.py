"""The in-memory encoder, the per-fragment encryptor both encoders share, and selection.

Theory of operation
-------------------
:func:`encode` turns mapped nodes into fragment plaintexts (:mod:`xdn.codec._plaintext`),
encrypts each with AES-256-GCM under its concept's per-document key (:mod:`xdn.codec._keys`,
:class:`FragmentEncryptor`) and seals them (:mod:`xdn.codec._seal`): leaves sorted by concept
(in the given concept order) then position, the signed manifest carrying the root and the range
table, one range proof per concept.

:func:`select` is what a disseminator does for one subscriber: it keeps the fragments of some
concepts and, for each contiguous run of leaves they form, one range proof (adjacent concepts'
proofs merged), in a :class:`~xdn.codec._fragments.Delivery`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from xdn import crypto
from xdn.codec._encoding import check_u64
from xdn.codec._fragments import Delivery, EncodedDocument, Fragment, fragment_leaf_hash
from xdn.codec._keys import ConceptKey, check_name
from xdn.codec._manifest import Sequencing
from xdn.codec._plaintext import MappedNodeLike, canonical_fragments, fragment_id
from xdn.codec._ranges import RangeProof, merge_range_proofs
from xdn.codec._seal import LeafRecord, seal
from xdn.errors import UsageError

__all__ = ["FragmentEncryptor", "encode", "leaf_record", "select"]


class FragmentEncryptor:
    """Encrypts fragment plaintexts of one document into :class:`Fragment` values.

    Args:
        keys: concept → the current :class:`ConceptKey` of every concept that may appear.
        publisher: the publisher (every key must be its).
        document_id: the document.
        iv_factory: returns a fresh 12-byte GCM IV per fragment (tests only; random otherwise).
    """

    __slots__ = ("_cache", "_document_id", "_iv_factory", "_keys", "_publisher")

    def __init__(
        self,
        keys: Mapping[str, ConceptKey],
        *,
        publisher: str,
        document_id: str,
        iv_factory: Callable[[], bytes] | None = None,
    ) -> None:
        if not isinstance(keys, Mapping):
            raise TypeError("keys must be a mapping concept → ConceptKey")
        self._keys = keys
        self._publisher = check_name("publisher", publisher)
        self._document_id = check_name("document_id", document_id)
        self._iv_factory = iv_factory
        self._cache: dict[str, tuple[int, str, crypto.Aead]] = {}

    def key_for(self, concept: str) -> tuple[int, str, crypto.Aead]:
        """(epoch, key name, cipher under the per-document key) of ``concept``; raise
        UsageError if unusable."""
        found = self._cache.get(concept)
        if found is None:
            key = self._keys.get(check_name("concept", concept))
            if key is None:
                raise UsageError(f"no group key for concept {concept!r}")
            if not isinstance(key, ConceptKey):
                raise TypeError(f"keys[{concept!r}] must be a ConceptKey")
            if (key.publisher, key.concept) != (self._publisher, concept):
                raise UsageError(f"keys[{concept!r}] is the key of {key.publisher}/{key.concept}")
            doc = self._document_id
            found = (key.epoch, key.name_for(doc), crypto.Aead(key.for_document(doc)))
            self._cache[concept] = found
        return found

    def encrypt(self, *, concept: str, position: int, parent: int | None, plain: bytes) -> Fragment:
        """Encrypt one fragment plaintext."""
        epoch, name, cipher = self.key_for(concept)
        if parent is not None and not 0 <= parent < position:
            raise ValueError("a fragment's parent must come before it in document order")
        iv = self._iv_factory() if self._iv_factory is not None else None
        # Every field is checked already (names when the encryptor or key was made, positions
        # just above): skip Fragment's validation, which costs as much as the encryption of a
        # small fragment.
        fragment: Fragment = object.__new__(Fragment)
        set_field = object.__setattr__
        set_field(fragment, "fragment_id", fragment_id(self._document_id, position))
        set_field(fragment, "document_id", self._document_id)
        set_field(fragment, "publisher", self._publisher)
        set_field(fragment, "concept", concept)
        set_field(fragment, "position", check_u64("position", position))
        set_field(fragment, "parent", parent)
        set_field(fragment, "epoch", epoch)
        set_field(fragment, "key_name", name)
        set_field(fragment, "cipher_value", cipher.encrypt(plain, iv=iv))
        return fragment


def leaf_record(fragment: Fragment) -> LeafRecord:
    """The :class:`LeafRecord` sealing needs of ``fragment``."""
    return LeafRecord(
        fragment.concept, fragment.position, fragment.epoch, fragment_leaf_hash(fragment)
    )


def encode(
    mapped: Iterable[MappedNodeLike],
    *,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    concept_order: Sequence[str] = (),
    iv_factory: Callable[[], bytes] | None = None,
    sequencing: Sequencing | None = None,
) -> EncodedDocument:
    """Encode a mapped document held in memory into signed, encrypted fragments.

    Args:
        mapped: the mapped nodes (``.element``, ``.concept``) of one document.
        document_id: identifier of the document.
        publisher: identifier of the publisher (must match every key's publisher).
        version: document version.
        issued_at_ms: issue time in milliseconds since the Unix epoch (passed in).
        keys: concept → current :class:`ConceptKey` for every concept mapped.
        signer: the publisher's signing key.
        concept_order: concepts in leaf order, e.g. :func:`xdn.codec.concept_order` of the
            ontology; unlisted concepts follow, by name.
        iv_factory: returns a fresh 12-byte GCM IV per fragment (tests only; random otherwise).
        sequencing: the document's place in the publisher's signed sequence (its number and
            each concept's previous document); ``None``: an unsequenced manifest.

    Returns:
        The encoded document, fragments in leaf order.

    Raises:
        UsageError: a missing or mismatched key, or a bad mapping (see ``canonical_fragments``).
        TypeError, ValueError: malformed arguments (empty identifiers, negative integers…).
    """
    check_u64("version", version)
    check_u64("issued_at_ms", issued_at_ms)
    encryptor = FragmentEncryptor(
        keys, publisher=publisher, document_id=document_id, iv_factory=iv_factory
    )
    nodes = list(mapped)
    for concept in sorted({check_name("concept", node.concept) for node in nodes}):
        encryptor.key_for(concept)
    fragments = [
        encryptor.encrypt(concept=p.concept, position=p.position, parent=p.parent, plain=p.content)
        for p in canonical_fragments(nodes, document_id=document_id)
    ]
    sealed = seal(
        [leaf_record(f) for f in fragments],
        document_id=document_id,
        publisher=publisher,
        version=version,
        issued_at_ms=issued_at_ms,
        signer=signer,
        concept_order=concept_order,
        sequencing=sequencing,
    )
    return EncodedDocument(
        signed_manifest=sealed.signed_manifest,
        fragments=tuple(fragments[i] for i in sealed.order),
        range_proofs=sealed.proofs,
    )


def select(encoded: EncodedDocument, concepts: Iterable[str]) -> Delivery:
    """The fragments of ``concepts`` (exact concept match), one merged proof per run of leaves.

    Raises:
        TypeError: ``concepts`` is a single string rather than a collection of them.
    """
    if isinstance(concepts, str):
        raise TypeError("concepts must be a collection of concepts, not a single str")
    wanted = frozenset(concepts)
    rows = [r for r in encoded.manifest.ranges if r.concept in wanted]
    runs: list[list[RangeProof]] = []
    for row in rows:
        proof = encoded.range_proofs[row.concept]
        if runs and runs[-1][-1].end == proof.start:
            runs[-1].append(proof)
        else:
            runs.append([proof])
    return Delivery(
        signed_manifest=encoded.signed_manifest,
        fragments=tuple(f for row in rows for f in encoded.fragments[row.first : row.end]),
        proofs=tuple(merge_range_proofs(run) for run in runs),
    )
