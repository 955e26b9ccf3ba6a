"""Run the benchmark suite: ``python -m benchmarks [--quick] [--only SUBSTRING]``.

Writes ``build/bench/results.json`` (a list of result objects) and prints a table. Results of
modules not run this time are kept from the previous file, so one module can be re-measured
alone.
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

RESULTS = Path("build/bench/results.json")


def main() -> int:
    disable_grpc_fork_handlers()  # before any benchmark loads grpc (Spark forks to start its JVM)
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--only", default="", help="run modules whose name contains this")
    args = parser.parse_args()
    modules = sorted(
        m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_")
    )
    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else []
    results = {r["name"]: r for r in previous}
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
                f"{result.baseline_value:.4g})  {result.goal}",
                flush=True,
            )
        print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(list(results.values()), indent=2) + "\n")
    print(f"results: {RESULTS}")
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
