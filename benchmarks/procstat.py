"""What a running process has used so far, read from ``/proc`` (Linux), and what a command run
to completion used at its peak (:func:`run_measured`, from ``wait4``)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CLK_TCK", "cpu_seconds", "memory_mb", "run_measured"]

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


def run_measured(
    args: Sequence[str], *, cwd: Path, timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``args`` to completion; return it (output as text) and its peak resident memory in
    MB: the kernel's account of that child alone (``wait4``), whatever other children this
    process has waited for.

    Raises:
        subprocess.TimeoutExpired: it ran longer than ``timeout`` seconds (it is killed).
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        child = subprocess.Popen(args, cwd=cwd, stdout=out, stderr=err)
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            child.kill()

        timer = threading.Timer(timeout, kill)
        timer.start()
        try:
            _, status, usage = os.wait4(child.pid, 0)
        finally:
            timer.cancel()
        child.returncode = os.waitstatus_to_exitcode(status)  # (reaped here, not by Popen)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if killed.is_set():
        raise subprocess.TimeoutExpired(list(args), timeout, stdout, stderr)
    done = subprocess.CompletedProcess(list(args), child.returncode, stdout, stderr)
    return done, usage.ru_maxrss / 1024
