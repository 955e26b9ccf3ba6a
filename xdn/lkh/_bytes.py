"""Byte layouts shared by the LKH values: framed fields, big-endian integers, labels.

Every encoding starts with a four-byte magic naming the type and its version, then fields in a
fixed order: integers are big-endian (``u8``/``u32``/``u64``), byte strings and UTF-8 text are
prefixed with their ``u32`` length. Decoding is strict: trailing bytes, truncation, a wrong magic
or an out-of-range value raise :class:`~xdn.errors.ProtocolError` (the bytes came from a peer or
from disk, never from our own caller).
"""

from __future__ import annotations

import struct

from xdn.errors import ProtocolError

__all__ = ["U64_MAX", "Reader", "Writer", "check_name", "check_u64", "label"]

U64_MAX = (1 << 64) - 1
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


def check_name(what: str, value: object) -> str:
    """Validate an identifier (publisher, concept, member): non-empty text, no controls.

    Raises:
        TypeError: ``value`` is not a ``str``.
        ValueError: it is empty or contains a control character.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{what} must not be empty")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        raise ValueError(f"{what} must not contain control characters: {value!r}")
    return value


def check_u64(what: str, value: object) -> int:
    """Validate an unsigned 64-bit integer (``bool`` refused)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if not 0 <= value <= U64_MAX:
        raise ValueError(f"{what} out of range: {value}")
    return value


def label(purpose: bytes, *fields: str | int) -> bytes:
    """An injective HKDF/HPKE ``info``: ``purpose`` then each field length-prefixed.

    ``str`` fields are UTF-8, ``int`` fields eight bytes big-endian.
    """
    out = [purpose]
    for value in fields:
        data = _U64.pack(value) if isinstance(value, int) else value.encode()
        out += (_U32.pack(len(data)), data)
    return b"".join(out)


class Writer:
    """Append fields to a byte string."""

    def __init__(self, magic: bytes) -> None:
        self._parts: list[bytes] = [magic]

    def u8(self, value: int) -> Writer:
        self._parts.append(bytes((value,)))
        return self

    def u64(self, value: int) -> Writer:
        self._parts.append(_U64.pack(value))
        return self

    def blob(self, value: bytes) -> Writer:
        self._parts += (_U32.pack(len(value)), value)
        return self

    def text(self, value: str) -> Writer:
        return self.blob(value.encode())

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    """Read the fields :class:`Writer` wrote; every defect is a :class:`ProtocolError`."""

    def __init__(self, data: bytes, magic: bytes) -> None:
        if not isinstance(data, bytes):
            raise TypeError(f"expected bytes, not {type(data).__name__}")
        if not data.startswith(magic):
            raise ProtocolError(f"not an encoded {magic!r} value")
        self._data = data
        self._at = len(magic)

    def _take(self, n: int) -> bytes:
        end = self._at + n
        if end > len(self._data):
            raise ProtocolError("truncated value")
        chunk = self._data[self._at : end]
        self._at = end
        return chunk

    def u8(self) -> int:
        return self._take(1)[0]

    def u64(self) -> int:
        value: int = _U64.unpack(self._take(8))[0]
        return value

    def blob(self) -> bytes:
        (length,) = _U32.unpack(self._take(4))
        return self._take(length)

    def text(self) -> str:
        try:
            return self.blob().decode()
        except UnicodeDecodeError:
            raise ProtocolError("text field is not UTF-8") from None

    def count(self, item_bytes: int) -> int:
        """Read an item count and check that many items of at least ``item_bytes`` can follow."""
        n = self.u64()
        if n * item_bytes > len(self._data) - self._at:
            raise ProtocolError("item count exceeds the data")
        return n

    def done(self) -> None:
        if self._at != len(self._data):
            raise ProtocolError("trailing bytes after value")
