"""Loading OWL files (RDF/XML, OWL/XML, N-Triples) into an :class:`Ontology`.

Theory of operation
-------------------
1. *Screen* every file (:mod:`xdn.ontology._sources`): format, ontology IRI, imports, lines.
2. *Order* the files so that every import is loaded before the file importing it; an import
   must name another file of the same call (no network fetches), and imports may not cycle.
3. *Parse* them with owlready2 into a fresh ``owlready2.World`` (never the default world; one
   per call, closed afterwards) and read the raw triples: named classes, ``rdfs:subClassOf``
   between named classes, ``owl:Nothing`` and disjointness axioms. Restrictions and
   ``owl:Thing`` are ignored. Working on triples rather than owlready2's Python classes keeps a
   cyclic hierarchy loadable, so :func:`xdn.ontology.check` can report it.
4. *Reduce* to an :class:`Ontology` of plain strings: a concept id is the local name of its
   class IRI; two classes with one local name are refused.
"""

from __future__ import annotations

import logging
import re
import types
import warnings
from collections.abc import Sequence
from pathlib import Path

import networkx as nx
import owlready2

from xdn.errors import OntologyError
from xdn.ontology._model import Location, Ontology, local_name
from xdn.ontology._sources import OWL, Source, screen

__all__ = ["load_ontology"]

log = logging.getLogger(__name__)

_THING = OWL + "Thing"
_NOTHING = OWL + "Nothing"


def _load_order(sources: Sequence[Source]) -> list[Source]:
    """Order files so that every import is loaded before the file importing it."""
    by_iri: dict[str, Source] = {}
    for source in sources:
        if source.iri in by_iri:
            raise OntologyError(
                f"{source.path}: ontology {source.iri} also in {by_iri[source.iri].path}"
            )
        by_iri[source.iri] = source
    deps: nx.DiGraph = nx.DiGraph()
    for source in sources:
        deps.add_node(source.iri)
        for imported in source.imports:
            if imported.rstrip("#") not in by_iri:
                line = source.mentioned.get(imported)
                where = f"{source.path}:{line}" if line else str(source.path)
                raise OntologyError(
                    f"{where}: imports {imported}, which is not among the files loaded "
                    "(xdn never fetches ontologies from the network)"
                )
            deps.add_edge(imported.rstrip("#"), source.iri)
    try:
        return [by_iri[i] for i in nx.lexicographical_topological_sort(deps)]
    except nx.NetworkXUnfeasible:
        cycle = " → ".join(a for a, _ in nx.find_cycle(deps))
        raise OntologyError(f"ontology imports form a cycle: {cycle}") from None


def _parse_into(world: owlready2.World, source: Source) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with source.path.open("rb") as stream:
                world.get_ontology(source.iri).load(fileobj=stream, format=source.format)
        except (owlready2.OwlReadyError, ValueError, TypeError, KeyError) as exc:
            text = " ".join(str(a) for a in exc.args if isinstance(a, str | tuple)) or str(exc)
            line = re.search(r"line (\d+)", text)
            where = f"{source.path}:{line.group(1)}" if line else str(source.path)
            raise OntologyError(f"{where}: owlready2 cannot load it: {exc}") from None
    for warning in caught:
        log.warning("%s: %s", source.path, warning.message)


def _iri(world: owlready2.World, storid: object) -> str | None:
    if isinstance(storid, int) and storid > 0:
        return str(world._unabbreviate(storid))
    return None


def _rdf_list(world: owlready2.World, head: object) -> list[str]:
    """Named members of an RDF collection (blank-node members are skipped)."""
    out: list[str] = []
    seen: set[object] = set()
    while isinstance(head, int) and head not in seen and head != owlready2.rdf_nil:
        seen.add(head)
        for _s, _p, first in world.get_triples(head, owlready2.rdf_first, None):
            iri = _iri(world, first)
            if iri:
                out.append(iri)
        rest = list(world.get_triples(head, owlready2.rdf_rest, None))
        head = rest[0][2] if rest else None
    return out


