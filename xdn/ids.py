"""Identifiers written into IRIs and file names, escaped so that they round-trip.

Theory of operation. Document ids, subscriber and site names are free text: any non-empty
string without control characters (:func:`xdn.codec.check_name`), so ``order 7``, ``café`` and
``2024/03/order`` are all ids. The id itself is what manifests, ``received.jsonl`` and the
provenance literals (``xdn:documentId``) carry, unchanged. Two places need an escaped form:

* **IRIs.** Each node mints message URIs ``<node>msg/<document>/<hop…>`` (see
  :func:`xdn.provenance.message_uri`); an id is one path segment there. :func:`segment`
  percent-encodes it per RFC 3986 §2.1: the UTF-8 bytes of every character but the unreserved
  ones (``A-Z a-z 0-9 - . _ ~``), upper-case hex. The result is plain ASCII, a URI and so an
  IRI (RFC 3987 §3.1 maps an IRI to a URI the same way), it never contains ``/``, ``?`` or
  ``#``, and every party that encodes the same id mints the same IRI. The segments ``.`` and
  ``..`` are encoded too (``%2E``), so no resolver removes them as dot-segments
  (RFC 3986 §5.2.4). :func:`unsegment` is the strict inverse.
* **File names.** A subscriber stores each view as ``views/<publisher>/<document>.vN.xml``.
  :func:`file_stem` makes one path component of an id: it escapes ``%``, ``/``, ``\\``,
  ``~``, control characters and a leading ``.`` as ``%XX`` — so ``../x`` cannot climb out of
  the folder and ``a/b`` makes no sub-folder — and keeps every other character (``café`` stays
  ``café``). A stem longer than :data:`MAX_STEM_BYTES` is cut and suffixed with ``~`` and a
  hash of the whole id, so the file system never refuses the name; below that limit the
  escaping is reversible and distinct ids never share a stem.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final
from urllib.parse import quote, unquote_to_bytes

__all__ = ["MAX_STEM_BYTES", "check_id", "file_stem", "segment", "unsegment"]

#: Longest file stem :func:`file_stem` returns, in UTF-8 bytes (file systems allow 255; the
#: rest is left for ``.vN.xml`` and a temporary suffix).
MAX_STEM_BYTES: Final = 200

_SEGMENT = re.compile(r"(?:[A-Za-z0-9\-._~]|%[0-9A-F]{2})+")
_DOT_SEGMENTS: Final = {".": "%2E", "..": "%2E%2E"}
# Characters a file stem escapes anywhere: the escape character itself, path separators, the
# truncation marker, C0 and C1 controls and DEL.
_FILE_UNSAFE = re.compile(r"[%/\\~\x00-\x1f\x7f-\x9f]")
_HASH_CHARS: Final = 16
_CONTROL = re.compile("[\x00-\x1f\x7f]")


def _check_text(what: str, text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{what} must be a str, not {type(text).__name__}")
    if not text:
        raise ValueError(f"{what} must not be empty")
    return text


def check_id(text: object, what: str = "document id") -> str:
    """Check an identifier the way the codec will: non-empty UTF-8 text, no control character.

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: it is empty, holds a control character or a lone surrogate (a file name
            whose bytes are not UTF-8).
    """
    checked = _check_text(what, text)
    if _CONTROL.search(checked):
        raise ValueError(f"{what} {checked!r} contains a control character")
    try:
        checked.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{what} {checked!r} is not valid UTF-8 text") from None
    return checked


def segment(text: str) -> str:
    """Percent-encode ``text`` as one IRI path segment (RFC 3986 §2.1, UTF-8, upper-case hex).

    >>> segment("order 7"), segment("café"), segment("a/b"), segment("..")
    ('order%207', 'caf%C3%A9', 'a%2Fb', '%2E%2E')

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: it is empty or holds a lone surrogate (not encodable as UTF-8).
    """
    _check_text("an IRI segment", text)
    if text in _DOT_SEGMENTS:
        return _DOT_SEGMENTS[text]
    try:
        return quote(text, safe="", encoding="utf-8", errors="strict")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} is not encodable as UTF-8") from None


def unsegment(encoded: str) -> str:
    """The text :func:`segment` encoded as ``encoded``; strict: only its exact output decodes.

    Raises:
        TypeError: ``encoded`` is not a ``str``.
        ValueError: it is empty, holds a character or escape :func:`segment` never writes, or
            its bytes are not UTF-8.
    """
    _check_text("an IRI segment", encoded)
    if not _SEGMENT.fullmatch(encoded):
        raise ValueError(f"{encoded!r} is not a percent-encoded path segment")
    try:
        text = unquote_to_bytes(encoded).decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{encoded!r} does not encode UTF-8 text") from None
    if segment(text) != encoded:
        raise ValueError(f"{encoded!r} is not the canonical encoding of {text!r}")
    return text


def _escape_file_char(match: re.Match[str]) -> str:
    return "".join(f"%{byte:02X}" for byte in match.group().encode("utf-8"))


def file_stem(text: str) -> str:
    """A safe single path component for ``text`` (no separators, no leading dot, bounded length).

    >>> file_stem("../x"), file_stem("a/b"), file_stem("order 7"), file_stem("café")
    ('%2E.%2Fx', 'a%2Fb', 'order 7', 'café')

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: it is empty or holds a lone surrogate.
    """
    _check_text("a file name", text)
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{text!r} is not encodable as UTF-8") from None
    stem = _FILE_UNSAFE.sub(_escape_file_char, text)
    if stem.startswith("."):
        stem = "%2E" + stem[1:]
    if len(stem.encode("utf-8")) <= MAX_STEM_BYTES:
        return stem
    digest = hashlib.sha256(raw).hexdigest()[:_HASH_CHARS]
    room = MAX_STEM_BYTES - 1 - _HASH_CHARS
    cut = stem.encode("utf-8")[:room].decode("utf-8", errors="ignore")
    cut = re.sub(r"%[0-9A-F]?$", "", cut)  # never end inside an escape
    return f"{cut}~{digest}"
