"""Test-only: where a soak's processes grow, by allocation site (``--tracemalloc DIR``).

The soak driver puts this directory first on ``PYTHONPATH`` and sets ``XDN_SOAK_TRACEMALLOC``
to a folder; Python then imports this module at start-up in every process the soak runs.
Each process starts tracing its allocations after ``XDN_SOAK_TRACEMALLOC_START`` seconds
(default 20; tracing its imports and start-up would slow it tenfold), takes a baseline
snapshot after ``XDN_SOAK_TRACEMALLOC_WARMUP`` seconds, then every
``XDN_SOAK_TRACEMALLOC_EVERY`` seconds (default 30) rewrites ``DIR/<pid>.txt`` with its
command line and the allocation sites (grouped by traceback) that grew most since the
baseline. The last rewrite before the process ended is what it leaves. Without the variable
this module does nothing.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from pathlib import Path

_FOLDER = os.environ.get("XDN_SOAK_TRACEMALLOC")
_FRAMES = 8
_TOP = 60  # (the memos alone take a dozen entries)


def _filtered(snapshot: tracemalloc.Snapshot) -> tracemalloc.Snapshot:
    return snapshot.filter_traces(
        (
            tracemalloc.Filter(False, tracemalloc.__file__, all_frames=True),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>", all_frames=True),
            tracemalloc.Filter(False, __file__, all_frames=True),  # this report's own
        )
    )


def _report(out: Path, baseline: tracemalloc.Snapshot, started: float) -> None:
    now = _filtered(tracemalloc.take_snapshot())
    stats = now.compare_to(baseline, "traceback")
    current, _peak = tracemalloc.get_traced_memory()
    lines = [
        " ".join(sys.argv),
        f"elapsed {time.monotonic() - started:.0f} s, traced {current / 1e6:.1f} MB",
        f"growth since baseline: {sum(s.size_diff for s in stats) / 1e6:+.2f} MB",
        "",
    ]
    for stat in stats[:_TOP]:
        lines.append(f"{stat.size_diff / 1e3:+.1f} kB  {stat.count_diff:+d} blocks")
        lines += ["    " + line for line in stat.traceback.format(limit=_FRAMES)]
    tmp = out.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(out)


_STOP = threading.Event()  # never set: the sampler's clock (it ends with the process)


def _watch(folder: Path, start: float, warmup: float, every: float) -> None:
    started = time.monotonic()
    _STOP.wait(start)
    tracemalloc.start(_FRAMES)
    _STOP.wait(max(0.0, warmup - start))
    baseline = _filtered(tracemalloc.take_snapshot())
    out = folder / f"{os.getpid()}.txt"
    while not _STOP.wait(every):
        _report(out, baseline, started)


if _FOLDER:
    _target = Path(_FOLDER)
    _target.mkdir(parents=True, exist_ok=True)
    threading.Thread(
        target=_watch,
        args=(
            _target,
            float(os.environ.get("XDN_SOAK_TRACEMALLOC_START", "20")),
            float(os.environ.get("XDN_SOAK_TRACEMALLOC_WARMUP", "60")),
            float(os.environ.get("XDN_SOAK_TRACEMALLOC_EVERY", "30")),
        ),
        name="soak-tracemalloc",
        daemon=True,
    ).start()
