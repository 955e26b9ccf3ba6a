"""A document's deliveries assembled from serialized parts parse as the messages built field
by field would, and name the manifest leaves they carry (disseminator.payloads)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disseminator.payloads import (
    DocumentParts,
    ReceivedDocument,
    _records_size,
    _varint,
    read_document,
)
from disseminator.store import Append, Piece
from xdn.errors import ProtocolError
from xdn.provenance import LeafRanges
from xdn.wire.v1 import dissemination_pb2 as pb

IDENTITY = ("pub", "doc-1")
CONCEPTS = frozenset({"A", "B", "C", "D"})


def _dissemination(
    runs: list[tuple[str, int]], *, first_leaf: int = 0, gaps: dict[int, int] | None = None
) -> pb.Dissemination:
    """One run per (concept, length), in order, each opened by a range proof; a concept's runs
    are consecutive (the manifest's range table gives each concept one range of leaves);
    ``gaps``: leaves skipped before run i (not carried here)."""
    diss = pb.Dissemination(
        manifest=pb.Manifest(document_id="doc-1", publisher="pub", version=3),
        provenance=b"<a> <b> <c> <d> .\n",
    )
    leaf = first_leaf
    ranges: dict[str, list[int]] = {}
    for run, (concept, length) in enumerate(runs):
        leaf += (gaps or {}).get(run, 0)
        span = ranges.setdefault(concept, [leaf, leaf])
        span[1] = leaf + length
        for index in range(length):
            fragment = diss.fragments.add(
                fragment_id=f"f{leaf}", document_id="doc-1", publisher="pub", concept=concept,
                position=leaf, cipher_value=bytes([leaf % 256]) * (10 + leaf % 300),
            )
            if index == 0:
                fragment.range_proof.start, fragment.range_proof.end = leaf, leaf + length
                fragment.range_proof.path.append(b"\x01" * 32)
            leaf += 1
    for concept, (first, end) in ranges.items():
        diss.manifest.ranges.add(concept=concept, first=first, count=end - first)
    diss.manifest.leaf_count = leaf
    return diss


def _records(diss: pb.Dissemination) -> pb.DisseminationRecords:
    return pb.DisseminationRecords.FromString(diss.SerializeToString())


def _parts(diss: pb.Dissemination) -> DocumentParts:
    return DocumentParts(_records(diss), IDENTITY, CONCEPTS)


def _expected(diss: pb.Dissemination, concepts: set[str], provenance: bytes) -> pb.Delivery:
    out = pb.Dissemination(
        manifest=diss.manifest,
        fragments=[f for f in diss.fragments if f.concept in concepts],
        provenance=provenance,
    )
    return pb.Delivery(dissemination=out)


def _bytes(parts: DocumentParts, pieces: tuple[Piece, ...]) -> bytes:
    """What the store sends for ``pieces`` of the document's shared body."""
    return Append(kind="subscriber", name="s", body=parts.body, pieces=pieces).delivery()


@settings(max_examples=60, deadline=None)
@given(
    runs=st.lists(
        st.tuples(
            st.sampled_from(sorted(CONCEPTS)), st.lists(st.integers(1, 40), min_size=1, max_size=3)
        ),
        min_size=1, max_size=4, unique_by=lambda run: run[0],
    ).map(lambda concepts: [(c, n) for c, lengths in concepts for n in lengths]),
    chosen=st.sets(st.sampled_from(sorted(CONCEPTS)), min_size=1),
    provenance=st.binary(max_size=300),
)
def test_an_assembled_delivery_is_the_message_built_field_by_field(
    runs: list[tuple[str, int]], chosen: set[str], provenance: bytes
) -> None:
    diss = _dissemination(runs)
    parts = _parts(diss)
    segments = parts.chosen(chosen)
    payload = _bytes(parts, parts.delivery(segments, (provenance,)))
    assert pb.Delivery.FromString(payload) == _expected(diss, chosen, provenance)
    if segments:
        leaves = {f.position for f in diss.fragments if f.concept in chosen}
        assert set(parts.leaves_of(segments)) == leaves
    assert parts.leaves == LeafRanges(((0, sum(n for _, n in runs)),))
    whole = pb.Dissemination.FromString(_bytes(parts, parts.dissemination((provenance,))))
    assert whole == pb.Dissemination(
        manifest=diss.manifest, fragments=diss.fragments, provenance=provenance
    )
    assert parts.count == len(diss.fragments)


def test_segments_follow_the_concept_runs_and_their_leaves() -> None:
    diss = _dissemination([("A", 3), ("A", 1), ("B", 2)], first_leaf=5, gaps={1: 2})
    parts = _parts(diss)
    assert [(s.concept, s.start, s.end, s.first_leaf) for s in parts.segments] == [
        ("A", 0, 3, 5), ("A", 3, 4, 10), ("B", 4, 6, 11),
    ]
    assert str(parts.leaves_of(parts.chosen({"A"}))) == "5-8 10-11"
    assert parts.concepts == {"A", "B"}


def test_runs_of_another_document_or_an_unknown_concept_are_refused() -> None:
    other = _dissemination([("A", 2), ("B", 1)])
    other.fragments[2].document_id = "doc-2"
    with pytest.raises(ProtocolError, match="fragment 'f2' is not of this document"):
        _parts(other)
    unknown = _dissemination([("A", 2), ("Z", 1)])
    with pytest.raises(ProtocolError, match="fragment 'f2': unknown concept 'Z'"):
        _parts(unknown)
    short = _dissemination([("A", 2)])
    del short.fragments[1]
    with pytest.raises(ProtocolError, match="do not fill their runs"):
        _parts(short)
    early = _dissemination([("A", 2), ("B", 2)])
    del early.fragments[1]  # B's run starts where A's should go on
    with pytest.raises(ProtocolError, match="fragment 'f3' lies outside every run"):
        _parts(early)
    garbled = _records(_dissemination([("A", 2)]))
    garbled.fragments[0] = b"\xff\xff"
    with pytest.raises(ProtocolError, match="not a valid Fragment"):
        DocumentParts(garbled, IDENTITY, CONCEPTS)


def test_a_site_reads_only_the_fragment_that_opens_each_run() -> None:
    """What is inside the other fragments travels unread, as bytes: the subscriber checks each
    against the publisher's Merkle root (which binds its document and concept)."""
    diss = _dissemination([("A", 3), ("B", 2)])
    diss.fragments[1].document_id = "doc-2"
    diss.fragments[4].concept = "A"
    records = _records(diss)
    records.fragments[2] = b"\xff\xff"  # not even a Fragment
    parts = DocumentParts(records, IDENTITY, CONCEPTS)
    assert [(s.concept, s.start, s.end) for s in parts.segments] == [("A", 0, 3), ("B", 3, 5)]
    expected = pb.DisseminationRecords(manifest=records.manifest, fragments=records.fragments[:3])
    payload = _bytes(parts, parts.delivery(parts.chosen({"A"}), ()))
    wrapped = expected.SerializeToString()
    assert payload == bytes([2 << 3 | 2]) + _varint(len(wrapped)) + wrapped


def test_two_runs_of_one_concept_name_their_own_leaves() -> None:
    diss = _dissemination([("A", 2), ("A", 2)], gaps={1: 8})
    parts = _parts(diss)
    assert [(s.start, s.end, s.first_leaf) for s in parts.segments] == [(0, 2, 0), (2, 4, 10)]
    assert str(parts.leaves_of(parts.chosen({"A"}))) == "0-2 10-12"


def test_a_run_of_several_concepts_is_refused() -> None:
    merged = _dissemination([("A", 2), ("B", 2)])
    merged.fragments[2].ClearField("range_proof")
    merged.fragments[0].range_proof.end = 4  # one run, one proof, two concepts
    with pytest.raises(ProtocolError, match="run of leaves 0-4 is not all of concept 'A'"):
        _parts(merged)
    unlisted = _dissemination([("A", 2)])
    del unlisted.manifest.ranges[:]
    with pytest.raises(ProtocolError, match="run of leaves 0-2 is not all of concept 'A'"):
        _parts(unlisted)


def test_no_segment_names_no_leaves() -> None:
    parts = _parts(_dissemination([("A", 2)]))
    assert parts.chosen({"B"}) == []
    with pytest.raises(ProtocolError, match="no fragment chosen"):
        parts.leaves_of([])


@given(sequence=st.integers(1, 2**64 - 1))
def test_a_queued_delivery_goes_out_as_stored_with_its_sequence_number(sequence: int) -> None:
    from disseminator.payloads import Outgoing

    diss = _dissemination([("A", 3), ("B", 2)])
    parts = _parts(diss)
    pieces = parts.delivery(parts.segments, (b"prov",))
    expected = _expected(diss, {"A", "B"}, b"prov")
    expected.sequence = sequence
    chunks = Append(kind="subscriber", name="s", body=parts.body, pieces=pieces).chunks()
    for out in (Outgoing(sequence, _bytes(parts, pieces)), Outgoing(sequence, chunks)):
        assert pb.Delivery.FromString(out.delivery_bytes()) == expected
        assert pb.ServerMessage.FromString(out.server_message_bytes()) == pb.ServerMessage(
            delivery=expected
        )
        assert out.parsed() == expected


def test_a_field_this_site_does_not_know_is_left_out_of_the_deliveries() -> None:
    diss = _dissemination([("A", 3), ("B", 2)])
    unknown = b"\x7a\x03abc"  # field 15, length-delimited: from a newer publisher
    received = pb.DisseminationRecords.FromString(unknown + diss.SerializeToString())
    parts = DocumentParts(received, IDENTITY, CONCEPTS)
    delivered = pb.Delivery.FromString(_bytes(parts, parts.delivery(parts.chosen({"B"}), (b"p",))))
    assert delivered == _expected(diss, {"B"}, b"p")


@settings(max_examples=40, deadline=None)
@given(received=st.binary(max_size=200), added=st.binary(max_size=200))
def test_an_outgoing_chain_is_the_received_one_stored_once_then_the_hop(
    received: bytes, added: bytes
) -> None:
    diss = _dissemination([("A", 2), ("B", 1)])
    diss.provenance = received
    parts = _parts(diss)
    pieces = parts.delivery(parts.chosen({"A"}), (*parts.received_provenance, added))
    if received:  # a span of the body, not a copy, followed by a line break if it lacks one
        assert parts.received_provenance[0] in pieces
    expected = received + (b"\n" if received and not received.endswith(b"\n") else b"") + added
    assert pb.Delivery.FromString(_bytes(parts, pieces)) == _expected(diss, {"A"}, expected)
    retained = parts.dissemination(parts.received_provenance)
    kept = pb.Dissemination.FromString(_bytes(parts, retained))
    assert kept.provenance == expected[: len(expected) - len(added)]  # what a site retains


@given(st.lists(st.one_of(
    st.integers(0, 300), st.integers(128, 16383), st.integers(0, 2**28 - 1)
), max_size=50))  # fmt: skip
def test_record_sizes_are_counted_as_the_wire_writes_them(lengths: list[int]) -> None:
    assert _records_size(lengths) == sum(1 + len(_varint(n)) + n for n in lengths)


def test_a_site_reads_a_document_from_its_uplink_as_records_with_its_bytes() -> None:
    from disseminator.uplink import read_delivery

    diss = _dissemination([("A", 3), ("B", 2)])
    data = pb.Delivery(sequence=7, dissemination=diss).SerializeToString()
    read = read_delivery(data)
    assert isinstance(read, ReceivedDocument)
    assert read.sequence == 7 and read.dissemination == _records(diss)
    assert read.wire == diss.SerializeToString()
    heartbeat = pb.Delivery(heartbeat=pb.Heartbeat(interval_ms=5))
    assert read_delivery(heartbeat.SerializeToString()) == heartbeat
    garbled = _records(diss)
    garbled.fragments[4] = b"\xff\xff"  # forwarded unread: its subscriber refuses it
    read = read_delivery(pb.DeliveryRecords(sequence=8, dissemination=garbled).SerializeToString())
    assert isinstance(read, ReceivedDocument) and read.dissemination == garbled


def test_a_delivery_records_would_read_otherwise_is_parsed_whole() -> None:
    """A later body replaces an earlier one (a oneof), which records would not see."""
    from disseminator.uplink import read_delivery

    key = pb.Delivery(sequence=3, key=pb.KeyMessage(publisher="pub", concept="A"))
    document = pb.Delivery(dissemination=_dissemination([("A", 1)]))
    read = read_delivery(document.SerializeToString() + key.SerializeToString())
    assert read == key
    twice = read_document(document.SerializeToString() * 2)  # merged by the parser
    assert twice is not None and twice.wire is None


@settings(max_examples=80, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(sorted(CONCEPTS)), st.integers(1, 3)), min_size=1, max_size=3
    ).map(lambda runs: list(dict(runs).items())),
    chosen=st.sets(st.sampled_from(sorted(CONCEPTS))),
    data=st.data(),
)
def test_deliveries_are_spans_of_the_bytes_as_received_only_when_they_lie_as_read(
    runs: list[tuple[str, int]], chosen: set[str], data: st.DataObject
) -> None:
    """Any order of the fields, and a field repeated, is a valid encoding of the message:
    such bytes are not forwarded as they came but serialized again."""
    diss = _dissemination(runs)
    fields = [
        pb.Dissemination(manifest=diss.manifest).SerializeToString(),
        *(pb.Dissemination(fragments=[f]).SerializeToString() for f in diss.fragments),
        pb.Dissemination(provenance=diss.provenance).SerializeToString(),
    ]
    order = data.draw(st.permutations(range(len(fields))).filter(
        lambda order: [order.index(i) for i in range(1, len(fields) - 1)] == sorted(
            order.index(i) for i in range(1, len(fields) - 1)
        )
    ), label="order")  # fragments keep their order: it is theirs  # fmt: skip
    repeated = [len(fields) - 1] * data.draw(st.integers(0, 1), label="chain twice")
    wire = b"".join(fields[i] for i in [*order, *repeated])
    records = pb.DisseminationRecords.FromString(wire)
    assert records == _records(diss)
    parts = DocumentParts(records, IDENTITY, CONCEPTS, wire)
    assert (parts.body.data is wire) == (wire == diss.SerializeToString())
    segments = parts.chosen(chosen)
    delivered = _bytes(parts, parts.delivery(segments, (*parts.received_provenance, b"hop\n")))
    provenance = diss.provenance + b"hop\n"
    assert pb.Delivery.FromString(delivered) == _expected(diss, chosen, provenance)


