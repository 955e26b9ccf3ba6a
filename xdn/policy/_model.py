"""Value objects of the policy engine: conditions, rules, policies and decisions.

All are frozen, slotted, keyword-only dataclasses: a :class:`Policy` is what
:func:`~xdn.policy.parse_policy` returns after validation; an :class:`Authorization` is what
:func:`~xdn.policy.auth_list` returns for one credential. Conditions and rules are hashable
values, so two versions of a policy can be compared rule by rule.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from xdn.names import KNOWN_FIELDS, canonical_field
from xdn.ontology import Ontology

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = [
    "NAME_FIELDS",
    "ROLES",
    "After",
    "Authorization",
    "Condition",
    "Effect",
    "Fields",
    "Grant",
    "Policy",
    "Rule",
]

Effect = Literal["grant", "deny"]
Fields = tuple[tuple[str, frozenset[str]], ...]

NAME_FIELDS = KNOWN_FIELDS
ROLES = frozenset({"site", "publisher", "subscriber"})


def _fields_imply(strong: Fields, weak: Fields) -> bool:
    """Whether every name satisfying ``strong`` also satisfies ``weak``.

    Sound for multi-valued fields too: a name with some value in ``S ⊆ W`` has one in ``W``.
    """
    given = dict(strong)
    return all(key in given and given[key] <= accepted for key, accepted in weak)


def _canonical_fields(fields: Fields, scope: str) -> Fields:
    out: dict[str, frozenset[str]] = {}
    for key, accepted in fields:
        name = canonical_field(key)
        if name in out:
            raise ValueError(f"{scope} field {name} is given twice")
        if not accepted or not all(isinstance(v, str) for v in accepted):
            raise ValueError(f"{scope} field {name}: accepted values must be non-empty strings")
        out[name] = frozenset(accepted)
    return tuple(sorted(out.items()))


def _any_in(values: tuple[str, ...], accepted: frozenset[str]) -> bool:
    return not accepted.isdisjoint(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class Condition:
    """Conditions on a credential; all given ones must hold (exact, case-sensitive match).

    A name field holds if *any* of the credential's values for it is accepted: a subject
    ``OU=Interns, OU=Staff`` satisfies ``OU = "Interns"`` and ``OU = "Staff"`` alike. Field
    names are canonicalised (:func:`xdn.names.canonical_field`), so ``"2.5.4.12"`` and
    ``title`` are one field; the fields are kept sorted by name.

    Attributes:
        subject: subject name fields → accepted values.
        issuer: issuer name fields → accepted values.
        roles: accepted roles (``site``, ``publisher``, ``subscriber``); empty means any.

    Raises:
        ValueError: an unknown field name, a field given twice (in two spellings), or an
            empty set of accepted values.
    """

    subject: Fields = ()
    issuer: Fields = ()
    roles: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "subject", _canonical_fields(self.subject, "subject"))
        object.__setattr__(self, "issuer", _canonical_fields(self.issuer, "issuer"))
        object.__setattr__(self, "roles", frozenset(self.roles))

    def matches(self, credential: Credential) -> bool:
        """Whether ``credential`` satisfies every condition."""
        if self.roles and credential.role not in self.roles:
            return False
        subject, issuer = credential.subject, credential.issuer
        return all(_any_in(subject.get(k, ()), v) for k, v in self.subject) and all(
            _any_in(issuer.get(k, ()), v) for k, v in self.issuer
        )

    def subsumes(self, other: Condition) -> bool:
        """Whether every credential matching ``other`` also matches this condition."""
        if self.roles and not (other.roles and other.roles <= self.roles):
            return False
        return _fields_imply(other.subject, self.subject) and _fields_imply(
            other.issuer, self.issuer
        )

    def describe(self) -> str:
        """A short human-readable form, e.g. ``subject OU=Cred1, role subscriber``."""
        parts = []
        for scope, fields in (("subject", self.subject), ("issuer", self.issuer)):
            for key, values in fields:
                parts.append(f"{scope} {key}={'|'.join(sorted(values))}")
        if self.roles:
            parts.append(f"role {'|'.join(sorted(self.roles))}")
        return ", ".join(parts) or "any credential"


@dataclass(frozen=True, slots=True, kw_only=True)
class After:
    """Temporal precondition: ``concept`` of ``publisher`` has been disseminated."""

    publisher: str
    concept: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One policy rule (see ``docs/policies.md`` for the document keys).

    Attributes:
        id: unique within its policy.
        effect: ``grant`` or ``deny``.
        concept: the concept granted or denied.
        inherit: R1 of the paper — the rule covers the concept's maximum conceptual block.
        requires: R2 of the paper — a grant applies only if these concepts are granted.
        when: which credentials the rule is about.
        after: temporal — a grant applies only once these have been disseminated.
        max_instances: separation of duty — a grant gives a concept only while the subscriber
            has received fewer than this many document instances of it.
        description: free text for administrators.
    """

    id: str
    effect: Effect
    concept: str
    inherit: bool = False
    requires: tuple[str, ...] = ()
    when: Condition = field(default_factory=Condition)
    after: tuple[After, ...] = ()
    max_instances: int | None = None
    description: str = ""

    def covers(self, ontology: Ontology) -> frozenset[str]:
        """Concepts this rule grants or denies: the block with ``inherit``, else the concept."""
        return ontology.block(self.concept) if self.inherit else frozenset({self.concept})


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """A validated policy document of one publisher.

    Attributes:
        publisher: the publisher's name (CN of its certificate).
        version: grows with every signed revision.
        ontology: IRI of the ontology the policy was validated against.
        rules: the rules in file order.
        source: where it was loaded from (for messages).
        description: free text.
        digest: SHA-256 of the exact document bytes.
        valid_until: after this time the policy grants nothing (optional).
        warnings: findings that are legal but suspicious (see ``xdn policy check``).
        rule_lines: rule id → line of its ``[[rule]]`` in ``source``.
    """

    publisher: str
    version: int
    ontology: str
    rules: tuple[Rule, ...]
    source: str = "<policy>"
    description: str = ""
    digest: str = ""
    valid_until: datetime | None = None
    warnings: tuple[str, ...] = ()
    rule_lines: tuple[tuple[str, int], ...] = ()
    _line_of: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_line_of", types.MappingProxyType(dict(self.rule_lines)))

    def where(self, rule_id: str | None = None) -> str:
        """``source[:line]`` of a rule (or of the policy) for messages."""
        line = self._line_of.get(rule_id) if rule_id is not None else None
        return f"{self.source}:{line}" if line else self.source

    def expired(self, at: datetime) -> bool:
        """Whether ``valid_until`` has passed at ``at``."""
        return self.valid_until is not None and at > self.valid_until


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """One decision: ``rule`` granted (or denied) ``concept``.

    Attributes:
        via: containment path from the rule's concept down to ``concept``.
        because: concepts an implication (``requires``) depended on.
    """

    rule: str
    effect: Effect
    concept: str
    via: tuple[str, ...]
    because: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Authorization:
    """The closure ``auth_list(u)`` for one credential under one publisher's policy.

    Attributes:
        publisher: whose policy.
        concepts: the concepts granted (after denies).
        explain: every decision: denies first, then grants in the order they were derived
            (empty when evaluated without explanation).
        denied: concepts removed by deny rules.
        limits: separation-of-duty bounds (concept, max document instances), sorted.
        notes: why a rule did not apply (validity, unmet implication, temporal condition,
            exhausted separation-of-duty limit).
    """

    publisher: str
    concepts: frozenset[str]
    explain: tuple[Grant, ...] = ()
    denied: frozenset[str] = frozenset()
    limits: tuple[tuple[str, int], ...] = ()
    notes: tuple[str, ...] = ()
