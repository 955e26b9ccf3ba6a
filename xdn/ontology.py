"""The concept-containment model: an OWL ontology reduced to a DAG of concept names.

Theory of operation
-------------------
Administrators edit the ontology in Protégé and save it as RDF/XML or OWL/XML. Loading it
happens in three steps:

1. *Screen* every file with the hardened parser of :mod:`xdn.xmlsafe` (no DTDs, no entities,
   bounded size) and read its ontology IRI and ``owl:imports``. An import must name another
   file given in the same call: owlready2 would otherwise fetch it from the network.
2. *Parse* the files, imports first, with owlready2 into a fresh ``owlready2.World`` (never the
   default world, one per call, closed afterwards) and read the raw triples: named classes and
   ``rdfs:subClassOf`` between named classes. Restrictions and ``owl:Thing`` are ignored.
   Working on triples rather than owlready2's Python classes keeps a cyclic hierarchy loadable,
   so :func:`check` can report it.
3. *Reduce* to an :class:`Ontology` of plain strings and a frozen ``networkx.DiGraph`` whose
   edges run parent → child. A concept id is the local name of its class IRI.

The *maximum conceptual block* of a concept C (paper §III.A) is C plus every concept reachable
from it by containment; :meth:`Ontology.block` returns it. All blocks are computed once at
construction, so lookups during policy evaluation and routing are dictionary reads.
"""

from __future__ import annotations

import logging
import types
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import networkx as nx
import owlready2

from xdn import xmlsafe
from xdn.errors import HostileXmlError, OntologyError

__all__ = ["Ontology", "check", "load_ontology", "local_name"]

log = logging.getLogger(__name__)

_RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
_OWL = "http://www.w3.org/2002/07/owl#"
_XML_BASE = "{http://www.w3.org/XML/1998/namespace}base"
_THING = _OWL + "Thing"


