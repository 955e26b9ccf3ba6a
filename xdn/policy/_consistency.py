"""Checks over the rules of a policy taken together, and re-validation on a new ontology.

Errors (the policy is refused):

* an implication (``requires``) that no grant rule of the policy can satisfy, or that a deny
  rule makes impossible for every credential the rule matches;
* implications that depend on each other in a cycle (``A requires what B grants, B requires
  what A grants``) — neither could ever apply first;
* a *contradictory* grant: every concept it grants is denied, by deny rules whose conditions
  hold for every credential the grant's condition holds for. Deny wins, so the grant is dead
  code and almost certainly a mistake.

Warnings (the policy is accepted; ``xdn policy check --strict`` refuses it):

* a grant and a deny of the *same concept* under the *same condition set* that leave part of
  the grant alive (a grant of a block, a deny of its top concept): legal, but it reads like a
  contradiction — carve-outs are clearer as a deny of the sub-concept;
* a grant that repeats another rule of the policy.
"""

from __future__ import annotations

import dataclasses

import networkx as nx

from xdn.errors import PolicyError
from xdn.ontology import Ontology
from xdn.policy._model import Condition, Policy, Rule

__all__ = ["check_rules", "revalidate"]


def _fail(policy: Policy, rule: Rule, message: str) -> PolicyError:
    return PolicyError(f"{policy.where(rule.id)}: rule {rule.id}: {message}")


def _shadows(policy: Policy, ontology: Ontology) -> dict[Condition, tuple[frozenset[str], ...]]:
    """Grant condition → (concepts denied to all its credentials, ids of those denies)."""
    denies: dict[Condition, list[Rule]] = {}
    for rule in policy.rules:
        if rule.effect == "deny":
            denies.setdefault(rule.when, []).append(rule)
    out: dict[Condition, tuple[frozenset[str], ...]] = {}
    for when in {r.when for r in policy.rules if r.effect == "grant"}:
        denied: set[str] = set()
        ids: set[str] = set()
        for deny_when, rules in denies.items():
            if deny_when.subsumes(when):
                for rule in rules:
                    denied |= rule.covers(ontology)
                    ids.add(rule.id)
        out[when] = (frozenset(denied), frozenset(ids))
    return out


def _implications(
    policy: Policy, ontology: Ontology, shadow: dict[Condition, tuple[frozenset[str], ...]]
) -> None:
    grants = [r for r in policy.rules if r.effect == "grant"]
    deps: nx.DiGraph = nx.DiGraph()
    for rule in grants:
        deps.add_node(rule.id)
        for needed in rule.requires:
            providers = [g.id for g in grants if needed in g.covers(ontology)]
            if not providers:
                raise _fail(
                    policy, rule, f"requires {needed}, which no grant rule of this policy grants"
                )
            if needed in shadow[rule.when][0]:
                raise _fail(
                    policy,
                    rule,
                    f"requires {needed}, but deny rule(s) {', '.join(sorted(shadow[rule.when][1]))}"
                    " deny it to every credential this rule matches, so it can never apply",
                )
            deps.add_edges_from((rule.id, p) for p in providers)
    try:
        cycle = nx.find_cycle(deps)
    except nx.NetworkXNoCycle:
        return
    path = " → ".join([a for a, _ in cycle] + [cycle[0][0]])
    first = next(r for r in grants if r.id == cycle[0][0])
    raise _fail(policy, first, f"implication cycle: {path}")


def _warnings(policy: Policy, ontology: Ontology) -> list[str]:
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
        shape = dataclasses.astuple(dataclasses.replace(rule, id="", description=""))
        if shape in seen:
            out.append(f"{policy.where(rule.id)}: rule {rule.id} repeats rule {seen[shape]}")
        seen.setdefault(shape, rule.id)
    return out


def check_rules(policy: Policy, ontology: Ontology) -> Policy:
    """Check the rules of ``policy`` together; return it with its warnings filled in.

    Raises:
        PolicyError: dead or cyclic implication, or a contradictory grant (see module doc).
    """
    shadow = _shadows(policy, ontology)
    for rule in policy.rules:
        if rule.effect != "grant":
            continue
        denied, ids = shadow[rule.when]
        if rule.covers(ontology) <= denied:
            raise _fail(
                policy,
                rule,
                f"contradictory rules: everything it grants ({rule.concept}"
                f"{' and its sub-concepts' if rule.inherit else ''}) is denied to the same "
                f"credentials by {', '.join(sorted(ids))} (deny wins)",
            )
    _implications(policy, ontology, shadow)
    return dataclasses.replace(policy, warnings=tuple(_warnings(policy, ontology)))


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
