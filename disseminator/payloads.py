"""A document's deliveries built from its serialized parts, not from copied messages.

A site sends one document to many destinations, each a selection of whole runs of fragments
(one run per concept, in leaf order). Copying thousands of fragment messages into a new
protobuf message per destination, and serializing each, costs more than everything else a hop
does. Protocol Buffers define a repeated message field on the wire as its elements, one
length-delimited record each, simply concatenated, so a delivery is assembled here as bytes:

* :class:`DocumentParts` reads the document as serialized records (``DisseminationRecords``,
  the same wire form), parses only the first fragment of each run and finds each run's
  records from the sizes of those before it: one :class:`Segment` per run, of one concept;
* :meth:`DocumentParts.delivery` lays the chosen segments' records out between the manifest
  and the provenance and wraps them as a ``Delivery`` — bytes that parse exactly as the message
  built field by field would (a unit test checks it). The layout is *pieces*: spans of the
  document's :class:`~disseminator.store.Body` (its manifest and fragment records, in message
  order) and literal bytes (framing, provenance), so the store keeps the document once
  however many destinations it has;
* :class:`Outgoing` sends a queued delivery as it was stored: its sequence number is one more
  field appended to the stored bytes, and a subscriber's ``ServerMessage`` one more wrapper,
  so a stream never parses and re-serializes a document it only forwards.

Segments also know the manifest leaves they are, for the provenance hop that names them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.unknown_fields import UnknownFieldSet

from disseminator.store import Body, Chunk, Piece, chunks_size, joined, piece_size
from xdn.errors import ProtocolError
from xdn.parts import PartData, cut
from xdn.provenance import LeafRanges
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import ranges_of_runs

__all__ = [
    "DocumentParts", "Outgoing", "ReceivedDocument", "Segment", "read_document", "records_of"
]

# Field numbers (length-delimited, wire type 2) of the messages assembled here.
_DISSEMINATION_MANIFEST = 1
_DISSEMINATION_FRAGMENTS = 2
_DISSEMINATION_PROVENANCE = 3
_DELIVERY_SEQUENCE = 1  # varint
_DELIVERY_DISSEMINATION = 2
_DELIVERY_PART = 14
_PART_DATA, _PART_SIZE, _PART_MORE = 1, 2, 3  # bytes, varint, bool (varint)
_SERVER_MESSAGE_DELIVERY = 2


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint_size(value: int) -> int:
    return max(1, (value.bit_length() + 6) // 7)


_RECORD_TAG_BYTES = 1  # the tag of fields 1 to 15 of wire type 2 is one byte
_MANIFEST_TAG = _DISSEMINATION_MANIFEST << 3 | 2
_FRAGMENT_TAG = _DISSEMINATION_FRAGMENTS << 3 | 2
_PROVENANCE_TAG = _DISSEMINATION_PROVENANCE << 3 | 2


def _provenance_field(pieces: Sequence[Piece]) -> tuple[Piece, ...]:
    """The ``provenance`` field made of ``pieces`` (nothing when they are empty)."""
    size = sum(piece_size(p) for p in pieces)
    if not size:
        return ()
    return (_varint(_PROVENANCE_TAG) + _varint(size), *(p for p in pieces if piece_size(p)))


def records_of(diss: pb.Dissemination | pb.DisseminationRecords) -> pb.DisseminationRecords:
    """``diss`` read as records, what a site routes (the same wire form)."""
    if isinstance(diss, pb.DisseminationRecords):
        return diss
    records: pb.DisseminationRecords = pb.DisseminationRecords.FromString(diss.SerializeToString())
    return records


@dataclass(frozen=True, slots=True)
class ReceivedDocument:
    """A ``Delivery`` that carries a document, read as records, with the bytes of its
    dissemination as they came (``None`` if they could not be told apart), so that routing
    forwards spans of those bytes instead of serializing the records again."""

    sequence: int
    dissemination: pb.DisseminationRecords
    wire: memoryview | None


def read_document(data: bytes | bytearray) -> ReceivedDocument | None:
    """``data``, a serialized ``Delivery``, read as a document, or ``None`` when it is not
    one that records read as the ``Delivery`` would be (another body, or an unknown field).

    Raises:
        DecodeError: ``data`` is not a message of this shape.
    """
    records: pb.DeliveryRecords = pb.DeliveryRecords.FromString(data)
    if not records.HasField("dissemination") or len(UnknownFieldSet(records)):
        return None
    return ReceivedDocument(
        sequence=records.sequence,
        dissemination=records.dissemination,
        wire=_sole_record(data, _DELIVERY_DISSEMINATION),
    )


def _sole_record(data: bytes | bytearray, number: int) -> memoryview | None:
    """The bytes of field ``number`` (length-delimited) of the message ``data``, which
    parsed, if it occurs there once (repeated, the parser merged its occurrences): a view of
    ``data``, not a copy (a document can be large)."""
    found: memoryview | None = None
    at = 0
    while at < len(data):
        key, at = _read_varint(data, at)
        wire_type = key & 7
        if wire_type == 0:
            _, at = _read_varint(data, at)
        elif wire_type == 2:
            size, start = _read_varint(data, at)
            at = start + size
            if key >> 3 == number:
                if found is not None:
                    return None
                found = memoryview(data)[start:at]
        else:  # fixed-width fields: none at the top of a Delivery read as records
            return None
    return found


def _read_varint(data: bytes | bytearray, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if byte < 0x80:
            return value, at
        shift += 7


def _records_size(lengths: Sequence[int]) -> int:
    """Bytes of the length-delimited records (one-byte tags) of payloads of ``lengths``,
    counted by the interpreter's C loops rather than one Python step per record: a length of
    ``b`` bits takes ``ceil(b / 7)`` varint bytes (at least one)."""
    if not lengths:
        return 0
    low, high = _varint_size(min(lengths)), _varint_size(max(lengths))
    if low == high:  # the usual case: every length takes as many varint bytes
        return sum(lengths) + len(lengths) * (1 + low)
    bits = Counter(map(int.bit_length, lengths))
    varints = sum(n * max(1, (b + 6) // 7) for b, n in bits.items())
    return sum(lengths) + len(lengths) + varints


def range_table(manifest: pb.Manifest) -> dict[str, tuple[int, int]]:
    """The manifest's leaves of each concept, as ``[first, end)``."""
    return {r.concept: (r.first, r.first + r.count) for r in manifest.ranges}


