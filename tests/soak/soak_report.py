"""The soak's HTML page: resident memory, open descriptors, queue depths and documents published
over time, as inline PNG plots (matplotlib, no JavaScript), above the summary's figures."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no display

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from soak_metrics import ProcessSample, QueueSample

__all__ = ["write_report"]

_ROLES = ("site", "publisher", "subscriber")


def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _process_plot(samples: Sequence[ProcessSample], value: str, label: str, warmup_s: float) -> str:
    """One panel per role (sites, publishers, subscribers), one line per incarnation."""
    roles = [r for r in _ROLES if any(s.role == r for s in samples)]
    figure, panels = plt.subplots(
        len(roles), 1, figsize=(11, 2.6 * len(roles)), sharex=True, squeeze=False
    )
    for role, axes in zip(roles, panels[:, 0], strict=True):
        by_incarnation: dict[tuple[str, int], list[ProcessSample]] = {}
        for sample in samples:
            if sample.role == role:
                by_incarnation.setdefault((sample.name, sample.pid), []).append(sample)
        colours: dict[str, str] = {}
        for (name, _pid), series in sorted(by_incarnation.items()):
            line = axes.plot(
                [s.t / 60 for s in series],
                [getattr(s, value) for s in series],
                linewidth=1.1,
                color=colours.get(name),
                label=None if name in colours else name,
            )
            colours.setdefault(name, line[0].get_color())
        axes.axvline(warmup_s / 60, color="grey", linewidth=0.8)
        axes.set_ylabel(f"{role}s: {label}")
        axes.legend(fontsize=7, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5))
    panels[-1, 0].set_xlabel("minutes (grey line: end of warm-up)")
    return _png(figure)


def _queue_plot(samples: Sequence[QueueSample], warmup_s: float) -> str:
    figure, axes = plt.subplots(figsize=(11, 3.5))
    for site in sorted({s.site for s in samples}):
        series = [s for s in samples if s.site == site]
        axes.plot([s.t / 60 for s in series], [s.depth for s in series], label=site)
    axes.axvline(warmup_s / 60, color="grey", linewidth=0.8)
    axes.set_xlabel("minutes")
    axes.set_ylabel("queued deliveries")
    axes.legend(fontsize=8)
    return _png(figure)


def _published_plot(published: Mapping[str, Sequence[tuple[float, int]]]) -> str:
    figure, axes = plt.subplots(figsize=(11, 3.0))
    for publisher, points in sorted(published.items()):
        axes.plot([t / 60 for t, _ in points], [n for _, n in points], label=publisher)
    axes.set_xlabel("minutes")
    axes.set_ylabel("documents published")
    axes.legend(fontsize=8)
    return _png(figure)


def write_report(
    path: Path,
    *,
    summary: Mapping[str, object],
    processes: Sequence[ProcessSample],
    queues: Sequence[QueueSample],
    published: Mapping[str, Sequence[tuple[float, int]]],
) -> None:
    """Write the page to ``path``: the plots, then the summary as a table."""
    warmup_s = float(str(summary["warmup_s"]))
    plots = [
        (
            "Resident memory (RSS) of every process",
            _process_plot(processes, "rss_mb", "MB", warmup_s),
        ),
        (
            "Open file descriptors of every process",
            _process_plot(processes, "fds", "descriptors", warmup_s),
        ),
        ("Queued deliveries at each site (xdn_queued_deliveries)", _queue_plot(queues, warmup_s)),
        ("Documents published", _published_plot(published)),
    ]
    rows = "\n".join(
        f"<tr><th>{html.escape(key)}</th><td><code>{html.escape(json.dumps(value))}</code></td>"
        "</tr>"
        for key, value in summary.items()
    )
    figures = "\n".join(
        f'<h2>{html.escape(title)}</h2>\n<img alt="{html.escape(title)}" '
        f'src="data:image/png;base64,{png}">'
        for title, png in plots
    )
    path.write_text(
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        "<title>xdn soak</title><style>body{font-family:sans-serif;margin:2em}"
        "td,th{text-align:left;padding:2px 8px;vertical-align:top}"
        "code{white-space:pre-wrap}</style></head><body>\n"
        f"<h1>xdn soak: {html.escape(str(summary.get('soak_seconds')))} s</h1>\n"
        f"{figures}\n<h2>Summary</h2>\n<table>\n{rows}\n</table>\n</body></html>\n"
    )
