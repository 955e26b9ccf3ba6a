"""Conversions between the codec's, key service's and publication values and the wire contract.

An edge module: the publisher, the subscriber and the sites' servicer call it; the core
modules never see a ``*_pb2`` type. Anything malformed that arrives from the wire becomes a
:class:`~xdn.errors.ProtocolError` with a message saying which field is wrong.

Range proofs travel on fragments: the first fragment (in leaf order) of each run of leaves a
message carries holds that run's proof. The publisher sends one run per concept (so a
disseminator that forwards a selection of concepts keeps the right proofs by just filtering
fragments); :func:`restrict_dissemination` filters *and* merges adjacent runs, so a message
carries one proof per contiguous run. The subscriber does not care which it gets: the codec
checks that the proofs exactly cover what arrived.

Key messages (rekeys, enrolments, document-key grants) travel with the key service's signature
and the publisher's certificate; reading one gives an unverified :class:`xdn.lkh.Signed` that the
member verifies before using it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from xdn.codec import (
    ConceptRange,
    Delivery,
    Fragment,
    Manifest,
    RangeProof,
    SignedManifest,
    merge_range_proofs,
)
from xdn.completeness import Checkpoint, Entitlement, SignedCheckpoint, SignedEntitlement
from xdn.errors import ProtocolError, SignatureError
from xdn.lkh import DocumentKeyGrant, Enrolment, RekeyMessage, Signed
from xdn.provenance import LeafRanges
from xdn.publication import PublishedBefore, Reach, Standing
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = [
    "checkpoint_from_pb",
    "checkpoint_to_pb",
    "delivery_from_pb",
    "dissemination_to_pb",
    "document_keys_from_pb",
    "document_keys_to_pb",
    "enrolment_from_pb",
    "enrolment_to_pb",
    "entitlement_from_pb",
    "entitlement_to_pb",
    "fragment_header_to_pb",
    "leaf_ranges",
    "leaf_runs",
    "manifest_from_pb",
    "manifest_to_pb",
    "published_before_to_pb",
    "range_proof_to_pb",
    "ranges_of_runs",
    "reach_from_pb",
    "rekey_from_pb",
    "rekey_to_pb",
    "restrict_dissemination",
    "revocation_list_delivery",
    "standing_from_pb",
    "standing_to_pb",
]

M = TypeVar("M", RekeyMessage, Enrolment, DocumentKeyGrant)


@contextmanager
def _reading(what: str) -> Iterator[None]:
    """Turn the value objects' constructor checks into a :class:`ProtocolError` on ``what``."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"malformed {what}: {exc}") from None


def fragment_header_to_pb(fragment: Fragment) -> pb.Fragment:
    """A fragment's wire form without its ciphertext (field 9) and range proof (field 12): the
    fields a writer that streams ciphertexts puts before them (:mod:`xdn.wire_write`)."""
    return pb.Fragment(
        fragment_id=fragment.fragment_id,
        document_id=fragment.document_id,
        publisher=fragment.publisher,
        concept=fragment.concept,
        position=fragment.position,
        parent=-1 if fragment.parent is None else fragment.parent,
        epoch=fragment.epoch,
        key_name=fragment.key_name,
    )


def range_proof_to_pb(proof: RangeProof) -> pb.Fragment.RangeProof:
    """A run's range proof as carried by the run's first fragment."""
    return pb.Fragment.RangeProof(start=proof.start, end=proof.end, path=list(proof.path))


def _fragment_to_pb(fragment: Fragment, proof: RangeProof | None) -> pb.Fragment:
    message = fragment_header_to_pb(fragment)
    message.cipher_value = fragment.cipher_value
    if proof is not None:
        message.range_proof.CopyFrom(range_proof_to_pb(proof))
    return message


