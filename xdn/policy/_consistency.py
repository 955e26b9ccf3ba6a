"""Checks over the rules of a policy taken together, and re-validation on a new ontology.

Errors (the policy is refused):

* a *contradictory* grant: every concept it grants is denied, by deny rules whose conditions
  hold for every credential the grant's condition holds for. Deny wins, so the grant is dead
  code and almost certainly a mistake;
* an *unsatisfiable* implication: a grant with ``requires`` that can apply for no credential
  at all (see below).

Warnings (the policy is accepted; ``xdn policy check --strict`` refuses it):

* a grant and a deny of the *same concept* under the *same condition set* that leave part of
  the grant alive (a grant of a block, a deny of its top concept): legal, but it reads like a
  contradiction — carve-outs are clearer as a deny of the sub-concept;
* a grant that repeats another rule of the policy.

Theory of operation
-------------------
*Implications.* ``auth_list`` grants to a least fixed point: a grant applies once every
concept it requires is granted by grants that already apply, so a grant can never satisfy its
own requirement, and grants that require each other's concepts never apply unless some other
grant starts the chain. A grant is refused as unsatisfiable exactly when it applies for no
credential even under the most favourable assumptions: every ``after`` disseminated, no
separation-of-duty budget spent, and any combination of subject and issuer values (a name
field may carry several values, so conditions on names never exclude each other — only the
role, of which a credential has one, does). Concretely, in file order:

1. it requires a concept no grant rule of the policy covers; or
2. a deny whose condition holds for every credential the grant matches covers a required
   concept; or
3. it is outside the least fixed point computed for every role (the rules for that role,
   optimistically assumed to match one credential): typically a cycle of implications with
   no other provider — including a grant requiring a concept only its own block holds.

The fixed point is the classic counting algorithm for Horn clauses: each grant waits for its
number of distinct required concepts, each required concept remembers who waits for it, and
applying a grant releases the required concepts its cover holds — found through an index of
required concepts by ancestor (a concept is in the block of each of its ancestors), so the
cost is linear in the rules, their requirements and the ancestors of required concepts.

*Contradictions* look up, for each grant condition, the deny conditions that subsume it
through an index of deny conditions by one of their clauses, instead of comparing every pair.
"""

from __future__ import annotations

import dataclasses
from collections import abc

import networkx as nx

from xdn.errors import PolicyError
from xdn.ontology import Ontology
from xdn.policy._model import Condition, Policy, Rule

__all__ = ["check_rules", "revalidate"]

_Clause = tuple[str, str, str]


def _fail(policy: Policy, rule: Rule, message: str) -> PolicyError:
    return PolicyError(f"{policy.where(rule.id)}: rule {rule.id}: {message}")


def _clauses(condition: Condition) -> list[tuple[str, str, frozenset[str]]]:
    return [("subject", k, v) for k, v in condition.subject] + [
        ("issuer", k, v) for k, v in condition.issuer
    ]


class _Shadows:
    """For a condition: the concepts denied to every credential satisfying it, and by whom."""

    def __init__(self, policy: Policy, ontology: Ontology) -> None:
        self._ontology = ontology
        self._denies: dict[Condition, list[Rule]] = {}
        for rule in policy.rules:
            if rule.effect == "deny":
                self._denies.setdefault(rule.when, []).append(rule)
        self._always: list[Condition] = []
        self._index: dict[_Clause, list[Condition]] = {}
        for when in self._denies:
            clauses = _clauses(when)
            if not clauses:
                self._always.append(when)
                continue
            scope, name, values = clauses[0]
            for value in values:
                self._index.setdefault((scope, name, value), []).append(when)
        self._found: dict[Condition, tuple[frozenset[str], frozenset[str]]] = {}
        self._unions: dict[frozenset[Condition], tuple[frozenset[str], frozenset[str]]] = {}

    def _subsuming(self, when: Condition) -> frozenset[Condition]:
        # A deny condition subsuming ``when`` has its indexed clause among ``when``'s clauses
        # with a superset of values, so any one value of that clause of ``when`` finds it.
        candidates = list(self._always)
        for scope, name, values in _clauses(when):
            candidates += self._index.get((scope, name, min(values)), ())
        return frozenset(d for d in candidates if d.subsumes(when))

    def __call__(self, when: Condition) -> tuple[frozenset[str], frozenset[str]]:
        """(concepts denied to every credential matching ``when``, ids of those denies)."""
        found = self._found.get(when)
        if found is None:
            subsuming = self._subsuming(when)
            found = self._unions.get(subsuming)
            if found is None:
                denied: set[str] = set()
                ids: set[str] = set()
                for deny_when in subsuming:
                    for rule in self._denies[deny_when]:
                        denied |= rule.covers(self._ontology)
                        ids.add(rule.id)
                found = self._unions[subsuming] = (frozenset(denied), frozenset(ids))
            self._found[when] = found
        return found


