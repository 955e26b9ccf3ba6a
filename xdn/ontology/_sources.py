"""Screening ontology files before owlready2 sees them: format, IRI, imports, line numbers.

Every file is read here first, with the hardened XML parser of :mod:`xdn.xmlsafe` for RDF/XML
and OWL/XML, or line by line for N-Triples. Screening refuses unsafe or malformed input with
the file and line, finds the ontology IRI and its ``owl:imports`` (which must name other files
of the same load: owlready2 would otherwise fetch them from the network), and records where
each class IRI is declared or mentioned and where each ``subClassOf`` is written, so that later
diagnostics can point at a line. owlready2 keeps no line numbers of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin

from lxml import etree

from xdn import xmlsafe
from xdn.errors import HostileXmlError, OntologyError

__all__ = ["Source", "screen"]

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_CLASS_TAGS = frozenset({f"{{{OWL}}}Class", f"{{{RDFS}}}Class"})
_MAX_NT_BYTES = 512 * 1024 * 1024
_NT_LINE = re.compile(
    r"""\s*(<[^<>"{}|^`\\\s]*>|_:[A-Za-z0-9_.\-]+)\s+<([^<>"{}|^`\\\s]*)>\s+"""
    r"""(<[^<>"{}|^`\\\s]*>|_:[A-Za-z0-9_.\-]+|"(?:[^"\\]|\\.)*"(?:@[A-Za-z0-9\-]+|\^\^<[^>\s]*>)?)"""
    r"""\s*\.\s*(#.*)?"""
)
_NT_EXTENSIONS = frozenset({".nt", ".ntriples"})


@dataclass(slots=True, kw_only=True)
class Source:
    """What screening learnt about one file.

    Attributes:
        path: the file.
        format: ``rdfxml``, ``owlxml`` or ``ntriples`` (owlready2's format names).
        iri: the ontology IRI, without a trailing ``#``.
        imports: IRIs this file imports.
        declared: class IRI → line of its declaration.
        mentioned: IRI → first line mentioning it.
        edges: ``(child IRI, parent IRI)`` → line of the ``subClassOf``.
    """

    path: Path
    format: str
    iri: str = ""
    imports: tuple[str, ...] = ()
    declared: dict[str, int] = field(default_factory=dict)
    mentioned: dict[str, int] = field(default_factory=dict)
    edges: dict[tuple[str, str], int] = field(default_factory=dict)

    def mention(self, iri: str, line: int | None) -> None:
        if line is not None:
            self.mentioned.setdefault(iri, line)


def _fail(path: Path, message: str, line: int | None = None) -> OntologyError:
    where = f"{path}:{line}" if line else str(path)
    return OntologyError(f"{where}: {message}")


def _is_ntriples(path: Path, data: bytes) -> bool:
    if path.suffix.lower() in _NT_EXTENSIONS:
        return True
    for raw in data[:4096].splitlines():
        line = raw.strip()
        if line and not line.startswith(b"#"):
            return re.match(rb"<[^>\s]*>\s+<", line) is not None
    return False


def _line(element: etree._Element) -> int | None:
    line = element.sourceline
    return int(line) if line else None


def _rdfxml(source: Source, root: etree._Element) -> None:
    heads = root.findall(f"{{{OWL}}}Ontology")
    if len(heads) != 1:
        raise _fail(source.path, f"expected exactly one owl:Ontology, found {len(heads)}")
    source.iri = heads[0].get(f"{{{RDF}}}about") or root.get(_XML_BASE) or ""
    source.imports = tuple(
        str(e.get(f"{{{RDF}}}resource", "")) for e in heads[0].iter(f"{{{OWL}}}imports")
    )
    base = root.get(_XML_BASE) or source.iri
    for element in root:
        if not isinstance(element.tag, str):
            continue
        about = element.get(f"{{{RDF}}}about")
        ident = element.get(f"{{{RDF}}}ID")
        subject = urljoin(base, about) if about else (f"{base}#{ident}" if ident else None)
        if subject is None:
            continue
        source.mention(subject, _line(element))
        if element.tag in _CLASS_TAGS:
            source.declared.setdefault(subject, _line(element) or 0)
        for child in element.iter(f"{{{RDFS}}}subClassOf"):
            resource = child.get(f"{{{RDF}}}resource")
            if resource:
                parent = urljoin(base, resource)
                source.mention(parent, _line(child))
                source.edges.setdefault((subject, parent), _line(child) or 0)


