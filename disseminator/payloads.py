"""A document's deliveries built from its serialized parts, not from copied messages.

A site sends one document to many destinations, each a selection of whole runs of fragments
(one run per concept, in leaf order). Copying thousands of fragment messages into a new
protobuf message per destination, and serializing each, costs more than everything else a hop
does. Protocol Buffers define a repeated message field on the wire as its elements, one
length-delimited record each, simply concatenated, so a delivery is assembled here as bytes:

* :class:`DocumentParts` serializes the document once and finds each fragment's record in it
  from the sizes of the records before it, grouped into :class:`Segment` values (maximal runs
  of one concept);
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

from bisect import bisect_right
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

from disseminator.store import Body, Piece, piece_size
from xdn.errors import ProtocolError
from xdn.provenance import LeafRanges
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import leaf_runs, ranges_of_runs

__all__ = ["DocumentParts", "Outgoing", "Segment"]

# Field numbers (length-delimited, wire type 2) of the messages assembled here.
_DISSEMINATION_MANIFEST = 1
_DISSEMINATION_FRAGMENTS = 2
_DISSEMINATION_PROVENANCE = 3
_DELIVERY_SEQUENCE = 1  # varint
_DELIVERY_DISSEMINATION = 2
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
_FRAGMENT_TAG = _DISSEMINATION_FRAGMENTS << 3 | 2
_PROVENANCE_TAG = _DISSEMINATION_PROVENANCE << 3 | 2


def _provenance_field(pieces: Sequence[Piece]) -> tuple[Piece, ...]:
    """The ``provenance`` field made of ``pieces`` (nothing when they are empty)."""
    size = sum(piece_size(p) for p in pieces)
    if not size:
        return ()
    return (_varint(_PROVENANCE_TAG) + _varint(size), *(p for p in pieces if piece_size(p)))


@dataclass(frozen=True, slots=True)
class Segment:
    """Fragments ``[start, end)`` of the document (in message order): one run of leaves, all of
    ``concept``, which are manifest leaves ``[first_leaf, first_leaf + end - start)``."""

    concept: str
    start: int
    end: int
    first_leaf: int


class DocumentParts:
    """One document's fragments, checked, segmented by concept and serialized once.

    Args:
        diss: the dissemination as received.
        identity: the (publisher, document id) every fragment must name.
        concepts: the ontology's concepts; a fragment of another is refused.

    Raises:
        ProtocolError: a fragment of another document or of an unknown concept, or fragments
            that do not fill their runs of leaves.
    """

    def __init__(
        self, diss: pb.Dissemination, identity: tuple[str, str], concepts: Collection[str]
    ) -> None:
        fragments = list(diss.fragments)  # each access to the repeated field builds a wrapper
        publisher, document = identity
        names, sizes, heads, strays = [], [], [], []
        for index, fragment in enumerate(fragments):  # one pass: thousands of fragments
            names.append(fragment.concept)
            sizes.append(fragment.ByteSize())
            if fragment.publisher != publisher or fragment.document_id != document:
                strays.append(fragment)
            if fragment.HasField("range_proof"):
                heads.append(index)
        if strays:
            raise ProtocolError(f"fragment {strays[0].fragment_id!r} is not of this document")
        unknown = set(names).difference(concepts)
        if unknown:
            bad = next(f for f in fragments if f.concept in unknown)
            raise ProtocolError(f"fragment {bad.fragment_id!r}: unknown concept {bad.concept!r}")
        runs = leaf_runs(fragments, heads)  # checks the runs are filled
        self.leaves = ranges_of_runs(runs)
        starts = [start for _, start, _ in runs]

        def leaf(index: int) -> int:
            run = bisect_right(heads, index) - 1
            return starts[run] + index - heads[run]

        changes = {i for i in range(1, len(names)) if names[i] != names[i - 1]}
        if not changes <= set(heads):
            raise ProtocolError(
                "a run of leaves holds fragments of several concepts: a site forwards whole "
                "concepts, so each needs a run (and range proof) of its own"
            )
        cuts = [*heads, len(names)]  # a segment is one run: its leaves are consecutive
        self.segments = [
            Segment(names[begin], begin, end, leaf(begin)) for begin, end in pairwise(cuts)
        ]
        self.count = len(fragments)
        self.concepts = frozenset(names)
        self._lay_out(diss, sizes)

    def _lay_out(self, diss: pb.Dissemination, sizes: Sequence[int]) -> None:
        """Serialize the message once (the library writes fields in number order: manifest,
        fragments, provenance, then unknown ones) and place each record from the sizes of
        those before it."""
        manifest_size = diss.manifest.ByteSize()
        manifest_end = _RECORD_TAG_BYTES + _varint_size(manifest_size) + manifest_size
        offsets = list(accumulate(
            (_RECORD_TAG_BYTES + _varint_size(size) + size for size in sizes),
            initial=manifest_end,
        ))  # fmt: skip
        self.body = Body(diss.SerializeToString())
        data = self.body.data
        misplaced = ProtocolError("the dissemination's fields are not laid out as expected")
        if len(data) < offsets[-1] or any(
            data[offsets[s.start]] != _FRAGMENT_TAG for s in self.segments
        ):
            raise misplaced
        self._manifest = (0, offsets[0])
        self._fragments_end = offsets[-1]
        self._spans = {s: (offsets[s.start], offsets[s.end]) for s in self.segments}
        self.received_provenance: tuple[Piece, ...] = ()
        if diss.provenance:  # the chain as it came, which every outgoing chain starts with
            size = len(diss.provenance)
            start = offsets[-1] + _RECORD_TAG_BYTES + _varint_size(size)
            if data[offsets[-1]] != _PROVENANCE_TAG or data[start:start + size] != diss.provenance:
                raise misplaced
            newline = () if diss.provenance.endswith(b"\n") else (b"\n",)
            self.received_provenance = ((start, start + size), *newline)

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
        return ((0, self._fragments_end), *_provenance_field(provenance))

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


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A queued delivery on its way out: its sequence number and its stored bytes (a
    serialized ``Delivery`` without sequence number), whole or in the chunks the store keeps
    (joined once, into the message a stream sends)."""

    sequence: int
    payload: bytes | Sequence[bytes | memoryview]

    def _chunks(self) -> list[bytes | memoryview]:
        chunks: list[bytes | memoryview] = (
            [self.payload] if isinstance(self.payload, bytes) else list(self.payload)
        )
        chunks.append(_varint(_DELIVERY_SEQUENCE << 3) + _varint(self.sequence))
        return chunks

    def delivery_bytes(self) -> bytes:
        """The serialized ``Delivery`` with its sequence number (a Link stream message)."""
        return b"".join(self._chunks())

    def server_message_bytes(self) -> bytes:
        """The serialized ``ServerMessage`` carrying it (a Subscribe stream message)."""
        chunks = self._chunks()
        size = sum(len(c) for c in chunks)
        head = _varint(_SERVER_MESSAGE_DELIVERY << 3 | 2) + _varint(size)
        return b"".join([head, *chunks])

    def parsed(self) -> pb.Delivery:
        """The delivery as a message (for inspection; sending uses the bytes)."""
        delivery = pb.Delivery()
        delivery.ParseFromString(self.delivery_bytes())
        return delivery
