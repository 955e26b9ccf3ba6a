"""Policy engine: cached auth_list and incremental re-evaluation of live subscriptions.

Workload (generated, seeded): an ontology of 10,000 concepts in 10 levels (depth 9) where
about 15% of concepts have a second parent; a policy of 1,000 rules over 300 organisational
units (each belonging to one of 30 organisations) and 12 titles — single-unit grants, unit +
organisation, organisation-wide, title-wide and a few role-wide rules; about 12% denies, 8%
implications, 3% temporal and 3% separation-of-duty rules; 70% inherit (R1). Subscribers get
a unique CN, a unit (and its organisation) and a title.

* ``auth_list_cached_ms`` — :meth:`PolicyEngine.auth_list` for credentials whose profile is
  already cached. Baseline ``auth_list_cold_ms``: the reference :func:`auth_list` from scratch
  (no index, no cache, set-based, no explanation). Goal ≤ 1 ms.
* ``policy_reeval_100k_s`` — :meth:`PolicyEngine.apply` of a one-rule change with 100,000 live
  subscriptions (10,000 with ``--quick``); the worst of six kinds of change (edit a unit
  rule, add a rule with a new condition, remove a rule, edit a role-wide rule, add an
  organisation-wide rule, add a rule whose new condition every subscriber satisfies).
  Baseline: recomputing every subscription from scratch with the reference
  :func:`auth_list`, timed on 1,000 subscriptions and scaled. Goal ≤ 1 s.
* ``policy_load_s_6k_rules`` and ``policy_load_peak_mb_6k_rules`` — loading (parsing,
  validating and checking) a 6,000-rule policy file with implications, against ``tomllib``
  plus building the same rules; see :mod:`benchmarks.policy_load`. Goal ≤ 1 s.
"""

from __future__ import annotations

import dataclasses
import gc
import random
import time
from datetime import UTC, datetime, timedelta

from benchmarks.harness import Result, best_of, ratio_result
from xdn.certs import Credential
from xdn.ontology import Ontology
from xdn.policy import After, Condition, Policy, PolicyEngine, PolicySet, Rule, auth_list

__all__ = ["make_credentials", "make_ontology", "make_policy", "run"]

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


def _condition(rng: random.Random) -> Condition:
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


def _concept(rng: random.Random, ontology_levels: list[list[str]]) -> str:
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
        when = _condition(rng)
        concept = _concept(rng, levels)
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
            after = After(publisher="bench", concept=_concept(rng, levels))
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


def _variants(
    policy: Policy, ontology: Ontology, rng: random.Random
) -> list[tuple[str, tuple[Rule, ...]]]:
    """Six one-rule changes, each relative to ``policy``'s rules."""
    rules = policy.rules
    grants = [i for i, r in enumerate(rules) if r.effect == "grant"]
    unit = rng.choice([i for i in grants if [f for f, _v in rules[i].when.subject] == ["OU"]])
    role_wide = [i for i in grants if not rules[i].when.subject and not rules[i].when.issuer]
    broad = max(role_wide, key=lambda i: (rules[i].inherit, len(ontology.block(rules[i].concept))))
    gone = rng.randrange(len(rules))

    def edited(i: int, rule: Rule) -> tuple[Rule, ...]:
        return (*rules[:i], rule, *rules[i + 1 :])

    def added(rule: Rule) -> tuple[Rule, ...]:
        return (*rules, rule)

    unit_and_title = Condition(
        subject=(("OU", frozenset({"Unit7"})), ("title", frozenset({"Title3"})))
    )
    org_wide = Condition(subject=(("O", frozenset({"Org4"})),), roles=frozenset({"subscriber"}))
    ca_wide = Condition(issuer=(("O", frozenset({"xdn development CA"})),))
    concept = rules[5].concept
    return [
        ("edit a unit rule", edited(unit, dataclasses.replace(rules[unit], concept=concept))),
        (
            "add a rule with a new condition",
            added(
                Rule(id="N1", effect="grant", concept=concept, inherit=True, when=unit_and_title)
            ),
        ),
        ("remove a rule", (*rules[:gone], *rules[gone + 1 :])),
        (
            "edit a role-wide rule",
            edited(broad, dataclasses.replace(rules[broad], inherit=not rules[broad].inherit)),
        ),
        (
            "add an organisation-wide rule",
            added(Rule(id="N2", effect="grant", concept=concept, inherit=True, when=org_wide)),
        ),
        (
            "add a CA-wide deny (a new condition every subscriber satisfies)",
            added(Rule(id="N3", effect="deny", concept=concept, when=ca_wide)),
        ),
    ]


