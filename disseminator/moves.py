"""A downlink that moved below another downlink: hand it over (pure; the node acts).

Theory of operation. A site S that linked to this site directly (as a fallback, say) and then
moves to a nearer uplink V — itself a downlink of this site, or below one — brings its members
along: V (or the downlink above it) now relays them, each with the member's own signed lease,
which names S. From that moment this site routes those members' deliveries through V, and S's
direct claim on them is stale:

* :func:`moved_below` — the direct downlinks whose members downlink ``via`` now relays (a
  lease naming S, relayed by ``via`` ≠ S, for a member S's link holds): the node removes them
  from S, so nothing new is queued for S, and once S has acknowledged everything it was sent,
  ends S's link with :data:`HANDED_OVER` and frees it. Nothing acknowledged is lost: the
  deliveries queued for S before the move still reach S, before S reads anything from V (see
  :mod:`disseminator.discovery`).
* :func:`claimed_elsewhere` — what a direct downlink S still claims (a whole set when it
  reconnects, a delta) that another, connected downlink relays under a lease naming S:
  ignored. (A relay by a downlink that is down is no claim: S may have left it while it was
  down, and linked here directly. Both then hold the member until that downlink states its
  members again — the last to state them wins.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from disseminator.routing import Registration
from xdn import lease
from xdn.errors import ProtocolError

__all__ = ["HANDED_OVER", "claimed_elsewhere", "lease_site", "moved_below"]

HANDED_OVER = "its members moved below"  # how the link's end says so (the downlink reads it)

Links = Mapping[str, Mapping[str, Registration]]


def lease_site(registration: Registration) -> str | None:
    """The site the member's lease names (``None``: no readable lease)."""
    if not registration.lease:
        return None
    try:
        return lease.SignedLease.from_bytes(registration.lease).lease.site
    except ProtocolError:
        return None


def moved_below(links: Links, via: str, members: Iterable[Registration]) -> dict[str, set[str]]:
    """Direct downlink → the names of its members that downlink ``via`` now relays."""
    moved: dict[str, set[str]] = {}
    for member in members:
        site = lease_site(member)
        if site is None or site == via:
            continue
        if member.subscriber in links.get(site, {}):
            moved.setdefault(site, set()).add(member.subscriber)
    return moved


def claimed_elsewhere(
    links: Links, site: str, members: Iterable[Registration], *, connected: Iterable[str]
) -> set[str]:
    """The names among what downlink ``site`` claims that another, ``connected`` downlink
    relays under a lease naming ``site`` (``site`` moved below it). A relay by a downlink that
    is not connected is no claim: it may be the old one (``site`` left it while it was down)."""
    live = set(connected)
    relayed = {
        name
        for via, regs in links.items() if via != site and via in live
        for name, reg in regs.items() if lease_site(reg) == site
    }
    return {m.subscriber for m in members if m.subscriber in relayed}
