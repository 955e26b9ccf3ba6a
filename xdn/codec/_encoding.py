"""Unambiguous byte encodings shared by the codec: namespaces, framing, fixed-width integers.

Everything the codec hashes or signs (Merkle leaves, manifests, key-derivation info) is built
from :func:`frame`: each field is prefixed with its length as a 4-byte big-endian integer, so
two different field sequences never encode to the same bytes. Integers are 8-byte big-endian
(:func:`u64`); an optional integer is the empty field when absent (:func:`opt_u64`). The first
field of every framed structure is a domain-separation label such as ``b"xdn/manifest/v1"``.
"""

from __future__ import annotations

import struct

from xdn.binary import check_u64

__all__ = ["DS_NS", "XDN_NS", "XENC11_NS", "XENC_NS", "check_u64", "frame", "opt_u64", "u64"]

XDN_NS = "https://xdn.example.org/ns#"
XENC_NS = "http://www.w3.org/2001/04/xmlenc#"
XENC11_NS = "http://www.w3.org/2009/xmlenc11#"
DS_NS = "http://www.w3.org/2000/09/xmldsig#"

_FIELD_MAX = 2**32 - 1
_LENGTH = struct.Struct(">I").pack


def u64(value: int) -> bytes:
    """8-byte big-endian encoding of a non-negative integer."""
    return check_u64("integer", value).to_bytes(8, "big")


def opt_u64(value: int | None) -> bytes:
    """:func:`u64` of ``value``, or the empty string for ``None`` (distinct once framed)."""
    return b"" if value is None else u64(value)


def frame(*fields: bytes | str) -> bytes:
    """Concatenate fields, each prefixed with its 4-byte big-endian length.

    ``str`` fields are encoded as UTF-8.
    """
    parts: list[bytes] = []
    for field in fields:
        data = field.encode("utf-8") if isinstance(field, str) else field
        if len(data) > _FIELD_MAX:
            raise ValueError("field too long to frame")
        parts.append(_LENGTH(len(data)))
        parts.append(data)
    return b"".join(parts)
