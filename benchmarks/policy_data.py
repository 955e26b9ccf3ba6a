"""Generated policy data for the benchmarks: a 10,000-concept ontology, policies of every kind
of rule, subscriber credentials. Seeded, so every run measures the same work.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta

from xdn.certs import Credential
from xdn.ontology import Ontology
from xdn.policy import After, Condition, Policy, Rule

__all__ = [
    "LEVELS",
    "NOW",
    "condition",
    "make_credentials",
    "make_ontology",
    "make_policy",
    "pick_concept",
]

NOW = datetime(2025, 6, 1, 12, tzinfo=UTC)
IRI = "http://bench.example/onto"
LEVELS = (1, 3, 9, 27, 81, 243, 600, 1400, 2800, 4836)  # 10,000 concepts, depth 9
UNITS, ORGS, TITLES = 300, 30, 12


def make_ontology(seed: int = 1) -> Ontology:
    """A layered DAG of 10,000 concepts with multiple inheritance."""
    rng = random.Random(seed)
    levels: list[list[str]] = []
    edges: list[tuple[str, str]] = []
    for depth, size in enumerate(LEVELS):
        level = [f"C{depth}_{i}" for i in range(size)]
        if levels:
            above = levels[-1]
            for child in level:
                edges.append((rng.choice(above), child))
                if rng.random() < 0.15:
                    pool = levels[-2] if len(levels) > 1 and rng.random() < 0.3 else above
                    edges.append((rng.choice(pool), child))
        levels.append(level)
    return Ontology.from_edges(iri=IRI, concepts=[c for lv in levels for c in lv], edges=edges)


def _org(unit: int) -> str:
    return f"Org{unit % ORGS}"


def condition(rng: random.Random) -> Condition:
    roll = rng.random()
    unit = rng.randrange(UNITS)
    if roll < 0.60:
        return Condition(
            subject=(("OU", frozenset({f"Unit{unit}"})),), roles=frozenset({"subscriber"})
        )
    if roll < 0.80:
        return Condition(
            subject=(("O", frozenset({_org(unit)})), ("OU", frozenset({f"Unit{unit}"})))
        )
    if roll < 0.90:
        return Condition(subject=(("O", frozenset({_org(unit)})),))
    if roll < 0.97:
        return Condition(subject=(("title", frozenset({f"Title{rng.randrange(TITLES)}"})),))
    return Condition(roles=frozenset({"subscriber"}))


def pick_concept(rng: random.Random, ontology_levels: list[list[str]]) -> str:
    depth = rng.choices(range(len(LEVELS)), weights=[0, 0, 1, 2, 4, 6, 8, 8, 6, 4])[0]
    return rng.choice(ontology_levels[depth])


def make_policy(ontology: Ontology, rules: int = 1000, seed: int = 2) -> Policy:
    """A policy of ``rules`` rules of every kind over the generated ontology."""
    rng = random.Random(seed)
    levels = [
        [c for c in sorted(ontology.concepts) if c.startswith(f"C{d}_")] for d in range(len(LEVELS))
    ]
    out: list[Rule] = []
    for i in range(rules):
        when = condition(rng)
        concept = pick_concept(rng, levels)
        if rng.random() < 0.12:
            out.append(
                Rule(
                    id=f"D{i}",
                    effect="deny",
                    concept=concept,
                    inherit=rng.random() < 0.5,
                    when=when,
                )
            )
            continue
        rule = Rule(
            id=f"G{i}", effect="grant", concept=concept, inherit=rng.random() < 0.7, when=when
        )
        roll = rng.random()
        if roll < 0.08 and out:
            needed = rng.choice([r for r in out if r.effect == "grant"] or out).concept
            rule = dataclasses.replace(rule, requires=(needed,))
        elif roll < 0.11:
            after = After(publisher="bench", concept=pick_concept(rng, levels))
            rule = dataclasses.replace(rule, after=(after,))
        elif roll < 0.14:
            rule = dataclasses.replace(rule, max_instances=rng.randint(1, 3))
        out.append(rule)
    return Policy(publisher="bench", version=1, ontology=ontology.iri, rules=tuple(out))


def make_credentials(count: int, seed: int = 3) -> list[Credential]:
    """``count`` subscriber credentials with a unit, its organisation and a title."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        unit = rng.randrange(UNITS)
        out.append(
            Credential(
                name=f"user{i}",
                subject={
                    "CN": (f"user{i}",),
                    "OU": (f"Unit{unit}",),
                    "O": (_org(unit),),
                    "title": (f"Title{rng.randrange(TITLES)}",),
                },
                issuer={"CN": ("xdn-ca",), "O": ("xdn development CA",)},
                role="subscriber",
                serial=i,
                not_before=NOW - timedelta(days=1),
                not_after=NOW + timedelta(days=365),
                fingerprint=f"{i:064x}",
            )
        )
    return out
