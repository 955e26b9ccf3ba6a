"""Conversions between the codec's and key service's values and the wire contract.

An edge module: the publisher and the subscriber call it; the core modules never see a
``*_pb2`` type. Anything malformed that arrives from the wire becomes a
:class:`~xdn.errors.ProtocolError` with a message saying which field is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdn.codec import (
    Delivery,
    Fragment,
    InclusionProof,
    Manifest,
    SignedManifest,
)
from xdn.errors import ProtocolError
from xdn.groupkeys import KeyGrant
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = [
    "delivery_from_pb",
    "dissemination_to_pb",
    "key_grant_from_pb",
    "key_grant_to_pb",
]


def _fragment_to_pb(fragment: Fragment, proof: InclusionProof) -> pb.Fragment:
    return pb.Fragment(
        fragment_id=fragment.fragment_id,
        document_id=fragment.document_id,
        publisher=fragment.publisher,
        concept=fragment.concept,
        position=fragment.position,
        parent=-1 if fragment.parent is None else fragment.parent,
        epoch=fragment.epoch,
        key_name=fragment.key_name,
        cipher_value=fragment.cipher_value,
        leaf_index=proof.leaf_index,
        proof=list(proof.path),
    )


def dissemination_to_pb(
    signed: SignedManifest,
    items: Iterable[tuple[Fragment, InclusionProof]],
    *,
    provenance: bytes,
    publisher_certificate: bytes,
) -> pb.Dissemination:
    """Build the wire form of (some of) a document's fragments."""
    manifest = signed.manifest
    return pb.Dissemination(
        manifest=pb.Manifest(
            document_id=manifest.document_id,
            publisher=manifest.publisher,
            version=manifest.version,
            issued_at_ms=manifest.issued_at_ms,
            leaf_count=manifest.leaf_count,
            root=manifest.root,
            signature=signed.signature,
            publisher_certificate=publisher_certificate,
        ),
        fragments=[_fragment_to_pb(f, p) for f, p in items],
        provenance=provenance,
    )


def delivery_from_pb(message: pb.Dissemination) -> Delivery:
    """Read a received dissemination into an (unverified) codec delivery."""
    m = message.manifest
    try:
        signed = SignedManifest(
            manifest=Manifest(
                document_id=m.document_id,
                publisher=m.publisher,
                version=m.version,
                issued_at_ms=m.issued_at_ms,
                leaf_count=m.leaf_count,
                root=m.root,
            ),
            signature=m.signature,
        )
        items = tuple(
            (
                Fragment(
                    fragment_id=f.fragment_id,
                    document_id=f.document_id,
                    publisher=f.publisher,
                    concept=f.concept,
                    position=f.position,
                    parent=None if f.parent < 0 else f.parent,
                    epoch=f.epoch,
                    key_name=f.key_name,
                    cipher_value=f.cipher_value,
                ),
                InclusionProof(
                    leaf_index=f.leaf_index, tree_size=m.leaf_count, path=tuple(f.proof)
                ),
            )
            for f in message.fragments
        )
        return Delivery(signed_manifest=signed, items=items)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"malformed dissemination of {m.document_id!r}: {exc}") from None


def key_grant_to_pb(grant: KeyGrant) -> pb.KeyMessage:
    """The wire form of a sealed group key."""
    return pb.KeyMessage(
        publisher=grant.publisher,
        concept=grant.concept,
        epoch=grant.epoch,
        subscriber=grant.subscriber,
        sealed=grant.sealed,
    )


def key_grant_from_pb(message: pb.KeyMessage) -> KeyGrant:
    """Read a received key message."""
    if not message.publisher or not message.concept or message.epoch < 1 or not message.sealed:
        raise ProtocolError("malformed key message: publisher, concept, epoch and seal required")
    return KeyGrant(
        publisher=message.publisher,
        concept=message.concept,
        epoch=message.epoch,
        subscriber=message.subscriber,
        sealed=message.sealed,
    )
