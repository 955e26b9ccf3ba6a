"""The reference decision procedure: :func:`auth_list`, a pure function with an explanation.

Theory of operation
-------------------
``auth_list(u)`` under one publisher's policy at time ``at`` is computed in four steps:

1. *Gate.* A credential outside its validity period, or a policy past its ``valid_until``,
   gets nothing.
2. *Match.* The rules whose ``when`` condition the credential satisfies. A grant with
   ``after`` (temporal) stays inactive until every named (publisher, concept) has been
   disseminated.
3. *Deny.* Every concept covered by a matching deny rule is denied (a deny with ``inherit``
   covers the concept's maximum conceptual block).
4. *Grant to a fixed point.* A grant rule applies once every concept it ``requires`` (R2) is
   granted; it gives its cover (R1: the block with ``inherit``) minus the denied concepts and
   minus the concepts whose separation-of-duty budget is spent (``max_instances``: the
   subscriber has already received that many document instances of the concept, as counted
   in ``instances``). Grants only grow, so iterating until nothing changes reaches the least
   fixed point, whatever the rule order.

Deny always wins, also over implications that depended on a denied concept. The set-based
code here is deliberately plain: :class:`~xdn.policy.PolicyEngine` evaluates the same
semantics on bitsets with caches, and the tests check both agree.
"""

from __future__ import annotations

from collections import abc
from datetime import datetime
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.ontology import Ontology
from xdn.policy._model import Authorization, Grant, Policy, Rule

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["auth_list", "gate"]


def gate(credential: Credential, policy: Policy, ontology: Ontology, at: datetime) -> str | None:
    """Check misuse; return why nothing is granted at ``at`` (``None`` when evaluation goes on).

    Raises:
        UsageError: naive ``at`` or an ontology other than the policy's.
    """
    if at.tzinfo is None:
        raise UsageError("auth_list needs a timezone-aware time")
    if policy.ontology != ontology.iri:
        raise UsageError(f"policy {policy.source} is for {policy.ontology}, not {ontology.iri}")
    if not credential.not_before <= at <= credential.not_after:
        return f"credential {credential.name!r} is not valid at {at.isoformat()}"
    if policy.expired(at):
        assert policy.valid_until is not None
        return f"policy {policy.source} expired at {policy.valid_until.isoformat()}"
    return None


def _decisions(
    rule: Rule, concepts: abc.Iterable[str], ontology: Ontology, because: tuple[str, ...] = ()
) -> list[Grant]:
    paths = ontology.paths_from(rule.concept)
    return [
        Grant(rule=rule.id, effect=rule.effect, concept=c, via=paths.get(c, ()), because=because)
        for c in sorted(concepts)
    ]


def _budget(
    rule: Rule, ontology: Ontology, instances: abc.Mapping[str, int], notes: list[str]
) -> frozenset[str]:
    """The rule's cover minus concepts whose separation-of-duty budget is spent."""
    cover = rule.covers(ontology)
    if rule.max_instances is None:
        return cover
    spent = {c for c in cover if instances.get(c, 0) >= rule.max_instances}
    for concept in sorted(spent):
        notes.append(
            f"{rule.id}: {concept} exhausted ({instances[concept]} of at most "
            f"{rule.max_instances} instance(s) received)"
        )
    return cover - spent


def auth_list(
    credential: Credential,
    policy: Policy,
    ontology: Ontology,
    *,
    at: datetime,
    disseminated: abc.Set[tuple[str, str]] = frozenset(),
    instances: abc.Mapping[str, int] | None = None,
    explain: bool = True,
) -> Authorization:
    """The concepts ``credential`` may receive from ``policy.publisher`` at time ``at``.

    Args:
        credential: the subscriber's credential.
        policy: the publisher's validated policy.
        ontology: the ontology the policy was validated against.
        at: evaluation time (timezone-aware).
        disseminated: (publisher, concept) pairs already disseminated, for ``after`` rules.
        instances: concept → document instances of it this subscriber has already received
            from this publisher, for ``max_instances`` rules.
        explain: record every decision in :attr:`Authorization.explain`.

    Raises:
        UsageError: naive ``at`` or an ontology other than the policy's.
    """
    refusal = gate(credential, policy, ontology, at)
    if refusal is not None:
        return Authorization(publisher=policy.publisher, concepts=frozenset(), notes=(refusal,))
    counts = instances or {}
    record: list[Grant] = []
    notes: list[str] = []
    active: list[Rule] = []
    for rule in policy.rules:
        if not rule.when.matches(credential):
            continue
        missing = [a for a in rule.after if (a.publisher, a.concept) not in disseminated]
        if missing:
            notes.append(
                f"{rule.id} waits until {missing[0].concept} of "
                f"{missing[0].publisher} has been disseminated"
            )
            continue
        active.append(rule)
    denied: set[str] = set()
    for rule in (r for r in active if r.effect == "deny"):
        denied |= rule.covers(ontology)
        if explain:
            record += _decisions(rule, rule.covers(ontology), ontology)
    granted: set[str] = set()
    pending = {r.id: r for r in active if r.effect == "grant"}
    gives = {rid: _budget(r, ontology, counts, notes) - denied for rid, r in pending.items()}
    applied: list[Rule] = []
    changed = True
    while changed:
        changed = False
        for rule in list(pending.values()):
            if all(c in granted for c in rule.requires):
                del pending[rule.id]
                applied.append(rule)
                if explain:
                    record += _decisions(rule, gives[rule.id], ontology, rule.requires)
                granted |= gives[rule.id]
                changed = True
    for rule in pending.values():
        lacking = ", ".join(c for c in rule.requires if c not in granted)
        notes.append(f"{rule.id} does not apply: {lacking} not granted")
    return Authorization(
        publisher=policy.publisher,
        concepts=frozenset(granted),
        explain=tuple(record),
        denied=frozenset(denied),
        limits=_limits(applied, gives),
        notes=tuple(notes),
    )


def _limits(applied: list[Rule], gives: dict[str, frozenset[str]]) -> tuple[tuple[str, int], ...]:
    """(concept, bound) for granted concepts that only limited rules give; the loosest wins."""
    free: set[str] = set()
    bound: dict[str, int] = {}
    for rule in applied:
        if rule.max_instances is None:
            free |= gives[rule.id]
        else:
            for concept in gives[rule.id]:
                bound[concept] = max(bound.get(concept, 0), rule.max_instances)
    return tuple(sorted((c, n) for c, n in bound.items() if c not in free))
