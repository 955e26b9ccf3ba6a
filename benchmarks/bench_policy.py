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

from benchmarks import policy_load
from benchmarks.harness import Result, best_of, ratio_result
from benchmarks.policy_data import NOW, make_credentials, make_ontology, make_policy
from xdn.certs import Credential
from xdn.ontology import Ontology
from xdn.policy import Condition, Policy, PolicyEngine, PolicySet, Rule, auth_list

__all__ = ["run"]

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
