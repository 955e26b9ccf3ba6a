"""A site's status for operators: who may see what, and the answer assembled (pure).

Theory of operation. The ``xdn.wire.v1.Admin`` service (:mod:`disseminator.admin_service`)
gathers the site's facts — block, uplink, downlinks, local subscribers with their grants and
queue depths, policy versions in force, DHT neighbours — into a :class:`SiteFacts`, and asks
this module what the caller may see of them. Nothing here reads a socket, the store or a clock.

Who may ask (decided from the certificate the caller presented, already checked against the
network CA and the CRL):

=================================  =====================================================
certificate role                   sees
=================================  =====================================================
``site`` (this one or any other)   everything: ``Status`` and every page of ``Subscribers``
``auditor``, ``admin``             everything, likewise
``publisher``                      ``Status`` limited to its own policy version and how
                                   many subscribers here it grants anything (counts only);
                                   ``Subscribers`` is refused (subscribers' names and grants
                                   are the subscribers' business)
``subscriber``                     its own row of ``Subscribers`` (none if not registered
                                   here); ``Status`` is refused
=================================  =====================================================

A refusal is :class:`AdminRefused` with a message saying what the certificate may do instead;
the servicer maps it to ``PERMISSION_DENIED``. Answers are bounded: ``Status`` carries at most
``limit`` subscriber rows plus the total; ``Subscribers`` is paged by name (``after``,
``limit``), so a site with 10,000 subscribers never builds one unbounded message.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_LIMIT",
    "FULL_ROLES",
    "MAX_LIMIT",
    "AdminRefused",
    "DownlinkRow",
    "Neighbour",
    "Page",
    "SiteFacts",
    "SiteStatusView",
    "SubscriberRow",
    "UplinkState",
    "Viewer",
    "page_of",
    "status_for",
    "subscribers_for",
    "viewer_of",
]

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
FULL_ROLES = frozenset({"site", "auditor", "admin"})

Grants = Mapping[str, frozenset[str]]


class AdminRefused(Exception):
    """The caller's certificate may not see what it asked for (``PERMISSION_DENIED``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Viewer:
    """Who asks: the name and role of the certificate presented, and its member id (the
    name and fingerprint, :mod:`xdn.identity`: a subscriber's row is keyed by it, so a
    namesake's certificate never sees another's row)."""

    name: str
    role: str
    member: str = ""

    @property
    def full(self) -> bool:
        return self.role in FULL_ROLES


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberRow:
    name: str
    grants: Grants
    queue_depth: int
    connected: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DownlinkRow:
    site: str
    block: str
    connected: bool
    members: int
    queue_depth: int
    address: str = ""  # its gRPC address, from its signed DHT record ("": none found)


@dataclass(frozen=True, slots=True, kw_only=True)
class UplinkState:
    address: str  # "": a root site, or not found yet
    connected: bool
    root: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class Neighbour:
    node_id: bytes
    address: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteFacts:
    """What the site knows of itself, gathered by the servicer. Subscriber rows are built
    lazily (``row``: a queue depth costs a store query), only for the names shown."""

    site: str
    block: str
    uplink: UplinkState
    downlinks: tuple[DownlinkRow, ...]
    subscribers: Mapping[str, Grants]  # local subscribers (member ids) → their grants
    row: Callable[[str], SubscriberRow]
    policies: Mapping[str, tuple[int, str]]  # publisher → (version, digest)
    neighbours: tuple[Neighbour, ...]
    queued_total: int
    address: str = ""  # the gRPC address the site announces in its DHT record


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteStatusView:
    """What ``Status`` answers a caller (already cut to what it may see)."""

    site: str
    block: str
    view: str  # "full" | "publisher"
    uplink: UplinkState | None
    downlinks: tuple[DownlinkRow, ...] = ()
    subscribers_total: int = 0
    subscribers: tuple[SubscriberRow, ...] = ()
    policies: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    neighbours: tuple[Neighbour, ...] = ()
    queued_total: int = 0
    address: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Page:
    """One page of ``Subscribers``: rows by name, the total visible, where the next starts."""

    subscribers: tuple[SubscriberRow, ...]
    total: int
    next_after: str  # "": the last page


def viewer_of(name: str, role: str, *, member: str = "") -> Viewer:
    """The viewer a checked certificate makes; refuses roles no admin view is defined for."""
    if role not in FULL_ROLES | {"publisher", "subscriber"}:
        raise AdminRefused(f"certificate {name!r} has role {role!r}: no site status for it")
    return Viewer(name=name, role=role, member=member)


def _limit(limit: int) -> int:
    if limit < 0:
        raise ValueError("limit must not be negative")
    return DEFAULT_LIMIT if limit == 0 else min(limit, MAX_LIMIT)


def page_of(names: Sequence[str], *, after: str, limit: int) -> tuple[list[str], str]:
    """The names of ``names`` (sorted) after ``after``, at most ``limit`` (0: the default,
    capped at :data:`MAX_LIMIT`), and the ``after`` of the next page ("": none)."""
    count = _limit(limit)
    start = bisect.bisect_right(names, after) if after else 0
    chosen = list(names[start:start + count])
    more = start + count < len(names)
    return chosen, (chosen[-1] if more and chosen else "")


def status_for(viewer: Viewer, facts: SiteFacts, *, limit: int = 0) -> SiteStatusView:
    """``Status`` as ``viewer`` may see it.

    Raises:
        AdminRefused: a subscriber asked (it may see only its own row: ``Subscribers``).
    """
    if viewer.role == "subscriber":
        raise AdminRefused(
            f"{viewer.name!r} holds a subscriber certificate: it may see only its own row "
            "(xdn site subscribers), not the status of a site"
        )
    if viewer.role == "publisher":
        mine = {p: v for p, v in facts.policies.items() if p == viewer.name}
        count = sum(1 for grants in facts.subscribers.values() if grants.get(viewer.name))
        return SiteStatusView(
            site=facts.site, block=facts.block, view="publisher", uplink=None,
            subscribers_total=count, policies=mine,
        )
    if not viewer.full:
        raise AdminRefused(f"role {viewer.role!r} may not see a site's status")
    names, _ = page_of(sorted(facts.subscribers), after="", limit=limit)
    return SiteStatusView(
        site=facts.site, block=facts.block, view="full", uplink=facts.uplink,
        downlinks=facts.downlinks, subscribers_total=len(facts.subscribers),
        subscribers=tuple(facts.row(n) for n in names), policies=dict(facts.policies),
        neighbours=facts.neighbours, queued_total=facts.queued_total, address=facts.address,
    )


def subscribers_for(viewer: Viewer, facts: SiteFacts, *, after: str = "", limit: int = 0) -> Page:
    """One page of ``Subscribers`` as ``viewer`` may see it.

    Raises:
        AdminRefused: a publisher asked (it sees counts only, in ``Status``).
    """
    if viewer.role == "publisher":
        raise AdminRefused(
            f"{viewer.name!r} holds a publisher certificate: it may see how many subscribers "
            "it has here (xdn site status), not who they are"
        )
    if viewer.role == "subscriber":
        visible = [viewer.member] if viewer.member in facts.subscribers else []
    elif viewer.full:
        visible = sorted(facts.subscribers)
    else:
        raise AdminRefused(f"role {viewer.role!r} may not list a site's subscribers")
    names, next_after = page_of(visible, after=after, limit=limit)
    return Page(
        subscribers=tuple(facts.row(n) for n in names), total=len(visible),
        next_after=next_after,
    )

