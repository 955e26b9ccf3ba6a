"""Hypothesis properties of the decision procedure and of the engine's incremental work.

* R1: a matching grant with ``inherit`` (and no premise) gives every sub-concept not denied.
* Deny wins: nothing a matching deny covers is ever granted.
* Cached == uncached: :class:`PolicyEngine` decides exactly like the reference ``auth_list``.
* A change's gains and losses are exactly the before/after difference of ``auth_list``, for
  policy changes, ontology changes, deliveries (separation of duty) and disseminations
  (temporal rules), and ``xdn policy diff``'s impacts agree with them.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xdn.certs import Credential
from xdn.errors import PolicyError
from xdn.ontology import Ontology
from xdn.policy import (
    After,
    Condition,
    Effect,
    Policy,
    PolicyEngine,
    PolicySet,
    Rule,
    auth_list,
    impacts,
)

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
IRI = "http://x.example/p"
UNITS, ORGS = ("a", "b", "c"), ("x", "y")
EFFECTS: tuple[Effect, ...] = ("grant", "deny")


def credential(unit: str, org: str, role: str = "subscriber", issuer: str = "ca") -> Credential:
    return Credential(
        name=f"{unit}-{org}-{role}-{issuer}",
        subject={"CN": (f"{unit}{org}",), "OU": (unit,), "O": (org,)},
        issuer={"O": (issuer,)},
        role=role,
        serial=1,
        not_before=NOW - timedelta(days=1),
        not_after=NOW + timedelta(days=1),
        fingerprint="ef" * 32,
    )


POOL = [
    credential(u, o, r, i)
    for u in UNITS
    for o in ORGS
    for r, i in (("subscriber", "ca"), ("site", "ca"), ("subscriber", "other"))
]


@st.composite
def ontologies(draw: st.DrawFn, names: list[str] | None = None) -> Ontology:
    names = names or [f"C{i}" for i in range(draw(st.integers(min_value=1, max_value=9)))]
    n = len(names)
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1])
    edges = draw(st.sets(pairs, max_size=18))
    return Ontology.from_edges(
        iri=IRI, concepts=names, edges=[(names[a], names[b]) for a, b in edges]
    )


@st.composite
def conditions(draw: st.DrawFn) -> Condition:
    units = st.frozensets(st.sampled_from(UNITS), min_size=1, max_size=2)
    kind = draw(st.sampled_from(["unit", "unit+org", "org", "role", "issuer"]))
    if kind == "unit":
        return Condition(subject=(("OU", draw(units)),))
    if kind == "unit+org":
        return Condition(
            subject=(("O", frozenset({draw(st.sampled_from(ORGS))})), ("OU", draw(units)))
        )
    if kind == "org":
        return Condition(
            subject=(("O", frozenset({draw(st.sampled_from(ORGS))})),),
            roles=frozenset({"subscriber"}),
        )
    if kind == "role":
        return Condition(roles=frozenset({draw(st.sampled_from(["subscriber", "site"]))}))
    return Condition(issuer=(("O", frozenset({"other"})),))


@st.composite
def policies(draw: st.DrawFn, ontology: Ontology, version: int = 1) -> Policy:
    names = sorted(ontology.concepts)
    rules = []
    for i in range(draw(st.integers(min_value=0, max_value=7))):
        effect = draw(st.sampled_from(EFFECTS))
        grant = effect == "grant"
        rules.append(
            Rule(
                id=f"R{i}",
                effect=effect,
                concept=draw(st.sampled_from(names)),
                inherit=draw(st.booleans()),
                requires=tuple(draw(st.lists(st.sampled_from(names), max_size=2, unique=True)))
                if grant and draw(st.booleans())
                else (),
                when=draw(conditions()),
                after=(After(publisher="p", concept=draw(st.sampled_from(names))),)
                if grant and draw(st.integers(0, 4)) == 0
                else (),
                max_instances=draw(st.sampled_from([None, None, 1, 2])) if grant else None,
            )
        )
    return Policy(publisher="p", version=version, ontology=IRI, rules=tuple(rules))


@st.composite
def states(
    draw: st.DrawFn, ontology: Ontology
) -> tuple[frozenset[tuple[str, str]], dict[str, int]]:
    names = sorted(ontology.concepts)
    done = draw(st.frozensets(st.sampled_from(names), max_size=3))
    counts = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 3), max_size=4))
    return frozenset(("p", c) for c in done), counts


@st.composite
def scenarios(
    draw: st.DrawFn,
) -> tuple[Ontology, Policy, Credential, frozenset[tuple[str, str]], dict[str, int]]:
    onto = draw(ontologies())
    done, counts = draw(states(onto))
    return onto, draw(policies(onto)), draw(st.sampled_from(POOL)), done, counts


def _same(a: object, b: object) -> None:
    assert (a.concepts, a.denied, a.limits) == (b.concepts, b.denied, b.limits)  # type: ignore[attr-defined]


@settings(max_examples=250, deadline=None)
@given(scenarios())
def test_r1_deny_wins_and_cached_equals_uncached(
    scenario: tuple[Ontology, Policy, Credential, frozenset[tuple[str, str]], dict[str, int]],
) -> None:
    onto, policy, holder, done, counts = scenario
    result = auth_list(holder, policy, onto, at=NOW, disseminated=done, instances=counts)
    matching = [r for r in policy.rules if r.when.matches(holder)]
    active = [r for r in matching if all(("p", a.concept) in done for a in r.after)]
    denied = set().union(*(r.covers(onto) for r in active if r.effect == "deny"))
    assert not result.concepts & denied  # deny wins
    assert result.denied == denied
    assert result.concepts <= set().union(*(r.covers(onto) for r in active if r.effect == "grant"))
    for rule in active:  # R1: an unconditional, unlimited inherit grant covers its whole block
        if rule.effect == "grant" and rule.inherit and not rule.requires and not rule.max_instances:
            assert onto.block(rule.concept) - denied <= result.concepts
    for rule in active:  # R2: an implication holds exactly when its premises hold
        if rule.effect == "grant" and set(rule.requires) <= result.concepts:
            spent = {c for c in counts if rule.max_instances and counts[c] >= rule.max_instances}
            assert rule.covers(onto) - denied - spent <= result.concepts
    engine = PolicyEngine(PolicySet.of(onto, [policy]), disseminated=done)
    for _ in range(2):
        _same(engine.auth_list(holder, NOW, instances=counts), result)
    _same(engine.explain(holder, NOW, instances=counts), result)


def _reference(engine: PolicyEngine, subscriber: str, holder: Credential) -> frozenset[str]:
    policy = engine.policies.policies.get("p")
    if policy is None:
        return frozenset()
    return auth_list(
        holder,
        policy,
        engine.ontology,
        at=NOW,
        disseminated=engine.disseminated,
        instances=engine.instances(subscriber, "p"),
    ).concepts


def _check(
    engine: PolicyEngine,
    live: dict[str, Credential],
    before: dict[str, frozenset[str]],
    changes: object,
) -> dict[str, frozenset[str]]:
    """Grants equal the reference, and the ChangeSet equals the before/after difference."""
    after = {s: _reference(engine, s, holder) for s, holder in live.items()}
    for subscriber, concepts in after.items():
        assert engine.grants(subscriber).get("p", frozenset()) == concepts
    expected = {
        (s, "p"): (after[s] - before[s], before[s] - after[s])
        for s in live
        if after[s] != before[s]
    }
    assert changes.net() == expected  # type: ignore[attr-defined]
    return after


Step = tuple[str, object]


@st.composite
def histories(draw: st.DrawFn) -> tuple[Ontology, Policy, list[Credential], list[Step]]:
    onto = draw(ontologies())
    names = sorted(onto.concepts)
    holders = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=6))
    steps: list[Step] = []
    version = 1
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        kind = draw(st.sampled_from(["policy", "policy", "ontology", "deliver", "disseminate"]))
        if kind == "policy":
            version += 1
            steps.append((kind, draw(policies(onto, version))))
        elif kind == "ontology":
            steps.append((kind, draw(ontologies(names))))
        elif kind == "deliver":
            who = draw(st.integers(0, len(holders) - 1))
            steps.append((kind, (who, draw(st.frozensets(st.sampled_from(names), max_size=3)))))
        else:
            steps.append((kind, draw(st.sampled_from(names))))
    return onto, draw(policies(onto)), holders, steps


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_changes_equal_the_before_after_difference(
    history: tuple[Ontology, Policy, list[Credential], list[Step]],
) -> None:
    onto, policy, holders, steps = history
    engine = PolicyEngine(PolicySet.of(onto, [policy]))
    live = {f"s{i}": holder for i, holder in enumerate(holders)}
    grants: dict[str, frozenset[str]] = {}
    for subscriber, holder in live.items():
        joined = engine.subscribe(subscriber, holder, at=NOW)
        grants[subscriber] = frozenset()
        grants = _check(engine, {s: live[s] for s in grants}, grants, joined)
    grants = _check(engine, live, grants, engine.advance(NOW))
    for kind, arg in steps:
        if kind == "policy":
            assert isinstance(arg, Policy)
            old = engine.policies.policies["p"]
            changes = engine.apply(arg, at=NOW)
            if not engine.disseminated and all(not engine.instances(s, "p") for s in live):
                found = impacts(old, arg, onto_now := engine.ontology, live, at=NOW)
                assert onto_now is engine.ontology
                assert {(i.who, "p"): (i.gained, i.lost) for i in found if i.gained or i.lost} == (
                    changes.net()
                )
        elif kind == "ontology":
            assert isinstance(arg, Ontology)
            current = engine.policies
            try:
                changes = engine.apply(arg)
            except PolicyError:  # the rules do not hold together on it: nothing changed
                assert engine.policies is current
                continue
        elif kind == "deliver":
            who, concepts = arg  # type: ignore[misc]
            changes = engine.record_delivery(f"s{who}", "p", concepts)
        else:
            changes = engine.mark_disseminated("p", [arg])  # type: ignore[list-item]
        grants = _check(engine, live, grants, changes)


@settings(max_examples=60, deadline=None)
@given(histories())
def test_a_rebuilt_engine_agrees_with_the_incremental_one(
    history: tuple[Ontology, Policy, list[Credential], list[Step]],
) -> None:
    onto, policy, holders, steps = history
    engine = PolicyEngine(PolicySet.of(onto, [policy]))
    for i, holder in enumerate(holders):
        engine.subscribe(f"s{i}", holder, at=NOW)
    for kind, arg in steps:
        if kind == "policy":
            engine.apply(dataclasses.replace(arg, publisher="p"), at=NOW)  # type: ignore[type-var]
    fresh = PolicyEngine(engine.policies, disseminated=engine.disseminated)
    for i, holder in enumerate(holders):
        fresh.subscribe(f"s{i}", holder, at=NOW)
        assert fresh.grants(f"s{i}") == engine.grants(f"s{i}")
