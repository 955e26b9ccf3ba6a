"""Policies compiled for speed: concepts as bits, rules indexed by condition.

Theory of operation
-------------------
:class:`OntologyBits` numbers the concepts of one ontology and holds every maximum conceptual
block as a Python ``int`` used as a bitset, so a rule's cover, a deny, a union of grants or a
``requires`` test is one machine-word loop in C rather than a hash-set walk.

:class:`CompiledPolicy` evaluates exactly the semantics of :func:`~xdn.policy.auth_list` on
those bitsets. Rules are grouped by their condition set, and each distinct condition is
indexed under one *anchor* clause (a subject or issuer field, else the role): matching a
credential looks up each of its values for each anchor field (a field may have several), then
verifies only those candidates. The
set of matching conditions (as interned ids) is the credential's *profile*: two credentials
with the same profile and the same relevant dissemination state get the same decision, which
is what :class:`~xdn.policy.PolicyEngine` caches.
"""

from __future__ import annotations

import re
from collections import abc
from dataclasses import dataclass
from itertools import compress
from typing import TYPE_CHECKING

from xdn.ontology import Ontology
from xdn.policy._model import Authorization, Condition, Policy

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["CompiledPolicy", "ConceptSet", "Decision", "Interner", "OntologyBits", "ProfileKey"]

ProfileKey = tuple[frozenset[int], tuple[tuple[str, int], ...]]
_NONZERO = re.compile(rb"[^\x00]")
_BYTE_BITS = tuple(tuple(b for b in range(8) if value >> b & 1) for value in range(256))
_BINARY = bytes.maketrans(b"01", b"\x00\x01")