def manifest_to_pb(signed: SignedManifest, *, publisher_certificate: bytes) -> pb.Manifest:
    """The wire form of a signed manifest, with the publisher's certificate (PEM)."""
    manifest = signed.manifest
    return pb.Manifest(
        document_id=manifest.document_id,
        publisher=manifest.publisher,
        version=manifest.version,
        issued_at_ms=manifest.issued_at_ms,
        leaf_count=manifest.leaf_count,
        root=manifest.root,
        signature=signed.signature,
        publisher_certificate=publisher_certificate,
        ranges=[
            pb.Manifest.ConceptRange(
                concept=r.concept,
                epoch=r.epoch,
                first=r.first,
                count=r.count,
                previous=r.previous,
            )
            for r in manifest.ranges
        ],
        sequence=manifest.sequence,
    )


def dissemination_to_pb(
    signed: SignedManifest,
    items: Iterable[tuple[Fragment, RangeProof]],
    *,
    provenance: bytes,
    publisher_certificate: bytes,
) -> pb.Dissemination:
    """Build the wire form of (some of) a document's fragments.

    Args:
        signed: the signed manifest.
        items: the fragments to send, in leaf order, each with the range proof of the run it
            belongs to (``EncodedDocument.proofs[fragment_id]``); each proof is sent once, on
            the first fragment of its run.
        provenance: the canonical N-Quads of the provenance message.
        publisher_certificate: the publisher's certificate (PEM).
    """
    fragments = []
    previous: RangeProof | None = None
    for fragment, proof in items:
        fragments.append(_fragment_to_pb(fragment, None if proof == previous else proof))
        previous = proof
    return pb.Dissemination(
        manifest=manifest_to_pb(signed, publisher_certificate=publisher_certificate),
        fragments=fragments,
        provenance=provenance,
    )


def leaf_runs(
    fragments: Sequence[pb.Fragment], heads: Sequence[int] | None = None
) -> list[tuple[int, int, int]]:
    """The runs of leaves a message's fragments open: ``(index of the run's first fragment,
    first leaf, end leaf)`` per fragment carrying a range proof, in message order.

    Only the run boundaries are read here; the subscriber's codec checks the proofs themselves.
    ``heads``: the indexes of the fragments with a range proof, if the caller has them.

    Raises:
        ProtocolError: no fragment, a fragment before any run, a run whose fragment count
            differs from its length, or runs that overlap.
    """
    if heads is None:
        heads = [i for i, f in enumerate(fragments) if f.HasField("range_proof")]
    if not fragments:
        raise ProtocolError("the fragments do not fill their runs of leaves (none came)")
    if not heads or heads[0] != 0:
        first = fragments[0].fragment_id
        raise ProtocolError(f"fragment {first!r} lies outside every run of leaves")
    runs = []
    for head, after in zip(heads, [*heads[1:], len(fragments)], strict=True):
        proof = fragments[head].range_proof
        if proof.end <= proof.start:
            raise ProtocolError(f"empty run of leaves {proof.start}-{proof.end}")
        length = proof.end - proof.start
        if after - head > length:
            stray = fragments[head + length].fragment_id
            raise ProtocolError(f"fragment {stray!r} lies outside every run of leaves")
        if after - head < length:
            if after == len(fragments):
                raise ProtocolError("the fragments do not fill their runs of leaves")
            raise ProtocolError(f"a run of leaves ends {length - (after - head)} fragments short")
        runs.append((head, proof.start, proof.end))
    return runs


def leaf_ranges(fragments: Sequence[pb.Fragment]) -> LeafRanges:
    """The manifest leaves a message's fragments are, from the runs their range proofs open:
    what a provenance envelope must say the message carries (:mod:`xdn.provenance`).

    Raises:
        ProtocolError: as :func:`leaf_runs`.
    """
    return ranges_of_runs(leaf_runs(fragments))


def ranges_of_runs(runs: Sequence[tuple[int, int, int]]) -> LeafRanges:
    """The leaves ``runs`` (from :func:`leaf_runs`) cover.

    Raises:
        ProtocolError: the runs overlap.
    """
    try:
        ranges = LeafRanges.of((start, end) for _, start, end in runs)
    except ValueError as exc:
        raise ProtocolError(f"runs of leaves: {exc}") from None
    if ranges.count != sum(end - start for _, start, end in runs):
        raise ProtocolError("runs of leaves overlap")
    return ranges


