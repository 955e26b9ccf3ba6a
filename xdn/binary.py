"""Deterministic byte layouts for signed statements and stored values, and their validators.

Theory of operation. Whatever a party signs (a lease, a key message) or keeps (a key tree, a
grant) must encode to exactly one byte string, and decoding what a peer or a disk hands back
must refuse anything else. The layout:

* a leading label or magic naming the type and its version (domain separation: a signature over
  one kind of statement never passes for another);
* then the fields in a fixed order: integers big-endian (``u8``/``u32``/``u64``), byte strings
  and UTF-8 text prefixed with their ``u32`` length, lists as a count then their items.

:class:`Writer` builds such a value, :class:`Reader` reads it back strictly: a wrong label,
truncation, trailing bytes, an impossible count or invalid UTF-8 raise
:class:`~xdn.errors.ProtocolError` (the bytes came from a peer or from disk, never from our own
caller). :func:`label` is the same framing for HKDF / HPKE ``info`` strings. The validators
(:func:`check_name`, :func:`check_u64`) are what the frozen values built from these fields check
in their constructors (misuse raises ``TypeError`` / ``ValueError``).

The codec's manifests, checkpoints and entitlements use the codec's own framing
(:func:`xdn.codec._encoding.frame`, every field including the label length-prefixed); both are
fixed by signatures already made and stay as they are.
"""

from __future__ import annotations

import re
import struct

from xdn.errors import ProtocolError

__all__ = ["U64_MAX", "Reader", "Writer", "check_name", "check_u64", "label"]

U64_MAX = (1 << 64) - 1
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_CONTROL = re.compile("[\x00-\x1f\x7f]")  # C0 controls and DEL


def check_name(what: str, value: object, *, empty: bool = False) -> str:
    """Validate an identifier (publisher, concept, member, site): text without controls.

    Args:
        what: the field's name, for the error message.
        value: the value to check.
        empty: whether the empty string is allowed.

    Raises:
        TypeError: ``value`` is not a ``str``.
        ValueError: it is empty (unless allowed) or contains a control character.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value and not empty:
        raise ValueError(f"{what} must not be empty")
    if _CONTROL.search(value) is not None:
        raise ValueError(f"{what} must not contain control characters: {value!r}")
    return value


def check_u64(what: str, value: object) -> int:
    """Validate an unsigned 64-bit integer (``bool`` refused).

    Raises:
        TypeError: ``value`` is not an ``int``.
        ValueError: it is negative or above :data:`U64_MAX`.
    """
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
    """Append fields to a byte string that starts with ``magic`` (a label or a magic number)."""

    def __init__(self, magic: bytes) -> None:
        self._parts: list[bytes] = [magic]

    def u8(self, value: int) -> Writer:
        self._parts.append(bytes((value,)))
        return self

    def u32(self, value: int) -> Writer:
        self._parts.append(_U32.pack(value))
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
    """Read the fields :class:`Writer` wrote; every defect is a :class:`ProtocolError`.

    Args:
        data: the encoded value.
        magic: the label or magic it must start with.
        what: what the value is, prefixed to error messages (e.g. ``"lease"``).
    """

    def __init__(self, data: bytes, magic: bytes, *, what: str = "") -> None:
        if not isinstance(data, bytes):
            raise TypeError(f"expected bytes, not {type(data).__name__}")
        self._prefix = f"{what}: " if what else ""
        if not data.startswith(magic):
            raise self._error(f"not an encoded {magic!r} value")
        self._data = data
        self._at = len(magic)

    def _error(self, message: str) -> ProtocolError:
        return ProtocolError(self._prefix + message)

    def _take(self, n: int) -> bytes:
        end = self._at + n
        if end > len(self._data):
            raise self._error("truncated value")
        chunk = self._data[self._at : end]
        self._at = end
        return chunk

    def u8(self) -> int:
        return self._take(1)[0]

    def u32(self) -> int:
        value: int = _U32.unpack(self._take(4))[0]
        return value

    def u64(self) -> int:
        value: int = _U64.unpack(self._take(8))[0]
        return value

    def blob(self) -> bytes:
        return self._take(self.u32())

    def text(self) -> str:
        try:
            return self.blob().decode()
        except UnicodeDecodeError:
            raise self._error("text field is not UTF-8") from None

    def count(self, item_bytes: int, *, u32: bool = False) -> int:
        """Read an item count (``u64``, or ``u32`` if asked) and check that many items of at
        least ``item_bytes`` each can follow."""
        n = self.u32() if u32 else self.u64()
        if n * item_bytes > len(self._data) - self._at:
            raise self._error("item count exceeds the data")
        return n

    def done(self) -> None:
        if self._at != len(self._data):
            raise self._error("trailing bytes after value")
