"""The one place that builds lxml parsers: hardened against hostile XML.

Every XML document xdn reads from outside (enterprise documents, encrypted exports, mappings)
goes through :func:`parse_bytes` / :func:`parse_file` or :func:`iterparse_file`. The parsers
refuse DTDs (so no entity expansion, no external entities), never touch the network, and bound
depth and text size; lxml's own errors are translated into :class:`HostileXmlError` naming the
line where the problem is.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lxml import etree

from xdn.errors import HostileXmlError

__all__ = ["Limits", "iterparse_file", "parse_bytes", "parse_file"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """Bounds on what an input document may contain."""

    max_depth: int = 256
    max_text_bytes: int = 64 * 1024 * 1024
    max_document_bytes: int = 2 * 1024**3

    def __post_init__(self) -> None:
        if self.max_depth < 1 or self.max_text_bytes < 1 or self.max_document_bytes < 1:
            raise ValueError("limits must be positive")


DEFAULT_LIMITS = Limits()


def _parser() -> etree.XMLParser:
    # huge_tree lets lxml accept big documents; our own limits below bound them instead.
    return etree.XMLParser(
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        dtd_validation=False,
        remove_comments=False,
        huge_tree=True,
    )


def _refuse_doctype(docinfo: Any, source: str) -> None:
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise HostileXmlError(f"{source}: DTDs and entity declarations are not allowed")


@functools.lru_cache(maxsize=16)
def _nodes_below(depth: int) -> etree.XPath:
    """XPath from a root to the element, comment or PI children at ``depth + 1``."""
    return etree.XPath("*/" * (depth - 1) + "node()[not(self::text())]")


def _check_tree(root: etree._Element, source: str, limits: Limits, *, size: int) -> None:
    """Bound the depth and the text nodes of a parsed document of ``size`` bytes."""
    too_deep = _nodes_below(limits.max_depth)(root)  # one pass in C, not a walk in Python
    if too_deep:
        line = too_deep[0].sourceline
        raise HostileXmlError(f"{source}:{line}: nesting deeper than {limits.max_depth} elements")
    if size <= limits.max_text_bytes:
        return  # no DTD, so no entity expands: no text node is longer than its document
    for node in root.iter():
        for text in (node.text, node.tail):
            if text is not None and len(text) > limits.max_text_bytes:
                raise HostileXmlError(
                    f"{source}:{node.sourceline}: text node larger than "
                    f"{limits.max_text_bytes} bytes"
                )


def parse_bytes(
    data: bytes, *, source: str = "<bytes>", limits: Limits = DEFAULT_LIMITS
) -> etree._ElementTree:
    """Parse a whole document held in memory, hardened; return its tree."""
    if len(data) > limits.max_document_bytes:
        raise HostileXmlError(f"{source}: document larger than {limits.max_document_bytes} bytes")
    if b"<!DOCTYPE" in data or b"<!ENTITY" in data:
        raise HostileXmlError(f"{source}: DTDs and entity declarations are not allowed")
    try:
        root = etree.fromstring(data, _parser())
    except etree.XMLSyntaxError as exc:
        raise HostileXmlError(f"{source}:{exc.lineno}: malformed XML: {exc.msg}") from None
    tree = root.getroottree()
    _refuse_doctype(tree.docinfo, source)
    _check_tree(root, source, limits, size=len(data))
    return tree


def parse_file(path: Path, *, limits: Limits = DEFAULT_LIMITS) -> etree._ElementTree:
    """Parse a document from a file, hardened."""
    size = path.stat().st_size
    if size > limits.max_document_bytes:
        raise HostileXmlError(f"{path}: document larger than {limits.max_document_bytes} bytes")
    return parse_bytes(path.read_bytes(), source=str(path), limits=limits)


def iterparse_file(
    source: Path | IO[bytes],
    *,
    events: tuple[str, ...] = ("start", "end"),
    limits: Limits = DEFAULT_LIMITS,
) -> Iterator[tuple[str, etree._Element]]:
    """Stream ``(event, element)`` pairs from a document, hardened, checking depth and text.

    ``events`` may also ask for ``"comment"`` and ``"pi"`` (the node is then the comment or the
    processing instruction). The caller owns memory: clear elements it has finished with
    (``element.clear()``).
    """
    name = str(source) if isinstance(source, Path) else getattr(source, "name", "<stream>")
    context = etree.iterparse(
        source,
        events=("start", "end", *(e for e in events if e in ("comment", "pi"))),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=True,
    )
    depth = 0
    try:
        for event, element in context:
            if event == "start":
                depth += 1
                if depth == 1:
                    _refuse_doctype(element.getroottree().docinfo, name)
                if depth > limits.max_depth:
                    raise HostileXmlError(
                        f"{name}:{element.sourceline}: nesting deeper than {limits.max_depth}"
                    )
            elif event == "end":
                depth -= 1
                for text in (element.text, element.tail):
                    if text is not None and len(text) > limits.max_text_bytes:
                        raise HostileXmlError(
                            f"{name}:{element.sourceline}: text node larger than "
                            f"{limits.max_text_bytes} bytes"
                        )
            if event in events:
                yield event, element
    except etree.XMLSyntaxError as exc:
        raise HostileXmlError(f"{name}:{exc.lineno}: malformed XML: {exc.msg}") from None

