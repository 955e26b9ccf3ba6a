"""A log line a peer can cause at will is kept to a burst per period, the rest counted."""

from __future__ import annotations

import logging

import pytest

from xdn.logthrottle import ThrottledLog


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_writes_a_burst_per_period_then_says_how_many_were_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = _Clock()
    throttled = ThrottledLog(logging.getLogger("t"), burst=3, period_s=60, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        for i in range(1000):
            throttled.warning("refused peer %d", i)
        clock.now += 60
        throttled.warning("refused peer %d", 1000)
    assert [r.getMessage() for r in caplog.records] == [
        "refused peer 0", "refused peer 1", "refused peer 2",
        "997 more like it were left out in the last 60 s", "refused peer 1000",
    ]


def test_lines_spread_over_time_are_all_written(caplog: pytest.LogCaptureFixture) -> None:
    clock = _Clock()
    throttled = ThrottledLog(logging.getLogger("t"), burst=1, period_s=10, clock=clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        for i in range(5):
            throttled.warning("line %d", i)
            clock.now += 10
    assert [r.getMessage() for r in caplog.records] == [f"line {i}" for i in range(5)]


def test_a_throttle_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="burst"):
        ThrottledLog(logging.getLogger("t"), burst=0)
