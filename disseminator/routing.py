"""Routing table and decisions of one disseminator (pure: no sockets, no clock).

Theory of operation (paper §III). A disseminator serves the maximum conceptual block of one
concept: ``served_list(D)`` is that concept and everything it contains. It knows:

* its local subscribers, each with the concepts every publisher's policy grants it;
* its downlinks (disseminators serving contained blocks), each with the members registered
  behind it, which is what the downlink has *requested*.

Subscription: a subscriber is registered when ``auth_list(u) ⊆ served_list(D)``; otherwise it
is sent to the uplink (:class:`Redirect`). Routing: a fragment of (publisher P, concept C) goes
to each local subscriber whose grants from P contain C, and down each link where some member's
grants from P contain C — never twice to the same destination.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "Accept",
    "Destination",
    "NotReady",
    "Redirect",
    "Refuse",
    "Registration",
    "RoutingTable",
    "decide_subscription",
]

Grants = Mapping[str, frozenset[str]]  # publisher → granted concepts


@dataclass(frozen=True, slots=True, kw_only=True)
class Registration:
    """A subscriber and what it may receive, per publisher.

    ``lease`` is the subscriber's signed membership lease (:mod:`xdn.lease`), empty until one
    arrives: a site reports a member upstream only while its lease holds.
    """

    subscriber: str
    certificate: bytes
    grants: Grants
    lease: bytes = b""

    def __post_init__(self) -> None:
        clean = {p: frozenset(c) for p, c in self.grants.items() if c}
        object.__setattr__(self, "grants", MappingProxyType(clean))

    def concepts(self) -> frozenset[str]:
        """Every concept granted by any publisher."""
        return frozenset().union(*self.grants.values()) if self.grants else frozenset()


@dataclass(frozen=True, slots=True)
class Destination:
    """Where a delivery goes: a local subscriber or a downlink site."""

    kind: str  # "subscriber" | "link"
    name: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Accept:
    grants: Grants


@dataclass(frozen=True, slots=True, kw_only=True)
class Redirect:
    uplink: str
    unserved: frozenset[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refuse:
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class NotReady:
    """The site cannot decide yet: it is not a root and does not know its uplink yet (it is
    still looking it up, say after a restart while the uplink was down). The subscriber
    should try again later; nothing about it is final."""

    unserved: frozenset[str]


def decide_subscription(
    grants: Grants,
    *,
    requested: frozenset[str],
    served: frozenset[str],
    uplink: str | None,
    uplink_pending: bool = False,
) -> Accept | Redirect | Refuse | NotReady:
    """Decide a subscription request (paper §III.B).

    Args:
        grants: publisher → concepts the policies grant the credential (``auth_list``).
        requested: concepts the subscriber asked for, already expanded to their blocks;
            empty means everything granted.
        served: ``served_list`` of this disseminator.
        uplink: address of the uplink, if any, to solicit when this site cannot serve.
        uplink_pending: this site has an uplink (it is no root) whose address it does not
            know yet: what it cannot serve is :class:`NotReady`, not refused.
    """
    if requested:
        grants = {p: c & requested for p, c in grants.items()}
    grants = {p: c for p, c in grants.items() if c}
    if not grants:
        return Refuse(reason="no policy grants this credential any of the requested concepts")
    wanted = frozenset().union(*grants.values())
    unserved = wanted - served
    if not unserved:
        return Accept(grants=grants)
    if uplink is not None:
        return Redirect(uplink=uplink, unserved=unserved)
    if uplink_pending:
        return NotReady(unserved=unserved)
    return Refuse(reason=f"concepts {sorted(unserved)} are not served by this network")


@dataclass(slots=True)
class RoutingTable:
    """Local subscribers and downlink interests; mutable state owned by one server."""

    local: dict[str, Registration] = field(default_factory=dict)
    links: dict[str, dict[str, Registration]] = field(default_factory=dict)
    # Per downlink, what its members ask of each publisher, and whom some concepts reach:
    # found once per change of its members, not once per document (thousands of members).
    _wanted: dict[str, dict[str, frozenset[str]]] = field(default_factory=dict)
    _reached: dict[str, dict[tuple[str, frozenset[str]], frozenset[str]]] = field(
        default_factory=dict
    )

    def members(self) -> list[Registration]:
        """Every subscriber registered here or behind a downlink (deduplicated by name)."""
        merged = self.by_name()
        return [merged[name] for name in sorted(merged)]

    def by_name(self) -> dict[str, Registration]:
        """Every subscriber registered here or behind a downlink, by name (local first)."""
        merged: dict[str, Registration] = {}
        for regs in self.links.values():
            merged.update(regs)
        merged.update(self.local)
        return merged

    def member(self, name: str) -> Registration | None:
        """The registration :meth:`by_name` gives ``name``, found without merging them all."""
        if (reg := self.local.get(name)) is not None:
            return reg
        for regs in reversed(self.links.values()):  # the last downlink's wins, as when merged
            if (reg := regs.get(name)) is not None:
                return reg
        return None

    def set_link_members(self, site: str, members: Iterable[Registration]) -> None:
        self.links[site] = {r.subscriber: r for r in members}
        self._wanted.pop(site, None)
        self._reached.pop(site, None)

    def change_link_members(
        self, site: str, added: Iterable[Registration], *, removed: Iterable[str] = ()
    ) -> None:
        """Apply a delta to the members behind ``site``: ``removed`` go, then ``added`` come."""
        regs = self.links.setdefault(site, {})
        for name in removed:
            regs.pop(name, None)
        for reg in added:
            regs[reg.subscriber] = reg
        self._wanted.pop(site, None)
        self._reached.pop(site, None)

    def drop_link(self, site: str) -> None:
        self.links.pop(site, None)
        self._wanted.pop(site, None)
        self._reached.pop(site, None)

    def _link_wants(self, site: str, publisher: str) -> frozenset[str]:
        wanted = self._wanted.setdefault(site, {})
        if publisher not in wanted:
            wanted[publisher] = frozenset().union(
                *(r.grants.get(publisher, frozenset()) for r in self.links[site].values())
            )
        return wanted[publisher]

    def _link_reach(self, site: str, publisher: str, concepts: frozenset[str]) -> frozenset[str]:
        reached = self._reached.setdefault(site, {})
        key = (publisher, concepts)
        if key not in reached:
            if len(reached) >= 64:  # (a few concept sets recur; bounded all the same)
                reached.clear()
            reached[key] = frozenset(
                name for name, r in self.links[site].items()
                if r.grants.get(publisher, frozenset()) & concepts
            )
        return reached[key]

    def plan(
        self, publisher: str, fragments: Sequence[tuple[str, str]]
    ) -> dict[Destination, tuple[str, ...]]:
        """Which fragment ids go where, for ``(fragment_id, concept)`` pairs of one publisher."""
        present = frozenset(concept for _, concept in fragments)
        return {
            destination: _select(fragments, concepts)
            for destination, concepts in self.granted(publisher, present).items()
        }

    def granted(
        self, publisher: str, concepts: frozenset[str]
    ) -> dict[Destination, frozenset[str]]:
        """Which of ``concepts`` (of one publisher) go where: every destination granted some.

        Work grows with destinations and concepts, never with fragments.
        """
        out: dict[Destination, frozenset[str]] = {}
        shared: dict[frozenset[str], frozenset[str]] = {}  # grants → chosen, one set per profile
        for name, reg in self.local.items():
            grants = reg.grants.get(publisher)
            if not grants:
                continue
            chosen = shared.get(grants)
            if chosen is None:
                chosen = shared[grants] = grants & concepts
            if chosen:
                out[Destination("subscriber", name)] = chosen
        for site in self.links:
            wanted = self._link_wants(site, publisher)
            if wanted & concepts:
                out[Destination("link", site)] = wanted & concepts
        return out

    def reach(self, publisher: str, concepts: frozenset[str]) -> int:
        """How many subscribers (here or behind downlinks) some of ``concepts`` would reach."""
        reached: set[str] = set()
        for site, regs in self.links.items():  # a later downlink's entry counts, as merged
            reached.difference_update(regs.keys())
            reached |= self._link_reach(site, publisher, concepts)
        reached.difference_update(self.local.keys())  # and a local one before any
        reached.update(
            name for name, r in self.local.items()
            if r.grants.get(publisher, frozenset()) & concepts
        )
        return len(reached)

    def route_key(self, subscriber: str) -> Destination | None:
        """Where a key message for ``subscriber`` goes, if it is known here."""
        if subscriber in self.local:
            return Destination("subscriber", subscriber)
        for site, regs in sorted(self.links.items()):
            if subscriber in regs:
                return Destination("link", site)
        return None


def _select(fragments: Sequence[tuple[str, str]], concepts: frozenset[str]) -> tuple[str, ...]:
    return tuple(fid for fid, concept in fragments if concept in concepts)
