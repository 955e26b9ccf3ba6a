"""Per-publisher bookkeeping of the engine and the incremental rebuild after a change.

A :class:`Book` holds one publisher's compiled policy, its decision cache (profile → decision)
and its live subscribers grouped by profile. :func:`rebuild` derives the book of a new policy
version (or of the same policy in a new dissemination state or ontology) from the old one
without touching it, re-evaluating only what the change can affect; see
:mod:`xdn.policy._engine` for why that is sound. Gains and losses are computed on bitsets and
grouped by identical difference, so only distinct differences are turned into concept names.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass, field

from xdn.policy._changes import Change, Reason
from xdn.policy._compiled import CompiledPolicy, ConceptSet, Decision, OntologyBits, ProfileKey

__all__ = ["Book", "Rebuilt", "Transitions", "rebuild"]

Decide = abc.Callable[["Book", ProfileKey], Decision]


class Book:
    """One publisher's compiled policy, decision cache and live subscribers by profile."""

    __slots__ = ("compiled", "dead", "key_of", "members", "results")

    def __init__(self, compiled: CompiledPolicy, *, dead: bool = False) -> None:
        self.compiled = compiled
        self.dead = dead
        self.results: dict[ProfileKey, Decision] = {}
        self.members: dict[ProfileKey, set[str]] = {}
        self.key_of: dict[str, ProfileKey] = {}

    @property
    def publisher(self) -> str:
        return self.compiled.policy.publisher

    def granted(self, subscriber: str) -> int:
        """The subscriber's granted concepts as bits (none once the policy has expired)."""
        if self.dead:
            return 0
        return self.results[self.key_of[subscriber]].granted

    def add(self, subscriber: str, key: ProfileKey) -> None:
        self.members.setdefault(key, set()).add(subscriber)
        self.key_of[subscriber] = key

    def remove(self, subscriber: str) -> None:
        key = self.key_of.pop(subscriber, None)
        if key is not None:
            group = self.members[key]
            group.discard(subscriber)
            if not group:
                del self.members[key]

    def everyone_loses(self, reason: Reason, bits: OntologyBits) -> list[Change]:
        """Changes by which every live subscriber loses what this book grants."""
        moves = Transitions()
        if not self.dead:
            for key, members in self.members.items():
                moves.add(self.results[key].granted, 0, members)
        return moves.changes(self.publisher, reason, bits)


class Transitions:
    """Subscribers grouped by identical (gained, lost) bitsets."""

    def __init__(self) -> None:
        self.groups: dict[tuple[int, int], list[abc.Set[str]]] = {}

    def add(self, old: int, new: int, members: abc.Set[str]) -> None:
        if old != new:
            self.groups.setdefault((new & ~old, old & ~new), []).append(members)

    def changes(self, publisher: str, reason: Reason, bits: OntologyBits) -> list[Change]:
        return [
            Change(
                publisher=publisher,
                subscribers=frozenset().union(*sets),
                gained=ConceptSet(bits, gained),
                lost=ConceptSet(bits, lost),
                reason=reason,
            )
            for (gained, lost), sets in self.groups.items()
        ]


@dataclass(slots=True, kw_only=True)
class Rebuilt:
    """A rebuilt book and what the rebuild changed."""

    book: Book
    changes: list[Change] = field(default_factory=list)
    reevaluated: int = 0


def _merge(book: Book, key: ProfileKey, members: abc.Set[str]) -> None:
    """Add ``members`` to a profile group (copying: ``members`` is also kept as a change)."""
    group = book.members.get(key)
    if group is None:
        book.members[key] = set(members)
    else:
        group |= members


def rebuild(
    old: Book | None,
    compiled: CompiledPolicy,
    *,
    changed: abc.Set[int],
    joined: abc.Mapping[frozenset[int], abc.Set[str]],
    recount: abc.Set[str],
    profile: abc.Callable[[str], ProfileKey],
    decide: Decide,
    reason: Reason,
) -> Rebuilt:
    """The book of ``compiled`` derived from ``old``; ``old`` is left untouched.

    Args:
        old: the current book; ``None`` or a dead book when nothing was granted before (then
            every live subscriber must be in ``recount``).
        compiled: the new compiled policy.
        changed: ids of condition sets whose rules changed; a profile containing none of
            them keeps its decision.
        joined: ids of condition sets new to the policy → the subscribers that satisfy
            exactly those of them (the groups are disjoint). Their profile grows by those
            ids, computed once per old profile rather than once per subscriber.
        recount: subscribers whose profile must be recomputed from scratch with ``profile``
            (their separation-of-duty bounds changed, or there is no old book).
        profile: a subscriber's profile under ``compiled``.
        decide: the (cached) decision for a profile in the new book.
        reason: recorded on every change.
    """
    out = Rebuilt(book=Book(compiled))
    book, keep = out.book, compiled.cond_ids
    moves = Transitions()
    previous = old if old is not None and not old.dead else None
    groups = list(previous.members.items()) if previous is not None else []
    if previous is None:
        groups.append(((frozenset(), ()), set(recount)))
    for old_key, members in groups:
        matched, instances = old_key
        base = matched if matched <= keep else matched & keep
        before = previous.results[old_key].granted if previous is not None else 0
        stay: abc.Set[str] = members
        recounted = members & recount if recount else set()
        if recounted:
            stay = stay - recounted
        parts: list[tuple[ProfileKey, abc.Set[str]]] = []
        for extra, subscribers in joined.items():
            part = stay & subscribers
            if part:
                stay = stay - part
                parts.append(((base | extra, instances), part))
        if stay:
            key = (base, instances)
            if matched & changed or previous is None:
                after = decide(book, key)
                out.reevaluated += len(stay)
            else:
                after = book.results.setdefault(key, previous.results[old_key])
            _merge(book, key, stay)
            moves.add(before, after.granted, stay)
        moved: dict[ProfileKey, set[str]] = {}
        for subscriber in recounted:
            moved.setdefault(profile(subscriber), set()).add(subscriber)
        for key, subscribers in [*parts, *moved.items()]:
            _merge(book, key, subscribers)
            moves.add(before, decide(book, key).granted, subscribers)
            out.reevaluated += len(subscribers)
    for key, members in book.members.items():
        book.key_of.update(dict.fromkeys(members, key))
    out.changes = moves.changes(compiled.policy.publisher, reason, compiled.bits)
    return out
