"""The soak's figures from samples (growth after warm-up, queue bounds) and its HTML page."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from soak_metrics import (
    QUEUE_SLACK,
    ProcessSample,
    QueueSample,
    process_growth,
    queue_bounds,
)
from soak_report import write_report


def _series(
    name: str, pid: int, rss: list[float], *, start: int = 0, fds: int = 20, role: str = "site"
) -> list[ProcessSample]:
    return [
        ProcessSample(t=float(start + i), name=name, role=role, pid=pid, rss_mb=mb, fds=fds)
        for i, mb in enumerate(rss)
    ]


def test_growth_is_judged_after_warm_up_on_whole_run_incarnations() -> None:
    # 0..99 s, warm-up 20 s; start-up growth (before 20 s) does not count.
    flat = _series("d1", 1, [50.0 + i for i in range(20)] + [100.0] * 80)
    leaking = _series(
        "s01", 2, [100.0] * 20 + [100.0 + i * 0.5 for i in range(80)], role="subscriber"
    )
    joined_late = _series("s09", 3, [10.0] * 40, start=50, role="subscriber")
    gone_early = _series("s10", 4, [10.0] * 40, role="subscriber")
    samples = flat + leaking + joined_late + gone_early
    grown, partial = process_growth(samples, warmup_s=20, end_s=99)
    by_name = {g.name: g for g in grown}
    assert set(by_name) == {"d1", "s01"}
    assert partial == 2  # s09 joined, s10 left inside the measured span
    assert by_name["d1"].rss_pct == 0.0
    assert by_name["s01"].rss_pct > 30  # ~+36 % over the span
    assert by_name["s01"].fd_growth == 0
    # Still climbing at the end: 0.5 MB a second over the second half, 1800 MB an hour.
    assert by_name["s01"].rss_late_slope_mb_per_h == pytest.approx(1800)
    assert by_name["d1"].rss_late_slope_mb_per_h == 0.0


def test_descriptor_growth_is_the_median_difference() -> None:
    samples = [
        ProcessSample(t=float(t), name="d2", role="site", pid=7, rss_mb=80.0, fds=20 + t // 10)
        for t in range(100)
    ]
    (grown,), _ = process_growth(samples, warmup_s=10, end_s=99)
    assert grown.fd_growth == 8  # 10-18 s: 21 each; the last tenth: 29


def test_a_queue_that_keeps_growing_is_not_bounded_one_that_swings_is() -> None:
    growing = [QueueSample(t=float(t), site="d1", depth=t * 10) for t in range(100)]
    swinging = [QueueSample(t=float(t), site="d2", depth=(t % 10) * 30) for t in range(100)]
    bounds = {b.site: b for b in queue_bounds(growing + swinging, warmup_s=10, end_s=99)}
    assert not bounds["d1"].bounded
    assert bounds["d1"].peak == 990 and bounds["d1"].last == 990
    assert bounds["d2"].bounded
    assert bounds["d2"].late_peak == bounds["d2"].early_peak == 270
    # A small queue is bounded whatever its shape, up to the slack.
    small = [QueueSample(t=float(t), site="d3", depth=t // 2) for t in range(100)]
    (bound,) = queue_bounds(small, warmup_s=10, end_s=99)
    assert bound.late_peak - bound.early_peak < QUEUE_SLACK and bound.bounded


@pytest.mark.parametrize("warmup", [-1.0, 99.0, 120.0])
def test_a_warm_up_that_does_not_end_before_the_soak_is_refused(warmup: float) -> None:
    with pytest.raises(ValueError, match="warm-up"):
        process_growth([], warmup_s=warmup, end_s=99)
    with pytest.raises(ValueError, match="warm-up"):
        queue_bounds([], warmup_s=warmup, end_s=99)


def test_the_page_holds_every_plot_inline_and_no_script(tmp_path: Path) -> None:
    page = tmp_path / "soak.html"
    processes = _series("d1", 1, [50.0] * 30) + _series("s01", 2, [40.0] * 30, role="subscriber")
    queues = [QueueSample(t=float(t), site="d1", depth=t % 5) for t in range(30)]
    summary = {"soak_seconds": 30, "warmup_s": 5, "soak_rss_growth_pct": math.nan}
    write_report(
        page,
        summary=summary,
        processes=processes,
        queues=queues,
        published={"qa-company": [(float(t), t) for t in range(30)]},
    )
    text = page.read_text()
    assert text.count('src="data:image/png;base64,') == 4
    assert "<script" not in text.lower() and "http" not in text
    assert "soak_rss_growth_pct" in text
