"""A delivery that comes in parts is spooled to a file, never joined in memory (issue #15).

Theory of operation
-------------------
A site sends a delivery larger than its part size as consecutive parts
(:mod:`xdn.wire_parts`). The subscriber hands each part to a :class:`FileSink` opened at the
first part (:meth:`Spool.open_sink`), which appends it to a file of its own in the spool folder
of the state directory. Once the last part came, :func:`read_spooled` walks the joined bytes'
protobuf framing (:mod:`xdn.wire_scan`) instead of parsing them:

* a delivery that carries a dissemination becomes a :class:`SpooledDissemination`: its manifest
  and its provenance chain parsed, each fragment's header fields parsed (everything but its
  ciphertext, which is only located) — a ``pb.Dissemination`` whose ciphertexts are empty — and
  the ciphertexts read from the file a span at a time when the document is opened
  (:func:`xdn.codec.decode_stored`), or joined in memory only to be held, within the held
  store's cap;
* any other delivery (small) is parsed whole and the file deleted.

Malformed protobuf, a second manifest or provenance, a field over :data:`FIELD_BYTES` read into
memory, or parts again, is a :class:`~xdn.errors.ProtocolError` (the stream is resumed, as for
parts that do not follow). The file is deleted when the parts do not follow, when the delivery
has been handled (accepted or refused), and at start-up for any a crash left behind
(:meth:`Spool.clear`).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from xdn.errors import ProtocolError
from xdn.span_files import FileSource, ScratchFolder
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_scan import LEN, Cursor
from xdn.wire_scan import read_delivery as read_framing

__all__ = [
    "FIELD_BYTES",
    "FileSink",
    "Spool",
    "SpooledDissemination",
    "read_spooled",
]

log = logging.getLogger(__name__)

FIELD_BYTES = 16 * 1024 * 1024  # the most of one field (a manifest, a chain…) read into memory
_SUFFIX = ".spool"
_MANIFEST, _FRAGMENT, _PROVENANCE = 1, 2, 3  # Dissemination's fields
_CIPHER_VALUE = 9  # Fragment.cipher_value: located, never read here


class FileSink:
    """Appends the parts of one delivery to a new file (an :class:`xdn.parts.Sink`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "xb")  # noqa: SIM115 (closed by finish or abort)

    def write(self, data: bytes) -> None:
        self._file.write(data)

    def finish(self) -> FileSource:
        self._file.close()
        return FileSource(self.path)

    def abort(self) -> None:
        self._file.close()
        self.path.unlink(missing_ok=True)


class Spool(ScratchFolder):
    """The folder where deliveries in parts are spooled (and views written before they are
    moved into place)."""

    what = "spooled files"

    def new_path(self, suffix: str = _SUFFIX) -> Path:
        return super().new_path(suffix)

    def open_sink(self, size: int) -> FileSink:
        """A sink for a delivery of ``size`` bytes (announced; not reserved)."""
        del size
        return FileSink(self.new_path())


@dataclass(frozen=True, slots=True, kw_only=True)
class SpooledCiphertext:
    """A fragment's ciphertext: bytes ``[start, end)`` of a spooled file."""

    source: FileSource
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start

    def read(self, start: int, end: int) -> bytes:
        if not 0 <= start <= end <= len(self):
            raise ValueError(f"span {start}-{end} is not within {len(self)} bytes")
        return self.source.read(self.start + start, self.start + end)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpooledDissemination:
    """A delivery carrying a document, spooled: ``message`` is its dissemination with every
    fragment's ``cipher_value`` empty, ``ciphertexts`` where each lies in the file."""

    sequence: int
    message: pb.Dissemination
    ciphertexts: tuple[SpooledCiphertext, ...]
    source: FileSource
    span: tuple[int, int]  # the dissemination's bytes in the file

    @property
    def size(self) -> int:
        return self.span[1] - self.span[0]

    def cipher_digests(self) -> list[bytes]:
        """The SHA-256 of each fragment's ciphertext, read a span at a time."""
        digests = []
        for stored in self.ciphertexts:
            digest = hashlib.sha256()
            for at in range(0, len(stored), 1 << 20):
                digest.update(stored.read(at, min(len(stored), at + (1 << 20))))
            digests.append(digest.digest())
        return digests

    def load(self) -> pb.Dissemination:
        """The dissemination parsed whole (to hold it: only within the held store's cap)."""
        message: pb.Dissemination = pb.Dissemination.FromString(self.source.read(*self.span))
        return message

    def delete(self) -> None:
        self.source.delete()


