"""The key service's own view of membership, kept up to date from the site's changes.

Theory of operation. Before each document the key service asks its root site for membership
(``GetMembership``), naming the version of the site's membership it holds; the site answers
with the entries changed since, and the names of those that are members no more, or with every
member when it cannot tell (see :mod:`disseminator.membership`). :class:`MemberView` applies
the answer: it judges only the entries that came (certificate, lease, policy: the caller's
``judge``), keeps what it judged by name, and keeps the sets documents need ready: who holds
each concept (and a generation number per concept that moves when they change), every
member's public key, who asks for a path refresh, who changed. So, once
membership settles, a document costs the key service O(changes), not O(members).

Nothing is taken on the site's word that the site could not say anyway: every entry that comes
is judged as in a full answer, and a lease or certificate that ends is noticed by this view's
own clock (:meth:`MemberView.current` drops members past the time their judgement holds until,
without being told). The key service starts over (:meth:`MemberView.forget`, then a full
answer) when what it judges by changes: its policy or the CRL in force.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from xdn import crypto
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["Judged", "MemberView"]


class _Member(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def public_key(self) -> crypto.PublicKey: ...
    @property
    def concepts(self) -> frozenset[str]: ...
    @property
    def refresh(self) -> frozenset[str]: ...


M = TypeVar("M", bound=_Member)


@dataclass(frozen=True, slots=True)
class Judged(Generic[M]):
    """A member as judged from its entry, and until when that judgement holds (ms since the
    epoch: its lease's or its certificate's end, whichever comes first)."""

    member: M
    until_ms: int


class MemberView(Generic[M]):
    """The members of one publisher's groups, as last judged, with what documents need."""

    def __init__(self) -> None:
        self.view = 0  # the site membership's version held (0: none, ask for everything)
        self.version = 0
        self._judged: dict[str, Judged[M]] = {}
        self._holders: dict[str, set[str]] = {}
        self._generations: dict[str, int] = {}  # concept → changes of its holders so far
        self._public_keys: dict[str, crypto.PublicKey] = {}
        self._keys_changed: dict[str, crypto.PublicKey | None] = {}  # (None: dropped)
        self._refreshing: set[str] = set()
        self._changed: set[str] = set()
        self._soonest_end = 0  # the earliest until_ms of any member (0: none)

    def request(self, publisher: str) -> pb.MembershipRequest:
        """What to ask the site: what changed since the version held."""
        return pb.MembershipRequest(publisher=publisher, view=self.view, since=self.version)

    def forget(self) -> None:
        """Judge everyone again on the next answer (what judgements rest on changed)."""
        self.view = self.version = 0

    def apply(
        self, reply: pb.Membership, judge: Callable[[pb.Member], Judged[M] | None]
    ) -> None:
        """Take in the site's answer, judging each entry it carries (``None``: not a member).

        A full answer replaces the view; changes replace or drop the members they name.
        """
        if reply.changes_only and reply.view == self.view and self.view:
            gone: Iterable[str] = reply.gone
        else:
            gone = list(self._judged)  # everyone not in the full answer is gone
        entries = {m.subscriber: m for m in reply.members}
        for name in gone:
            if name not in entries:
                self._drop(name)
        for name, entry in entries.items():
            judged = judge(entry)
            if judged is None:
                self._drop(name)
            else:
                self._put(judged)
        self._new_keys()
        self.view, self.version = reply.view, reply.version

    def current(self, now_ms: int) -> Mapping[str, Judged[M]]:
        """Every member whose judgement still holds at ``now_ms`` (the others are dropped)."""
        if self._soonest_end and now_ms > self._soonest_end:
            for name in [n for n, j in self._judged.items() if j.until_ms < now_ms]:
                self._drop(name)
            self._new_keys()
            self._soonest_end = min((j.until_ms for j in self._judged.values()), default=0)
        return self._judged

    def holders(self, concept: str) -> frozenset[str]:
        """The members that must hold ``concept``'s group key."""
        return frozenset(self._holders.get(concept, ()))

    def generation(self, concept: str) -> int:
        """A number that changes whenever :meth:`holders` of ``concept`` does (so a group
        whose holders did not change since it was planned need not be compared again)."""
        return self._generations.get(concept, 0)

    def public_keys(self) -> dict[str, crypto.PublicKey]:
        """Every member's public key; the same mapping until membership changes (then a new
        one: a document being sent keeps the one it was prepared with)."""
        return self._public_keys

    def refreshing(self) -> list[M]:
        """The members that asked for a path refresh."""
        return [self._judged[n].member for n in sorted(self._refreshing)]

    def take_changed(self) -> set[str]:
        """The names of the members added, changed or dropped since the last call."""
        changed, self._changed = self._changed, set()
        return changed

    def _put(self, judged: Judged[M]) -> None:
        member = judged.member
        old = self._judged.get(member.name)
        if old is not None and old.member == member:
            self._judged[member.name] = judged  # (only its end moved)
        else:
            if old is not None:
                self._forget_sets(old.member)
            self._judged[member.name] = judged
            for concept in member.concepts:
                self._holders.setdefault(concept, set()).add(member.name)
                self._generations[concept] = self._generations.get(concept, 0) + 1
            if member.refresh:
                self._refreshing.add(member.name)
            self._keys_changed[member.name] = member.public_key
            self._changed.add(member.name)
        if not self._soonest_end or judged.until_ms < self._soonest_end:
            self._soonest_end = judged.until_ms

    def _drop(self, name: str) -> None:
        old = self._judged.pop(name, None)
        if old is None:
            return
        self._forget_sets(old.member)
        self._keys_changed[name] = None
        self._changed.add(name)

    def _new_keys(self) -> None:
        """A new public-key mapping with the changes since the last (one copy for them all)."""
        if not self._keys_changed:
            return
        keys = dict(self._public_keys)
        for name, key in self._keys_changed.items():
            if key is None:
                keys.pop(name, None)
            else:
                keys[name] = key
        self._public_keys, self._keys_changed = keys, {}

    def _forget_sets(self, member: M) -> None:
        for concept in member.concepts:
            holders = self._holders.get(concept)
            if holders is not None:
                holders.discard(member.name)
                self._generations[concept] = self._generations.get(concept, 0) + 1
        self._refreshing.discard(member.name)
