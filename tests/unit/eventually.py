"""Waiting on a loop's observable state with a deadline, instead of counting loop turns."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

POLL_S = 0.001


async def eventually(condition: Callable[[], bool], *, timeout: float = 10.0) -> None:
    """Return once ``condition()`` holds (checked every :data:`POLL_S` seconds).

    Raises:
        TimeoutError: it did not hold within ``timeout`` seconds.
    """

    async def poll() -> None:
        while not condition():
            await asyncio.sleep(POLL_S)

    await asyncio.wait_for(poll(), timeout)