def _owlxml_iri(element: etree._Element, base: str, prefixes: dict[str, str]) -> str | None:
    iri = element.get("IRI")
    if iri is not None:
        return urljoin(base, str(iri))
    short = element.get("abbreviatedIRI")
    if short is not None and ":" in short:
        prefix, local = short.split(":", 1)
        if prefix in prefixes:
            return prefixes[prefix] + str(local)
    return None


def _owlxml(source: Source, root: etree._Element) -> None:
    source.iri = root.get("ontologyIRI", "")
    source.imports = tuple((e.text or "").strip() for e in root.iter(f"{{{OWL}}}Import"))
    base = root.get(_XML_BASE) or source.iri
    prefixes = {
        str(p.get("name", "")): str(p.get("IRI", "")) for p in root.iter(f"{{{OWL}}}Prefix")
    }
    for element in root.iter(f"{{{OWL}}}Class"):
        iri = _owlxml_iri(element, base, prefixes)
        if iri is None:
            continue
        source.mention(iri, _line(element))
        parent = element.getparent()
        if parent is not None and parent.tag == f"{{{OWL}}}Declaration":
            source.declared.setdefault(iri, _line(element) or 0)
    for axiom in root.iter(f"{{{OWL}}}SubClassOf"):
        pair = [c for c in axiom if c.tag == f"{{{OWL}}}Class"]
        if len(pair) == 2:
            child, parent = (_owlxml_iri(c, base, prefixes) for c in pair)
            if child and parent:
                source.edges.setdefault((child, parent), _line(axiom) or 0)


def _screen_xml(path: Path, data: bytes) -> Source:
    try:
        root = xmlsafe.parse_bytes(data, source=str(path)).getroot()
    except HostileXmlError as exc:
        raise OntologyError(f"not a safe RDF/XML or OWL/XML file: {exc}") from None
    if root.tag == f"{{{RDF}}}RDF":
        source = Source(path=path, format="rdfxml")
        _rdfxml(source, root)
    elif root.tag == f"{{{OWL}}}Ontology":
        source = Source(path=path, format="owlxml")
        _owlxml(source, root)
    else:
        raise _fail(path, f"root element {root.tag} is neither rdf:RDF nor owl:Ontology")
    if not source.iri.startswith(("http://", "https://", "urn:")):
        raise _fail(path, "ontology has no absolute IRI", _line(root))
    return source


def _screen_ntriples(path: Path, data: bytes) -> Source:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _fail(path, f"not UTF-8 text (byte {exc.start})") from None
    source = Source(path=path, format="ntriples")
    heads: list[tuple[str, int]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        match = _NT_LINE.fullmatch(raw)
        if match is None:
            raise _fail(path, "not an N-Triples statement <s> <p> <o> .", number)
        subject, predicate, obj = match.group(1)[1:-1], match.group(2), match.group(3)
        obj_iri = obj[1:-1] if obj.startswith("<") else None
        for iri in (subject, obj_iri):
            if iri:
                source.mention(iri, number)
        if predicate == RDF + "type" and obj_iri == OWL + "Ontology":
            heads.append((subject, number))
        elif predicate == RDF + "type" and obj_iri in (OWL + "Class", RDFS + "Class"):
            source.declared.setdefault(subject, number)
        elif predicate == RDFS + "subClassOf" and obj_iri:
            source.edges.setdefault((subject, obj_iri), number)
        elif predicate == OWL + "imports" and obj_iri:
            source.imports += (obj_iri,)
    if len(heads) != 1:
        raise _fail(path, f"expected exactly one owl:Ontology, found {len(heads)}")
    source.iri = heads[0][0]
    if not source.iri.startswith(("http://", "https://", "urn:")):
        raise _fail(path, "ontology has no absolute IRI", heads[0][1])
    return source


def screen(path: Path) -> Source:
    """Read and screen one ontology file (see the module docstring).

    Raises:
        OntologyError: unreadable, unsafe or malformed file, or no ontology IRI.
    """
    try:
        size = path.stat().st_size
        if size > _MAX_NT_BYTES:
            raise _fail(path, f"larger than {_MAX_NT_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise OntologyError(f"{path}: cannot read ontology: {exc.strerror}") from None
    source = _screen_ntriples(path, data) if _is_ntriples(path, data) else _screen_xml(path, data)
    source.iri = source.iri.rstrip("#")
    return source
