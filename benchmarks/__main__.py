"""Run the benchmark suite: ``python -m benchmarks [--quick] [--only SUBSTRING]``.

Writes the figures of this run only (a list of result objects; never merged with an older
run's) and prints a table: a whole run writes ``build/bench/results.json``, a ``--quick`` run
``results-quick.json``, an ``--only`` run ``results-only-SUBSTRING.json`` (``results-quick-only-…``
for both), so every file holds the figures of one run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
import time
import traceback
from pathlib import Path

import benchmarks
from xdn.grpc_fork import disable_grpc_fork_handlers

RESULTS_DIR = Path("build/bench")


def results_path(*, quick: bool, only: str) -> Path:
    """Where a run writes its figures: one file per kind of run, each from one run."""
    name = "results" + ("-quick" if quick else "") + (f"-only-{only}" if only else "")
    return RESULTS_DIR / f"{name}.json"


def main() -> int:
    disable_grpc_fork_handlers()  # before any benchmark loads grpc (Spark forks to start its JVM)
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--only", default="", help="run modules whose name contains this")
    args = parser.parse_args()
    modules = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    path = results_path(quick=args.quick, only=args.only)
    path.unlink(missing_ok=True)  # (a run that fails early leaves no older figures behind)
    results: dict[str, dict[str, object]] = {}
    failed: list[str] = []
    for name in modules:
        if args.only not in name:
            continue
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        try:
            module = importlib.import_module(f"benchmarks.{name}")
            produced = module.run(quick=args.quick)
        except Exception:  # one broken benchmark must not lose the others' figures
            traceback.print_exc()
            failed.append(name)
            continue
        for result in produced:
            results[result.name] = result.as_json()
            print(
                f"   {result.name:<40} {result.value:>12.4g} {result.unit:<10} "
                f"ratio {result.ratio:>8.3f}  (baseline {result.baseline}: "
                f"{result.baseline_value:.4g})  {result.goal}"
                + (f"  repetitions {_spread(result.repetitions)}" if result.repetitions else ""),
                flush=True,
            )
        print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(list(results.values()), indent=2) + "\n")
    print(f"results: {path}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _spread(ratios: tuple[float, ...]) -> str:
    return ", ".join(f"{r:.3g}" for r in ratios)


if __name__ == "__main__":
    sys.exit(main())