def _contradictions(policy: Policy, ontology: Ontology, shadow: _Shadows) -> None:
    for rule in policy.rules:
        if rule.effect != "grant":
            continue
        denied, ids = shadow(rule.when)
        cover = rule.covers(ontology)
        if denied and len(cover) <= len(denied) and cover <= denied:
            raise _fail(
                policy,
                rule,
                f"contradictory rules: everything it grants ({rule.concept}"
                f"{' and its sub-concepts' if rule.inherit else ''}) is denied to the same "
                f"credentials by {', '.join(sorted(ids))} (deny wins)",
            )


class _Implications:
    """The least-fixed-point analysis of implications (see the module doc)."""

    def __init__(self, policy: Policy, ontology: Ontology) -> None:
        self.grants = [r for r in policy.rules if r.effect == "grant"]
        self.required = {c for r in self.grants for c in r.requires}
        self.inside: dict[str, list[str]] = {}  # concept → required concepts in its block
        for needed in sorted(self.required):
            for outer in (needed, *ontology.ancestors(needed)):
                self.inside.setdefault(outer, []).append(needed)

    def gives(self, rule: Rule) -> abc.Sequence[str]:
        """The required concepts ``rule``'s cover holds."""
        if rule.inherit:
            return self.inside.get(rule.concept, ())
        return (rule.concept,) if rule.concept in self.required else ()

    def fixpoint(self, role: str) -> set[int]:
        """Indices of the grants that apply when every rule for ``role`` matches."""
        waiting: dict[str, list[int]] = {}
        missing: dict[int, int] = {}
        ready: list[int] = []
        for i, rule in enumerate(self.grants):
            if rule.when.roles and role not in rule.when.roles:
                continue
            needs = set(rule.requires)
            missing[i] = len(needs)
            for needed in needs:
                waiting.setdefault(needed, []).append(i)
            if not needs:
                ready.append(i)
        available: set[str] = set()
        opened: set[tuple[str, bool]] = set()
        applied: set[int] = set()
        while ready:
            i = ready.pop()
            applied.add(i)
            rule = self.grants[i]
            if (rule.concept, rule.inherit) in opened:
                continue
            opened.add((rule.concept, rule.inherit))
            for concept in self.gives(rule):
                if concept in available:
                    continue
                available.add(concept)
                for j in waiting.get(concept, ()):
                    missing[j] -= 1
                    if not missing[j]:
                        ready.append(j)
        return applied

    def dead(self) -> list[Rule]:
        """The grants that apply for no credential, in file order."""
        # A role no grant names admits only the grants without a role, which every named
        # role admits too: one run per named role, or one run when no grant names a role.
        roles = set().union(*(r.when.roles for r in self.grants)) or {""}
        applies: set[int] = set()
        for role in sorted(roles):
            applies |= self.fixpoint(role)
        return [r for i, r in enumerate(self.grants) if i not in applies]


def _direct(policy: Policy, checker: _Implications, shadow: _Shadows) -> None:
    """Reasons 1 and 2 of the module doc, in file order."""
    provided: set[str] = set()
    for rule in checker.grants:
        provided.update(checker.gives(rule))
    for rule in checker.grants:
        for needed in rule.requires:
            if needed not in provided:
                raise _fail(
                    policy, rule, f"requires {needed}, which no grant rule of this policy grants"
                )
            denied, ids = shadow(rule.when)
            if needed in denied:
                raise _fail(
                    policy,
                    rule,
                    f"requires {needed}, but deny rule(s) {', '.join(sorted(ids))}"
                    " deny it to every credential this rule matches, so it can never apply",
                )


