"""The RDF media types the endpoint speaks, and reading a ``Content-Type`` header.

Representations offered (content negotiation, :mod:`._conneg`): JSON-LD (the default: LDN
requires it), TriG, N-Quads, Turtle (for a resource without named graphs) and an HTML page.
Notifications accepted (``Accept-Post``, :mod:`._notification`): JSON-LD, Turtle, N-Quads and
TriG.
"""

from __future__ import annotations

from typing import Final

import pyoxigraph as ox

from xdn.linked_data._errors import UnsupportedMediaType

__all__ = [
    "ACCEPTED_POST_TYPES",
    "HTML",
    "JSON_LD",
    "N_QUADS",
    "RDF_FORMATS",
    "TRIG",
    "TURTLE",
    "content_type",
    "parse_content_type",
]

JSON_LD: Final = "application/ld+json"
TRIG: Final = "application/trig"
N_QUADS: Final = "application/n-quads"
TURTLE: Final = "text/turtle"
HTML: Final = "text/html"

#: Media type → pyoxigraph format, for every RDF syntax the endpoint reads or writes.
RDF_FORMATS: Final = {
    JSON_LD: ox.RdfFormat.JSON_LD,
    TRIG: ox.RdfFormat.TRIG,
    N_QUADS: ox.RdfFormat.N_QUADS,
    TURTLE: ox.RdfFormat.TURTLE,
}

#: What an inbox takes in a POST, in the order ``Accept-Post`` lists them.
ACCEPTED_POST_TYPES: Final = (JSON_LD, TURTLE, N_QUADS, TRIG)

_TEXT_TYPES: Final = frozenset({TURTLE, HTML})


def parse_content_type(header: str | None) -> tuple[str, dict[str, str]]:
    """Split a ``Content-Type`` value into the lower-cased media type and its parameters.

    Raises:
        UnsupportedMediaType: the header is missing or is not ``type/subtype[; k=v]…``.
    """
    if header is None or not header.strip():
        raise UnsupportedMediaType(
            f"a notification needs a Content-Type; accepted: {', '.join(ACCEPTED_POST_TYPES)}"
        )
    kind, *params = header.split(";")
    kind = kind.strip().lower()
    main, slash, sub = kind.partition("/")
    if not slash or not main or not sub or any(c.isspace() for c in kind):
        raise UnsupportedMediaType(f"Content-Type {header!r} is not a media type")
    parsed = {}
    for param in params:
        key, eq, value = param.partition("=")
        if not eq or not key.strip():
            raise UnsupportedMediaType(f"Content-Type {header!r} has a malformed parameter")
        parsed[key.strip().lower()] = value.strip().strip('"')
    return kind, parsed


def content_type(media_type: str) -> str:
    """The ``Content-Type`` value for a representation in ``media_type`` (UTF-8 where the
    type has a charset parameter; the RDF types other than Turtle are UTF-8 by definition)."""
    return f"{media_type}; charset=utf-8" if media_type in _TEXT_TYPES else media_type