class OntologyBits:
    """Concept ↔ bit numbering and maximum conceptual blocks as int bitsets.

    Numbering is stable across ontology versions: built with ``previous``, every concept
    keeps its bit and new concepts get new ones (removed concepts keep theirs, unused), so
    decisions made under two versions can be compared bit by bit.
    """

    def __init__(self, ontology: Ontology, previous: OntologyBits | None = None) -> None:
        self.ontology = ontology
        names = list(previous.names) if previous else []
        known = set(names)
        names += sorted(ontology.concepts - known)
        self.names: tuple[str, ...] = tuple(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self._width = (len(self.names) + 7) // 8 or 1
        self.blocks = {name: self.bits(ontology.block(name)) for name in ontology.concepts}

    def bits(self, concepts: abc.Iterable[str]) -> int:
        """The bitset of ``concepts``."""
        buffer = bytearray(self._width)
        for concept in concepts:
            i = self.index[concept]
            buffer[i >> 3] |= 1 << (i & 7)
        return int.from_bytes(buffer, "little")

    def names_of(self, bits: int) -> frozenset[str]:
        """The concepts of bitset ``bits``."""
        if not bits:
            return frozenset()
        names = self.names
        if bits.bit_count() * 16 > len(names):
            selectors = format(bits, "b")[::-1].encode("ascii").translate(_BINARY)
            return frozenset(compress(names, selectors))
        raw = bits.to_bytes(self._width, "little")
        return frozenset(
            names[(m.start() << 3) + b]
            for m in _NONZERO.finditer(raw)
            for b in _BYTE_BITS[raw[m.start()]]
        )


class ConceptSet(abc.Set[str]):
    """A read-only set of concept ids backed by a bitset; names are made on first iteration.

    Membership and size are answered from the bits; iterating (or comparing with another
    set) builds the names once. A change that touches thousands of profiles thus costs no
    more than its bitsets until someone looks at the concepts.
    """

    __slots__ = ("_bits", "_names", "_table")

    def __init__(self, table: OntologyBits, bits: int) -> None:
        self._table = table
        self._bits = bits
        self._names: frozenset[str] | None = None

    def names(self) -> frozenset[str]:
        """The concepts as a frozenset (computed once)."""
        if self._names is None:
            self._names = self._table.names_of(self._bits)
        return self._names

    def __contains__(self, concept: object) -> bool:
        i = self._table.index.get(concept) if isinstance(concept, str) else None
        return i is not None and bool(self._bits >> i & 1)

    def __len__(self) -> int:
        return self._bits.bit_count()

    def __iter__(self) -> abc.Iterator[str]:
        return iter(self.names())

    def __hash__(self) -> int:
        return hash(self.names())

    def isdisjoint(self, other: abc.Iterable[object]) -> bool:
        """Whether no concept is in both (on bits when ``other`` is a ConceptSet too)."""
        if isinstance(other, ConceptSet):
            return not self._bits & other._bits
        return not any(concept in self for concept in other)

    def __repr__(self) -> str:
        return f"ConceptSet({sorted(self.names())!r})"

    @classmethod
    def _from_iterable(cls, it: abc.Iterable[str]) -> frozenset[str]:  # type: ignore[override]
        return frozenset(it)


class Decision:
    """A decision as bitsets; concept names and the :class:`Authorization` are made lazily."""

    __slots__ = ("_auth", "bits", "denied", "granted", "limited", "publisher")

    def __init__(
        self,
        bits: OntologyBits,
        publisher: str,
        granted: int,
        denied: int = 0,
        limited: tuple[tuple[int, int], ...] = (),
    ) -> None:
        self.bits = bits
        self.publisher = publisher
        self.granted = granted
        self.denied = denied
        self.limited = limited
        self._auth: Authorization | None = None

    @property
    def concepts(self) -> frozenset[str]:
        """The concepts granted.

        Not cached unless :meth:`authorization` was asked for: with thousands of profiles
        each granting thousands of concepts, cached name sets would cost more memory, and
        more time to build and to free, than the bitsets they describe.
        """
        if self._auth is not None:
            return self._auth.concepts
        return self.bits.names_of(self.granted)

    def authorization(self) -> Authorization:
        """The decision as an :class:`Authorization` (no explanation)."""
        if self._auth is None:
            bound: dict[str, int] = {}
            for gives, limit in self.limited:
                for concept in self.bits.names_of(gives):
                    bound[concept] = max(bound.get(concept, 0), limit)
            self._auth = Authorization(
                publisher=self.publisher,
                concepts=self.bits.names_of(self.granted),
                denied=self.bits.names_of(self.denied),
                limits=tuple(sorted(bound.items())),
            )
        return self._auth


class Interner:
    """Stable small ids for conditions, shared by every compiled version of every policy."""

    def __init__(self) -> None:
        self._ids: dict[Condition, int] = {}
        self.conditions: list[Condition] = []

    def __call__(self, condition: Condition) -> int:
        found = self._ids.get(condition)
        if found is None:
            found = self._ids[condition] = len(self.conditions)
            self.conditions.append(condition)
        return found


@dataclass(frozen=True, slots=True, kw_only=True)
class _CRule:
    id: str
    deny: bool
    cover: int
    requires: int
    after: tuple[tuple[str, str], ...]
    limit: int | None


class CompiledPolicy:
    """One policy version on one ontology, ready for fast evaluation (see module doc)."""

    def __init__(self, policy: Policy, bits: OntologyBits, intern: Interner) -> None:
        self.policy = policy
        self.bits = bits
        self.conditions = intern.conditions
        self.rules_by_cond: dict[int, list[_CRule]] = {}
        self.limited: list[tuple[int, int]] = []
        after: set[tuple[str, str]] = set()
        index = bits.index
        for rule in policy.rules:
            cover = bits.blocks[rule.concept] if rule.inherit else 1 << index[rule.concept]
            requires = 0
            for needed in rule.requires:
                requires |= 1 << index[needed]
            compiled = _CRule(
                id=rule.id,
                deny=rule.effect == "deny",
                cover=cover,
                requires=requires,
                after=tuple((a.publisher, a.concept) for a in rule.after),
                limit=rule.max_instances,
            )
            self.rules_by_cond.setdefault(intern(rule.when), []).append(compiled)
            after.update(compiled.after)
            if rule.max_instances is not None:
                self.limited.append((cover, rule.max_instances))
        self.limited_cover = 0
        for cover, _limit in self.limited:
            self.limited_cover |= cover
        self._caps: dict[str, int | None] = {}
        self.after_pairs = frozenset(after)
        self.cond_ids = frozenset(self.rules_by_cond)
        self._combine()
        self._index()

    def _combine(self) -> None:
        """Per condition set: the OR of its plain grants, of its denies, and the rest."""
        self.combined: dict[int, tuple[int, int, tuple[_CRule, ...]]] = {}
        for cid, rules in self.rules_by_cond.items():
            grants = denies = 0
            special = []
            for rule in rules:
                if rule.deny:
                    denies |= rule.cover
                elif rule.after or rule.requires or rule.limit is not None:
                    special.append(rule)
                else:
                    grants |= rule.cover
            self.combined[cid] = (grants, denies, tuple(special))

    def cap(self, concept: str) -> int | None:
        """The loosest separation-of-duty bound on ``concept`` (``None``: unbounded)."""
        if concept in self._caps:
            return self._caps[concept]
        i = self.bits.index.get(concept)
        bound = None
        if i is not None and self.limited_cover >> i & 1:
            bound = max(limit for cover, limit in self.limited if cover >> i & 1)
        self._caps[concept] = bound
        return bound

    def _index(self) -> None:
        """Index each condition set under one anchor clause; note what is left to verify."""
        self.anchors: dict[tuple[str, str], dict[str, list[int]]] = {}
        self.by_role: dict[str, list[int]] = {}
        self.always: list[int] = []
        self.verify: frozenset[int] = frozenset()
        verify = set()
        for cid in sorted(self.cond_ids):
            cond = self.conditions[cid]
            clauses = [("subject", f, v) for f, v in cond.subject]
            clauses += [("issuer", f, v) for f, v in cond.issuer]
            if clauses:
                scope, name, values = clauses[0]
                table = self.anchors.setdefault((scope, name), {})
                for value in values:
                    table.setdefault(value, []).append(cid)
                if len(clauses) > 1 or cond.roles:
                    verify.add(cid)
            elif cond.roles:
                for role in cond.roles:
                    self.by_role.setdefault(role, []).append(cid)
            else:
                self.always.append(cid)
        self.verify = frozenset(verify)

    def match(self, credential: Credential) -> frozenset[int]:
        """Ids of the conditions of this policy that ``credential`` satisfies."""
        found: list[int] = list(self.always)
        for (scope, name), table in self.anchors.items():
            names = credential.subject if scope == "subject" else credential.issuer
            for value in names.get(name, ()):
                found += table.get(value, ())
        found += self.by_role.get(credential.role, ())
        verify, conditions = self.verify, self.conditions
        return frozenset(c for c in found if c not in verify or conditions[c].matches(credential))

    def instance_key(self, instances: abc.Mapping[str, int] | None) -> tuple[tuple[str, int], ...]:
        """The part of a subscriber's instance counts that can change a decision."""
        if not instances or not self.limited:
            return ()
        out = []
        for concept, count in instances.items():
            bound = self.cap(concept) if count > 0 else None
            if bound is not None:
                out.append((concept, min(count, bound)))
        return tuple(sorted(out))

    def evaluate(
        self,
        matched: abc.Iterable[int],
        satisfied: abc.Set[tuple[str, str]],
        instances: abc.Mapping[str, int] | None = None,
    ) -> Decision:
        """The decision for a profile: same semantics as :func:`~xdn.policy.auth_list`.

        Works on the covers before denies (``raw``) and removes the denied concepts once at
        the end; an implication whose premises meet a denied concept can never hold and is
        dropped first, so testing premises against ``raw`` is the same as against the grants.
        """
        counts = instances or {}
        denied = free = 0
        conditional: list[_CRule] = []
        capped: list[tuple[int, int]] = []
        combined = self.combined
        for cid in matched:
            entry = combined.get(cid)
            if entry is None:
                continue
            grants, denies, special = entry
            free |= grants
            denied |= denies
            for rule in special:
                if rule.after and not all(p in satisfied for p in rule.after):
                    continue
                if rule.requires:
                    conditional.append(rule)
                elif rule.limit is None:
                    free |= rule.cover
                else:
                    capped.append((self._budget(rule, counts), rule.limit))
        raw = free
        for budget, _limit in capped:
            raw |= budget
        pending = [r for r in conditional if not r.requires & denied]
        while pending:
            waiting = []
            for rule in pending:
                if rule.requires & raw != rule.requires:
                    waiting.append(rule)
                elif rule.limit is None:
                    free |= rule.cover
                    raw |= rule.cover
                else:
                    budget = self._budget(rule, counts)
                    capped.append((budget, rule.limit))
                    raw |= budget
            if len(waiting) == len(pending):
                break
            pending = waiting
        kept = ~(denied | free)
        limited = tuple((budget & kept, limit) for budget, limit in capped)
        return Decision(self.bits, self.policy.publisher, raw & ~denied, denied, limited)

    def _budget(self, rule: _CRule, counts: abc.Mapping[str, int]) -> int:
        cover = rule.cover
        if rule.limit is None or not counts:
            return cover
        index = self.bits.index
        for concept, count in counts.items():
            if count >= rule.limit and concept in index:
                cover &= ~(1 << index[concept])
        return cover