def restrict_dissemination(
    message: pb.Dissemination, fragment_ids: Iterable[str]
) -> pb.Dissemination:
    """The same dissemination with only ``fragment_ids``, adjacent runs' proofs merged.

    For disseminators: routing selects whole concepts, whose runs' proofs travel on their first
    fragments; runs that end up adjacent are merged into one proof (one per contiguous run).
    Nothing is verified here; proofs that do not merge are passed on unchanged.
    """
    wanted = set(fragment_ids)
    out = pb.Dissemination()
    out.CopyFrom(message)
    del out.fragments[:]
    out.fragments.extend(f for f in message.fragments if f.fragment_id in wanted)
    heads: list[int] = []  # fragments carrying the proofs of the current contiguous run
    for index, fragment in enumerate([*out.fragments, None]):
        proof = fragment.range_proof if fragment is not None else None
        if fragment is not None and not fragment.HasField("range_proof"):
            continue
        if proof is not None and heads and out.fragments[heads[-1]].range_proof.end == proof.start:
            heads.append(index)
            continue
        _merge_heads(out, heads)
        heads = [index]
    return out


def _merge_heads(message: pb.Dissemination, heads: list[int]) -> None:
    if len(heads) < 2:
        return
    tree_size = message.manifest.leaf_count
    try:
        merged = merge_range_proofs(
            [
                RangeProof(
                    start=message.fragments[i].range_proof.start,
                    end=message.fragments[i].range_proof.end,
                    tree_size=tree_size,
                    path=tuple(message.fragments[i].range_proof.path),
                )
                for i in heads
            ]
        )
    except (TypeError, ValueError):
        return
    for index in heads[1:]:
        message.fragments[index].ClearField("range_proof")
    message.fragments[heads[0]].range_proof.CopyFrom(
        pb.Fragment.RangeProof(start=merged.start, end=merged.end, path=list(merged.path))
    )


def _manifest_from_pb(m: pb.Manifest) -> SignedManifest:
    return SignedManifest(
        manifest=Manifest(
            document_id=m.document_id,
            publisher=m.publisher,
            version=m.version,
            issued_at_ms=m.issued_at_ms,
            leaf_count=m.leaf_count,
            root=m.root,
            ranges=tuple(
                ConceptRange(
                    concept=r.concept,
                    epoch=r.epoch,
                    first=r.first,
                    count=r.count,
                    previous=r.previous,
                )
                for r in m.ranges
            ),
            sequence=m.sequence,
        ),
        signature=m.signature,
    )


def manifest_from_pb(m: pb.Manifest) -> SignedManifest:
    """Read a received manifest (unverified).

    Raises:
        ProtocolError: a field is malformed.
    """
    with _reading(f"manifest of {m.document_id!r}"):
        return _manifest_from_pb(m)


def checkpoint_to_pb(signed: SignedCheckpoint, *, publisher_certificate: bytes) -> pb.Checkpoint:
    """The wire form of a publisher's signed checkpoint."""
    c = signed.checkpoint
    return pb.Checkpoint(
        publisher=c.publisher,
        issued_at_ms=c.issued_at_ms,
        sequence=c.sequence,
        concepts=[
            pb.Checkpoint.ConceptSequence(concept=concept, latest=latest)
            for concept, latest in c.latest.items()
        ],
        signature=signed.signature,
        publisher_certificate=publisher_certificate,
        policy_version=c.policy_version,
    )


def checkpoint_from_pb(message: pb.Checkpoint) -> SignedCheckpoint:
    """Read a received checkpoint (unverified).

    Raises:
        ProtocolError: a field is malformed or a concept is listed twice.
    """
    latest = {c.concept: c.latest for c in message.concepts}
    with _reading(f"checkpoint of {message.publisher!r}"):
        if len(latest) != len(message.concepts):
            raise ValueError("a concept is listed twice")
        return SignedCheckpoint(
            checkpoint=Checkpoint(
                publisher=message.publisher,
                issued_at_ms=message.issued_at_ms,
                sequence=message.sequence,
                latest=latest,
                policy_version=message.policy_version,
            ),
            signature=message.signature,
        )


