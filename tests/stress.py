"""Run the whole test suite several times on a machine kept busy: ``make test-stress``.

A flaky test costs a whole CI run, and flakes show on a loaded machine: a child waits longer
before ``exec``, a stream's status loses a race with a write, a wait meets its deadline. This
starts one CPU-bound load process per core (busy loops at normal priority, so the suite
competes for every core), runs ``pytest`` N times in a row, each in a fresh process, stops the
load however the runs end, and prints ``K/N runs passed``. Each run's output is kept in
``build/stress/run-K.log``.

Usage: ``python tests/stress.py [--runs N] [--load-per-core K] [-- PYTEST ARGS...]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "build" / "stress"
_BUSY_LOOP = "while True: pass"


def _start_load(processes: int) -> list[subprocess.Popen[bytes]]:
    return [
        subprocess.Popen([sys.executable, "-c", _BUSY_LOOP], stdin=subprocess.DEVNULL)
        for _ in range(processes)
    ]


def _stop_load(load: list[subprocess.Popen[bytes]]) -> None:
    for proc in load:
        proc.kill()
    for proc in load:
        proc.wait()


def _summary(log: Path) -> str:
    """pytest's last line ("N passed, M failed in …"), or the log's last line."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip("= ") if lines else "no output"


def _run_suite(number: int, pytest_args: list[str]) -> tuple[bool, float, Path]:
    log = LOGS / f"run-{number}.log"
    started = time.monotonic()
    with open(log, "wb") as out:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False,
        )
    return done.returncode == 0, time.monotonic() - started, log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make test-stress", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=5, help="how many suite runs (default 5)")
    parser.add_argument(
        "--load-per-core", type=int, default=1,
        help="busy-loop processes per core kept running during the runs (default 1)",
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.load_per_core < 0:
        parser.error("--runs must be at least 1 and --load-per-core at least 0")
    LOGS.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    load = _start_load(cores * args.load_per_core)
    print(f"load: {len(load)} busy processes on {cores} cores; {args.runs} runs of the suite",
          flush=True)
    passed = 0
    try:
        for number in range(1, args.runs + 1):
            ok, seconds, log = _run_suite(number, args.pytest_args)
            passed += ok
            verdict = "passed" if ok else f"FAILED (see {log.relative_to(ROOT)})"
            print(f"run {number}/{args.runs}: {verdict} in {seconds:.0f}s: {_summary(log)}",
                  flush=True)
    finally:
        _stop_load(load)
    print(f"{passed}/{args.runs} runs passed", flush=True)
    return 0 if passed == args.runs else 1


if __name__ == "__main__":
    sys.exit(main())
