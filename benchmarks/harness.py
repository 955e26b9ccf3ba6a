"""Shared pieces of the benchmark suite.

Every benchmark module ``benchmarks/bench_*.py`` defines ``run(quick: bool) -> list[Result]``.
A :class:`Result` is one figure *and* the baseline it is compared with, measured in the same
run on the same machine (the machine is shared and noisy, so absolute numbers mean little).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Result", "best_of", "ratio_result"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """One benchmark figure, written to ``build/bench/results.json``."""

    name: str
    value: float
    unit: str
    baseline: str
    baseline_value: float
    ratio: float
    goal: str = ""
    note: str = ""
    # The ratio of each repetition when the figure is their median (the spread).
    repetitions: tuple[float, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def best_of(fn: Callable[[], object], *, repeat: int = 5, min_time: float = 0.05) -> float:
    """Seconds per call: the best of ``repeat`` rounds, each long enough to time reliably."""
    fn()  # warm up
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        if time.perf_counter() - start >= min_time or calls >= 1 << 20:
            break
        calls *= 2
    best = float("inf")
    gc.disable()
    try:
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best = min(best, (time.perf_counter() - start) / calls)
    finally:
        gc.enable()
    return best


def ratio_result(
    *, name: str, value: float, unit: str, baseline: str, baseline_value: float,
    goal: str = "", note: str = "",
) -> Result:
    """A result whose ratio is ``value / baseline_value``."""
    ratio = value / baseline_value if baseline_value else float("inf")
    return Result(
        name=name, value=value, unit=unit, baseline=baseline, baseline_value=baseline_value,
        ratio=ratio, goal=goal, note=note,
    )