class _Facts:
    """Raw class facts read from a world's triples, as full IRIs."""

    def __init__(self, world: owlready2.World) -> None:
        self.declared: set[str] = set()
        for s, _p, _o in world.get_triples(None, owlready2.rdf_type, owlready2.owl_class):
            iri = _iri(world, s)
            if iri:
                self.declared.add(iri)
        self.edges: set[tuple[str, str]] = set()
        self.empty: set[str] = set()
        for s, _p, o in world.get_triples(None, owlready2.rdfs_subclassof, None):
            child, parent = _iri(world, s), _iri(world, o)
            if child and parent == _NOTHING:
                self.empty.add(child)
            elif child and parent and parent != _THING:
                self.edges.add((parent, child))
        self.disjoint: set[frozenset[str]] = set()
        for s, _p, o in world.get_triples(None, owlready2.owl_disjointwith, None):
            a, b = _iri(world, s), _iri(world, o)
            if a and b:
                self.disjoint.add(frozenset((a, b)))
        groups = world.get_triples(None, owlready2.rdf_type, owlready2.owl_alldisjointclasses)
        for s, _p, _o in groups:
            for _s2, _p2, members in world.get_triples(s, owlready2.owl_members, None):
                names = _rdf_list(world, members)
                self.disjoint.update(
                    frozenset((a, b)) for i, a in enumerate(names) for b in names[i + 1 :]
                )
        self.declared.discard(_THING)
        self.declared.discard(_NOTHING)

    def iris(self) -> set[str]:
        return self.declared | {c for e in self.edges for c in e} | self.empty


def _labels(world: owlready2.World, names: dict[str, str]) -> dict[str, str]:
    labels: dict[str, str] = {}
    label_id = owlready2.label.storid
    for name, full in names.items():
        values = world._get_data_triples_sp_od(world._abbreviate(full), label_id)
        english = sorted(str(v) for v, lang in values if lang == "@en")
        other = sorted(str(v) for v, _lang in values)
        labels[name] = (english or other or [name])[0]
    return labels


def _locations(
    sources: Sequence[Source], names: dict[str, str]
) -> tuple[dict[str, Location], dict[tuple[str, str], Location]]:
    """Concept → declaration (else first mention); (parent, child) → subClassOf line."""
    by_iri = {full: name for name, full in names.items()}
    where: dict[str, Location] = {}
    for source in sources:
        for full, line in source.declared.items():
            if full in by_iri:
                where.setdefault(by_iri[full], Location(file=str(source.path), line=line or None))
    for source in sources:
        for full, line in source.mentioned.items():
            if full in by_iri:
                where.setdefault(by_iri[full], Location(file=str(source.path), line=line))
    edges: dict[tuple[str, str], Location] = {}
    for source in sources:
        for (child, parent), line in source.edges.items():
            if child in by_iri and parent in by_iri:
                key = (by_iri[parent], by_iri[child])
                edges.setdefault(key, Location(file=str(source.path), line=line or None))
    return where, edges


def _extract(world: owlready2.World, iri: str, sources: Sequence[Source]) -> Ontology:
    facts = _Facts(world)
    names: dict[str, str] = {}
    for full in sorted(facts.iris()):
        name = local_name(full)
        if name in names:
            files = ", ".join(str(s.path) for s in sources)
            raise OntologyError(f"{files}: classes {names[name]} and {full} share the id {name}")
        names[name] = full
    where, edge_where = _locations(sources, names)
    return Ontology.from_edges(
        iri=iri,
        concepts=names,
        edges=((local_name(p), local_name(c)) for p, c in facts.edges),
        labels=_labels(world, names),
        iris=names,
        declared=frozenset(local_name(d) for d in facts.declared),
        empty=frozenset(local_name(e) for e in facts.empty),
        disjoint=frozenset(frozenset(local_name(x) for x in pair) for pair in facts.disjoint),
        locations=types.MappingProxyType(where),
        edge_locations=types.MappingProxyType(edge_where),
    )


def load_ontology(paths: Sequence[Path]) -> Ontology:
    """Load one or more ontology files into an :class:`Ontology`.

    Args:
        paths: RDF/XML, OWL/XML or N-Triples files (format detected from the content; ``.nt``
            files are N-Triples); the first one's IRI becomes ``Ontology.iri``. Every
            ``owl:imports`` must name one of these files.

    Raises:
        OntologyError: a file is missing, unsafe, unparsable, imports an unknown ontology,
            imports form a cycle, or two classes share a local name — naming the file and,
            where known, the line.
    """
    if not paths:
        raise OntologyError("no ontology file given")
    sources = [screen(Path(p)) for p in paths]
    world = owlready2.World()
    try:
        for source in _load_order(sources):
            _parse_into(world, source)
        return _extract(world, sources[0].iri, sources)
    finally:
        world.close()
