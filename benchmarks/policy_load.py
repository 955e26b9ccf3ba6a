"""Loading a large policy file: ``policy_load_s_6k_rules`` and ``policy_load_peak_mb_6k_rules``.

Every site parses and checks every policy it enforces, at start and on every reload, so the
load must stay near-linear in the size of the policy (issue #12: 6,000 rules with
implications took 16 s and 519 MB). Goal: ≤ 1 s for 6,000 rules.

:func:`make_valid_policy` draws the same mix of conditions and rules as
:func:`benchmarks.policy_data.make_policy` (denies, implications, temporal and
separation-of-duty grants, 70% with ``inherit``) but keeps it valid: denies name only
concepts of the deepest level with an even number, grants never do (so no grant is wholly
denied), and every implication requires the concept of an earlier grant — a later grant
whose block holds that concept may itself require something, so implications depend on each
other. :func:`plain_rules` is the baseline a loader is compared with: ``tomllib`` plus
building the same :class:`~xdn.policy.Rule` objects, trusting every value (no validation, no
consistency checks).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import time
import tomllib
import tracemalloc
from collections.abc import Callable
from typing import Any

from benchmarks import policy_data
from benchmarks.harness import Result, ratio_result
from xdn.ontology import Ontology
from xdn.policy import After, Condition, Policy, PolicyEngine, PolicySet, Rule, parse_policy

__all__ = ["make_valid_policy", "plain_rules", "policy_toml", "run"]


def _deniable(concept: str) -> bool:
    depth, number = concept[1:].split("_")
    return depth == str(len(policy_data.LEVELS) - 1) and int(number) % 2 == 0


def make_valid_policy(ontology: Ontology, rules: int, seed: int = 5) -> Policy:
    """A valid policy of ``rules`` rules of every kind (see the module doc)."""
    rng = random.Random(seed)
    levels = [
        [c for c in sorted(ontology.concepts) if c.startswith(f"C{d}_")]
        for d in range(len(policy_data.LEVELS))
    ]
    leaves = [c for c in levels[-1] if _deniable(c)]
    grantable = [[c for c in level if not _deniable(c)] for level in levels]
    out: list[Rule] = []
    granted: list[str] = []
    for i in range(rules):
        when = policy_data.condition(rng)
        if rng.random() < 0.12:
            concept = rng.choice(leaves)
            out.append(Rule(id=f"D{i}", effect="deny", concept=concept, when=when))
            continue
        concept = policy_data.pick_concept(rng, grantable)
        rule = Rule(
            id=f"G{i}", effect="grant", concept=concept, inherit=rng.random() < 0.7, when=when
        )
        roll = rng.random()
        if roll < 0.08 and granted:
            rule = dataclasses.replace(rule, requires=(rng.choice(granted),))
        elif roll < 0.11:
            after = After(publisher="bench", concept=policy_data.pick_concept(rng, levels))
            rule = dataclasses.replace(rule, after=(after,))
        elif roll < 0.14:
            rule = dataclasses.replace(rule, max_instances=rng.randint(1, 3))
        granted.append(concept)
        out.append(rule)
    return Policy(publisher="bench", version=1, ontology=ontology.iri, rules=tuple(out))


def _str(value: str) -> str:
    return json.dumps(value)  # a JSON string of ASCII text is a TOML basic string


def _strings(values: object) -> str:
    return "[" + ", ".join(_str(v) for v in sorted(values)) + "]"  # type: ignore[call-overload]


def _when(condition: Condition) -> str:
    parts = []
    for scope, fields in (("subject", condition.subject), ("issuer", condition.issuer)):
        if fields:
            inner = ", ".join(f"{_str(k)} = {_strings(v)}" for k, v in fields)
            parts.append(f"{scope} = {{ {inner} }}")
    if condition.roles:
        parts.append(f"role = {_strings(condition.roles)}")
    return "{ " + ", ".join(parts) + " }"


def _rule(rule: Rule) -> str:
    lines = [
        "[[rule]]",
        f"id = {_str(rule.id)}",
        f"effect = {_str(rule.effect)}",
        f"concept = {_str(rule.concept)}",
    ]
    if rule.inherit:
        lines.append("inherit = true")
    if rule.requires:
        lines.append(f"requires = {_strings(rule.requires)}")
    if rule.after:
        items = ", ".join(
            f"{{ publisher = {_str(a.publisher)}, concept = {_str(a.concept)} }}"
            for a in rule.after
        )
        lines.append(f"after = [{items}]")
    if rule.max_instances is not None:
        lines.append(f"max_instances = {rule.max_instances}")
    lines.append(f"when = {_when(rule.when)}")
    return "\n".join(lines) + "\n"


def policy_toml(policy: Policy) -> bytes:
    """``policy`` as a TOML document."""
    head = (
        f"[policy]\npublisher = {_str(policy.publisher)}\nversion = {policy.version}\n"
        f"ontology = {_str(policy.ontology)}\n\n"
    )
    return (head + "\n".join(_rule(r) for r in policy.rules)).encode()


def _fields(raw: dict[str, Any]) -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple(sorted((k, frozenset(v)) for k, v in raw.items()))


def plain_rules(data: bytes) -> tuple[Rule, ...]:
    """The baseline: parse with ``tomllib`` and build the rules, trusting every value."""
    doc = tomllib.loads(data.decode("utf-8"))
    publisher = doc["policy"]["publisher"]
    out = []
    for raw in doc["rule"]:
        when = raw["when"]
        requires = raw.get("requires", ())
        out.append(
            Rule(
                id=raw["id"],
                effect=raw["effect"],
                concept=raw["concept"],
                inherit=raw.get("inherit", False),
                requires=tuple(requires),
                when=Condition(
                    subject=_fields(when.get("subject", {})),
                    issuer=_fields(when.get("issuer", {})),
                    roles=frozenset(when.get("role", ())),
                ),
                after=tuple(
                    After(publisher=a.get("publisher", publisher), concept=a["concept"])
                    for a in raw.get("after", ())
                ),
                max_instances=raw.get("max_instances"),
            )
        )
    return tuple(out)


def _peak_mb(fn: Callable[[], object]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def _seconds(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        gc.collect()
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def run(ontology: Ontology, quick: bool) -> list[Result]:
    """``policy_load_s_6k_rules`` and ``policy_load_peak_mb_6k_rules`` (see bench_policy)."""
    rounds = 2 if quick else 3
    data = policy_toml(make_valid_policy(ontology, 6000))
    policy = parse_policy(data, ontology, source="bench.toml")
    implications = sum(1 for r in policy.rules if r.requires)
    assert plain_rules(data) == policy.rules  # the baseline builds the very same rules

    def load() -> object:
        return parse_policy(data, ontology, source="bench.toml")

    def baseline() -> object:
        return plain_rules(data)

    loaded, plain = _seconds(load, rounds), _seconds(baseline, rounds)
    big = policy_toml(make_valid_policy(ontology, 12_000))
    twice = _seconds(lambda: parse_policy(big, ontology, source="big.toml"), 1)
    engine = _seconds(lambda: PolicyEngine(PolicySet.of(ontology, [policy])), 1)
    shape = (
        f"6,000 rules ({implications} implications, {len(data) // 1000} kB of TOML) over "
        f"{len(ontology.concepts)} concepts"
    )
    return [
        ratio_result(
            name="policy_load_s_6k_rules",
            value=loaded,
            unit="s",
            baseline="tomllib + building the same Rule objects, no validation or analysis",
            baseline_value=plain,
            goal="<= 1 s",
            note=f"parse_policy (validation and every consistency check) of {shape}; best of "
            f"{rounds}; 12,000 rules: {twice:.2f}s (1 round); building a PolicyEngine on the "
            f"6,000-rule policy: {engine:.2f}s",
        ),
        ratio_result(
            name="policy_load_peak_mb_6k_rules",
            value=_peak_mb(load),
            unit="MB",
            baseline="peak of tomllib + building the same Rule objects",
            baseline_value=_peak_mb(baseline),
            note=f"tracemalloc peak of parse_policy of {shape}",
        ),
    ]
