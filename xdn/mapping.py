"""Concept → XPath mappings: how one organisation's private schema carries the shared concepts.

Theory of operation
-------------------
A mapping is a TOML file next to the schema it describes (``ontology/mappings/<schema>.toml``)::

    [namespaces]
    pd = "urn:example:production-dept"

    [concepts]
    WorkOrder = ["/pd:WorkOrders/pd:Order"]
    ProductionStep = ["//pd:Manufacturing/pd:Step"]

:func:`load_mapping` checks every concept against the ontology (a concept id or its full class
IRI) and compiles every expression with lxml, probing it once on an empty element so that
undefined prefixes and non-node-set expressions (``count(...)``) fail at load time rather than
on the first document. :func:`map_document` evaluates the rules on a parsed document and returns
the selected elements in document order; a mapped element nested in another mapped element is
its own node (the fragment codec turns it into a separate fragment). Selecting one element for
two concepts, or selecting text or attributes, is a :class:`~xdn.errors.MappingError`. Errors
in a mapping file name the file and the line of the concept concerned.
"""

from __future__ import annotations

import re
import tomllib
import types
from collections import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lxml import etree

from xdn.errors import MappingError
from xdn.ontology import Ontology

__all__ = [
    "MappedNode",
    "Mapping",
    "MappingRule",
    "Unpublished",
    "UnpublishedTally",
    "load_mapping",
    "map_document",
    "parse_mapping",
    "unmapped_elements",
    "unpublished",
]

