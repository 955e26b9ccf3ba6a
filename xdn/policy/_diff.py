"""What changes between two versions of a policy: rules, and who gains or loses what.

``xdn policy diff OLD NEW`` answers two questions. *Which rules changed* (added, removed,
edited — matched by rule id). *Who gains or loses what*: with certificates, exactly, by
evaluating :func:`~xdn.policy.auth_list` for each under both versions; without, for every
distinct condition set of either version, through a representative credential that satisfies
that condition set with the first accepted value of each field (a real credential may satisfy
several condition sets at once; pass certificates for exact answers).
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from xdn.ontology import Ontology
from xdn.policy._evaluate import auth_list
from xdn.policy._model import Condition, Policy, Rule

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["Impact", "RuleDiff", "impacts", "representatives", "rule_diff"]

_DAWN = datetime(1970, 1, 1, tzinfo=UTC)
_DUSK = datetime(9999, 12, 31, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class RuleDiff:
    """Rules added, removed and edited (same id, other content) between two versions."""

    added: tuple[Rule, ...] = ()
    removed: tuple[Rule, ...] = ()
    edited: tuple[tuple[Rule, Rule], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.edited)


@dataclass(frozen=True, slots=True, kw_only=True)
class Impact:
    """What one credential (or representative of a condition set) gains and loses."""

    who: str
    gained: frozenset[str]
    lost: frozenset[str]
    before: frozenset[str]
    after: frozenset[str]


def rule_diff(old: Policy, new: Policy) -> RuleDiff:
    """Compare the rules of two versions of a policy by rule id."""
    before = {r.id: r for r in old.rules}
    after = {r.id: r for r in new.rules}
    return RuleDiff(
        added=tuple(r for r in new.rules if r.id not in before),
        removed=tuple(r for r in old.rules if r.id not in after),
        edited=tuple((before[r.id], r) for r in new.rules if r.id in before and before[r.id] != r),
    )


def _representative(condition: Condition) -> Credential:
    from xdn.certs import Credential

    return Credential(
        name=condition.describe(),
        subject={key: (min(values),) for key, values in condition.subject},
        issuer={key: (min(values),) for key, values in condition.issuer},
        role=min(condition.roles) if condition.roles else "subscriber",
        serial=0,
        not_before=_DAWN,
        not_after=_DUSK,
        fingerprint="",
    )


def representatives(*policies: Policy) -> dict[str, Credential]:
    """One representative credential per distinct condition set of ``policies``."""
    seen: dict[Condition, None] = {}
    for policy in policies:
        for rule in policy.rules:
            seen.setdefault(rule.when)
    return {cond.describe(): _representative(cond) for cond in seen}


def impacts(
    old: Policy,
    new: Policy,
    ontology: Ontology,
    credentials: abc.Mapping[str, Credential],
    *,
    at: datetime,
) -> list[Impact]:
    """For each named credential, its authorizations under both versions and the difference."""
    out = []
    for who, credential in sorted(credentials.items()):
        before = auth_list(credential, old, ontology, at=at, explain=False).concepts
        after = auth_list(credential, new, ontology, at=at, explain=False).concepts
        out.append(
            Impact(who=who, gained=after - before, lost=before - after, before=before, after=after)
        )
    return out