def test_bytes_that_only_look_laid_out_at_the_segment_heads_are_serialized_again() -> None:
    """A fragment's opaque bytes can hold a fragment's tag where a segment would start if the
    manifest came first: the manifest's own record is looked for too."""
    diss = _dissemination([("A", 1)])
    diss.fragments[0].cipher_value = bytes([2 << 3 | 2]) * 600  # a fragment's tag, throughout
    manifest = pb.Dissemination(manifest=diss.manifest).SerializeToString()
    fragment = pb.Dissemination(fragments=diss.fragments).SerializeToString()
    chain = pb.Dissemination(provenance=diss.provenance).SerializeToString()
    wire = fragment + manifest + chain
    assert wire[len(manifest)] == 2 << 3 | 2  # where the segment would start
    parts = DocumentParts(pb.DisseminationRecords.FromString(wire), IDENTITY, CONCEPTS, wire)
    assert parts.body.data is not wire
    delivered = _bytes(parts, parts.delivery(parts.segments, parts.received_provenance))
    assert pb.Delivery.FromString(delivered) == _expected(diss, {"A"}, diss.provenance)


@settings(max_examples=40, deadline=None)
@given(sequence=st.integers(1, 2**64 - 1), part_bytes=st.integers(1024, 4096))
def test_a_delivery_larger_than_a_part_goes_out_in_parts_that_join_to_it(
    sequence: int, part_bytes: int
) -> None:
    from disseminator.payloads import Outgoing

    diss = _dissemination([("A", 30), ("B", 20)])
    parts = _parts(diss)
    pieces = parts.delivery(parts.segments, (b"prov" * 300,))
    chunks = Append(kind="subscriber", name="s", body=parts.body, pieces=pieces).chunks()
    out = Outgoing(sequence, chunks)
    whole = out.delivery_bytes()
    assert len(whole) > part_bytes
    assert out.in_parts(part_bytes) and not out.in_parts(len(whole))
    sent = [pb.Delivery.FromString(m) for m in out.delivery_messages(part_bytes)]
    wrapped = [pb.ServerMessage.FromString(m) for m in out.server_messages(part_bytes)]
    assert [m.delivery for m in wrapped] == sent
    assert {d.sequence for d in sent} == {sequence}
    assert all(d.WhichOneof("body") == "part" for d in sent)
    assert [d.part.size for d in sent] == [len(whole)] + [0] * (len(sent) - 1)
    assert [d.part.more for d in sent] == [True] * (len(sent) - 1) + [False]
    assert all(len(d.part.data) <= part_bytes for d in sent)
    assert b"".join(d.part.data for d in sent) == whole
    assert list(out.delivery_messages(len(whole))) == [whole]  # small enough: whole, as before
    assert list(out.server_messages(len(whole))) == [out.server_message_bytes()]
