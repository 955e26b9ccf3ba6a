"""A document staged in the store is read from its protobuf framing, not parsed whole
(disseminator.stored_documents, xdn.wire_scan): the deliveries laid out from it are
exactly those laid out from the parsed message, its ciphertext is never read, and malformed,
truncated or oddly laid out bytes are refused with a ProtocolError, never anything else."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_payloads import CONCEPTS, IDENTITY, _dissemination  # (the same documents)

from disseminator import stored_documents
from disseminator.payloads import DocumentLayout, DocumentParts
from disseminator.store import Append, Body, Piece, Retained, Store
from disseminator.stored_documents import (
    FIELD_BYTES,
    StagedDelivery,
    read_delivery,
    read_request,
    retained_document,
    scan,
)
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_scan import Cursor, MemorySource

KEY = pb.KeyMessage(publisher="pub", concept="A", epoch=2, subscriber="alice", sealed=b"k" * 40)


def _request(diss: pb.Dissemination) -> bytes:
    return bytes(pb.PublishRequest(dissemination=diss, keys=[KEY]).SerializeToString())


def _bytes(layout: DocumentLayout, pieces: tuple[Piece, ...]) -> bytes:
    return Append(kind="subscriber", name="s", body=layout.body, pieces=pieces).delivery()


def _staged(tmp_path: Path, data: bytes) -> tuple[Store, Body]:
    store = Store(tmp_path / "site.sqlite")
    staging = store.stage(len(data), chunk_bytes=777)  # chunks cut through every field
    for at in range(0, len(data), 1_000):
        staging.write(data[at:at + 1_000])
    return store, Body(staging.finish())


runs_strategy = st.lists(
    st.tuples(st.sampled_from(sorted(CONCEPTS)), st.lists(st.integers(1, 20), min_size=1,
                                                            max_size=3)),
    min_size=1, max_size=4, unique_by=lambda run: run[0],
).map(lambda concepts: [(c, n) for c, lengths in concepts for n in lengths])  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    runs=runs_strategy,
    chosen=st.sets(st.sampled_from(sorted(CONCEPTS)), min_size=1),
    provenance=st.binary(max_size=300),
)
def test_a_scanned_request_lays_out_what_the_parsed_one_does(
    runs: list[tuple[str, int]], chosen: set[str], provenance: bytes
) -> None:
    diss = _dissemination(runs)
    diss.provenance = provenance
    records = pb.DisseminationRecords.FromString(diss.SerializeToString())
    parsed = DocumentParts(records, IDENTITY, CONCEPTS)
    staged = read_request(Body(_request(diss)), "a test request")
    assert list(staged.rest.keys) == [KEY] and not staged.rest.HasField("dissemination")
    assert staged.document is not None and staged.document.manifest == diss.manifest
    layout, chain = scan(staged.document, CONCEPTS)
    assert chain == provenance
    assert layout.segments == parsed.segments and layout.leaves == parsed.leaves
    assert (layout.count, layout.concepts) == (parsed.count, parsed.concepts)
    sent = []
    for parts in (layout, parsed):  # the same bytes go out, from either
        hop = (*parts.received_provenance, b"<hop> .\n")
        sent.append((_bytes(parts, parts.delivery(parts.chosen(chosen), hop)),
                     _bytes(parts, parts.dissemination(hop))))  # fmt: skip
    assert sent[0] == sent[1]


def test_a_staged_delivery_from_the_store_is_read_span_by_span(tmp_path: Path) -> None:
    diss = _dissemination([("A", 3), ("B", 2), ("C", 4)])
    data = pb.Delivery(sequence=7, dissemination=diss).SerializeToString()
    store, body = _staged(tmp_path, data)
    staged = read_delivery(body, "a test delivery")
    assert isinstance(staged, StagedDelivery) and staged.sequence == 7
    layout, _ = scan(staged.document, CONCEPTS)
    pieces = layout.delivery(layout.chosen({"B"}), layout.received_provenance)
    expected = pb.Delivery(dissemination=pb.Dissemination(
        manifest=diss.manifest, fragments=diss.fragments[3:5], provenance=diss.provenance,
    ))  # fmt: skip
    assert pb.Delivery.FromString(_bytes(layout, pieces)) == expected
    kept = Retained(publisher="pub", document="doc-1", version=3, body=body,
                    pieces=layout.dissemination(layout.received_provenance))  # fmt: skip
    again, chain = scan(retained_document(kept), CONCEPTS)
    assert chain == diss.provenance and again.segments == layout.segments
    assert _bytes(again, again.delivery(again.chosen({"B"}), again.received_provenance)) == (
        _bytes(layout, pieces)
    )
    store.close()


def test_the_ciphertext_is_never_read(monkeypatch: pytest.MonkeyPatch) -> None:
    class Counting(MemorySource):
        read_bytes = 0

        def read(self, start: int, end: int) -> bytes:
            self.read_bytes += end - start
            return super().read(start, end)

    diss = _dissemination([("A", 3), ("B", 2)])
    for fragment in diss.fragments:
        fragment.cipher_value = b"\x00" * 1_000_000
    data = _request(diss)
    source = Counting(data)
    monkeypatch.setattr(stored_documents, "_source", lambda body: source)
    staged = read_request(Body(data), "a test request")
    assert staged.document is not None
    layout, _ = scan(staged.document, CONCEPTS)
    assert layout.count == 5 and len(data) > 5_000_000
    assert 0 < source.read_bytes < 8 * 64 * 1024  # a window here and there, no ciphertext


def test_non_document_deliveries_are_parsed_whole_and_parts_again_refused() -> None:
    key = pb.Delivery(sequence=3, key=KEY)
    assert read_delivery(Body(key.SerializeToString()), "d") == key
    nested = pb.Delivery(sequence=3, part=pb.Part(data=b"x", size=1)).SerializeToString()
    with pytest.raises(ProtocolError, match="joins to parts again"):
        read_delivery(Body(nested), "d")
    both = pb.Delivery(sequence=3, dissemination=_dissemination([("A", 1)])).SerializeToString()
    both += pb.Delivery(key=KEY).SerializeToString()  # a later body field is the one in force
    assert read_delivery(Body(both), "d").WhichOneof("body") == "key"  # type: ignore[union-attr]


def _refused(data: bytes, match: str) -> None:
    with pytest.raises(ProtocolError, match=match):
        staged = read_request(Body(data), "a test request")
        assert staged.document is not None
        scan(staged.document, CONCEPTS)


def test_fields_out_of_their_written_order_are_refused() -> None:
    diss = _dissemination([("A", 2), ("B", 1)])
    records = pb.DisseminationRecords.FromString(diss.SerializeToString())
    manifest = bytes([1 << 3 | 2]) + _len(records.manifest.SerializeToString())
    fragment = [bytes([2 << 3 | 2]) + _len(f) for f in records.fragments]
    chain = bytes([3 << 3 | 2]) + _len(b"<a> <b> <c> .\n")
    for body, match in [
        (fragment[0] + manifest + b"".join(fragment[1:]), "does not start with its manifest"),
        (manifest + fragment[0] + chain + b"".join(fragment[1:]), "not laid out"),
        (manifest + b"".join(fragment) + chain + chain, "not laid out"),
        (manifest + b"".join(fragment) + b"\x20\x01", "not laid out"),  # an unknown field
        (manifest, "none came"),
        (manifest + fragment[0], "do not fill their runs"),
        (b"", "does not start with its manifest"),
    ]:
        _refused(bytes([1 << 3 | 2]) + _len(body), match)
    twice = _request(diss) + bytes([1 << 3 | 2]) + _len(manifest)
    _refused(twice, "a second dissemination")


def test_what_the_parsed_reading_refuses_the_scan_refuses_too() -> None:
    other = _dissemination([("A", 2), ("B", 1)])
    other.fragments[2].document_id = "doc-2"
    _refused(_request(other), "fragment 'f2' is not of this document")
    unknown = _dissemination([("A", 2), ("Z", 1)])
    _refused(_request(unknown), "fragment 'f2': unknown concept 'Z'")
    early = _dissemination([("A", 2), ("B", 2)])
    del early.fragments[1]
    _refused(_request(early), "fragment 'f3' lies outside every run")
    merged = _dissemination([("A", 2), ("B", 2)])
    merged.fragments[2].ClearField("range_proof")
    merged.fragments[0].range_proof.end = 4
    _refused(_request(merged), "run of leaves 0-4 is not all of concept 'A'")


def test_malformed_fragments_are_refused_even_inside_a_run() -> None:
    """Unlike a site reading a parsed message's records, the scan reads every fragment's
    header fields (not its ciphertext), as the root's whole parse did: malformed protobuf
    never goes further."""
    records = pb.DisseminationRecords.FromString(
        _dissemination([("A", 3)]).SerializeToString()
    )
    records.fragments[1] = b"\xff\xff"
    _refused(b"\x0a" + _len(records.SerializeToString()), "malformed")
    records.fragments[1] = pb.Fragment(fragment_id="x").SerializeToString().replace(b"x", b"\xff")
    _refused(b"\x0a" + _len(records.SerializeToString()), "not a valid Fragment")


@settings(max_examples=60, deadline=None)
@given(cut=st.integers(0, 10_000), flip=st.tuples(st.integers(0, 10_000), st.integers(0, 255)))
def test_truncated_or_garbled_bytes_are_refused_never_crash(
    cut: int, flip: tuple[int, int]
) -> None:
    data = _request(_dissemination([("A", 3), ("B", 2)]))
    at, value = flip
    garbled = bytearray(data)
    garbled[at % len(data)] = value
    for candidate in (data[:cut % len(data)], bytes(garbled)):
        try:
            staged = read_request(Body(candidate), "a test request")
            if staged.document is not None:
                scan(staged.document, CONCEPTS)
        except ProtocolError:
            pass


def test_a_field_read_into_memory_is_bounded() -> None:
    diss = _dissemination([("A", 1)])
    diss.fragments[0].key_name = "k" * (FIELD_BYTES + 1)
    _refused(_request(diss), "header fields are over")
    cursor = Cursor(MemorySource(b"\xff" * 11), 0, 11, "eleven bytes")
    with pytest.raises(ProtocolError, match="longer than ten bytes"):
        cursor.varint()
    with pytest.raises(ProtocolError, match="wire type 3"):
        Cursor(MemorySource(b"\x0b"), 0, 1, "a group").key()
    with pytest.raises(ProtocolError, match="5 bytes announced where 1 remain"):
        Cursor(MemorySource(b"\x05x"), 0, 2, "short").span()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _len(data: bytes) -> bytes:
    return _varint(len(data)) + data
