"""A downlink's uplink, re-checked: move when a nearer ancestor appears or the uplink is gone.

Theory of operation. A site with no configured uplink asks the DHT for the site serving the
smallest block strictly containing its own (:meth:`disseminator.dht.DhtNode.find_uplink`).
That answer is only as good as the DHT's view at that moment: right after a restart of the
sites holding the records, the nearest ancestor can be missing and a farther one answers (a
*fallback*: the chosen uplink does not serve a parent of our block, which is logged as such).
So the choice is never final: :func:`watch_uplink` asks again every ``[dht]
uplink_recheck_s`` and whenever our DHT node stores a new or newer record (a site announced
itself: perhaps the nearer ancestor), and returns the uplink to move to as soon as
:func:`disseminator.dht.recheck_uplink` says so — a strictly nearer one, or any when the one in
use is no longer listed and its link is down. The daemon then ends the link and links to it;
the per-uplink resume points (:func:`disseminator.uplink.applied_counter`) keep the two
uplinks' sequence numbers apart. An uplink that hands us over (we moved below one of its
downlinks, :mod:`disseminator.moves`) is not taken again until the DHT names another
(:func:`uplink_other_than`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from disseminator.dht import DhtNode, SiteRecord, is_fallback, recheck_uplink
from xdn import certs
from xdn.errors import XdnError

__all__ = ["LinkState", "describe_choice", "uplink_other_than", "watch_uplink"]

log = logging.getLogger(__name__)

_MIN_GAP_S = 1.0  # at most one re-check a second, however often records change


class LinkState(Protocol):
    """What the watcher reads of the link in use (an :class:`~disseminator.uplink.Uplink`)."""

    @property
    def address(self) -> str: ...

    @property
    def peer(self) -> certs.Credential | None: ...

    @property
    def connected(self) -> asyncio.Event: ...


def describe_choice(block: str, uplink: SiteRecord, dht: DhtNode) -> str:
    """The log line for a chosen uplink; says when it is a fallback (and that it is re-checked)."""
    where = (
        f"uplink found through the DHT: {uplink.site} at {uplink.address} "
        f"(block {uplink.block})"
    )
    if is_fallback(block, uplink.block, dht.ontology):
        parents = ", ".join(sorted(dht.ontology.parents(block)))
        return (
            f"{where} is a FALLBACK: no site serving a parent of {block} ({parents}) is known "
            f"now; re-checked every {dht.config.uplink_recheck_s:g}s and as records change"
        )
    return where


async def _changed_or_due(dht: DhtNode) -> None:
    """Wait until our DHT node stores a new record, or ``uplink_recheck_s`` passed."""
    dht.records_changed.clear()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(dht.config.uplink_recheck_s):
            await dht.records_changed.wait()


async def uplink_other_than(dht: DhtNode, block: str, site: str) -> SiteRecord:
    """The nearest uplink once it is not ``site`` — the uplink that just handed us over to a
    downlink of its own, which our DHT view does not show yet: linking to ``site`` again would
    only be handed over again. Asks again as records change and every ``uplink_recheck_s``."""
    while True:
        try:
            candidates = await dht.uplink_candidates(block)
        except XdnError as exc:
            log.info("uplink lookup failed: %s", exc)
            candidates = []
        if candidates and candidates[0].site != site:
            return candidates[0]
        log.warning(
            "uplink %s handed us over, and the DHT names no other uplink yet: asking again "
            "as records change (at least every %gs)", site, dht.config.uplink_recheck_s,
        )
        await _changed_or_due(dht)
        await asyncio.sleep(min(_MIN_GAP_S, dht.config.uplink_recheck_s))


async def watch_uplink(dht: DhtNode, block: str, link: LinkState) -> SiteRecord:
    """Return the uplink to move to, once there is one (runs until then, or until cancelled)."""
    every = dht.config.uplink_recheck_s
    while True:
        await _changed_or_due(dht)
        try:
            candidates = await dht.uplink_candidates(block)
        except XdnError as exc:
            log.info("uplink re-check failed: %s", exc)
            continue
        current = link.peer.name if link.peer is not None else link.address
        move = recheck_uplink(
            candidates, current=current, connected=link.connected.is_set(), ontology=dht.ontology
        )
        if move is not None:
            return move
        await asyncio.sleep(min(_MIN_GAP_S, every))
