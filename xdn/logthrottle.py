"""A log line that a peer can cause at will, kept to a few per minute.

A flood of refused calls (bad certificates, say) would otherwise write one line per call, and
a site's log would grow as fast as the flood: ~17 MB in three minutes, measured. The first
``burst`` lines of each period are written; the rest are counted, and the first line of the next
period says how many were left out. Counting the refusals is the metrics' job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["ThrottledLog"]


class ThrottledLog:
    """At most ``burst`` lines per ``period_s`` seconds through ``logger``; the rest counted.

    Args:
        logger: where the lines go.
        burst: lines written per period.
        period_s: the period.
        clock: seconds, monotonic (a test's fake).
    """

    def __init__(
        self,
        logger: logging.Logger,
        *,
        burst: int = 10,
        period_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if burst < 1 or period_s <= 0:
            raise ValueError("burst must be at least 1 and period_s positive")
        self._logger, self._burst, self._period_s, self._clock = logger, burst, period_s, clock
        self._started = float("-inf")
        self._written = 0
        self._left_out = 0

    def log(self, level: int, message: str, *args: object) -> None:
        """Write ``message % args`` at ``level`` if this period has room; else count it."""
        now = self._clock()
        if now - self._started >= self._period_s:
            self._started, self._written = now, 0
            if self._left_out:
                self._logger.log(
                    level, "%d more like it were left out in the last %.0f s",
                    self._left_out, self._period_s,
                )
                self._left_out = 0
        if self._written >= self._burst:
            self._left_out += 1
            return
        self._written += 1
        self._logger.log(level, message, *args)

    def warning(self, message: str, *args: object) -> None:
        self.log(logging.WARNING, message, *args)
