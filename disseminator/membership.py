"""Numbered membership changes, so that a key service asks only for what changed.

Theory of operation. A publisher's key service asks its root site for the membership before
every document (``GetMembership``). Sending every member each time costs the site, the wire and
the key service O(members) per document, whatever changed. Instead the site numbers its
membership: :class:`MembershipJournal` keeps a *view* id (random, new with every process, so a
restarted site is never mistaken for the one before) and a *version* that grows with every
change, and remembers which members changed at which version (the last :data:`KEEP` changes).
A key service that holds version ``v`` of view ``w`` asks for what changed since; the site
answers with the current entry of every member changed since ``v`` (or names it as gone), or
with everything when it cannot (another view, a version it no longer remembers, or none).

The site marks the journal stale at every membership change (:meth:`MembershipJournal.touch`,
from the same signal that sends interest upstream) and the journal finds what changed when it
is next asked (:meth:`MembershipJournal.settle`): one pass over the members then, none while
nothing changes. A member is compared by its registration (immutable, replaced on change: the
same object, or an equal one) and by its open path refresh requests. Time alone changes
nothing here: a lease that lapses is the key service's to notice (it checks every lease's
expiry itself, see :mod:`publisher.membership`).
"""

from __future__ import annotations

import secrets
from collections import deque
from collections.abc import Callable, Hashable, Mapping

__all__ = ["KEEP", "MembershipJournal"]

#: How many member changes the journal remembers (older versions get everything).
KEEP = 262_144


class MembershipJournal:
    """Which members changed at which version of one site's membership."""

    def __init__(self, *, keep: int = KEEP) -> None:
        self.view = secrets.randbits(63) or 1  # (0 means "none" on the wire)
        self.version = 0
        self._keep = keep
        self._tokens: dict[str, tuple[object, Hashable]] = {}
        self._changes: deque[tuple[int, str]] = deque()
        self._forgotten = 0  # the newest version of a change no longer remembered
        self._stale = True

    def touch(self) -> None:
        """Membership may have changed: look at it when next asked."""
        self._stale = True

    def settle(self, current: Callable[[], Mapping[str, tuple[object, Hashable]]]) -> None:
        """Record the members that changed since the last look, under a new version.

        Args:
            current: called only if something may have changed: every member now, by id: (its
                registration, its other state that counts, such as open refresh requests). A
                member is unchanged while its registration is the same object or an equal one
                (a downlink's members are checked and made anew at each of its updates) and
                the rest compares equal.
        """
        if not self._stale:
            return
        self._stale = False
        members = current()
        changed = [
            name for name, (reg, rest) in members.items()
            if (known := self._tokens.get(name)) is None
            or (known[0] is not reg and known[0] != reg) or known[1] != rest
        ]
        changed += [name for name in self._tokens if name not in members]
        if not changed:
            return
        self.version += 1
        for name in changed:
            self._changes.append((self.version, name))
        while len(self._changes) > self._keep:
            self._forgotten = self._changes.popleft()[0]
        self._tokens = dict(members)

    def since(self, view: int, version: int) -> set[str] | None:
        """The members changed after ``version`` of ``view``; ``None`` if the journal cannot
        tell (another view, no version, or one older than what it remembers): send all."""
        if view != self.view or not self._forgotten <= version <= self.version or version == 0:
            return None
        changed = set()
        for at, name in reversed(self._changes):  # newest first: only the changes asked for
            if at <= version:
                break
            changed.add(name)
        return changed
