"""Writing protobuf framing by hand, for a document too large to build as a message (issue #15).

Theory of operation
-------------------
A publisher encrypts a document's fragments one at a time (:func:`xdn.codec.encode_to_sink`),
but its wire form cannot be written in that order: a ``Dissemination`` starts with the manifest,
carries each run's range proof on the run's first fragment — both known only once the last
fragment is sealed — and holds the fragments in leaf order, not the order they were encrypted
in. So :class:`DisseminationWriter` writes it in two steps, keeping no ciphertext in memory:

* :meth:`~DisseminationWriter.add` writes each fragment's record as it comes — the ``Fragment``
  message's fields up to and including its ciphertext (field 9; its range proof, field 12, is
  its last field) — to a records file, and keeps only the record's offset and length;
* :meth:`~DisseminationWriter.body`, once sealed, lays out the ``Dissemination``: the manifest,
  each fragment's record in leaf order (read from the records file where it is, a window at a
  time: no second copy is written), the first of each run completed by the run's range proof,
  then the provenance chain; :meth:`~DisseminationWriter.write` writes it out.

:func:`request_framing` puts a dissemination written so into a ``PublishRequest``: its key and
length before it, the request's other fields (all numbered after it) after it.

Each field is written as the protobuf library writes it — ascending field numbers, proto3
defaults left out, lengths as varints — so the bytes are those ``SerializeToString`` gives for
the same message (tested against it), and a site reads them as it reads any other
(:mod:`xdn.wire_scan`, :mod:`disseminator.stored_documents`: the manifest first, the fragments,
then the provenance). Memory: 32 bytes per fragment and one read window.
"""

from __future__ import annotations

import bisect
import functools
import os
from array import array
from typing import IO

from xdn.codec import Fragment, Sealed
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_scan import LEN
from xdn.wireconv import fragment_header_to_pb, manifest_to_pb, range_proof_to_pb

__all__ = [
    "DisseminationWriter",
    "SplicedDissemination",
    "field_header",
    "fragment_header",
    "request_framing",
    "varint",
]

_MANIFEST, _FRAGMENTS, _PROVENANCE = 1, 2, 3  # Dissemination's fields
_CIPHER_VALUE = 9  # Fragment.cipher_value
_POSITION, _PARENT, _EPOCH = 0x28, 0x30, 0x38  # Fragment's varint fields 5, 6, 7, with their type
_NO_PARENT = bytes([_PARENT]) + b"\xff" * 9 + b"\x01"  # int32 -1: ten bytes, sign-extended
_DISSEMINATION_IN_REQUEST = 1  # PublishRequest.dissemination: before every other field
_WINDOW = 1024 * 1024  # bytes of a record copied at a time


def varint(value: int) -> bytes:
    """``value`` as a protobuf varint.

    Raises:
        ValueError: ``value`` is negative or does not fit 64 bits.
    """
    if not 0 <= value < 1 << 64:
        raise ValueError(f"a varint holds 0 to 2**64 - 1, not {value}")
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field_header(number: int, length: int) -> bytes:
    """The key and length that precede a length-delimited field's ``length`` bytes."""
    return varint(number << 3 | LEN) + varint(length)


def _text_field(number: int, value: str) -> bytes:
    data = value.encode()
    return field_header(number, len(data)) + data if data else b""  # (proto3: "" left out)


@functools.lru_cache(maxsize=256)
def _shared_fields(document_id: str, publisher: str, concept: str) -> bytes:
    return _text_field(2, document_id) + _text_field(3, publisher) + _text_field(4, concept)


@functools.lru_cache(maxsize=256)
def _key_name_field(key_name: str) -> bytes:
    return _text_field(8, key_name)