def _time_changes(
    engine: PolicyEngine, policy: Policy, rounds: int
) -> list[tuple[float, float, float, str, int, int, int]]:
    """Best-of-``rounds`` wall and CPU time of applying each change (then reverting it)."""
    version = policy.version
    out = []
    for label, rules in _variants(policy, engine.ontology, random.Random(4)):
        best, cpu = float("inf"), float("inf")
        for _ in range(rounds):
            version += 1
            gc.collect()
            wall, clock = time.perf_counter(), time.process_time()
            changes = engine.apply(dataclasses.replace(policy, version=version, rules=rules))
            best = min(best, time.perf_counter() - wall)
            cpu = min(cpu, time.process_time() - clock)
            version += 1
            engine.apply(dataclasses.replace(policy, version=version))  # revert, untimed
        started = time.perf_counter()
        for change in changes.changes:  # what a consumer pays to read every concept name
            frozenset(change.gained), frozenset(change.lost)
        naming = time.perf_counter() - started
        out.append(
            (best, cpu, naming, label, len(changes), changes.reevaluated, changes.evaluations)
        )
    return out


def _bench_auth_list(
    engine: PolicyEngine, policy: Policy, ontology: Ontology, creds: list[Credential]
) -> list[Result]:
    sample = creds[:1000]
    for c in sample:
        engine.auth_list(c, NOW)
    position = iter(range(1 << 62))

    def cached() -> None:
        engine.auth_list(sample[next(position) % len(sample)], NOW)

    def cold() -> None:
        c = sample[next(position) % len(sample)]
        auth_list(c, policy, ontology, at=NOW, explain=False)

    hot = best_of(cached) * 1000
    scratch = best_of(cold, repeat=3) * 1000
    return [
        ratio_result(
            name="auth_list_cached_ms",
            value=hot,
            unit="ms",
            baseline="auth_list_cold_ms",
            baseline_value=scratch,
            goal="<= 1 ms",
            note=f"{len(policy.rules)} rules, {len(ontology.concepts)} concepts; cached "
            "= profile match + dict lookup; cold = reference auth_list from scratch",
        ),
        ratio_result(
            name="auth_list_cold_ms",
            value=scratch,
            unit="ms",
            baseline="auth_list_cached_ms",
            baseline_value=hot,
            note="reference auth_list, no index, no cache, no explanation",
        ),
    ]


def run(quick: bool) -> list[Result]:
    """Measure (see the module docstring)."""
    from benchmarks import policy_load  # it draws its rules with this module's helpers

    ontology = make_ontology()
    loading = policy_load.run(ontology, quick)
    policy = make_policy(ontology)
    count = 10_000 if quick else 100_000
    creds = make_credentials(count)
    started = time.perf_counter()
    engine = PolicyEngine(PolicySet.of(ontology, [policy]))
    for cred in creds:
        engine.subscribe(cred.name, cred, at=NOW)
    setup = time.perf_counter() - started
    results = _bench_auth_list(engine, policy, ontology, creds)
    timings = _time_changes(engine, policy, rounds=2 if quick else 3)
    sample = creds[:1000]
    scratch = float("inf")
    for _ in range(2 if quick else 3):
        started = time.perf_counter()
        for cred in sample:
            auth_list(cred, policy, ontology, at=NOW, explain=False)
        scratch = min(scratch, (time.perf_counter() - started) / len(sample) * count)
    worst = max(timings)
    detail = "; ".join(
        f"{label}: {t:.3f}s (cpu {c:.3f}s; naming every concept of the ChangeSet "
        f"+{m:.3f}s), {n} changed, {r} re-evaluated, {e} evaluations"
        for t, c, m, label, n, r, e in timings
    )
    results.append(
        ratio_result(
            name="policy_reeval_100k_s",
            value=worst[0],
            unit="s",
            baseline="recompute all from scratch (reference auth_list)",
            baseline_value=scratch,
            goal="<= 1 s",
            note=f"{count} live subscriptions ({engine.evaluations} profiles evaluated, "
            f"initial subscribe {setup:.1f}s); best of {2 if quick else 3} rounds, worst "
            f"change: {detail}; baseline timed on "
            f"{len(sample)} subscriptions and scaled",
        )
    )
    return results + loading
