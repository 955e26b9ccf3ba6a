"""The peak resident memory of a process and all its descendants, sampled from ``/proc``.

A Spark job is a tree of processes (the driver's Python, its JVM, the Python workers the JVM
forks); the kernel keeps a peak per process only, and the peaks of different processes fall at
different times, so their sum overstates the tree's peak. :class:`PeakSampler` reads every
process of the tree every few hundred milliseconds and keeps the largest sum seen.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["PeakSampler", "tree_rss_mb"]

_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def _children() -> dict[int, list[int]]:
    """Parent pid → child pids, for every process now running."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def tree_rss_mb(pid: int) -> float:
    """Resident memory (MB) of ``pid`` and its descendants now (0 for processes gone)."""
    tree, total, todo = _children(), 0.0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(tree.get(current, ()))
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * _PAGE_MB
        except OSError:
            continue
    return total


class PeakSampler:
    """Samples :func:`tree_rss_mb` of ``pid`` every ``every_s`` seconds while in its block;
    ``peak_mb`` is the largest sum seen."""

    def __init__(self, pid: int, *, every_s: float) -> None:
        self._pid, self._every = pid, every_s
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        while True:
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self._pid))
            if self._stop.wait(self._every):
                return

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
