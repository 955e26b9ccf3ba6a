"""Paging an inbox's listing: pages of notifications after a cursor, in the order they came.

Theory of operation
-------------------
Listing a whole inbox costs the site's event loop time in proportion to the notifications it
holds, so ``GET /inbox/`` answers one page of at most ``[web] inbox_page`` of them — the
first, at the inbox's own URI, so an LDN consumer that knows nothing of paging reads the inbox
as before — and links the next page in the way of LDP Paging 1.0: a ``Link: <…>; rel="next"``
header (RFC 8288), ``rel="first"`` and ``rel="type"`` ``ldp:Page`` on the pages after the
first, and the same links as statements of the page (the link relations as IANA IRIs,
``http://www.iana.org/assignments/relation/next``).

A page after the first is ``INBOX?after=SEQ``: the notifications the inbox accepted after the
one it numbered ``SEQ`` (the store's sequence, never reused). A cursor, not an offset: when
older notifications go (receipts are pruned) no page boundary moves, so a walk from the first
page to the last meets every notification that stayed exactly once.

Pure: the caller reads the store and passes the page's rows in.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import pyoxigraph as ox

from xdn.linked_data._dataset import Dataset
from xdn.linked_data._errors import InvalidRequest
from xdn.linked_data._resources import LDP, inbox_listing

__all__ = ["IANA_RELATION", "InboxPage", "page_cursor", "parse_links"]

#: Registered link relations as IRIs (RFC 8288 §2.1.1), for ``next`` and ``first`` in RDF.
IANA_RELATION: Final = "http://www.iana.org/assignments/relation/"
_RDF_TYPE: Final = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_MAX_CURSOR: Final = 2**63 - 1
_LINK: Final = re.compile(r'\s*<([^>]*)>((?:\s*;\s*[^;,]*)*)\s*(?:,|$)')
_REL: Final = re.compile(r'(?i)\brel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))')


def page_cursor(query: Mapping[str, str]) -> int:
    """The cursor a listing's query asks for: ``after=SEQ``, or 0 (the first page).

    Raises:
        InvalidRequest: ``after`` is not a whole number from 0 to 2**63 - 1.
    """
    value = query.get("after")
    if value is None:
        return 0
    if not value.isascii() or not value.isdigit() or len(value) > 19 or int(value) > _MAX_CURSOR:
        raise InvalidRequest(
            f"after={value[:40]!r}: a page cursor is a whole number (from the inbox's "
            '"next" link)'
        )
    return int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class InboxPage:
    """One page of an inbox's listing.

    Attributes:
        inbox: the inbox's URI (ends with ``/``).
        after: this page's cursor (0: the first page, served at the inbox's URI).
        notifications: the URIs of the page's notifications, oldest first.
        next_after: the next page's cursor (``None``: this is the last page).
    """

    inbox: str
    after: int
    notifications: tuple[str, ...]
    next_after: int | None

    def __post_init__(self) -> None:
        if not self.inbox.endswith("/"):
            raise ValueError(f"inbox URI {self.inbox!r} must end with '/'")
        for cursor in (self.after, self.next_after):
            if cursor is not None and not 0 <= cursor <= _MAX_CURSOR:
                raise ValueError(f"page cursor {cursor} out of range")

    @classmethod
    def of_rows(
        cls, inbox: str, rows: Sequence[tuple[int, str]], *, after: int, more: bool
    ) -> InboxPage:
        """The page of ``rows`` (sequence number, notification URI), oldest first; ``more``:
        whether the inbox holds notifications after the last of them."""
        return cls(
            inbox=inbox, after=after, notifications=tuple(uri for _, uri in rows),
            next_after=rows[-1][0] if more and rows else None,
        )

    @staticmethod
    def _at(base: str, cursor: int) -> str:
        return base if cursor == 0 else f"{base}?after={cursor}"

    @property
    def uri(self) -> str:
        """This page's URI (the inbox's, for the first)."""
        return self._at(self.inbox, self.after)

    @property
    def next_uri(self) -> str | None:
        """The next page's URI, if there is one."""
        return None if self.next_after is None else self._at(self.inbox, self.next_after)

    def links(self, path: str) -> list[str]:
        """The ``Link`` header values of this page, relative to the inbox's ``path``."""
        links = []
        if self.after:
            links += [f'<{LDP}Page>; rel="type"', f'<{path}>; rel="first"']
        if self.next_after is not None:
            links.append(f'<{self._at(path, self.next_after)}>; rel="next"')
        return links

    def dataset(self) -> Dataset:
        """The page as RDF: the container and the notifications on it (``ldp:contains``),
        and the paging statements."""
        quads = list(inbox_listing(self.inbox, self.notifications))
        page = ox.NamedNode(self.uri)
        if self.after:
            quads += [
                ox.Quad(page, _RDF_TYPE, ox.NamedNode(LDP + "Page")),
                ox.Quad(page, ox.NamedNode(IANA_RELATION + "first"), ox.NamedNode(self.inbox)),
            ]
        if (following := self.next_uri) is not None:
            quads.append(ox.Quad(page, ox.NamedNode(IANA_RELATION + "next"),
                                 ox.NamedNode(following)))
        return tuple(quads)


def parse_links(values: Iterable[str]) -> dict[str, str]:
    """The targets of ``Link`` header values by relation (the first of each), as written."""
    found: dict[str, str] = {}
    for value in values:
        for match in _LINK.finditer(value):
            if not match.group(0).strip():
                continue
            for rel in _REL.finditer(match.group(2)):
                for name in (rel.group(1) or rel.group(2) or "").split():
                    found.setdefault(name.lower(), match.group(1))
    return found
