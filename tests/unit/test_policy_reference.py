"""Differential test: random policy documents, decided by the engine and by a tiny reference.

The reference (``tests/unit/policy_reference.py``) is written from docs/policies.md and reads
the TOML document itself, so field spellings (``OU``, ``ou``, ``organizationalUnitName``,
``2.5.4.11``), fields with several values, ``requires`` (least fixed point), ``after``,
``max_instances``, ``valid_until`` and credential validity are all exercised through the
parser. A policy the parser refuses must be refused for a rule that is dead code: removing
that rule changes no decision for any credential of a universe that holds every combination
of values, with every ``after`` disseminated and no budget spent.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from policy_reference import Cert, decide

from xdn.certs import Credential
from xdn.errors import PolicyError
from xdn.ontology import Ontology
from xdn.policy import PolicyEngine, PolicySet, auth_list, parse_policy

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
IRI = "http://x.example/ref"
POOLS = {"OU": ("a", "b"), "O": ("x", "y"), "title": ("t",)}
SPELLINGS = {
    "OU": ("OU", "ou", "organizationalUnitName", "2.5.4.11"),
    "O": ("O", "organizationName", "2.5.4.10"),
    "title": ("title", "2.5.4.12"),
}
ROLES = ("site", "publisher", "subscriber")
ISSUERS = ("ca", "other")


def _strings(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


@st.composite
def whens(draw: st.DrawFn) -> str:
    parts = []
    subject = []
    for field in draw(st.lists(st.sampled_from(sorted(POOLS)), unique=True, max_size=2)):
        spelt = draw(st.sampled_from(SPELLINGS[field]))
        values = draw(st.lists(st.sampled_from(POOLS[field]), min_size=1, unique=True))
        subject.append(f'"{spelt}" = {_strings(values)}')
    if subject:
        parts.append("subject = { " + ", ".join(subject) + " }")
    if draw(st.integers(0, 4)) == 0:
        parts.append(f'issuer = {{ O = "{draw(st.sampled_from(ISSUERS))}" }}')
    if not parts or draw(st.booleans()):
        roles = draw(st.lists(st.sampled_from(ROLES), min_size=1, max_size=2, unique=True))
        parts.append(f"role = {_strings(roles)}")
    return "{ " + ", ".join(parts) + " }"


@st.composite
def documents(draw: st.DrawFn, names: list[str]) -> str:
    head = f'[policy]\npublisher = "p"\nversion = 1\nontology = "{IRI}"\n'
    if draw(st.integers(0, 3)) == 0:
        head += (
            f"valid_until = {(NOW + timedelta(hours=draw(st.sampled_from([-1, 1])))).isoformat()}\n"
        )
    rules = []
    for i in range(draw(st.integers(0, 6))):
        effect = draw(st.sampled_from(["grant", "grant", "deny"]))
        lines = [f'[[rule]]\nid = "R{i}"\neffect = "{effect}"']
        lines.append(f'concept = "{draw(st.sampled_from(names))}"')
        if draw(st.booleans()):
            lines.append("inherit = true")
        if effect == "grant":
            needs = draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
            if needs and draw(st.booleans()):
                lines.append(f"requires = {_strings(needs)}")
            if draw(st.integers(0, 4)) == 0:
                who = draw(st.sampled_from(["p", "q"]))
                lines.append(
                    f'after = {{ publisher = "{who}", concept = "{draw(st.sampled_from(names))}" }}'
                )
            if draw(st.integers(0, 3)) == 0:
                lines.append(f"max_instances = {draw(st.integers(1, 2))}")
        lines.append(f"when = {draw(whens())}")
        rules.append("\n".join(lines) + "\n")
    return head + "\n".join(rules)


@st.composite
def certs(draw: st.DrawFn) -> Cert:
    subject = [("CN", "someone")]
    for field, pool in sorted(POOLS.items()):
        for value in draw(st.lists(st.sampled_from(pool), max_size=3)):
            subject.append((draw(st.sampled_from(SPELLINGS[field])), value))
    issuer = [("O", v) for v in draw(st.lists(st.sampled_from(ISSUERS), max_size=2))]
    start = NOW - timedelta(hours=draw(st.sampled_from([-1, 1])))
    return Cert(
        subject=tuple(draw(st.permutations(subject))),
        issuer=tuple(issuer),
        role=draw(st.sampled_from(ROLES)),
        not_before=start,
        not_after=start + timedelta(hours=draw(st.sampled_from([0, 2]))),
    )


def credential(cert: Cert) -> Credential:
    def fields(pairs: tuple[tuple[str, str], ...]) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for name, value in pairs:
            out[name] = (*out.get(name, ()), value)
        return out

    return Credential(
        name="someone",
        subject=fields(cert.subject),
        issuer=fields(cert.issuer),
        role=cert.role,
        serial=1,
        not_before=cert.not_before,
        not_after=cert.not_after,
        fingerprint="",
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Ontology, str, Cert, set[tuple[str, str]], dict[str, int]]:
    names = [f"C{i}" for i in range(draw(st.integers(1, 6)))]
    pairs = st.tuples(st.integers(0, len(names) - 1), st.integers(0, len(names) - 1))
    edges = draw(st.sets(pairs.filter(lambda e: e[0] < e[1]), max_size=8))
    onto = Ontology.from_edges(
        iri=IRI, concepts=names, edges=[(names[a], names[b]) for a, b in edges]
    )
    done = {(p, c) for p in "pq" for c in draw(st.sets(st.sampled_from(names), max_size=2))}
    counts = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 2), max_size=3))
    return onto, draw(documents(names)), draw(certs()), done, counts


def _universe() -> list[Cert]:
    def subsets(pool: tuple[str, ...]) -> list[tuple[str, ...]]:
        return [c for n in range(len(pool) + 1) for c in itertools.combinations(pool, n)]

    out = []
    for ou, o, title, issuer in itertools.product(
        subsets(POOLS["OU"]), subsets(POOLS["O"]), subsets(POOLS["title"]), subsets(ISSUERS)
    ):
        subject = [("OU", v) for v in ou] + [("O", v) for v in o] + [("title", v) for v in title]
        for role in ROLES:
            out.append(
                Cert(
                    subject=tuple(subject),
                    issuer=tuple(("O", v) for v in issuer),
                    role=role,
                    not_before=NOW - timedelta(days=1),
                    not_after=NOW + timedelta(days=1),
                )
            )
    return out


UNIVERSE = _universe()


def _refused_rule_is_dead_code(onto: Ontology, text: str, error: PolicyError) -> None:
    found = re.search(r": rule (R\d+): ", str(error))
    assert found, error
    doc = tomllib.loads(text)
    doc["policy"].pop("valid_until", None)
    without = {**doc, "rule": [r for r in doc["rule"] if r["id"] != found.group(1)]}
    every = {(p, c) for p in "pq" for c in onto.concepts}
    for cert in UNIVERSE:
        with_rule = decide(doc, onto.graph, cert, at=NOW, disseminated=every)[0]
        assert with_rule == decide(without, onto.graph, cert, at=NOW, disseminated=every)[0]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_engine_and_reference_decide_alike(
    scenario: tuple[Ontology, str, Cert, set[tuple[str, str]], dict[str, int]],
) -> None:
    onto, text, cert, done, counts = scenario
    try:
        policy = parse_policy(text.encode(), onto, source="random.toml")
    except PolicyError as error:
        event("refused")
        _refused_rule_is_dead_code(onto, text, error)
        return
    event("accepted")
    doc: dict[str, Any] = tomllib.loads(text)
    expected, _ = decide(doc, onto.graph, cert, at=NOW, disseminated=done, instances=counts)
    holder = credential(cert)
    found = auth_list(holder, policy, onto, at=NOW, disseminated=done, instances=counts)
    assert found.concepts == expected
    engine = PolicyEngine(PolicySet.of(onto, [policy]), disseminated=done)
    assert engine.auth_list(holder, NOW, instances=counts).concepts == expected
