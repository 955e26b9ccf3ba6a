"""Reading protobuf framing from bytes kept elsewhere, a window at a time (issue #15).

A document staged in a site's store (:mod:`disseminator.body_chunks`) or spooled to a file by a
subscriber (:mod:`subscriber.spool`) can be larger than memory, so the receiver reads only what
it needs of it: the framing of its fields (keys, lengths) and the few small fields it uses.
:class:`Cursor` walks ``[start, end)`` of a :class:`Source` through a small window, reading
varints and field values and jumping over what it skips (ciphertext) without reading it.
Every way the bytes can fail to be protobuf — a varint longer than ten bytes, a length past the
end, a group or an unknown wire type, a field cut short — is a
:class:`~xdn.errors.ProtocolError` saying what was being read and where.

Pure: a :class:`Source` is anything with a length and ``read(start, end)`` (bytes in memory,
:class:`MemorySource`; a staged body, :class:`~disseminator.body_chunks.StoredBytes`; a spooled
file, :class:`~xdn.span_files.FileSource`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from google.protobuf.message import DecodeError

from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = [
    "LEN", "VARINT", "Cursor", "DocumentInDelivery", "MemorySource", "Source", "read_delivery"
]

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5  # the wire types a proto3 message uses
_WINDOW = 64 * 1024


class Source(Protocol):
    """Bytes read a span at a time."""

    def __len__(self) -> int: ...

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``."""
        ...


class MemorySource:
    """A :class:`Source` over bytes in memory (no copy until a span is read)."""

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self._view = memoryview(data).cast("B")

    def __len__(self) -> int:
        return len(self._view)

    def read(self, start: int, end: int) -> bytes:
        return bytes(self._view[start:end])


class Cursor:
    """Walks the framing of ``[start, end)`` of ``source`` (see the module docstring).

    Args:
        source: the bytes.
        start, end: the span read (a message's fields).
        what: what the bytes are, for errors (``"a PublishRequest sent in parts"``).
    """

    def __init__(self, source: Source, start: int, end: int, what: str) -> None:
        if not 0 <= start <= end <= len(source):
            raise ValueError(f"span {start}-{end} is not within {len(source)} bytes")
        self._source = source
        self.at = start
        self.end = end  # (narrowed while a nested message is read: :meth:`within`)
        self._limit = end  # how far a window may read
        self.what = what
        self._window = b""
        self._window_at = start

    @property
    def done(self) -> bool:
        """Whether the span is read to its end."""
        return self.at >= self.end

    def within(self, end: int) -> int:
        """Read only up to ``end`` (a nested message's end) from now on; return the end it
        replaces, to be given back once the nested message is read."""
        if end > self.end:
            raise self.malformed(f"a field of {end - self.at} bytes runs past its message")
        previous, self.end = self.end, end
        return previous

    def malformed(self, why: str) -> ProtocolError:
        """The error for bytes that are not what they should be, here."""
        return ProtocolError(f"{self.what} is malformed at byte {self.at}: {why}")

    def key(self) -> tuple[int, int]:
        """The next field's (number, wire type)."""
        key = self.varint()
        number, wire_type = key >> 3, key & 7
        if number == 0 or wire_type not in (VARINT, FIXED64, LEN, FIXED32):
            raise self.malformed(f"field {number} of wire type {wire_type}")
        return number, wire_type

    def varint(self) -> int:
        """The next varint."""
        offset = self.at - self._window_at
        if 0 <= offset < len(self._window) and self._window[offset] < 0x80:
            self.at += 1  # (one byte, in the window: most keys and lengths)
            return self._window[offset]
        value = shift = 0
        for _ in range(10):
            byte = self._byte()
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7
        raise self.malformed("a varint longer than ten bytes")

    def span(self) -> tuple[int, int]:
        """A length-delimited value: its span, moved past."""
        length = self.varint()
        start = self.at
        self.skip(length)
        return start, start + length

    def skip(self, length: int) -> None:
        """Move ``length`` bytes on, without reading them."""
        if length > self.end - self.at:
            raise self.malformed(f"{length} bytes announced where {self.end - self.at} remain")
        self.at += length

    def skip_value(self, wire_type: int) -> None:
        """Move past a field's value."""
        if wire_type == VARINT:
            self.varint()
        elif wire_type == LEN:
            self.span()
        else:
            self.skip(8 if wire_type == FIXED64 else 4)

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` already walked (from the window if it holds them)."""
        if self._window_at <= start and end <= self._window_at + len(self._window):
            return self._window[start - self._window_at:end - self._window_at]
        return self._source.read(start, end)

    def _byte(self) -> int:
        offset = self.at - self._window_at
        if not 0 <= offset < len(self._window):
            if self.at >= self.end:
                raise self.malformed("the bytes end within a field")
            self._window_at, offset = self.at, 0
            self._window = self._source.read(self.at, min(self._limit, self.at + _WINDOW))
        self.at += 1
        return self._window[offset]


_DELIVERY_SEQUENCE, _DELIVERY_DISSEMINATION, _DELIVERY_PART = 1, 2, 14  # Delivery's fields


@dataclass(frozen=True, slots=True)
class DocumentInDelivery:
    """A ``Delivery`` that carries a document: its sequence number and where its serialized
    ``Dissemination`` lies (``[start, end)`` of the source)."""

    sequence: int
    start: int
    end: int


def read_delivery(
    source: Source, what: str, *, max_whole: int
) -> DocumentInDelivery | pb.Delivery:
    """The ``Delivery`` joined from parts in ``source``: where its document lies, or, for one
    that carries no document, the message parsed whole.

    Raises:
        ProtocolError: it is malformed, is parts again, or carries no document and is larger
            than ``max_whole``.
    """
    cursor = Cursor(source, 0, len(source), what)
    sequence, found, other = 0, None, False
    while not cursor.done:
        number, wire_type = cursor.key()
        if number == _DELIVERY_SEQUENCE and wire_type == VARINT:
            sequence = cursor.varint()
        elif number == _DELIVERY_DISSEMINATION and wire_type == LEN:
            found, other = cursor.span(), False  # (the last of a oneof's fields is in force)
        elif number == _DELIVERY_PART:
            raise ProtocolError(f"{what} joins to parts again")
        else:
            cursor.skip_value(wire_type)
            other = other or number in pb.Delivery.DESCRIPTOR.fields_by_number
    if found is not None and not other:
        return DocumentInDelivery(sequence, *found)
    if len(source) > max_whole:
        raise ProtocolError(f"{what} is {len(source)} bytes and carries no document")
    try:
        delivery: pb.Delivery = pb.Delivery.FromString(source.read(0, len(source)))
    except DecodeError:
        raise ProtocolError(f"{what} is not a valid Delivery") from None
    return delivery