def entitlement_to_pb(
    signed: SignedEntitlement, *, publisher_certificate: bytes
) -> pb.Entitlement:
    """The wire form of a member's signed entitlement (routed to that member only)."""
    e = signed.entitlement
    return pb.Entitlement(
        publisher=e.publisher,
        subscriber=e.subscriber,
        certificate=e.certificate,
        policy_version=e.policy_version,
        issued_at_ms=e.issued_at_ms,
        valid_until_ms=e.valid_until_ms,
        concepts=sorted(e.concepts),
        conditional=sorted(e.conditional),
        signature=signed.signature,
        publisher_certificate=publisher_certificate,
    )


def entitlement_from_pb(message: pb.Entitlement) -> SignedEntitlement:
    """Read a received entitlement (unverified).

    Raises:
        ProtocolError: a field is malformed.
    """
    with _reading(f"entitlement from {message.publisher!r}"):
        return SignedEntitlement(
            entitlement=Entitlement(
                publisher=message.publisher,
                subscriber=message.subscriber,
                certificate=message.certificate,
                policy_version=message.policy_version,
                issued_at_ms=message.issued_at_ms,
                valid_until_ms=message.valid_until_ms,
                concepts=frozenset(message.concepts),
                conditional=frozenset(message.conditional),
            ),
            signature=message.signature,
        )


def _fragment_from_pb(f: pb.Fragment) -> Fragment:
    return Fragment(
        fragment_id=f.fragment_id,
        document_id=f.document_id,
        publisher=f.publisher,
        concept=f.concept,
        position=f.position,
        parent=None if f.parent < 0 else f.parent,
        epoch=f.epoch,
        key_name=f.key_name,
        cipher_value=f.cipher_value,
    )


def delivery_from_pb(message: pb.Dissemination) -> Delivery:
    """Read a received dissemination into an (unverified) codec delivery."""
    m = message.manifest
    with _reading(f"dissemination of {m.document_id!r}"):
        return Delivery(
            signed_manifest=_manifest_from_pb(m),
            fragments=tuple(_fragment_from_pb(f) for f in message.fragments),
            proofs=tuple(
                RangeProof(
                    start=f.range_proof.start,
                    end=f.range_proof.end,
                    tree_size=m.leaf_count,
                    path=tuple(f.range_proof.path),
                )
                for f in message.fragments
                if f.HasField("range_proof")
            ),
        )


def _signed(
    message: M,
    *,
    content: tuple[str | int, ...],
    routing: tuple[str | int, ...],
    wire: pb.GroupRekey | pb.KeyMessage | pb.DocumentKeys,
    what: str,
) -> Signed[M]:
    """A received key message with the signature and certificate ``wire`` carries (verified by
    the member).

    Raises:
        ProtocolError: the routing fields the sites read differ from the message's ``content``.
        SignatureError: no signature or no certificate.
    """
    if content != routing:
        raise ProtocolError(f"{what}: routing fields do not match the content")
    signature, certificate = wire.signature, wire.publisher_certificate
    if not signature or not certificate:
        raise SignatureError(f"{what} of {message.publisher}/{message.concept} is not signed")
    return Signed(message=message, signature=signature, certificate=certificate)


def rekey_to_pb(signed: Signed[RekeyMessage]) -> pb.GroupRekey:
    """The wire form of a signed LKH rekey broadcast."""
    message = signed.message
    return pb.GroupRekey(
        publisher=message.publisher,
        concept=message.concept,
        epoch=message.epoch,
        message=message.to_bytes(),
        signature=signed.signature,
        publisher_certificate=signed.certificate,
    )


def rekey_from_pb(message: pb.GroupRekey) -> Signed[RekeyMessage]:
    """Read a received rekey broadcast; its routing fields must match its content.

    The result is not verified yet (:func:`xdn.lkh.verify_key_message`).

    Raises:
        ProtocolError: malformed, or routing fields that differ from the content.
        SignatureError: no signature or no certificate.
    """
    rekey = RekeyMessage.from_bytes(message.message)
    return _signed(
        rekey,
        content=(rekey.publisher, rekey.concept, rekey.epoch),
        routing=(message.publisher, message.concept, message.epoch),
        wire=message,
        what="rekey message",
    )


