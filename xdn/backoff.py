"""Reconnect backoff: exponential, jittered, and reset once a connection has worked.

Theory of operation. A client that loses its peer waits before it tries again: 0.2 s, then
twice as long after each failed attempt, up to 5 s. Each wait is jittered down by up to half
(so many clients cut off at once do not all come back in the same instant). The base goes
back to the first delay as soon as a connection has *worked* (the peer registered us, or sent
something): a peer that comes back after an outage is reconnected to within a fraction of a
second however many outages came before, while one that keeps refusing is not hammered.

Pure: the caller sleeps, and the randomness is injected (``jitter``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass(slots=True, kw_only=True)
class Backoff:
    """The waits between attempts to reach a peer.

    Args:
        first: the first wait (and the one after a reset), in seconds.
        cap: the longest wait, in seconds.
        jitter: a source of numbers in [0, 1); each wait is ``base * (1 - jitter() / 2)``.
    """

    first: float = 0.2
    cap: float = 5.0
    jitter: Callable[[], float] = random.random
    _base: float = field(init=False)

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.cap:
            raise ValueError(f"backoff needs 0 < first <= cap, not {self.first}, {self.cap}")
        self._base = self.first

    def next(self) -> float:
        """The wait before the next attempt; the one after it doubles (up to ``cap``)."""
        wait = self._base * (1 - self.jitter() / 2)
        self._base = min(self._base * 2, self.cap)
        return wait

    def reset(self) -> None:
        """A connection worked: the next wait is the first one again."""
        self._base = self.first
