"""What a soak's samples say: memory and descriptor growth after warm-up, queue depth bounds.

Theory of operation
-------------------
The driver samples, every few seconds, each running process's resident memory and open file
descriptors and each site's queued deliveries. Everything here is pure: it takes those samples
and the soak's timeline and computes the figures of the summary.

A process *incarnation* is one (name, pid): a subscriber that leaves and joins again is a new
incarnation. Growth is judged on the incarnations that ran through the whole measured span
(warm-up end → soak end): the sites, the publishers and the subscribers that never left. Their
baseline is the median over the first tenth of the measured span, their end the median over the
last tenth (medians, so one sample taken mid-burst does not decide). Incarnations that came and
went inside the span are counted, not judged: a few minutes of a process is all start-up.

A site's queue is *bounded* when its peak over the second half of the measured span exceeds
its peak over the first half by no more than a quarter plus :data:`QUEUE_SLACK` deliveries:
a queue that grows with time roughly doubles from one half to the next.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "QUEUE_SLACK",
    "RSS_GOAL_PCT",
    "Growth",
    "ProcessSample",
    "QueueBound",
    "QueueSample",
    "process_growth",
    "queue_bounds",
]

RSS_GOAL_PCT = 10.0  # issue #18: less than 10 % resident memory growth after warm-up
QUEUE_SLACK = 50  # deliveries a late peak may exceed an early one by and still be bounded
_WINDOW_FRACTION = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessSample:
    t: float  # seconds since the soak started
    name: str  # d1, s03, publisher:qa-company, …
    role: str  # site, subscriber, publisher
    pid: int
    rss_mb: float
    fds: int


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueSample:
    t: float
    site: str
    depth: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Growth:
    """One incarnation's growth from just after warm-up to the end of the soak."""

    name: str
    role: str
    pid: int
    rss_start_mb: float
    rss_end_mb: float
    fds_start: float
    fds_end: float
    # Least-squares slope of RSS over the second half of the measured span, in MB per hour:
    # whether it still climbs at the end (a short run's growth may be start-up still settling).
    rss_late_slope_mb_per_h: float

    @property
    def rss_pct(self) -> float:
        return 100.0 * (self.rss_end_mb - self.rss_start_mb) / self.rss_start_mb

    @property
    def fd_growth(self) -> float:
        return self.fds_end - self.fds_start


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueBound:
    site: str
    peak: int
    last: int
    early_peak: int
    late_peak: int

    @property
    def bounded(self) -> bool:
        return self.late_peak <= 1.25 * self.early_peak + QUEUE_SLACK


def _check_span(warmup_s: float, end_s: float) -> None:
    if not 0 <= warmup_s < end_s:
        raise ValueError(f"warm-up {warmup_s}s must end before the soak ends ({end_s}s)")


def process_growth(
    samples: Iterable[ProcessSample], *, warmup_s: float, end_s: float
) -> tuple[list[Growth], int]:
    """Growth of every incarnation that ran through ``[warmup_s, end_s]``, and how many
    incarnations did not (left, joined or restarted inside it).

    Raises:
        ValueError: the warm-up does not end before the soak.
    """
    _check_span(warmup_s, end_s)
    window = (end_s - warmup_s) * _WINDOW_FRACTION
    by_incarnation: dict[tuple[str, int], list[ProcessSample]] = {}
    for sample in samples:
        by_incarnation.setdefault((sample.name, sample.pid), []).append(sample)
    grown: list[Growth] = []
    partial = 0
    for (name, pid), series in sorted(by_incarnation.items()):
        first = [s for s in series if warmup_s <= s.t <= warmup_s + window]
        last = [s for s in series if end_s - window <= s.t <= end_s]
        if not first or not last or series[0].t > warmup_s:
            if any(s.t >= warmup_s for s in series):
                partial += 1
            continue
        grown.append(
            Growth(
                name=name,
                role=series[0].role,
                pid=pid,
                rss_start_mb=statistics.median(s.rss_mb for s in first),
                rss_end_mb=statistics.median(s.rss_mb for s in last),
                fds_start=statistics.median(s.fds for s in first),
                fds_end=statistics.median(s.fds for s in last),
                rss_late_slope_mb_per_h=_late_slope(series, (warmup_s + end_s) / 2, end_s),
            )
        )
    return grown, partial


def _late_slope(series: Sequence[ProcessSample], middle: float, end_s: float) -> float:
    late = [s for s in series if middle <= s.t <= end_s]
    if len(late) < 2 or late[0].t == late[-1].t:
        return 0.0
    slope = statistics.linear_regression([s.t for s in late], [s.rss_mb for s in late]).slope
    return slope * 3600


def queue_bounds(
    samples: Sequence[QueueSample], *, warmup_s: float, end_s: float
) -> list[QueueBound]:
    """Each site's queue depth over the measured span: peaks early and late, and the last.

    Raises:
        ValueError: the warm-up does not end before the soak.
    """
    _check_span(warmup_s, end_s)
    middle = (warmup_s + end_s) / 2
    bounds = []
    for site in sorted({s.site for s in samples}):
        series = [s for s in samples if s.site == site and warmup_s <= s.t <= end_s]
        if not series:
            continue
        bounds.append(
            QueueBound(
                site=site,
                peak=max(s.depth for s in series),
                last=series[-1].depth,
                early_peak=max((s.depth for s in series if s.t < middle), default=0),
                late_peak=max((s.depth for s in series if s.t >= middle), default=0),
            )
        )
    return bounds
