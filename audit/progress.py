"""A progress line for long audits: stage, log lines and envelopes read so far, and the rate.

Theory of operation
-------------------
The executors count as they go: the parsing UDF adds each log line it reads to one Spark
accumulator and the describing UDF each envelope graph to another (:mod:`audit.transforms`
takes them as optional counters, so the transforms stay pure). Tasks report their counts to the
driver as they finish. A daemon thread on the driver reads both every ``every_s`` seconds and
prints one line through the job's ``progress`` callback, naming the stage the job announced
last; a run shorter than ``every_s`` prints none. The thread waits on an event, so stopping it
is immediate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol

__all__ = ["Counter", "ProgressLine"]


class Counter(Protocol):
    """What the line reads: a Spark accumulator's ``value`` (or any stand-in)."""

    @property
    def value(self) -> int: ...


class ProgressLine:
    """Prints ``stage: N log lines, M envelopes read (R lines/s, T s)`` every ``every_s``.

    Args:
        say: where the line goes (the job's ``progress`` callback).
        lines / envelopes: the counters the executors add to.
        every_s: seconds between lines (and before the first).
        clock: seconds, monotonic (injectable for tests).
    """

    def __init__(
        self,
        say: Callable[[str], None],
        *,
        lines: Counter,
        envelopes: Counter,
        every_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if every_s <= 0:
            raise ValueError("every_s must be positive")
        self._say, self._lines, self._envelopes = say, lines, envelopes
        self._every, self._clock = every_s, clock
        self._start = clock()
        self._stage = "starting"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="audit-progress", daemon=True)

    def stage(self, name: str) -> None:
        """Name the stage the job is in now."""
        self._stage = name

    def say(self, text: str) -> None:
        """Pass ``text`` to the callback (the job's own lines go where the progress goes)."""
        self._say(text)

    def totals(self) -> str:
        """``N log lines, M envelopes read (R lines/s, T s)`` as of now."""
        elapsed = max(self._clock() - self._start, 1e-9)
        lines, envelopes = self._lines.value, self._envelopes.value
        return (
            f"{lines:,} log lines, {envelopes:,} envelopes read "
            f"({lines / elapsed:,.0f} lines/s, {elapsed:.0f} s)"
        )

    def line(self) -> str:
        """The progress line as of now: the stage, then :meth:`totals`."""
        return f"{self._stage}: {self.totals()}"

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._say(self.line())

    def __enter__(self) -> ProgressLine:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
