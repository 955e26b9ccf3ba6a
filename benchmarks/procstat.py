"""What a running process has used so far, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CLK_TCK", "cpu_seconds", "memory_mb"]

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def memory_mb(pid: int, field: str = "VmRSS") -> float:
    """A memory figure of process ``pid`` in MB: ``VmRSS`` (resident now), ``VmHWM`` (its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for process {pid}")