_TOP_LEVEL = frozenset({"namespaces", "concepts"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MappingRule:
    """One XPath expression selecting elements of one concept."""

    concept: str
    expression: str
    xpath: etree.XPath = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Mapping:
    """A validated mapping of one publisher schema onto the ontology.

    Attributes:
        publisher_schema: the mapping file's stem, e.g. ``production-dept``.
        namespaces: prefix → namespace URI used by the expressions.
        rules: every (concept, expression) pair, in file order.
        ontology_iri: IRI of the ontology the concepts were checked against.
        source: the file it was loaded from (for messages).
    """

    publisher_schema: str
    namespaces: abc.Mapping[str, str]
    rules: tuple[MappingRule, ...]
    ontology_iri: str
    source: str

    @property
    def concepts(self) -> frozenset[str]:
        """Concepts this mapping can produce."""
        return frozenset(rule.concept for rule in self.rules)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MappedNode:
    """An element of a document and the concept it carries."""

    element: etree._Element
    concept: str


def _read_toml(data: bytes, source: str) -> tuple[str, dict[str, Any]]:
    try:
        text = data.decode("utf-8")
        return text, tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise MappingError(f"{source}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"at line (\d+)", str(exc))
        where = f"{source}:{line.group(1)}" if line else source
        raise MappingError(f"{where}: malformed TOML: {exc}") from None


def _namespaces(raw: Any, source: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not raw:
        raise MappingError(f"{source}: [namespaces] must be a non-empty table of prefix = URI")
    for prefix, uri in raw.items():
        if not isinstance(uri, str) or not uri or not prefix.isidentifier():
            raise MappingError(f"{source}: namespace {prefix!r} must map a name to a URI string")
    return dict(raw)


def _where(source: str, text: str, key: str) -> str:
    """``source:line`` of the line assigning ``key`` in ``text`` (``source`` when not found)."""
    pattern = re.compile(rf"""\s*(?:{re.escape(key)}|"{re.escape(key)}"|'{re.escape(key)}')\s*=""")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return f"{source}:{number}"
    return source


def _compile(concept: str, expression: str, namespaces: dict[str, str], source: str) -> etree.XPath:
    where = f"{source}: concept {concept}: XPath {expression!r}"
    try:
        xpath = etree.XPath(expression, namespaces=namespaces)
        probe = xpath(etree.Element("probe"))
    except etree.XPathError as exc:
        raise MappingError(f"{where}: {exc}") from None
    if not isinstance(probe, list):
        kind = type(probe).__name__
        raise MappingError(f"{where}: does not select elements (it yields a {kind})")
    return xpath


def parse_mapping(data: bytes, ontology: Ontology, *, source: str, schema: str) -> Mapping:
    """Validate mapping TOML held in memory; see :func:`load_mapping`."""
    text, doc = _read_toml(data, source)
    unknown = sorted(set(doc) - _TOP_LEVEL)
    if unknown:
        raise MappingError(f"{source}: unknown top-level key(s): {', '.join(unknown)}")
    namespaces = _namespaces(doc.get("namespaces"), source)
    concepts = doc.get("concepts")
    if not isinstance(concepts, dict) or not concepts:
        raise MappingError(f"{source}: [concepts] must be a non-empty table of concept = [XPath]")
    rules: list[MappingRule] = []
    for ref, expressions in concepts.items():
        where = _where(source, text, ref)
        concept = ontology.resolve(ref)
        if concept is None:
            raise MappingError(f"{where}: concept {ref!r} is not in ontology {ontology.iri}")
        if isinstance(expressions, str):
            expressions = [expressions]
        if not isinstance(expressions, list) or not expressions:
            raise MappingError(f"{where}: concept {ref}: expected a list of XPath strings")
        for expression in expressions:
            if not isinstance(expression, str) or not expression.strip():
                raise MappingError(f"{where}: concept {ref}: {expression!r} is not an XPath")
            xpath = _compile(ref, expression, namespaces, where)
            rules.append(MappingRule(concept=concept, expression=expression, xpath=xpath))
    return Mapping(
        publisher_schema=schema,
        namespaces=types.MappingProxyType(namespaces),
        rules=tuple(rules),
        ontology_iri=ontology.iri,
        source=source,
    )


def load_mapping(path: Path, ontology: Ontology) -> Mapping:
    """Load and validate a mapping file.

    Args:
        path: the TOML mapping; its stem names the publisher schema.
        ontology: the ontology the concepts must belong to.

    Raises:
        MappingError: unreadable or malformed file, unknown concept, bad XPath — the message
            names the file, the concept and the expression.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise MappingError(f"{path}: cannot read mapping: {exc.strerror}") from None
    return parse_mapping(data, ontology, source=str(path), schema=Path(path).stem)


def _root_of(tree_or_root: etree._ElementTree | etree._Element) -> etree._Element:
    if isinstance(tree_or_root, etree._ElementTree):
        return tree_or_root.getroot()
    if isinstance(tree_or_root, etree._Element):
        return tree_or_root
    raise TypeError(f"expected an lxml tree or element, got {type(tree_or_root).__name__}")


def _describe(element: etree._Element) -> str:
    return f"<{element.tag}> at line {element.sourceline}"


def map_document(
    tree_or_root: etree._ElementTree | etree._Element, mapping: Mapping
) -> list[MappedNode]:
    """Evaluate ``mapping`` on a document; return the mapped elements in document order.

    Raises:
        MappingError: an expression selects something other than elements, or one element is
            selected for two different concepts.
    """
    root = _root_of(tree_or_root)
    concept_of: dict[etree._Element, str] = {}
    for rule in mapping.rules:
        try:
            selected = rule.xpath(root)
        except etree.XPathError as exc:
            raise MappingError(f"{mapping.source}: XPath {rule.expression!r}: {exc}") from None
        if not isinstance(selected, list):
            raise MappingError(f"{mapping.source}: XPath {rule.expression!r} selects no elements")
        for item in selected:
            if not isinstance(item, etree._Element) or not isinstance(item.tag, str):
                raise MappingError(
                    f"{mapping.source}: concept {rule.concept}: XPath {rule.expression!r} "
                    "selects text, attributes or comments; only elements can be mapped"
                )
            previous = concept_of.setdefault(item, rule.concept)
            if previous != rule.concept:
                raise MappingError(
                    f"{mapping.source}: {_describe(item)} is mapped to both {previous} "
                    f"and {rule.concept}"
                )
    return [
        MappedNode(element=element, concept=concept_of[element])
        for element in root.iter(etree.Element)
        if element in concept_of
    ]


def unmapped_elements(
    root: etree._ElementTree | etree._Element, mapped: abc.Iterable[MappedNode]
) -> list[etree._Element]:
    """Elements carrying no concept: neither mapped nor inside a mapped element.

    These form the document's skeleton (root, headers, metadata). Elements inside a mapped
    element travel in that element's fragment and are not listed.
    """
    marked = {node.element for node in mapped}
    skeleton: list[etree._Element] = []
    stack = [_root_of(root)]
    while stack:
        element = stack.pop()
        if element in marked:
            continue
        skeleton.append(element)
        stack.extend(reversed([c for c in element if isinstance(c.tag, str)]))
    return skeleton


@dataclass(frozen=True, slots=True, kw_only=True)
class Unpublished:
    """What of a document is in no fragment, so in no subscriber's view: the elements outside
    every mapped element (with their text) and their attributes (the root's among them).

    Attributes:
        elements: how many elements are outside every mapped element.
        attributes: how many attributes those elements carry.
        paths: the first few of them, in document order (``/pd:Orders/@plant``).
    """

    elements: int = 0
    attributes: int = 0
    paths: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.elements or self.attributes)

    def describe(self) -> str:
        """One sentence: how much is not published, and where it starts."""
        first = f": {', '.join(self.paths)}" if self.paths else ""
        more = ", ..." if self.paths and len(self.paths) < self.elements + self.attributes else ""
        return (
            f"{self.elements} element(s) and {self.attributes} attribute(s) outside every mapped "
            f"element are not published (in no view){first}{more}"
        )


class UnpublishedTally:
    """Counts what :class:`Unpublished` reports, one element at a time (a streaming reader
    calls :meth:`element` for each element it meets outside every mapped element)."""

    def __init__(self, prefixes: abc.Mapping[str, str], *, first: int = 5) -> None:
        self._prefixes = dict(prefixes)  # namespace URI → prefix
        self._first = first
        self._elements = self._attributes = 0
        self._paths: list[str] = []

    def _name(self, qname: str) -> str:
        name = etree.QName(qname)
        prefix = self._prefixes.get(name.namespace or "", "")
        return f"{prefix}:{name.localname}" if prefix else name.localname

    def element(self, element: etree._Element) -> None:
        """Count ``element`` (outside every mapped element) and its attributes."""
        self._elements += 1
        self._attributes += len(element.attrib)
        if len(self._paths) < self._first:
            chain = [element, *element.iterancestors()]
            path = "/" + "/".join(self._name(e.tag) for e in reversed(chain))
            for attribute in element.attrib:
                self._paths.append(f"{path}/@{self._name(attribute)}")
            self._paths.append(path)
            del self._paths[self._first:]

    def result(self) -> Unpublished:
        """What was counted."""
        return Unpublished(
            elements=self._elements, attributes=self._attributes, paths=tuple(self._paths)
        )


def unpublished(
    root: etree._ElementTree | etree._Element, mapped: abc.Iterable[MappedNode],
    mapping: Mapping, *, first: int = 5,
) -> Unpublished:
    """What of a parsed document no view holds (see :class:`Unpublished`); names are written
    with ``mapping``'s prefixes."""
    tally = UnpublishedTally(
        {uri: prefix for prefix, uri in mapping.namespaces.items()}, first=first
    )
    for element in unmapped_elements(root, mapped):  # (document order)
        tally.element(element)
    return tally.result()