def run_of(
    fragment: pb.Fragment,
    identity: tuple[str, str],
    concepts: Collection[str],
    ranges: dict[str, tuple[int, int]],
) -> tuple[int, int]:
    """The leaves ``[start, end)`` of the run ``fragment`` opens, checked: of this document, of
    a known concept, with a range proof, within its concept's leaves in ``ranges``.

    Raises:
        ProtocolError: naming what does not hold.
    """
    if (fragment.publisher, fragment.document_id) != identity:
        raise ProtocolError(f"fragment {fragment.fragment_id!r} is not of this document")
    if fragment.concept not in concepts:
        raise ProtocolError(
            f"fragment {fragment.fragment_id!r}: unknown concept {fragment.concept!r}"
        )
    if not fragment.HasField("range_proof"):
        raise ProtocolError(f"fragment {fragment.fragment_id!r} lies outside every run of leaves")
    start, end = fragment.range_proof.start, fragment.range_proof.end
    if end <= start:
        raise ProtocolError(f"empty run of leaves {start}-{end}")
    first, after = ranges.get(fragment.concept, (0, 0))
    if not first <= start < end <= after:
        raise ProtocolError(
            f"run of leaves {start}-{end} is not all of concept {fragment.concept!r} in "
            "the manifest's range table: a site forwards whole concepts, so each needs a "
            "run (and range proof) of its own"
        )
    return start, end