def fragment_header(fragment: Fragment) -> bytes:
    """``fragment_header_to_pb(fragment).SerializeToString()`` (:mod:`xdn.wireconv`: every
    field but the ciphertext and the range proof), written by hand: the fields shared by a
    concept's fragments are cached, so a fragment costs its id and three varints."""
    f = fragment
    if f.position >> 32 or (f.parent is not None and f.parent >> 31):
        refused: bytes = fragment_header_to_pb(f).SerializeToString()  # (raises ValueError)
        return refused
    parts = [_text_field(1, f.fragment_id), _shared_fields(f.document_id, f.publisher, f.concept)]
    if f.position:
        parts.append(bytes([_POSITION]) + varint(f.position))
    if f.parent is None:
        parts.append(_NO_PARENT)
    elif f.parent:
        parts.append(bytes([_PARENT]) + varint(f.parent))
    if f.epoch:
        parts.append(bytes([_EPOCH]) + varint(f.epoch))
    parts.append(_key_name_field(f.key_name))
    return b"".join(parts)


class DisseminationWriter:
    """Writes a document's ``Dissemination`` from fragments given one at a time (see the module
    docstring).

    Args:
        records: where each fragment's record goes as it comes (a file opened for writing and
            reading, or a buffer); read back by :meth:`write`.
    """

    def __init__(self, records: IO[bytes]) -> None:
        self._records = records
        try:  # (read back with pread: no shared file position)
            self._fd: int | None = records.fileno()
        except (OSError, ValueError):  # a buffer
            self._fd = None
        self._end = records.tell()
        self._offsets = array("Q")  # of each record, in the order added
        self._sizes = array("Q")

    def __len__(self) -> int:
        """How many fragments were added."""
        return len(self._offsets)

    def add(self, fragment: Fragment) -> None:
        """Write ``fragment``'s record (all of it but a range proof)."""
        head = fragment_header(fragment)
        cipher = fragment.cipher_value
        if cipher:
            head += field_header(_CIPHER_VALUE, len(cipher))
        self._records.write(head)
        self._records.write(cipher)
        size = len(head) + len(cipher)
        self._offsets.append(self._end)
        self._sizes.append(size)
        self._end += size

    def write(
        self, out: IO[bytes], sealed: Sealed, *, provenance: bytes, publisher_certificate: bytes
    ) -> int:
        """Write the sealed ``Dissemination`` of the fragments added to ``out``; return its size.

        Raises:
            ValueError: ``sealed`` is not of the fragments added.
        """
        body = self.body(sealed, provenance=provenance, publisher_certificate=publisher_certificate)
        for at in range(0, len(body), _WINDOW):
            out.write(body.read(at, min(len(body), at + _WINDOW)))
        return len(body)

    def body(
        self, sealed: Sealed, *, provenance: bytes, publisher_certificate: bytes
    ) -> SplicedDissemination:
        """The sealed ``Dissemination`` of the fragments added, read from the records where they
        are (no copy of them is written).

        Raises:
            ValueError: ``sealed`` is not of the fragments added.
        """
        manifest = sealed.signed_manifest.manifest
        if manifest.leaf_count != len(self) or len(sealed.order) != len(self):
            raise ValueError(f"a manifest of {manifest.leaf_count} leaves for {len(self)} records")
        self._records.flush()
        body = manifest_to_pb(
            sealed.signed_manifest, publisher_certificate=publisher_certificate
        ).SerializeToString()
        head = field_header(_MANIFEST, len(body)) + body
        records, starts, tails = array("Q"), array("Q"), {}
        at = len(head)
        for row in manifest.ranges:
            proof = pb.Fragment(range_proof=range_proof_to_pb(sealed.proofs[row.concept]))
            tail = proof.SerializeToString()  # (field 12 alone: the record's last field)
            for leaf in range(row.first, row.end):
                index = sealed.order[leaf]
                if tail:
                    tails[len(starts)] = tail
                records.append(index)
                starts.append(at)
                size = self._sizes[index] + len(tail)
                at += len(field_header(_FRAGMENTS, size)) + size
                tail = b""  # (the run's proof rides on its first fragment only)
        trailer = field_header(_PROVENANCE, len(provenance)) + provenance if provenance else b""
        return SplicedDissemination(self, head, (records, starts, tails), at, trailer)

    def _read_records(self, wanted: list[tuple[int, int, int, int]], out: list[bytes]) -> None:
        """Put bytes ``[lo, hi)`` of record ``index`` in ``out[slot]`` for each ``(slot, index,
        lo, hi)`` of ``wanted``: in one read when they lie close together, else one each."""
        if not wanted:
            return
        first = min(self._offsets[index] + lo for _, index, lo, _ in wanted)
        last = max(self._offsets[index] + hi for _, index, _, hi in wanted)
        if last - first <= 2 * sum(hi - lo for _, _, lo, hi in wanted) + _WINDOW:
            block = self._pread(first, last - first)
            for slot, index, lo, hi in wanted:
                at = self._offsets[index] + lo - first
                out[slot] = block[at : at + hi - lo]
            return
        for slot, index, lo, hi in wanted:
            out[slot] = self._pread(self._offsets[index] + lo, hi - lo)

    def _pread(self, at: int, size: int) -> bytes:
        if self._fd is None:
            self._records.seek(at)
            data = self._records.read(size)
        else:
            data = os.pread(self._fd, size, at)
        if len(data) != size:
            raise ValueError(f"the records end before byte {at + size}")
        return data


