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
* :meth:`~DisseminationWriter.write`, once sealed, writes the ``Dissemination``: the manifest,
  each fragment's record in leaf order (copied from the records file a window at a time), the
  first of each run completed by the run's range proof, then the provenance chain.

:func:`request_framing` puts a dissemination written so into a ``PublishRequest``: its key and
length before it, the request's other fields (all numbered after it) after it.

Each field is written as the protobuf library writes it — ascending field numbers, proto3
defaults left out, lengths as varints — so the bytes are those ``SerializeToString`` gives for
the same message (tested against it), and a site reads them as it reads any other
(:mod:`xdn.wire_scan`, :mod:`disseminator.stored_documents`: the manifest first, the fragments,
then the provenance). Memory: 16 bytes per fragment and one copy window.
"""

from __future__ import annotations

import functools
from array import array
from typing import IO

from xdn.codec import Fragment, Sealed
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_scan import LEN
from xdn.wireconv import fragment_header_to_pb, manifest_to_pb, range_proof_to_pb

__all__ = ["DisseminationWriter", "field_header", "fragment_header", "request_framing", "varint"]

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
        manifest = sealed.signed_manifest.manifest
        if manifest.leaf_count != len(self) or len(sealed.order) != len(self):
            raise ValueError(f"a manifest of {manifest.leaf_count} leaves for {len(self)} records")
        self._records.flush()
        body = manifest_to_pb(
            sealed.signed_manifest, publisher_certificate=publisher_certificate
        ).SerializeToString()
        written = _put(out, field_header(_MANIFEST, len(body)), body)
        for row in manifest.ranges:
            proof = pb.Fragment(range_proof=range_proof_to_pb(sealed.proofs[row.concept]))
            tail = proof.SerializeToString()  # (field 12 alone: the record's last field)
            for leaf in range(row.first, row.end):
                index = sealed.order[leaf]
                size = self._sizes[index] + len(tail)
                written += _put(out, field_header(_FRAGMENTS, size))
                written += self._copy(out, self._offsets[index], self._sizes[index])
                written += _put(out, tail)
                tail = b""  # (the run's proof rides on its first fragment only)
        if provenance:
            written += _put(out, field_header(_PROVENANCE, len(provenance)), provenance)
        return written

    def _copy(self, out: IO[bytes], offset: int, size: int) -> int:
        self._records.seek(offset)
        left = size
        while left:
            data = self._records.read(min(left, _WINDOW))
            if not data:
                raise ValueError(f"the records end within the record at byte {offset}")
            out.write(data)
            left -= len(data)
        return size


def _put(out: IO[bytes], *pieces: bytes) -> int:
    for piece in pieces:
        out.write(piece)
    return sum(len(p) for p in pieces)


def request_framing(rest: pb.PublishRequest, length: int) -> tuple[bytes, bytes]:
    """What goes before and after a serialized ``Dissemination`` of ``length`` bytes to make
    the ``PublishRequest`` that is ``rest`` with that dissemination.

    Raises:
        ValueError: ``rest`` has a dissemination already.
    """
    if rest.HasField("dissemination"):
        raise ValueError("the request's dissemination is the one written apart")
    return field_header(_DISSEMINATION_IN_REQUEST, length), rest.SerializeToString()