NONE_CAME = "the fragments do not fill their runs of leaves (none came)"
NOT_FILLED = "the fragments do not fill their runs of leaves"


def _runs(
    diss: pb.DisseminationRecords,
    sizes: Sequence[int],
    identity: tuple[str, str],
    concepts: Collection[str],
) -> tuple[list[tuple[int, int, int]], list[str]]:
    """The runs of ``diss`` (``(index of the run's first fragment, first leaf, end leaf)``,
    as :func:`~xdn.wireconv.leaf_runs`) and each run's concept, reading only the fragments
    that open them: a run's proof says how many fragments it has, so the next run starts
    after them."""
    ranges = range_table(diss.manifest)
    runs, names, head = [], [], 0
    if not sizes:
        raise ProtocolError(NONE_CAME)
    while head < len(sizes):
        fragment = fragment_of(diss.fragments[head])
        start, end = run_of(fragment, identity, concepts, ranges)
        if head + end - start > len(sizes):
            raise ProtocolError(NOT_FILLED)
        runs.append((head, start, end))
        names.append(fragment.concept)
        head += end - start
    return runs, names


def fragment_of(record: bytes) -> pb.Fragment:
    """A fragment's record (or its header fields) read as a ``Fragment``.

    Raises:
        ProtocolError: it is not one.
    """
    try:
        fragment: pb.Fragment = pb.Fragment.FromString(record)
    except DecodeError:
        raise ProtocolError("a fragment is not a valid Fragment message") from None
    return fragment


@dataclass(frozen=True, slots=True)
class Segment:
    """Fragments ``[start, end)`` of the document (in message order): one run of leaves, all of
    ``concept``, which are manifest leaves ``[first_leaf, first_leaf + end - start)``."""

    concept: str
    start: int
    end: int
    first_leaf: int


class DocumentLayout:
    """Where a document's parts lie in its :class:`~disseminator.store.Body`, and the
    deliveries made of them (as pieces): the manifest's record, the records of each run of
    fragments (a :class:`Segment`), the provenance as received.

    Args:
        body: the bytes, stored once for every destination.
        manifest: the span of the manifest's record (the dissemination starts there).
        spans: each segment (in message order) and the span of its records.
        fragments_end: where the last fragment's record ends.
        received_provenance: the chain as received (pieces: a span of the body, a newline).
        count: how many fragments the document has.
    """

    def __init__(
        self,
        *,
        body: Body,
        manifest: tuple[int, int],
        spans: Sequence[tuple[Segment, tuple[int, int]]],
        fragments_end: int,
        received_provenance: tuple[Piece, ...],
        count: int,
    ) -> None:
        self.body = body
        self._manifest = manifest
        self._spans = dict(spans)
        self.segments = [segment for segment, _ in spans]
        self._fragments_end = fragments_end
        self.received_provenance = received_provenance
        self.count = count
        self.concepts = frozenset(s.concept for s in self.segments)
        self.leaves = ranges_of_runs(
            [(s.start, s.first_leaf, s.first_leaf + s.end - s.start) for s in self.segments]
        )

    def chosen(self, concepts: Collection[str]) -> list[Segment]:
        """The segments of ``concepts``, in message order."""
        return [s for s in self.segments if s.concept in concepts]

    @staticmethod
    def leaves_of(segments: Sequence[Segment]) -> LeafRanges:
        """The manifest leaves ``segments`` are.

        Raises:
            ProtocolError: no segment (nothing to name).
        """
        if not segments:
            raise ProtocolError("no fragment chosen")
        return LeafRanges.of((s.first_leaf, s.first_leaf + s.end - s.start) for s in segments)

    def dissemination(self, provenance: Sequence[Piece]) -> tuple[Piece, ...]:
        """The whole document as a serialized ``Dissemination`` with ``provenance`` (pieces:
        what a site retains for later subscribers), as pieces of :attr:`body`."""
        return ((self._manifest[0], self._fragments_end), *_provenance_field(provenance))

    def delivery(
        self, segments: Sequence[Segment], provenance: Sequence[Piece]
    ) -> tuple[Piece, ...]:
        """The serialized ``Delivery`` of ``segments`` with ``provenance`` (pieces: usually
        :attr:`received_provenance` and the lines of this site's hop), as pieces of
        :attr:`body` (adjacent spans merged)."""
        spans = [self._manifest]
        for segment in segments:
            start, end = self._spans[segment]
            if spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
        tail = _provenance_field(provenance)
        size = sum(end - start for start, end in spans) + sum(piece_size(p) for p in tail)
        head = _varint(_DELIVERY_DISSEMINATION << 3 | 2) + _varint(size)
        return (head, *spans, *tail)


