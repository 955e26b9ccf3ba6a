"""What a policy, ontology or state change did to live subscriptions: a :class:`ChangeSet`.

Changes are grouped: one :class:`Change` holds every subscriber who gained and lost exactly
the same concepts of one publisher for the same reason (typically every subscriber of one
profile), so a change touching 100,000 subscribers is a handful of objects. Iterating a
ChangeSet yields one :class:`SubscriberChange` per (subscriber, publisher), which is what the
disseminator acts on: *lost* → leave those concept groups (rekey) and stop delivering them,
unsubscribing the subscriber when nothing is left; *gained* → join those groups (rekey).
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from typing import Literal

__all__ = ["Change", "ChangeSet", "Reason", "SubscriberChange"]

Reason = Literal[
    "subscribe", "unsubscribe", "policy", "ontology", "delivery", "dissemination", "expiry"
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberChange:
    """One subscriber's change under one publisher's policy."""

    subscriber: str
    publisher: str
    gained: abc.Set[str]
    lost: abc.Set[str]
    reason: Reason


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """The same gain and loss for a group of subscribers under one publisher's policy.

    ``gained`` and ``lost`` are read-only sets of concept ids; the engine fills them with
    lazily named bitsets (:class:`~xdn.policy.ConceptSet`), so testing ``concept in lost`` is
    cheap and names are only built when iterated.
    """

    publisher: str
    subscribers: frozenset[str]
    gained: abc.Set[str]
    lost: abc.Set[str]
    reason: Reason

    def __post_init__(self) -> None:
        if self.gained and self.lost and not self.gained.isdisjoint(self.lost):
            raise ValueError("a concept cannot be both gained and lost")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChangeSet:
    """The outcome of one engine operation.

    Attributes:
        changes: grouped changes, in the order they happened.
        reevaluated: live subscriptions whose decision had to be looked up again.
        evaluations: decisions actually computed (cache misses); the rest were shared.
    """

    changes: tuple[Change, ...] = ()
    reevaluated: int = 0
    evaluations: int = 0

    def __bool__(self) -> bool:
        return bool(self.changes)

    def __len__(self) -> int:
        return sum(len(c.subscribers) for c in self.changes)

    def __iter__(self) -> abc.Iterator[SubscriberChange]:
        for change in self.changes:
            for subscriber in sorted(change.subscribers):
                yield SubscriberChange(
                    subscriber=subscriber,
                    publisher=change.publisher,
                    gained=change.gained,
                    lost=change.lost,
                    reason=change.reason,
                )

    def __add__(self, other: ChangeSet) -> ChangeSet:
        return ChangeSet(
            changes=self.changes + other.changes,
            reevaluated=self.reevaluated + other.reevaluated,
            evaluations=self.evaluations + other.evaluations,
        )

    def net(self) -> dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]]:
        """(subscriber, publisher) → net (gained, lost) over all changes, in order."""
        out: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {}
        for change in self.changes:
            for subscriber in change.subscribers:
                key = (subscriber, change.publisher)
                gained, lost = out.get(key, (frozenset(), frozenset()))
                gained, lost = (
                    (gained - change.lost) | (change.gained - lost),
                    (lost - change.gained) | (change.lost - gained),
                )
                if gained or lost:
                    out[key] = (gained, lost)
                else:
                    out.pop(key, None)
        return out

    def lost(self) -> dict[str, dict[str, frozenset[str]]]:
        """subscriber → publisher → concepts lost (net); drives forced unsubscription."""
        out: dict[str, dict[str, frozenset[str]]] = {}
        for (subscriber, publisher), (_gained, lost) in sorted(self.net().items()):
            if lost:
                out.setdefault(subscriber, {})[publisher] = lost
        return out

    def gained(self) -> dict[str, dict[str, frozenset[str]]]:
        """subscriber → publisher → concepts gained (net); drives joins and rekeying."""
        out: dict[str, dict[str, frozenset[str]]] = {}
        for (subscriber, publisher), (gained, _lost) in sorted(self.net().items()):
            if gained:
                out.setdefault(subscriber, {})[publisher] = gained
        return out
