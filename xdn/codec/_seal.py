"""Finishing an encoding: leaf order, range table, Merkle tree, per-concept proofs, signature.

Both encoders (in memory, :func:`xdn.codec.encode`; streaming, :func:`xdn.codec.encode_file`)
produce one :class:`LeafRecord` per fragment as they go (its concept, position, epoch and leaf
hash: 32 bytes and a few integers, never the ciphertext) and call :func:`seal` once at the end.
Sealing sorts the records into leaf order (:mod:`xdn.codec._order`), cuts the range table,
builds the tree, proves each concept's run (:mod:`xdn.codec._ranges`) and signs the manifest:
one signature per document, however many fragments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdn import crypto
from xdn.codec._manifest import (
    ConceptRange,
    Manifest,
    Sequencing,
    SignedManifest,
    sign_manifest,
)
from xdn.codec._merkle import MerkleTree
from xdn.codec._order import leaf_sort_key
from xdn.codec._ranges import RangeProof, range_proof
from xdn.errors import UsageError

__all__ = ["LeafRecord", "Sealed", "seal"]


@dataclass(frozen=True, slots=True)
class LeafRecord:
    """What sealing needs of one fragment."""

    concept: str
    position: int
    epoch: int
    leaf: bytes  # leaf_hash(fragment_leaf(fragment))


@dataclass(frozen=True, slots=True, kw_only=True)
class Sealed:
    """The signed manifest, the leaf order and each concept's range proof."""

    signed_manifest: SignedManifest
    order: tuple[int, ...]  # order[i] = index (into the records given) of leaf i
    proofs: Mapping[str, RangeProof]


def seal(
    records: Sequence[LeafRecord],
    *,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    signer: crypto.PrivateKey,
    concept_order: Sequence[str] = (),
    sequencing: Sequencing | None = None,
) -> Sealed:
    """Order the leaves, build and sign the manifest (sequenced when ``sequencing`` is given).

    Raises:
        UsageError: no records, or one concept under two epochs.
    """
    if not records:
        raise UsageError("nothing to encode: the mapping selected no nodes")
    key = leaf_sort_key(concept_order)
    order = sorted(range(len(records)), key=lambda i: key(records[i].concept, records[i].position))
    ranges: list[ConceptRange] = []
    start = 0
    for index in range(1, len(order) + 1):
        head = records[order[start]]
        if index < len(order) and records[order[index]].concept == head.concept:
            if records[order[index]].epoch != head.epoch:
                raise UsageError(f"concept {head.concept!r} encrypted under two key epochs")
            continue
        ranges.append(
            ConceptRange(
                concept=head.concept,
                epoch=head.epoch,
                first=start,
                count=index - start,
                previous=0 if sequencing is None else sequencing.previous.get(head.concept, 0),
            )
        )
        start = index
    tree = MerkleTree([records[i].leaf for i in order])
    manifest = Manifest(
        document_id=document_id,
        publisher=publisher,
        version=version,
        issued_at_ms=issued_at_ms,
        leaf_count=tree.size,
        root=tree.root,
        ranges=tuple(ranges),
        sequence=0 if sequencing is None else sequencing.sequence,
    )
    return Sealed(
        signed_manifest=sign_manifest(manifest, signer),
        order=tuple(order),
        proofs={r.concept: range_proof(tree, r.first, r.end) for r in ranges},
    )
