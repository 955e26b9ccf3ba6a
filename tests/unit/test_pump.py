"""A stream's pump: it sends within its window, waits, and is woken only when it can send."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from disseminator.routing import Destination
from disseminator.store import Append
from tests.unit.eventually import eventually
from tests.unit.site_fixtures import site_node

CAROL = Destination("subscriber", "carol")


def test_an_ack_into_a_full_window_resumes_the_stream_and_others_do_not_wake_it(
    tmp_path: Path,
) -> None:
    node = site_node(tmp_path, "d1", "ProductionProcess", lambda: datetime.now(UTC))
    node.store.commit_routing(
        document=None, appends=[Append(kind="subscriber", name="carol", payload=b"%d" % i)
                                for i in range(3)],
    )

    async def run() -> list[tuple[int, bool]]:
        cursor = node.connect(CAROL, 0, 2)
        pump = node.pump(CAROL, cursor, node.generation(CAROL))
        seen = [((await anext(pump)).sequence, False) for _ in range(2)]
        third = asyncio.ensure_future(anext(pump))  # the window is full: it must wait
        node.on_ack(CAROL, cursor, 1)  # … until this ack makes room
        seen.append(((await asyncio.wait_for(third, 10)).sequence, False))
        fourth = asyncio.ensure_future(anext(pump))
        await eventually(lambda: node.idle(CAROL))  # the pump finds the window full, waits
        node.on_ack(CAROL, cursor, 2)  # room again: the pump is woken …
        woken = not node.idle(CAROL)
        await eventually(lambda: node.idle(CAROL))  # … finds nothing queued, and waits again
        node.on_ack(CAROL, cursor, 3)  # the pump waits for deliveries, not room: not woken
        seen.append((4, woken and node.idle(CAROL)))
        fourth.cancel()
        return seen

    assert asyncio.run(run()) == [(1, False), (2, False), (3, False), (4, True)]