def enrolment_to_pb(signed: Signed[Enrolment]) -> pb.KeyMessage:
    """The wire form of a signed LKH enrolment (routed to its member only)."""
    enrolment = signed.message
    return pb.KeyMessage(
        publisher=enrolment.publisher,
        concept=enrolment.concept,
        epoch=enrolment.epoch,
        subscriber=enrolment.member,
        sealed=enrolment.to_bytes(),
        signature=signed.signature,
        publisher_certificate=signed.certificate,
    )


def enrolment_from_pb(message: pb.KeyMessage) -> Signed[Enrolment]:
    """Read a received enrolment; its routing fields must match its content.

    The result is not verified yet (:func:`xdn.lkh.verify_key_message`).

    Raises:
        ProtocolError: malformed, or routing fields that differ from the content.
        SignatureError: no signature or no certificate.
    """
    enrolment = Enrolment.from_bytes(message.sealed)
    return _signed(
        enrolment,
        content=(enrolment.publisher, enrolment.concept, enrolment.epoch, enrolment.member),
        routing=(message.publisher, message.concept, message.epoch, message.subscriber),
        wire=message,
        what="key message",
    )


def document_keys_to_pb(signed: Signed[DocumentKeyGrant]) -> pb.DocumentKeys:
    """The wire form of a signed document-key grant (routed to its member only)."""
    grant = signed.message
    return pb.DocumentKeys(
        publisher=grant.publisher,
        concept=grant.concept,
        subscriber=grant.member,
        sealed=grant.to_bytes(),
        signature=signed.signature,
        publisher_certificate=signed.certificate,
    )


def document_keys_from_pb(message: pb.DocumentKeys) -> Signed[DocumentKeyGrant]:
    """Read a received document-key grant; its routing fields must match its content.

    The result is not verified yet (:func:`xdn.lkh.verify_key_message`).

    Raises:
        ProtocolError: malformed, or routing fields that differ from the content.
        SignatureError: no signature or no certificate.
    """
    grant = DocumentKeyGrant.from_bytes(message.sealed)
    return _signed(
        grant,
        content=(grant.publisher, grant.concept, grant.member),
        routing=(message.publisher, message.concept, message.subscriber),
        wire=message,
        what="document keys",
    )


def revocation_list_delivery(crl_pem: bytes) -> bytes:
    """The queued delivery relaying a site's CA-signed CRL (PEM) to a local subscriber."""
    return bytes(pb.Delivery(revocation_list=pb.RevocationList(crl=crl_pem)).SerializeToString())


def standing_to_pb(standing: Standing) -> pb.SiteStanding:
    """The wire form of where a site stands for a publisher."""
    return pb.SiteStanding(
        root=standing.root, policy_version=standing.policy_version, uplink=standing.uplink or ""
    )


def standing_from_pb(site: str, message: pb.SiteStanding) -> Standing:
    """Where site ``site`` says it stands.

    Raises:
        ProtocolError: no site name.
    """
    if not site:
        raise ProtocolError("a site's standing must name the site")
    return Standing(
        site=site,
        root=message.root,
        policy_version=message.policy_version,
        uplink=message.uplink or None,
    )


def reach_from_pb(ack: pb.PublishAck) -> Reach:
    """What a ``PublishAck`` says the document reached.

    Raises:
        ProtocolError: ``published_before`` names no version.
    """
    before = None
    if ack.HasField("published_before"):
        if ack.published_before.version < 1:
            raise ProtocolError("a PublishAck's published_before names no version")
        before = PublishedBefore(
            version=ack.published_before.version,
            sequence=ack.published_before.sequence,
            provenance=ack.published_before.provenance,
        )
    return Reach(
        fragments=ack.fragments_accepted,
        destinations=ack.links_reached,
        subscribers=ack.subscribers_reached,
        retained=ack.retained,
        before=before,
    )


def published_before_to_pb(before: PublishedBefore) -> pb.PublishedBefore:
    """The wire form of what a site routed before under a publish id."""
    return pb.PublishedBefore(
        version=before.version, sequence=before.sequence, provenance=before.provenance
    )