class DocumentParts(DocumentLayout):
    """One document's runs of fragments, checked, segmented by concept and serialized once.

    A site forwards whole runs, so it reads only what routing needs: each run's first
    fragment (its concept, its document, its range proof) and the size of every fragment's
    record, which Python reads from the message's serialized records without building a
    message per fragment. What is inside the other fragments travels unread; the subscriber
    checks every fragment against the publisher's signed Merkle root, which binds its
    document, concept and position.

    Args:
        diss: the dissemination as received, read as records.
        identity: the (publisher, document id) every run must name.
        concepts: the ontology's concepts; a run of another is refused.
        wire: the bytes ``diss`` was read from, if at hand: the body is then those bytes
            as they came, when they lie as the records say (else the records serialized).

    Raises:
        ProtocolError: a run of another document or of an unknown concept, a run whose
            leaves are not all of its concept in the manifest's range table, or fragments
            that do not fill their runs of leaves.
    """

    def __init__(
        self,
        diss: pb.DisseminationRecords,
        identity: tuple[str, str],
        concepts: Collection[str],
        wire: bytes | memoryview | None = None,
    ) -> None:
        sizes = list(map(len, diss.fragments))  # no Python per fragment
        runs, names = _runs(diss, sizes, identity, concepts)
        segments = [
            Segment(name, head, head + end - start, start)
            for (head, start, end), name in zip(runs, names, strict=True)
        ]
        laid_out = None
        if wire is not None and not len(UnknownFieldSet(diss)):
            laid_out = _lay_out(diss, segments, sizes, wire)
        if laid_out is None:
            laid_out = _lay_out(diss, segments, sizes, diss.SerializeToString())
        if laid_out is None:
            raise ProtocolError("the dissemination's fields are not laid out as expected")
        super().__init__(**laid_out, count=len(sizes))