class SplicedDissemination:
    """A ``Dissemination`` :meth:`DisseminationWriter.body` lays out: the manifest field, each
    fragment's field (its key and length, its record read from the records file, the run's
    range proof on a run's first) in leaf order, the provenance field. Read a span at a time
    (a :class:`xdn.parts.ReadableChunk`); memory: 16 bytes per fragment."""

    def __init__(
        self,
        writer: DisseminationWriter,
        head: bytes,
        leaves: tuple[array[int], array[int], dict[int, bytes]],
        body_end: int,
        trailer: bytes,
    ) -> None:
        self._writer = writer
        self._head = head
        # of each leaf: its record, where its field starts; the range proofs by leaf
        self._records, self._starts, self._tails = leaves
        self._body_end = body_end  # where the fragments end
        self._trailer = trailer
        self._size = body_end + len(trailer)

    def __len__(self) -> int:
        return self._size

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``.

        Raises:
            ValueError: the span is not within the dissemination, or the records file is short.
        """
        if not 0 <= start <= end <= self._size:
            raise ValueError(f"span {start}-{end} is not within {self._size} bytes")
        pieces = [self._head[start:end]] if start < len(self._head) else []
        at, stop = max(start, len(self._head)), min(end, self._body_end)
        if at < stop:
            self._fragments(at, stop, pieces)
        if end > self._body_end:
            pieces.append(self._trailer[max(start - self._body_end, 0) : end - self._body_end])
        return b"".join(pieces)

    def _fragments(self, at: int, stop: int, out: list[bytes]) -> None:
        """Append bytes ``[at, stop)`` of the fragments' fields to ``out``."""
        sizes = self._writer._sizes
        wanted: list[tuple[int, int, int, int]] = []  # records to read: slot, index, lo, hi
        leaf = bisect.bisect_right(self._starts, at) - 1
        while at < stop:
            index, first = self._records[leaf], self._starts[leaf]
            size, tail = sizes[index], self._tails.get(leaf, b"")
            key = field_header(_FRAGMENTS, size + len(tail))
            lo, hi, body = at - first, stop - first, len(key) + size  # (within the field)
            if lo < len(key):
                out.append(key[lo:hi])
            if lo < body and hi > len(key):
                wanted.append((len(out), index, max(lo - len(key), 0), min(hi - len(key), size)))
                out.append(b"")
            if hi > body and tail:
                out.append(tail[max(lo - body, 0) : hi - body])
            at = first + body + len(tail)
            leaf += 1
        self._writer._read_records(wanted, out)


def request_framing(rest: pb.PublishRequest, length: int) -> tuple[bytes, bytes]:
    """What goes before and after a serialized ``Dissemination`` of ``length`` bytes to make
    the ``PublishRequest`` that is ``rest`` with that dissemination.

    Raises:
        ValueError: ``rest`` has a dissemination already.
    """
    if rest.HasField("dissemination"):
        raise ValueError("the request's dissemination is the one written apart")
    return field_header(_DISSEMINATION_IN_REQUEST, length), rest.SerializeToString()
