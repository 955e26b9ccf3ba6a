"""The wire form of deliveries: range table in the manifest, run proofs on fragments, and the
manifest leaves they carry."""

from __future__ import annotations

from collections.abc import Collection
from itertools import pairwise

import pytest

from xdn import crypto, xmlsafe
from xdn.codec import ConceptKey, EncodedDocument, View, concept_order, decode, encode
from xdn.errors import DecryptError, ProtocolError
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.provenance import LeafRanges
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import (
    delivery_from_pb,
    dissemination_to_pb,
    leaf_ranges,
    restrict_dissemination,
)

SIGNER = crypto.generate_private_key()
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
MAPPING = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ONTOLOGY)
GROUP = {c: crypto.sha256(c.encode()) for c in ONTOLOGY.concepts}
KEYS = {("production-dept", c, 1): k for c, k in GROUP.items()}


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    doc = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(doc), MAPPING)
    return encode(
        mapped,
        document_id="order-1",
        publisher="production-dept",
        version=1,
        issued_at_ms=1,
        keys={
            c: ConceptKey(publisher="production-dept", concept=c, epoch=1, group_key=k)
            for c, k in GROUP.items()
        },
        signer=SIGNER,
        concept_order=concept_order(ONTOLOGY),
    )


@pytest.fixture(scope="module")
def message(encoded: EncodedDocument) -> pb.Dissemination:
    return dissemination_to_pb(
        encoded.signed_manifest,
        [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
        provenance=b"",
        publisher_certificate=b"",
    )


def open_message(message: pb.Dissemination, concepts: object = None) -> View:
    return decode(
        delivery_from_pb(message),
        publisher_key=SIGNER.public_key(),
        keys=KEYS,
        concepts=concepts,  # type: ignore[arg-type]
    )


def only(message: pb.Dissemination, concepts: Collection[str]) -> pb.Dissemination:
    """What the disseminator does: copy the manifest, keep the fragments of some concepts."""
    return pb.Dissemination(
        manifest=message.manifest,
        fragments=[f for f in message.fragments if f.concept in concepts],
        provenance=message.provenance,
    )


def test_round_trip_with_one_proof_per_concept(
    encoded: EncodedDocument, message: pb.Dissemination
) -> None:
    assert [(r.concept, r.first, r.count) for r in message.manifest.ranges] == [
        (r.concept, r.first, r.count) for r in encoded.manifest.ranges
    ]
    carriers = [f.concept for f in message.fragments if f.HasField("range_proof")]
    assert carriers == [r.concept for r in encoded.manifest.ranges]
    view = open_message(message)
    assert len(view.fragments) == encoded.manifest.leaf_count


def test_a_disseminators_selection_keeps_the_right_proofs(message: pb.Dissemination) -> None:
    wanted = ONTOLOGY.block("Production")
    view = open_message(only(message, wanted), concepts=wanted)
    assert {h.concept for h in view.fragments} == wanted & {f.concept for f in message.fragments}


def test_restrict_merges_adjacent_runs(message: pb.Dissemination) -> None:
    wanted = ONTOLOGY.block("WorkOrder")
    ids = [f.fragment_id for f in message.fragments if f.concept in wanted]
    restricted = restrict_dissemination(message, ids)
    assert [f.fragment_id for f in restricted.fragments] == ids
    proofs = [f.range_proof for f in restricted.fragments if f.HasField("range_proof")]
    assert len(proofs) == 1  # the block of WorkOrder is one run of leaves
    assert proofs[0].end - proofs[0].start == len(ids)
    view = open_message(restricted, concepts=wanted)
    assert len(view.fragments) == len(ids)
    assert restricted.manifest == message.manifest


def test_restrict_keeps_runs_that_do_not_touch(message: pb.Dissemination) -> None:
    ids = [f.fragment_id for f in message.fragments if f.concept in {"Machine", "Measurement"}]
    restricted = restrict_dissemination(message, ids)
    assert sum(f.HasField("range_proof") for f in restricted.fragments) == 2
    open_message(restricted, concepts={"Machine", "Measurement"})


def test_a_stripped_proof_is_refused(message: pb.Dissemination) -> None:
    tampered = pb.Dissemination()
    tampered.CopyFrom(message)
    carrier = next(f for f in tampered.fragments if f.HasField("range_proof"))
    carrier.ClearField("range_proof")
    with pytest.raises(DecryptError):
        open_message(tampered)


def test_a_widened_proof_is_refused(message: pb.Dissemination) -> None:
    tampered = pb.Dissemination()
    tampered.CopyFrom(message)
    carrier = next(f for f in tampered.fragments if f.HasField("range_proof"))
    carrier.range_proof.end += 1
    with pytest.raises(DecryptError):
        open_message(tampered)


def test_a_malformed_manifest_is_a_protocol_error(message: pb.Dissemination) -> None:
    tampered = pb.Dissemination()
    tampered.CopyFrom(message)
    tampered.manifest.ranges[0].count += 1
    with pytest.raises(ProtocolError, match="malformed dissemination"):
        delivery_from_pb(tampered)
    tampered.CopyFrom(message)
    tampered.fragments[0].range_proof.start = tampered.fragments[0].range_proof.end
    with pytest.raises(ProtocolError, match="malformed dissemination"):
        delivery_from_pb(tampered)


# ---- the leaves a message carries, as its provenance must name them (wireconv.leaf_ranges) ----


def _ranges(message: pb.Dissemination) -> dict[str, tuple[int, int]]:
    return {r.concept: (r.first, r.first + r.count) for r in message.manifest.ranges}


def test_leaf_ranges_are_the_runs_the_proofs_open(message: pb.Dissemination) -> None:
    assert leaf_ranges(message.fragments) == LeafRanges(((0, message.manifest.leaf_count),))
    ranges = _ranges(message)
    for concepts in ({"Machine", "Measurement"}, ONTOLOGY.block("WorkOrder"), {"Machine"}):
        selected = only(message, concepts)
        held = {f.concept for f in selected.fragments}
        expected = LeafRanges.of(ranges[c] for c in held)
        assert leaf_ranges(selected.fragments) == expected
        ids = [f.fragment_id for f in selected.fragments]
        merged = restrict_dissemination(message, ids)  # fewer, longer proofs: the same leaves
        assert leaf_ranges(merged.fragments) == expected
        assert expected.count == len(ids)


def _copy(message: pb.Dissemination) -> pb.Dissemination:
    out = pb.Dissemination()
    out.CopyFrom(message)
    return out


def _carriers(message: pb.Dissemination) -> list[int]:
    return [i for i, f in enumerate(message.fragments) if f.HasField("range_proof")]


def test_a_fragment_outside_every_run_is_refused(message: pb.Dissemination) -> None:
    tampered = _copy(message)
    tampered.fragments[0].ClearField("range_proof")
    with pytest.raises(ProtocolError, match="lies outside every run of leaves"):
        leaf_ranges(tampered.fragments)
    extra = _copy(message)  # one fragment more than the last run holds
    extra.fragments.append(extra.fragments[-1])
    extra.fragments[-1].ClearField("range_proof")
    with pytest.raises(ProtocolError, match="lies outside every run of leaves"):
        leaf_ranges(extra.fragments)


def test_a_run_short_of_fragments_is_refused(message: pb.Dissemination) -> None:
    carriers = [*_carriers(message), len(message.fragments)]
    end = next(b for a, b in pairwise(carriers) if b - a > 1)  # a run of several fragments
    short = _copy(message)
    del short.fragments[end - 1]  # loses its last one
    with pytest.raises(ProtocolError, match="a run of leaves ends 1 fragments short"):
        leaf_ranges(short.fragments)
    with pytest.raises(ProtocolError, match="do not fill their runs"):
        leaf_ranges(message.fragments[: end - 1])  # ... and no run after it


def test_overlapping_and_empty_runs_are_refused(message: pb.Dissemination) -> None:
    first, second = _carriers(message)[:2]
    overlapping = _copy(message)
    proof = overlapping.fragments[second].range_proof
    proof.start, proof.end = proof.start - 1, proof.end - 1  # same length, one leaf back
    with pytest.raises(ProtocolError, match="runs of leaves overlap"):
        leaf_ranges(overlapping.fragments)
    twice = _copy(message)  # the first run sent twice
    twice.fragments.extend(message.fragments[first:second])
    with pytest.raises(ProtocolError, match="overlap"):
        leaf_ranges(twice.fragments)
    empty = _copy(message)
    empty.fragments[first].range_proof.end = empty.fragments[first].range_proof.start
    with pytest.raises(ProtocolError, match="empty run of leaves"):
        leaf_ranges(empty.fragments)
    with pytest.raises(ProtocolError, match="do not fill"):
        leaf_ranges([])
