"""The concept-containment model: concept ids, their IRIs and a frozen DAG with blocks.

An :class:`Ontology` is plain data: strings, a frozen ``networkx.DiGraph`` whose edges run
parent → child, and precomputed *maximum conceptual blocks* (paper §III.A: a concept C plus
everything reachable from it by containment). Blocks are computed once at construction, so
lookups during policy evaluation and routing are dictionary reads.

Diagnostic facts gathered while loading (which classes were declared, which are declared empty
or disjoint, and where in which file each concept and each containment was written) ride along
so that :func:`xdn.ontology.check` can name file and line.
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import networkx as nx

from xdn.errors import OntologyError

__all__ = ["Location", "Ontology", "local_name"]


def local_name(iri: str) -> str:
    """The part of ``iri`` after its last ``#`` or ``/`` (the concept id of a class IRI)."""
    return iri.rsplit("#", 1)[-1] if "#" in iri else iri.rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True, kw_only=True)
class Location:
    """Where something was written: a file and, when known, a 1-based line."""

    file: str
    line: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


def _no_locations() -> Mapping[str, Location]:
    return types.MappingProxyType({})


def _no_edge_locations() -> Mapping[tuple[str, str], Location]:
    return types.MappingProxyType({})


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
        declared: concepts declared as classes in some loaded file; ``None`` means all of
            them (ontologies built in code). The others are referenced but never declared.
        empty: concepts declared ``rdfs:subClassOf owl:Nothing``.
        disjoint: pairs of concepts declared disjoint.
        locations: concept → where it is declared (or first mentioned).
        edge_locations: ``(parent, child)`` → where the containment is written.
    """

    iri: str
    concepts: frozenset[str]
    graph: nx.DiGraph
    iris: Mapping[str, str]
    labels: Mapping[str, str]
    declared: frozenset[str] | None = None
    empty: frozenset[str] = frozenset()
    disjoint: frozenset[frozenset[str]] = frozenset()
    locations: Mapping[str, Location] = field(default_factory=_no_locations)
    edge_locations: Mapping[tuple[str, str], Location] = field(default_factory=_no_edge_locations)
    _blocks: Mapping[str, frozenset[str]] = field(init=False, repr=False)
    _by_iri: Mapping[str, str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if set(self.graph.nodes) != set(self.concepts) or set(self.iris) != set(self.concepts):
            raise ValueError("graph nodes, iris and concepts must name the same concepts")
        blocks = {c: frozenset(nx.descendants(self.graph, c)) | {c} for c in self.concepts}
        object.__setattr__(self, "_blocks", types.MappingProxyType(blocks))
        by_iri = {iri: name for name, iri in self.iris.items()}
        object.__setattr__(self, "_by_iri", types.MappingProxyType(by_iri))

    @classmethod
    def from_edges(
        cls,
        *,
        iri: str,
        concepts: Iterable[str],
        edges: Iterable[tuple[str, str]],
        labels: Mapping[str, str] | None = None,
        iris: Mapping[str, str] | None = None,
        **facts: object,
    ) -> Ontology:
        """Build an ontology from ``(parent, child)`` edges (also handy in tests).

        Class IRIs default to ``iri#name``; labels default to the concept id. ``facts`` are
        passed on unchanged (``declared``, ``empty``, ``disjoint``, ``locations``,
        ``edge_locations``).
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
            **facts,  # type: ignore[arg-type]
        )

    def _known(self, concept: str) -> str:
        if concept not in self._blocks:
            raise OntologyError(f"unknown concept {concept!r} in ontology {self.iri}")
        return concept

    def iri_of(self, name: str) -> str:
        """The class IRI of concept ``name``."""
        return self.iris[self._known(name)]

    def resolve(self, ref: str) -> str | None:
        """The concept id for a concept id or full class IRI, or ``None`` if unknown."""
        if ref in self._blocks:
            return ref
        return self._by_iri.get(ref)

    def parents(self, concept: str) -> frozenset[str]:
        """Direct super-concepts of ``concept``."""
        return frozenset(self.graph.predecessors(self._known(concept)))

    def children(self, concept: str) -> frozenset[str]:
        """Direct sub-concepts of ``concept``."""
        return frozenset(self.graph.successors(self._known(concept)))

    def descendants(self, concept: str) -> frozenset[str]:
        """Every concept contained in ``concept`` (transitively), excluding itself."""
        return self._blocks[self._known(concept)] - {concept}

    def ancestors(self, concept: str) -> frozenset[str]:
        """Every concept containing ``concept`` (transitively), excluding itself."""
        return frozenset(nx.ancestors(self.graph, self._known(concept)))

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

    def paths_from(self, outer: str) -> Mapping[str, tuple[str, ...]]:
        """Shortest containment paths from ``outer`` to every concept of its block.

        One breadth-first search, so explaining a grant of a large block stays linear.
        """
        found = nx.single_source_shortest_path(self.graph, self._known(outer))
        return {inner: tuple(path) for inner, path in found.items()}
