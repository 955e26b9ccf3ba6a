"""Checks that make an ontology fit (or unfit) for dissemination.

:func:`check` reports, each with the file and line where the problem was written when the
ontology was loaded from files:

* containment cycles — the dissemination topology must be acyclic (paper §III.A);
* unknown references — a ``subClassOf`` naming a class that no loaded file declares (a typo,
  or a missing import);
* unsatisfiable concepts — structurally: a concept contained in ``owl:Nothing``, or in two
  concepts declared disjoint. No description-logic reasoner runs; restrictions are ignored;
* orphan concepts — no super- and no sub-concept in an ontology of several concepts;
* several roots — the concepts are not one connected hierarchy under one root.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import networkx as nx

from xdn.ontology._model import Location, Ontology

__all__ = ["Problem", "ProblemKind", "check"]

ProblemKind = Literal["cycle", "unknown", "unsatisfiable", "orphan", "roots"]
_ORDER: dict[str, int] = {"cycle": 0, "unknown": 1, "unsatisfiable": 2, "orphan": 3, "roots": 4}


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One problem found by :func:`check`."""

    kind: ProblemKind
    message: str
    location: Location | None = None

    def __str__(self) -> str:
        return f"{self.location}: {self.message}" if self.location else self.message


def _cycles(ontology: Ontology) -> list[Problem]:
    graph = ontology.graph
    out = []
    for component in nx.strongly_connected_components(graph):
        members = sorted(component)
        if len(members) == 1 and not graph.has_edge(members[0], members[0]):
            continue
        edges = nx.find_cycle(graph.subgraph(members), source=members[0])
        loop = [parent for parent, _child in edges]
        text = " ⊒ ".join([*loop, loop[0]])
        out.append(
            Problem(
                kind="cycle",
                message=f"containment cycle: {text}",
                location=ontology.edge_locations.get(edges[0]),
            )
        )
    return out


def _unknown(ontology: Ontology) -> list[Problem]:
    if ontology.declared is None:
        return []
    out = []
    for concept in sorted(ontology.concepts - ontology.declared):
        users = sorted(ontology.graph.successors(concept))
        where = ontology.edge_locations.get((concept, users[0])) if users else None
        used = f" (super-concept of {', '.join(users)})" if users else ""
        out.append(
            Problem(
                kind="unknown",
                message=f"unknown reference: {concept}{used} is not declared as a class "
                "in any loaded file",
                location=where or ontology.locations.get(concept),
            )
        )
    return out


def _unsatisfiable(ontology: Ontology) -> list[Problem]:
    reasons: dict[str, str] = {}
    for empty in sorted(ontology.empty):
        for concept in sorted(ontology.block(empty)):
            via = "" if concept == empty else f" (via {empty})"
            reasons.setdefault(concept, f"contained in owl:Nothing{via}")
    for pair in sorted(sorted(p) for p in ontology.disjoint):
        if len(pair) != 2 or not set(pair) <= ontology.concepts:
            continue
        first, second = pair
        for concept in sorted(ontology.block(first) & ontology.block(second)):
            reasons.setdefault(
                concept, f"contained in both {first} and {second}, which are disjoint"
            )
    return [
        Problem(
            kind="unsatisfiable",
            message=f"unsatisfiable concept: {concept} is {reason}",
            location=ontology.locations.get(concept),
        )
        for concept, reason in sorted(reasons.items())
    ]


def _shape(ontology: Ontology) -> list[Problem]:
    out = []
    if len(ontology.concepts) > 1:
        for concept in sorted(ontology.concepts):
            if ontology.graph.degree(concept) == 0:
                out.append(
                    Problem(
                        kind="orphan",
                        message=f"orphan concept: {concept} has no super- or sub-concept",
                        location=ontology.locations.get(concept),
                    )
                )
    roots = sorted(c for c in ontology.roots() if ontology.graph.out_degree(c) > 0)
    if len(roots) > 1:
        out.append(Problem(kind="roots", message="several root concepts: " + ", ".join(roots)))
    return out


def check(ontology: Ontology) -> list[Problem]:
    """Problems that make an ontology unfit for dissemination (empty list when fine)."""
    found = _cycles(ontology) + _unknown(ontology) + _unsatisfiable(ontology) + _shape(ontology)
    return sorted(found, key=lambda p: (_ORDER[p.kind], p.message))