def _compatible(a: Rule, b: Rule) -> bool:
    return not a.when.roles or not b.when.roles or bool(a.when.roles & b.when.roles)


def _unsatisfiable(policy: Policy, ontology: Ontology, dead: list[Rule]) -> PolicyError:
    """Why the first of ``dead`` can never apply: a cycle it is in or depends on, or roles."""
    grants = [r for r in policy.rules if r.effect == "grant"]
    ids = {r.id for r in dead}
    graph: nx.DiGraph = nx.DiGraph()
    for rule in dead:
        for needed in rule.requires:
            providers = [g for g in grants if needed in g.covers(ontology) and _compatible(g, rule)]
            if all(p.id in ids for p in providers):
                graph.add_edges_from((rule.id, p.id) for p in providers)
    first = dead[0]
    try:
        cycle = nx.find_cycle(graph, source=first.id)
    except nx.NetworkXNoCycle:
        return _fail(
            policy,
            first,
            f"requires {', '.join(first.requires)}, which no grant rule for the same role "
            "can give, so it can never apply",
        )
    start = next(r for r in dead if r.id == cycle[0][0])
    path = " → ".join([a for a, _ in cycle] + [cycle[0][0]])
    if len(cycle) == 1:
        return _fail(
            policy,
            start,
            f"implication cycle: {path}: it requires what only its own grant gives, and a "
            "grant cannot satisfy its own requirement (grant that concept by another rule)",
        )
    return _fail(
        policy,
        start,
        f"implication cycle: {path}, and no other rule grants what they require, so none of "
        "them can ever apply first",
    )


def _warnings(policy: Policy) -> list[str]:
    out = []
    denies = {(r.when, r.concept): r for r in policy.rules if r.effect == "deny"}
    seen: dict[tuple[object, ...], str] = {}
    for rule in policy.rules:
        if rule.effect == "grant" and (rule.when, rule.concept) in denies:
            deny = denies[(rule.when, rule.concept)]
            out.append(
                f"{policy.where(rule.id)}: rule {rule.id} grants {rule.concept} and rule "
                f"{deny.id} denies it to the same credentials ({rule.when.describe()}); deny "
                f"wins, so only {rule.concept}'s sub-concepts are granted — write a deny of "
                "the sub-concepts you mean instead"
            )
        shape = (
            rule.effect,
            rule.concept,
            rule.inherit,
            rule.requires,
            rule.when,
            rule.after,
            rule.max_instances,
        )  # the rule without its id and description
        if shape in seen:
            out.append(f"{policy.where(rule.id)}: rule {rule.id} repeats rule {seen[shape]}")
        seen.setdefault(shape, rule.id)
    return out


def check_rules(policy: Policy, ontology: Ontology) -> Policy:
    """Check the rules of ``policy`` together; return it with its warnings filled in.

    Raises:
        PolicyError: a contradictory grant or an unsatisfiable implication (see module doc).
    """
    shadow = _Shadows(policy, ontology)
    _contradictions(policy, ontology, shadow)
    checker = _Implications(policy, ontology)
    if checker.required:
        _direct(policy, checker, shadow)
        dead = checker.dead()
        if dead:
            raise _unsatisfiable(policy, ontology, dead)
    return dataclasses.replace(policy, warnings=tuple(_warnings(policy)))


def revalidate(policy: Policy, ontology: Ontology) -> Policy:
    """Re-check ``policy`` against a new version of its ontology (all concepts still known).

    Raises:
        PolicyError: the policy is for another ontology IRI, names a concept the new ontology
            lacks, or its rules no longer hold together — naming the file and rule.
    """
    if policy.ontology != ontology.iri:
        raise PolicyError(
            f"{policy.source}: written for ontology {policy.ontology}, not {ontology.iri}"
        )
    for rule in policy.rules:
        named = [rule.concept, *rule.requires, *(a.concept for a in rule.after)]
        missing = [c for c in named if c not in ontology.concepts]
        if missing:
            raise _fail(policy, rule, f"concept {missing[0]!r} is not in the new ontology")
    return check_rules(policy, ontology)
