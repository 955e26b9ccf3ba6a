"""Print ``build/bench/results.json`` as a Markdown table (for BENCHMARKS.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _spread(result: dict[str, object]) -> str:
    """The ratios of the repetitions a median comes from, if any."""
    ratios = result.get("repetitions") or []
    return f" ({', '.join(_fmt(float(r)) for r in ratios)})" if ratios else ""  # type: ignore[attr-defined]


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "build/bench/results.json")
    results = json.loads(path.read_text())
    print("| name | value | unit | baseline | baseline value | ratio | goal |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(
            f"| `{r['name']}` | {_fmt(r['value'])} | {r['unit']} | {r['baseline']} | "
            f"{_fmt(r['baseline_value'])} | **{_fmt(r['ratio'])}**{_spread(r)} | "
            f"{r.get('goal', '')} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
