"""Mapped nodes → fragment plaintexts (canonical XML with references to nested fragments).

Theory of operation
-------------------
The input is any sequence of objects with ``.element`` (an lxml element) and ``.concept``
(:class:`MappedNodeLike`, e.g. :class:`xdn.mapping.MappedNode`), all from one document. They are
put in document order; a node's *position* is its index in that order and its *parent* is the
position of its nearest mapped ancestor (``None`` if it has none).

Each fragment's plaintext is its element serialised as **exclusive XML Canonicalization 1.0
without comments** (``etree.tostring(el, method="c14n", exclusive=True,
with_comments=False)``), where every mapped descendant whose nearest mapped ancestor is this
element is replaced by ``<xdn:ref xmlns:xdn="https://xdn.example.org/ns#" fragment="ID"/>``
(the replaced element's tail text stays in place). Exclusive C14N makes each plaintext a
self-contained element: it declares exactly the namespaces it visibly uses, and does not
inherit ``xml:*`` attributes from outside. One caveat of exclusive C14N: a prefix used only
inside attribute values or text (QNames in content, e.g. ``xsi:type="p:T"``) is not declared.

The caller's tree is never modified: the root is deep-copied once, and the copy's counterparts
of the mapped nodes are serialised in reverse document order, each then replaced by its
reference, so every fragment is serialised exactly once with its descendants already replaced
(linear in the document size).

Documents that already contain elements in the xdn namespace are refused: a subscriber could
not tell them from the codec's own references.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from lxml import etree

from xdn.codec._encoding import XDN_NS
from xdn.codec._keys import check_name
from xdn.errors import UsageError

__all__ = [
    "REF_TAG",
    "MappedNodeLike",
    "Plaintext",
    "canonical_fragments",
    "canonicalize",
    "fragment_id",
]

REF_TAG = f"{{{XDN_NS}}}ref"


class MappedNodeLike(Protocol):
    """A node selected by a concept mapping (structurally, ``xdn.mapping.MappedNode``)."""

    @property
    def element(self) -> etree._Element: ...

    @property
    def concept(self) -> str: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Plaintext:
    """One fragment before encryption: its place, its concept and its canonical bytes."""

    position: int
    parent: int | None
    concept: str
    content: bytes


def fragment_id(document_id: str, position: int) -> str:
    """The identifier of the fragment at ``position`` of ``document_id``: ``"DOC#POS"``."""
    return f"{document_id}#{position}"


def canonicalize(element: etree._Element) -> bytes:
    """Exclusive C14N 1.0 without comments of ``element`` (its tail excluded)."""
    data: bytes = etree.tostring(element, method="c14n", exclusive=True, with_comments=False)
    return data


def _document_order(nodes: Sequence[MappedNodeLike]) -> tuple[etree._Element, list[int]]:
    """Validate the nodes; return the document root and each node's document-order index."""
    for node in nodes:
        if not isinstance(node.element, etree._Element) or not isinstance(node.element.tag, str):
            raise UsageError("every mapped node must be an element (not text, comment or PI)")
        check_name("concept", node.concept)
    root = nodes[0].element.getroottree().getroot()
    order: dict[etree._Element, int] = {}
    for index, element in enumerate(root.iter()):
        if isinstance(element.tag, str) and element.tag.startswith(f"{{{XDN_NS}}}"):
            raise UsageError(f"document uses the reserved xdn namespace: {element.tag}")
        order[element] = index
    indices = []
    for node in nodes:
        found = order.get(node.element)
        if found is None:
            raise UsageError("all mapped nodes must belong to the same document")
        indices.append(found)
    if len(set(indices)) != len(indices):
        raise UsageError("an element is mapped more than once")
    return root, indices


def canonical_fragments(mapped: Iterable[MappedNodeLike], *, document_id: str) -> list[Plaintext]:
    """Turn mapped nodes into fragment plaintexts, in position order.

    Args:
        mapped: the mapped nodes of one document (any order; sorted into document order).
        document_id: the document's identifier, used in reference elements.

    Returns:
        One :class:`Plaintext` per mapped node, ``position`` 0, 1, ….

    Raises:
        UsageError: no nodes, nodes from different documents, a node mapped twice, a non-element
            node, or a document using the xdn namespace.
        ValueError: an empty concept or document id, or one with control characters.
    """
    check_name("document_id", document_id)
    nodes = list(mapped)
    if not nodes:
        raise UsageError("nothing to encode: the mapping selected no nodes")
    root, indices = _document_order(nodes)
    ordered = [node for _, node in sorted(zip(indices, nodes, strict=True), key=lambda p: p[0])]
    position_of = {node.element: pos for pos, node in enumerate(ordered)}
    parents = [
        next((position_of[a] for a in node.element.iterancestors() if a in position_of), None)
        for node in ordered
    ]
    root_copy = copy.deepcopy(root)
    copies: dict[int, etree._Element] = {}
    for original, twin in zip(root.iter(), root_copy.iter(), strict=True):
        pos = position_of.get(original)
        if pos is not None:
            copies[pos] = twin
    contents: dict[int, bytes] = {}
    blank_ref = etree.Element(REF_TAG, nsmap={"xdn": XDN_NS})  # copied: cheaper than building
    for pos in range(len(ordered) - 1, -1, -1):
        twin = copies[pos]
        contents[pos] = canonicalize(twin)
        holder = twin.getparent()
        if holder is not None:
            ref = copy.copy(blank_ref)
            ref.set("fragment", fragment_id(document_id, pos))
            ref.tail = twin.tail
            holder.replace(twin, ref)
    return [
        Plaintext(position=pos, parent=parents[pos], concept=node.concept, content=contents[pos])
        for pos, node in enumerate(ordered)
    ]
