"""What routing reads of a document staged in the store, read from the stored bytes
(issue #15).

Theory of operation. A message that came in parts is staged in the store as it arrived
(:mod:`disseminator.body_chunks`), never joined in memory; so instead of parsing it, a site
walks its protobuf framing (:mod:`xdn.wire_scan`) and reads only what it routes on:

* :func:`read_request` (a ``PublishParts`` call) and :func:`read_delivery` (a delivery from
  the uplink) find the document's dissemination in the message, read its manifest (its first
  field, so that a document routed before is known at once) and parse every other field (key
  messages, a checkpoint: small) as the message would be parsed;
* :func:`scan` walks the fragments' records once: each fragment's header fields (everything
  but its ciphertext, which is skipped unread) are parsed, so malformed protobuf is refused
  here as a whole parse would refuse it; each run's first fragment is checked as
  :class:`~disseminator.payloads.DocumentParts` checks it (:func:`~disseminator.payloads.run_of`);
  and the result is a :class:`~disseminator.payloads.DocumentLayout` of spans of the stored
  bytes, the document's one body.

The dissemination must lie as every protobuf library writes it — its manifest, its fragments,
then its provenance, each field once — else it is refused (a :class:`~xdn.errors.ProtocolError`
naming what), as is any field read into memory over :data:`FIELD_BYTES` (a manifest, a
provenance chain, a fragment's header fields, the key messages beside a document). Memory is
one read window and one such field at a time, whatever the document's size.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from disseminator.body_chunks import StoredBytes
from disseminator.payloads import (
    NONE_CAME,
    NOT_FILLED,
    DocumentLayout,
    Segment,
    fragment_of,
    range_table,
    run_of,
)
from disseminator.store import Body, Piece, Retained, joined
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_scan import LEN, Cursor, MemorySource, Source
from xdn.wire_scan import read_delivery as read_framing

__all__ = [
    "FIELD_BYTES",
    "StagedDelivery",
    "StagedRequest",
    "StoredDocument",
    "read_delivery",
    "read_request",
    "retained_document",
    "scan",
]

FIELD_BYTES = 16 * 1024 * 1024  # the most of a field (or of the fields beside a document) read
_CIPHER_VALUE = 9  # Fragment.cipher_value: skipped, never read
_DISSEMINATION_IN_REQUEST = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredDocument:
    """A dissemination lying in bytes ``[start, end)`` of ``body``, its manifest read.

    ``manifest_end`` is where the manifest's record ends (the fragments' records begin);
    ``provenance`` is the chain when it lies apart from those bytes (a retained copy), else
    ``None`` (read from them by :func:`scan`).
    """

    body: Body
    start: int
    end: int
    manifest: pb.Manifest
    manifest_end: int
    provenance: bytes | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedRequest:
    """A ``PublishRequest`` staged: its document (if any) and its other fields, parsed."""

    document: StoredDocument | None
    rest: pb.PublishRequest


@dataclass(frozen=True, slots=True, kw_only=True)
class StagedDelivery:
    """A ``Delivery`` staged that carries a document."""

    sequence: int
    document: StoredDocument


def _source(body: Body) -> Source:
    return body.data if isinstance(body.data, StoredBytes) else MemorySource(body.data)


def read_request(body: Body, what: str) -> StagedRequest:
    """The staged ``PublishRequest`` in ``body``.

    Raises:
        ProtocolError: it is malformed, or carries two disseminations, or its fields beside
            the document come to more than :data:`FIELD_BYTES`.
    """
    source = _source(body)
    cursor = Cursor(source, 0, len(source), what)
    found: tuple[int, int] | None = None
    rest = bytearray()
    while not cursor.done:
        at = cursor.at
        number, wire_type = cursor.key()
        if number == _DISSEMINATION_IN_REQUEST and wire_type == LEN:
            if found is not None:
                raise cursor.malformed("a second dissemination")
            found = cursor.span()
            continue
        cursor.skip_value(wire_type)
        if len(rest) + cursor.at - at > FIELD_BYTES:
            raise ProtocolError(
                f"the key messages beside the document in {what} come to more than "
                f"{FIELD_BYTES} bytes: send them apart"
            )
        rest += cursor.read(at, cursor.at)
    try:
        parsed: pb.PublishRequest = pb.PublishRequest.FromString(bytes(rest))
    except DecodeError:
        raise ProtocolError(f"{what} is not a valid PublishRequest") from None
    document = None if found is None else _open(body, source, *found, what)
    return StagedRequest(document=document, rest=parsed)


def read_delivery(body: Body, what: str) -> StagedDelivery | pb.Delivery:
    """The staged ``Delivery`` in ``body``: one that carries a document is read as a
    :class:`StagedDelivery`; any other (small, or refused) is parsed whole.

    Raises:
        ProtocolError: it is malformed, is parts again, or is not a document and larger than
            :data:`FIELD_BYTES`.
    """
    source = _source(body)
    found = read_framing(source, what, max_whole=FIELD_BYTES)
    if isinstance(found, pb.Delivery):
        return found
    return StagedDelivery(
        sequence=found.sequence, document=_open(body, source, found.start, found.end, what)
    )


def retained_document(retained: Retained) -> StoredDocument:
    """A retained copy of a staged document, as kept: a span of its body (the manifest and
    the fragments) and the provenance field after it.

    Raises:
        ValueError: it is not kept as pieces of a staged body.
    """
    body, pieces = retained.body, retained.pieces
    if body is None or not pieces or isinstance(pieces[0], bytes):
        raise ValueError("a retained document kept whole is parsed, not scanned")
    field = joined(retained.chunks()[1:])  # the provenance field: small
    provenance = pb.DisseminationRecords.FromString(field).provenance
    start, end = pieces[0]
    return _open(body, _source(body), start, end, "a retained document", provenance)


def _open(
    body: Body, source: Source, start: int, end: int, what: str, provenance: bytes | None = None
) -> StoredDocument:
    """The dissemination in ``[start, end)``, its manifest (its first field) read."""
    cursor = Cursor(source, start, end, f"the dissemination of {what}")
    number, wire_type = cursor.key() if not cursor.done else (0, 0)
    if (number, wire_type) != (1, LEN):
        raise ProtocolError(f"the dissemination of {what} does not start with its manifest")
    manifest_start, manifest_end = cursor.span()
    try:
        manifest = pb.Manifest.FromString(_read(cursor, manifest_start, manifest_end, "manifest"))
    except DecodeError:
        raise ProtocolError(f"the manifest of {what} is not a valid Manifest") from None
    return StoredDocument(
        body=body, start=start, end=end, manifest=manifest, manifest_end=cursor.at,
        provenance=provenance,
    )


def _read(cursor: Cursor, start: int, end: int, what: str) -> bytes:
    if end - start > FIELD_BYTES:
        raise ProtocolError(f"a {what} of {end - start} bytes: over {FIELD_BYTES} bytes")
    return cursor.read(start, end)


def scan(document: StoredDocument, concepts: Collection[str]) -> tuple[DocumentLayout, bytes]:
    """The layout of a stored document's runs of fragments, checked, and its provenance.

    Raises:
        ProtocolError: malformed bytes, fields not laid out as a ``Dissemination`` is written,
            or what :class:`~disseminator.payloads.DocumentParts` refuses (a run of another
            document or concept, outside the range table, fragments not filling their runs).
    """
    manifest = document.manifest
    identity = (manifest.publisher, manifest.document_id)
    ranges = range_table(manifest)
    cursor = Cursor(_source(document.body), document.manifest_end, document.end,
                    f"the dissemination of document {manifest.document_id!r}")  # fmt: skip
    heads: list[tuple[int, int, int, str, int]] = []  # (index, first leaf, end leaf, concept, at)
    index = next_head = 0
    fragments_end = document.manifest_end
    chain: tuple[int, int] | None = None
    while not cursor.done:
        at = cursor.at
        number, wire_type = cursor.key()
        if number == 2 and wire_type == LEN and chain is None:
            fragment = _fragment_header(cursor)
            if index == next_head:
                start, end = run_of(fragment, identity, concepts, ranges)
                heads.append((index, start, end, fragment.concept, at))
                next_head = index + end - start
            index += 1
            fragments_end = cursor.at
        elif number == 3 and wire_type == LEN and chain is None:
            chain = cursor.span()
        else:
            raise ProtocolError(
                "the dissemination's fields are not laid out as a Dissemination is written: "
                f"field {number} at byte {at} (its manifest, its fragments, then its provenance)"
            )
    if not index:
        raise ProtocolError(NONE_CAME)
    if index != next_head:
        raise ProtocolError(NOT_FILLED)
    spans = [
        (Segment(concept, head, head + end - start, start),
         (at, heads[n + 1][4] if n + 1 < len(heads) else fragments_end))
        for n, (head, start, end, concept, at) in enumerate(heads)
    ]  # fmt: skip
    provenance, received = _provenance(document, cursor, chain)
    layout = DocumentLayout(
        body=document.body, manifest=(document.start, document.manifest_end), spans=spans,
        fragments_end=fragments_end, received_provenance=received, count=index,
    )
    return layout, provenance


def _fragment_header(cursor: Cursor) -> pb.Fragment:
    """The next fragment's record read without its ciphertext (skipped), as a ``Fragment``."""
    start, end = cursor.span()
    cursor.at = start  # (back to read the record's fields)
    outer = cursor.within(end)
    header = bytearray()
    while not cursor.done:
        at = cursor.at
        number, wire_type = cursor.key()
        cursor.skip_value(wire_type)
        if number == _CIPHER_VALUE and wire_type == LEN:
            continue
        if len(header) + cursor.at - at > FIELD_BYTES:
            raise ProtocolError(f"a fragment's header fields are over {FIELD_BYTES} bytes")
        header += cursor.read(at, cursor.at)
    cursor.end = outer
    return fragment_of(bytes(header))


def _provenance(
    document: StoredDocument, cursor: Cursor, chain: tuple[int, int] | None
) -> tuple[bytes, tuple[Piece, ...]]:
    """The chain as received, and as the pieces every outgoing chain starts with."""
    if document.provenance is not None:  # kept apart: literal pieces (small)
        text = document.provenance
        return text, ((text, *(() if text.endswith(b"\n") else (b"\n",))) if text else ())
    if chain is None or chain[0] == chain[1]:
        return b"", ()
    text = _read(cursor, *chain, "provenance chain")
    return text, (chain, *(() if text.endswith(b"\n") else (b"\n",)))