def _lay_out(
    diss: pb.DisseminationRecords,
    segments: Sequence[Segment],
    sizes: Sequence[int],
    data: bytes | memoryview,
) -> dict[str, Any] | None:
    """The layout of ``data``, the serialized message: each segment's records placed from
    the sizes of the records before it, if they lie there (else ``None``).

    The library writes fields in number order (manifest, fragments, provenance, then
    unknown ones); ``data`` as received is checked to lie that way: the manifest's record
    first, a fragment's record at each segment's start, the chain's record last, with its
    bytes, and nothing more. Fragments inside a segment are not looked at; a sender can
    put anything there, as in the fragments themselves, and each subscriber checks every
    fragment it gets against the publisher's signed root.
    """
    manifest_size = diss.manifest.ByteSize()
    offset = _RECORD_TAG_BYTES + _varint_size(manifest_size) + manifest_size
    if data[:offset - manifest_size] != _varint(_MANIFEST_TAG) + _varint(manifest_size):
        return None
    manifest = (0, offset)
    spans = []
    for segment in segments:
        end = offset + _records_size(sizes[segment.start:segment.end])
        spans.append((segment, (offset, end)))
        offset = end
    if len(data) < offset or any(data[s] != _FRAGMENT_TAG for _, (s, _) in spans):
        return None
    fragments_end = offset
    received_provenance: tuple[Piece, ...] = ()
    if diss.provenance:  # the chain as it came, which every outgoing chain starts with
        size = len(diss.provenance)
        start = offset + _RECORD_TAG_BYTES + _varint_size(size)
        if data[offset] != _PROVENANCE_TAG or data[start:start + size] != diss.provenance:
            return None
        newline = () if diss.provenance.endswith(b"\n") else (b"\n",)
        received_provenance = ((start, start + size), *newline)
        offset = start + size
    if len(data) != offset and not len(UnknownFieldSet(diss)):
        return None
    return {
        "body": Body(data), "manifest": manifest, "spans": spans,
        "fragments_end": fragments_end, "received_provenance": received_provenance,
    }


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A queued delivery on its way out: its sequence number and its stored bytes (a
    serialized ``Delivery`` without sequence number), whole or in the chunks the store keeps
    (joined once, into the message a stream sends; a staged document's spans are read a part
    at a time, as the parts go)."""

    sequence: int
    payload: bytes | Sequence[Chunk]

    def _chunks(self) -> list[Chunk]:
        chunks: list[Chunk] = (
            [self.payload] if isinstance(self.payload, bytes) else list(self.payload)
        )
        chunks.append(_varint(_DELIVERY_SEQUENCE << 3) + _varint(self.sequence))
        return chunks

    def delivery_bytes(self) -> bytes:
        """The serialized ``Delivery`` with its sequence number (a Link stream message)."""
        return joined(self._chunks())

    def server_message_bytes(self) -> bytes:
        """The serialized ``ServerMessage`` carrying it (a Subscribe stream message)."""
        return _server_message(self._chunks())

    def in_parts(self, part_bytes: int) -> bool:
        """Whether it goes in parts: its ``Delivery`` is larger than ``part_bytes``."""
        return chunks_size(self._chunks()) > part_bytes

    def delivery_messages(self, part_bytes: int) -> Iterator[bytes]:
        """What a Link stream sends: :meth:`delivery_bytes`, or, when that is larger than
        ``part_bytes``, a ``Delivery`` per part of it (:mod:`xdn.parts`), made one at a time
        as they go."""
        chunks = self._chunks()
        if chunks_size(chunks) <= part_bytes:
            yield joined(chunks)
            return
        for part in cut(chunks, part_bytes):
            yield self._part(part)

    def server_messages(self, part_bytes: int) -> Iterator[bytes]:
        """What a Subscribe stream sends: each of :meth:`delivery_messages` in a
        ``ServerMessage``."""
        chunks = self._chunks()
        if chunks_size(chunks) <= part_bytes:
            yield _server_message(chunks)
            return
        for part in cut(chunks, part_bytes):
            yield _server_message([self._part(part)])

    def _part(self, part: PartData) -> bytes:
        """A ``Delivery`` with this sequence number carrying ``part``."""
        fields = [_varint(_PART_DATA << 3 | 2), _varint(len(part.data)), part.data]
        if part.size:
            fields += [_varint(_PART_SIZE << 3), _varint(part.size)]
        if part.more:
            fields += [_varint(_PART_MORE << 3), b"\x01"]
        size = sum(len(f) for f in fields)
        return b"".join([
            _varint(_DELIVERY_SEQUENCE << 3), _varint(self.sequence),
            _varint(_DELIVERY_PART << 3 | 2), _varint(size), *fields,
        ])  # fmt: skip

    def parsed(self) -> pb.Delivery:
        """The delivery as a message (for inspection; sending uses the bytes)."""
        delivery = pb.Delivery()
        delivery.ParseFromString(self.delivery_bytes())
        return delivery


def _server_message(chunks: Sequence[Chunk]) -> bytes:
    head = _varint(_SERVER_MESSAGE_DELIVERY << 3 | 2) + _varint(chunks_size(chunks))
    return joined([head, *chunks])
