"""Property: the engine's live state always equals ``auth_list`` at the engine's instant.

After any sequence of subscribe / deliver / disseminate / policy update / ontology update /
time passing (credentials and policies expiring), for every live subscriber,
``engine.grants(s)`` equals the reference ``auth_list`` evaluated at ``engine.now`` with the
engine's dissemination state and the subscriber's instance counts — and equals
``engine.auth_list`` at that instant. No subscriber with an expired credential is live.

The engine persists nothing itself: a site rebuilds it from the policies in force, the
dissemination state, the live subscriptions and their delivery counts. An engine rebuilt so
(with ``at=engine.now``) holds the same grants.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xdn.certs import Credential
from xdn.errors import PolicyError
from xdn.ontology import Ontology
from xdn.policy import After, Condition, Policy, PolicyEngine, PolicySet, Rule, auth_list

START = datetime(2025, 6, 1, tzinfo=UTC)
IRI = "http://x.example/state"
NAMES = [f"C{i}" for i in range(5)]


def _ontology(edges: frozenset[tuple[int, int]]) -> Ontology:
    return Ontology.from_edges(
        iri=IRI, concepts=NAMES, edges=[(NAMES[a], NAMES[b]) for a, b in edges]
    )


ontologies = st.frozensets(
    st.tuples(st.integers(0, 4), st.integers(0, 4)).filter(lambda e: e[0] < e[1]), max_size=6
).map(_ontology)
conditions = st.one_of(
    st.builds(
        lambda units: Condition(subject=(("OU", frozenset(units)),)),
        st.lists(st.sampled_from("ab"), min_size=1, unique=True),
    ),
    st.sampled_from(
        [Condition(roles=frozenset({"subscriber"})), Condition(roles=frozenset({"site"}))]
    ),
)


@st.composite
def policies(draw: st.DrawFn, version: int) -> Policy:
    rules = []
    for i in range(draw(st.integers(0, 5))):
        grant = draw(st.integers(0, 3)) > 0
        rules.append(
            Rule(
                id=f"R{i}",
                effect="grant" if grant else "deny",
                concept=draw(st.sampled_from(NAMES)),
                inherit=draw(st.booleans()),
                requires=tuple(draw(st.lists(st.sampled_from(NAMES), max_size=1))) if grant else (),
                when=draw(conditions),
                after=(After(publisher="p", concept=draw(st.sampled_from(NAMES))),)
                if grant and draw(st.integers(0, 4)) == 0
                else (),
                max_instances=draw(st.sampled_from([None, None, 1, 2])) if grant else None,
            )
        )
    hours = draw(st.sampled_from([None, 5, 30, 80]))
    until = START + timedelta(hours=hours) if hours is not None else None
    return Policy(
        publisher="p", version=version, ontology=IRI, rules=tuple(rules), valid_until=until
    )


@st.composite
def credentials(draw: st.DrawFn, number: int) -> Credential:
    units = tuple(draw(st.lists(st.sampled_from("ab"), min_size=1, max_size=2)))
    return Credential(
        name=f"s{number}",
        subject={"CN": (f"s{number}",), "OU": units},
        issuer={"O": ("ca",)},
        role=draw(st.sampled_from(["subscriber", "site"])),
        serial=number,
        not_before=START,
        not_after=START + timedelta(hours=draw(st.sampled_from([10, 40, 100]))),
        fingerprint="",
    )


Step = tuple[str, object]


@st.composite
def histories(draw: st.DrawFn) -> tuple[Ontology, Policy, list[Step]]:
    steps: list[Step] = []
    version, subscribers = 1, 0
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(
            st.sampled_from(["subscribe", "deliver", "disseminate", "policy", "ontology", "time"])
        )
        if kind == "subscribe":
            steps.append((kind, draw(credentials(subscribers))))
            subscribers += 1
        elif kind == "deliver":
            steps.append((kind, (draw(st.integers(0, 9)), draw(st.sets(st.sampled_from(NAMES))))))
        elif kind == "disseminate":
            steps.append((kind, draw(st.sampled_from(NAMES))))
        elif kind == "policy":
            version += 1
            steps.append((kind, draw(policies(version))))
        elif kind == "ontology":
            steps.append((kind, draw(ontologies)))
        else:
            steps.append((kind, draw(st.sampled_from([1, 6, 12, 30]))))
    return draw(ontologies), draw(policies(1)), steps


def _assert_consistent(engine: PolicyEngine, holders: dict[str, Credential]) -> None:
    now = engine.now
    assert now is not None
    policy = engine.policies.policies["p"]
    for subscriber in engine.subscribers:
        holder = holders[subscriber]
        assert holder.valid_at(now)
        counts = engine.instances(subscriber, "p")
        expected = auth_list(
            holder,
            policy,
            engine.ontology,
            at=now,
            disseminated=engine.disseminated,
            instances=counts,
            explain=False,
        ).concepts
        assert engine.grants(subscriber)["p"] == expected, subscriber
        assert engine.auth_list(holder, now, instances=counts).concepts == expected
    for subscriber, holder in holders.items():
        if not holder.valid_at(now):
            assert subscriber not in engine


def _rebuilt(engine: PolicyEngine, holders: dict[str, Credential]) -> PolicyEngine:
    fresh = PolicyEngine(engine.policies, disseminated=engine.disseminated, at=engine.now)
    for subscriber in sorted(engine.subscribers):
        assert engine.now is not None
        fresh.subscribe(subscriber, holders[subscriber], at=engine.now)
        for concept, count in engine.instances(subscriber, "p").items():
            for _ in range(count):
                fresh.record_delivery(subscriber, "p", [concept])
    return fresh


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_live_state_equals_auth_list_at_the_engine_instant(
    history: tuple[Ontology, Policy, list[Step]],
) -> None:
    onto, first, steps = history
    engine = PolicyEngine(PolicySet.of(onto, [first]), at=START)
    holders: dict[str, Credential] = {}
    clock = START
    for kind, arg in steps:
        if kind == "subscribe":
            assert isinstance(arg, Credential)
            holders[arg.name] = arg
            if arg.valid_at(clock):
                engine.subscribe(arg.name, arg, at=clock)
        elif kind == "deliver":
            who, concepts = arg  # type: ignore[misc]
            if f"s{who}" in engine:
                engine.record_delivery(f"s{who}", "p", concepts)
        elif kind == "disseminate":
            engine.mark_disseminated("p", [arg])  # type: ignore[list-item]
        elif kind in ("policy", "ontology"):
            before = engine.policies
            try:
                engine.apply(arg, at=clock)  # type: ignore[arg-type]
            except PolicyError:  # expired, or its rules do not hold on that ontology
                assert engine.policies is before
        else:
            clock += timedelta(hours=arg)  # type: ignore[operator]
            engine.advance(clock)
        _assert_consistent(engine, holders)
    rebuilt = _rebuilt(engine, holders)
    for subscriber in engine.subscribers:
        assert rebuilt.grants(subscriber) == engine.grants(subscriber)
