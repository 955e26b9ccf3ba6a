"""The engine's registry of live subscribers, indexed by credential attribute.

Besides subscriber → credential and instance counts, the registry keeps *postings*:
(scope, field, value) → subscribers, so the subscribers satisfying a condition set new to a
policy are found by looking up the condition's most selective clause rather than by scanning
everyone; (publisher, concept) → subscribers holding instances of it, for changes of
separation-of-duty bounds; and a heap of credential expiry times.
"""

from __future__ import annotations

import heapq
from collections import abc
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from xdn.errors import UsageError
from xdn.policy._model import Condition

if TYPE_CHECKING:
    from xdn.certs import Credential

__all__ = ["Member", "Registry"]


@dataclass(slots=True)
class Member:
    """One live subscriber: its credential and, per publisher, concept → instances received."""

    credential: Credential
    instances: dict[str, dict[str, int]]


def _postings(credential: Credential) -> list[tuple[str, str, str]]:
    keys = {("subject", k, v) for k, values in credential.subject.items() for v in values}
    keys |= {("issuer", k, v) for k, values in credential.issuer.items() for v in values}
    return [*keys, ("role", "", credential.role)]


class Registry:
    """Live subscribers with attribute postings, instance holders and an expiry heap."""

    def __init__(self) -> None:
        self.members: dict[str, Member] = {}
        self._postings: dict[tuple[str, str, str], set[str]] = {}
        self._holders: dict[tuple[str, str], set[str]] = {}
        self._expiry: list[tuple[datetime, str]] = []

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, subscriber: object) -> bool:
        return subscriber in self.members

    def get(self, subscriber: str) -> Member:
        """The member, or :class:`UsageError` when not subscribed."""
        try:
            return self.members[subscriber]
        except KeyError:
            raise UsageError(f"{subscriber!r} is not subscribed") from None

    def add(self, subscriber: str, credential: Credential) -> None:
        self.members[subscriber] = Member(credential=credential, instances={})
        for posting in _postings(credential):
            self._postings.setdefault(posting, set()).add(subscriber)
        heapq.heappush(self._expiry, (credential.not_after, subscriber))

    def remove(self, subscriber: str) -> None:
        member = self.members.pop(subscriber)
        for posting in _postings(member.credential):
            self._postings[posting].discard(subscriber)
        for publisher, counts in member.instances.items():
            for concept in counts:
                self._holders[(publisher, concept)].discard(subscriber)

    def count(self, subscriber: str, publisher: str, concepts: abc.Iterable[str]) -> dict[str, int]:
        """Add one document instance of each of ``concepts``; return the new counts."""
        counts = self.get(subscriber).instances.setdefault(publisher, {})
        for concept in set(concepts):
            counts[concept] = counts.get(concept, 0) + 1
            self._holders.setdefault((publisher, concept), set()).add(subscriber)
        return counts

    def holders(self, publisher: str, concepts: abc.Iterable[str]) -> set[str]:
        """Subscribers that received at least one instance of any of ``concepts``."""
        return set().union(*(self._holders.get((publisher, c), ()) for c in concepts))

    def matching(self, condition: Condition) -> set[str]:
        """Live subscribers whose credential satisfies ``condition``."""
        options: list[set[str]] = []
        for scope, fields in (("subject", condition.subject), ("issuer", condition.issuer)):
            for name, values in fields:
                options.append(
                    set().union(*(self._postings.get((scope, name, v), ()) for v in values))
                )
        if condition.roles:
            options.append(
                set().union(*(self._postings.get(("role", "", r), ()) for r in condition.roles))
            )
        if not options:
            return set(self.members)
        single = len(options) == 1 and all(len(values) >= 1 for _n, values in condition.subject)
        if single:
            return options[0]
        members = self.members
        return {s for s in min(options, key=len) if condition.matches(members[s].credential)}

    def expired(self, at: datetime) -> list[str]:
        """Live subscribers whose credential's validity ended before ``at``."""
        out = []
        while self._expiry and self._expiry[0][0] < at:
            not_after, subscriber = heapq.heappop(self._expiry)
            member = self.members.get(subscriber)
            if member is not None and member.credential.not_after == not_after:
                out.append(subscriber)
        return sorted(out)