def read_spooled(
    source: FileSource, what: str, sequence: int | None = None
) -> SpooledDissemination | pb.Delivery:
    """The delivery spooled in ``source``: a dissemination read by its framing, anything else
    parsed whole (and the file deleted). On an error the file is deleted.

    Raises:
        ProtocolError: see the module docstring; or its sequence number is not ``sequence``
            (the parts' own).
    """
    try:
        read = _read_delivery(source, what)
        if sequence is not None and read.sequence != sequence:
            raise ProtocolError(f"{what} joins to delivery {read.sequence}")
    except BaseException:
        source.delete()
        raise
    if isinstance(read, pb.Delivery):
        source.delete()
    return read


def _read_delivery(source: FileSource, what: str) -> SpooledDissemination | pb.Delivery:
    found = read_framing(source, what, max_whole=FIELD_BYTES)
    if isinstance(found, pb.Delivery):
        return found
    return _read_dissemination(source, found.sequence, (found.start, found.end), what)


def _field(cursor: Cursor, start: int, end: int, what: str) -> bytes:
    if end - start > FIELD_BYTES:
        raise cursor.malformed(f"{what} of {end - start} bytes: over {FIELD_BYTES} bytes")
    return cursor.read(start, end)


def _read_dissemination(
    source: FileSource, sequence: int, span: tuple[int, int], what: str
) -> SpooledDissemination:
    cursor = Cursor(source, *span, f"the dissemination of {what}")
    message = pb.Dissemination()
    ciphertexts: list[SpooledCiphertext] = []
    seen: set[int] = set()
    try:
        while not cursor.done:
            number, wire_type = cursor.key()
            if wire_type != LEN or number not in (_MANIFEST, _FRAGMENT, _PROVENANCE):
                cursor.skip_value(wire_type)  # (an unknown field: a parse skips it too)
                continue
            if number != _FRAGMENT and number in seen:
                raise cursor.malformed(f"field {number} twice")
            seen.add(number)
            start, end = cursor.span()
            if number == _MANIFEST:
                message.manifest.ParseFromString(_field(cursor, start, end, "a manifest"))
            elif number == _PROVENANCE:
                message.provenance = _field(cursor, start, end, "a provenance chain")
            else:
                cursor.at = start  # (back to read the fragment's fields)
                header, cipher = _fragment(cursor, end)
                message.fragments.add().ParseFromString(header)
                ciphertexts.append(SpooledCiphertext(source=source, start=cipher[0],
                                                     end=cipher[1]))  # fmt: skip
    except DecodeError:
        raise ProtocolError(f"the dissemination of {what} is not a valid Dissemination") from None
    return SpooledDissemination(
        sequence=sequence, message=message, ciphertexts=tuple(ciphertexts), source=source,
        span=span,
    )  # fmt: skip


def _fragment(cursor: Cursor, end: int) -> tuple[bytes, tuple[int, int]]:
    """A fragment's record: its fields but the ciphertext, and where the ciphertext lies."""
    outer = cursor.within(end)
    header = bytearray()
    cipher = (cursor.at, cursor.at)
    while not cursor.done:
        at = cursor.at
        number, wire_type = cursor.key()
        if number == _CIPHER_VALUE and wire_type == LEN:
            cipher = cursor.span()  # (the last one counts, as in a parse)
            continue
        cursor.skip_value(wire_type)
        if len(header) + cursor.at - at > FIELD_BYTES:
            raise cursor.malformed(f"a fragment's header fields are over {FIELD_BYTES} bytes")
        header += cursor.read(at, cursor.at)
    cursor.end = outer
    return bytes(header), cipher