def local_name(iri: str) -> str:
    """The part of ``iri`` after its last ``#`` or ``/`` (the concept id of a class IRI)."""
    return iri.rsplit("#", 1)[-1] if "#" in iri else iri.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Ontology:
    """A loaded ontology: concept ids, their IRIs and the containment DAG.

    Compared by identity (it holds a graph); compare ``iri`` to know whether two policies or
    mappings were written against the same ontology.

    Attributes:
        iri: the ontology IRI (of the first file loaded), without a trailing ``#``.
        concepts: every concept id (class local name).
        graph: frozen DiGraph over ``concepts`` with edges parent → child.
        iris: concept id → full class IRI.
        labels: concept id → ``rdfs:label`` (the concept id when there is none).
    """

    iri: str
    concepts: frozenset[str]
    graph: nx.DiGraph
    iris: Mapping[str, str]
    labels: Mapping[str, str]
    _blocks: Mapping[str, frozenset[str]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if set(self.graph.nodes) != set(self.concepts) or set(self.iris) != set(self.concepts):
            raise ValueError("graph nodes, iris and concepts must name the same concepts")
        blocks = {c: frozenset(nx.descendants(self.graph, c)) | {c} for c in self.concepts}
        object.__setattr__(self, "_blocks", types.MappingProxyType(blocks))

    @classmethod
    def from_edges(
        cls,
        *,
        iri: str,
        concepts: Iterable[str],
        edges: Iterable[tuple[str, str]],
        labels: Mapping[str, str] | None = None,
        iris: Mapping[str, str] | None = None,
    ) -> Ontology:
        """Build an ontology from ``(parent, child)`` edges (also handy in tests).

        Class IRIs default to ``iri#name``; labels default to the concept id.
        """
        names = set(concepts)
        edge_list = sorted(set(edges))
        for parent, child in edge_list:
            names.update((parent, child))
        graph: nx.DiGraph = nx.DiGraph()
        graph.add_nodes_from(sorted(names))
        graph.add_edges_from(edge_list)
        given_iris = dict(iris or {})
        given_labels = dict(labels or {})
        return cls(
            iri=iri,
            concepts=frozenset(names),
            graph=nx.freeze(graph),
            iris=types.MappingProxyType({n: given_iris.get(n, f"{iri}#{n}") for n in names}),
            labels=types.MappingProxyType({n: given_labels.get(n, n) for n in names}),
        )

    def _known(self, concept: str) -> str:
        if concept not in self.concepts:
            raise OntologyError(f"unknown concept {concept!r} in ontology {self.iri}")
        return concept

    def iri_of(self, name: str) -> str:
        """The class IRI of concept ``name``."""
        return self.iris[self._known(name)]

    def resolve(self, ref: str) -> str | None:
        """The concept id for a concept id or full class IRI, or ``None`` if unknown."""
        if ref in self.concepts:
            return ref
        for name, iri in self.iris.items():
            if iri == ref:
                return name
        return None

    def parents(self, concept: str) -> frozenset[str]:
        """Direct super-concepts of ``concept``."""
        return frozenset(self.graph.predecessors(self._known(concept)))

    def children(self, concept: str) -> frozenset[str]:
        """Direct sub-concepts of ``concept``."""
        return frozenset(self.graph.successors(self._known(concept)))

    def descendants(self, concept: str) -> frozenset[str]:
        """Every concept contained in ``concept`` (transitively), excluding itself."""
        return self._blocks[self._known(concept)] - {concept}

    def block(self, concept: str) -> frozenset[str]:
        """The maximum conceptual block of ``concept``: itself and all it contains."""
        return self._blocks[self._known(concept)]

    def contains(self, outer: str, inner: str) -> bool:
        """Whether ``inner`` ⊑* ``outer`` (reflexive, transitive containment)."""
        return self._known(inner) in self._blocks[self._known(outer)]

    def roots(self) -> frozenset[str]:
        """Concepts without a super-concept."""
        return frozenset(c for c in self.concepts if self.graph.in_degree(c) == 0)

    def path(self, outer: str, inner: str) -> tuple[str, ...]:
        """A shortest containment path ``outer → … → inner`` (empty if not contained)."""
        if not self.contains(outer, inner):
            return ()
        return tuple(nx.shortest_path(self.graph, outer, inner))


def check(ontology: Ontology) -> list[str]:
    """Problems that make an ontology unfit for dissemination (empty list when fine).

    Reports containment cycles (the dissemination topology must be acyclic), orphan concepts
    (no parent and no child in an ontology of several concepts) and several roots.
    """
    problems: list[str] = []
    for cycle in sorted(sorted(c) for c in nx.simple_cycles(ontology.graph)):
        problems.append("containment cycle: " + " ⊑ ".join([*cycle, cycle[0]]))
    if len(ontology.concepts) > 1:
        for concept in sorted(ontology.concepts):
            if ontology.graph.degree(concept) == 0:
                problems.append(f"orphan concept: {concept} has no super- or sub-concept")
    roots = sorted(c for c in ontology.roots() if ontology.graph.out_degree(c) > 0)
    if len(roots) > 1:
        problems.append("several root concepts: " + ", ".join(roots))
    return problems


@dataclass(frozen=True, slots=True, kw_only=True)
class _Header:
    path: Path
    iri: str
    imports: tuple[str, ...]


def _screen(path: Path) -> _Header:
    """Parse ``path`` with the hardened parser; return its ontology IRI and imports."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise OntologyError(f"{path}: cannot read ontology: {exc.strerror}") from None
    try:
        root = xmlsafe.parse_bytes(data, source=str(path)).getroot()
    except HostileXmlError as exc:
        raise OntologyError(f"{path}: not a safe RDF/XML or OWL/XML file: {exc}") from None
    if root.tag == f"{{{_RDF}}}RDF":
        heads = root.findall(f"{{{_OWL}}}Ontology")
        if len(heads) != 1:
            raise OntologyError(f"{path}: expected exactly one owl:Ontology, found {len(heads)}")
        about = heads[0].get(f"{{{_RDF}}}about")
        iri = about or root.get(_XML_BASE) or ""
        imports = tuple(
            str(e.get(f"{{{_RDF}}}resource", "")) for e in heads[0].iter(f"{{{_OWL}}}imports")
        )
    elif root.tag == f"{{{_OWL}}}Ontology":
        iri = root.get("ontologyIRI", "")
        imports = tuple((e.text or "").strip() for e in root.iter(f"{{{_OWL}}}Import"))
    else:
        raise OntologyError(f"{path}: root element {root.tag} is neither rdf:RDF nor owl:Ontology")
    if not iri.startswith(("http://", "https://", "urn:")):
        raise OntologyError(f"{path}:{root.sourceline}: ontology has no absolute IRI")
    return _Header(path=path, iri=iri.rstrip("#"), imports=imports)


def _load_order(headers: Sequence[_Header]) -> list[_Header]:
    """Order files so that every import is loaded before the file importing it."""
    by_iri: dict[str, _Header] = {}
    for head in headers:
        if head.iri in by_iri:
            raise OntologyError(f"{head.path}: ontology {head.iri} also in {by_iri[head.iri].path}")
        by_iri[head.iri] = head
    deps: nx.DiGraph = nx.DiGraph()
    for head in headers:
        deps.add_node(head.iri)
        for imported in head.imports:
            if imported.rstrip("#") not in by_iri:
                raise OntologyError(
                    f"{head.path}: imports {imported}, which is not among the files loaded "
                    "(xdn never fetches ontologies from the network)"
                )
            deps.add_edge(imported.rstrip("#"), head.iri)
    try:
        return [by_iri[i] for i in nx.lexicographical_topological_sort(deps)]
    except nx.NetworkXUnfeasible:
        raise OntologyError("ontology imports form a cycle") from None


def _parse_into(world: owlready2.World, head: _Header) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with head.path.open("rb") as stream:
                world.get_ontology(head.iri).load(fileobj=stream)
        except (owlready2.OwlReadyError, ValueError, TypeError, KeyError) as exc:
            raise OntologyError(f"{head.path}: owlready2 cannot load it: {exc}") from None
    for warning in caught:
        log.warning("%s: %s", head.path, warning.message)


def _extract(world: owlready2.World, iri: str, source: str) -> Ontology:
    """Read named classes, subclass edges and labels from the world's triples."""
    iris: set[str] = set()
    for s, _p, _o in world.get_triples(None, owlready2.rdf_type, owlready2.owl_class):
        if s > 0:
            iris.add(world._unabbreviate(s))
    edges: set[tuple[str, str]] = set()
    for s, _p, o in world.get_triples(None, owlready2.rdfs_subclassof, None):
        if s > 0 and isinstance(o, int) and o > 0:
            child, parent = world._unabbreviate(s), world._unabbreviate(o)
            iris.add(child)
            if parent != _THING:
                iris.add(parent)
                edges.add((parent, child))
    iris.discard(_THING)
    names: dict[str, str] = {}
    for full in sorted(iris):
        name = local_name(full)
        if name in names:
            raise OntologyError(f"{source}: classes {names[name]} and {full} share the id {name}")
        names[name] = full
    labels: dict[str, str] = {}
    label_id = owlready2.label.storid
    for name, full in names.items():
        values = world._get_data_triples_sp_od(world._abbreviate(full), label_id)
        english = sorted(str(v) for v, lang in values if lang == "@en")
        other = sorted(str(v) for v, _lang in values)
        labels[name] = (english or other or [name])[0]
    return Ontology.from_edges(
        iri=iri,
        concepts=names,
        edges=((local_name(p), local_name(c)) for p, c in edges),
        labels=labels,
        iris=names,
    )


def load_ontology(paths: Sequence[Path]) -> Ontology:
    """Load one or more ontology files into an :class:`Ontology`.

    Args:
        paths: RDF/XML or OWL/XML files; the first one's IRI becomes ``Ontology.iri``.
            Every ``owl:imports`` must name one of these files.

    Raises:
        OntologyError: a file is missing, unsafe, unparsable, imports an unknown ontology, or
            two classes share a local name.
    """
    if not paths:
        raise OntologyError("no ontology file given")
    headers = [_screen(Path(p)) for p in paths]
    world = owlready2.World()
    try:
        for head in _load_order(headers):
            _parse_into(world, head)
        return _extract(world, headers[0].iri, ", ".join(str(p) for p in paths))
    finally:
        world.close()
