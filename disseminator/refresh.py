"""Path refresh requests: members that missed epochs of a group, on their way to its publisher.

A subscriber whose key-tree path fell behind (it missed a rekey) asks its site for a *path
refresh* of that (publisher, concept) group. The site keeps the request and reports it with the
member — to its uplink in the interest it states, and at the root to the publisher's key
service in ``GetMembership`` — until an enrolment for that member and group passes through
(the refresh itself), which clears it. A downlink's requests are replaced with each interest
update it sends (only those of the members a delta lists, see :mod:`disseminator.interest`).
Requests live in memory: a subscriber repeats its open requests on every new
stream, so a restarted site learns them again.

Pure bookkeeping, no I/O; :class:`~disseminator.node.SiteNode` owns one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Group", "RefreshRequests"]

Group = tuple[str, str]  # (publisher, concept)


@dataclass(slots=True)
class RefreshRequests:
    """Open path refresh requests of local subscribers and of members behind each downlink."""

    local: dict[str, set[Group]] = field(default_factory=dict)
    links: dict[str, dict[str, set[Group]]] = field(default_factory=dict)

    def ask(self, subscriber: str, group: Group) -> bool:
        """A local subscriber asks; return whether the request is new."""
        groups = self.local.setdefault(subscriber, set())
        if group in groups:
            return False
        groups.add(group)
        return True

    def set_link(self, site: str, requests: Mapping[str, Iterable[Group]]) -> bool:
        """The requests of the members behind ``site`` now; return whether they changed."""
        fresh = {name: set(groups) for name, groups in requests.items() if groups}
        changed = self.links.get(site, {}) != fresh
        self.links[site] = fresh
        return changed

    def change_link(self, site: str, requests: Mapping[str, Iterable[Group]]) -> bool:
        """The requests of some members behind ``site`` now (none: their requests end; the
        other members' stay); return whether they changed."""
        held = self.links.setdefault(site, {})
        changed = False
        for name, groups in requests.items():
            fresh = set(groups)
            if held.get(name, set()) != fresh:
                changed = True
                if fresh:
                    held[name] = fresh
                else:
                    del held[name]
        return changed

    def drop_link(self, site: str) -> None:
        self.links.pop(site, None)

    def forget(self, subscriber: str) -> None:
        """A local subscriber left."""
        self.local.pop(subscriber, None)

    def served(self, subscriber: str, group: Group) -> bool:
        """An enrolment of ``subscriber`` in ``group`` passed: clear its request, if any."""
        cleared = False
        for requests in (self.local, *self.links.values()):
            groups = requests.get(subscriber)
            if groups is not None and group in groups:
                groups.discard(group)
                cleared = True
        return cleared

    def of(self, subscriber: str) -> set[Group]:
        """Every open request of ``subscriber``, whichever way it came."""
        out = set(self.local.get(subscriber, ()))
        for requests in self.links.values():
            out |= requests.get(subscriber, set())
        return out
