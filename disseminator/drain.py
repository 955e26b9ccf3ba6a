"""Graceful shutdown: let connected streams acknowledge what is queued for them, then stop.

On SIGTERM / SIGINT the daemon stops taking new work (new Publish, Subscribe and Link calls
are refused, the uplink is dropped) and calls :func:`drain`: the live streams keep pumping
their queues while it waits until every *connected* destination has acknowledged everything
queued for it, or ``timeout`` passes, or the operator insists (a second signal). A destination
that disconnects meanwhile (or is taken for dead) stops being waited for. Whatever is not
acknowledged stays in the store and is delivered after the next start.

:class:`DrainReport`, :func:`backlog` and :func:`acknowledged_since` are pure; :func:`drain`
polls the node.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from disseminator.node import SiteNode
from disseminator.routing import Destination

__all__ = ["DrainReport", "acknowledged_since", "backlog", "drain"]

Cursors = Mapping[Destination, tuple[int, int]]  # destination -> (assigned, acknowledged)

_POLL_S = 0.05


def backlog(cursors: Cursors) -> dict[Destination, int]:
    """How many deliveries each destination has not acknowledged yet (only those with some)."""
    return {d: assigned - acked for d, (assigned, acked) in cursors.items() if assigned > acked}


def acknowledged_since(before: Cursors, after: Cursors) -> int:
    """How many deliveries were acknowledged between two readings of the same destinations."""
    return sum(max(0, after[d][1] - acked) for d, (_, acked) in before.items() if d in after)


@dataclass(frozen=True, slots=True, kw_only=True)
class DrainReport:
    """What a drain achieved."""

    drained: int  # deliveries acknowledged while draining
    left: Mapping[Destination, int] = field(default_factory=dict)  # connected, unacknowledged
    queued_on_disk: int = 0  # every destination's unacknowledged deliveries, kept for next start
    seconds: float = 0.0

    def describe(self) -> str:
        line = (
            f"drained {self.drained} deliveries in {self.seconds:.1f}s; "
            f"{self.queued_on_disk} stay queued on disk for the next start"
        )
        if self.left:
            waiting = ", ".join(
                f"{d.kind} {d.name} ({n})"
                for d, n in sorted(self.left.items(), key=lambda item: (item[0].kind, item[0].name))
            )
            line += f" (connected but not acknowledged: {waiting})"
        return line


def _cursors(node: SiteNode, destinations: frozenset[Destination]) -> Cursors:
    return {d: node.store.cursor(d.kind, d.name) for d in destinations}


async def drain(
    node: SiteNode,
    *,
    timeout: float,
    interrupted: asyncio.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> DrainReport:
    """Wait until every connected destination acknowledged its queue, or ``timeout`` passed."""
    start = clock()
    before = _cursors(node, node.connected())
    while backlog(_cursors(node, node.connected())) and clock() - start < timeout:
        if interrupted is not None and interrupted.is_set():
            break
        await asyncio.sleep(_POLL_S)
    return DrainReport(
        drained=acknowledged_since(before, _cursors(node, frozenset(before))),
        left=backlog(_cursors(node, node.connected())),
        queued_on_disk=node.store.queued_total(),
        seconds=clock() - start,
    )
