"""The fuzz campaign (``make fuzz``): each target under atheris (libFuzzer) for a budget.

Usage::

    python tests/fuzz/fuzz_driver.py [--budget N] [--jobs J] [--targets a,b] [--timeout S]
                                     [--rss-mb M]

Each target runs in its own worker process (``--worker NAME``), coverage-guided by atheris,
for ``--budget`` executions (``FUZZ_RUNS``, default one million), ``--jobs`` targets at a time
(``FUZZ_JOBS``, default one), starting from the committed seeds (``corpus/NAME``), the same
made afresh under the run's PKI (``build/fuzz/pki``, shared with the workers) and past findings
(``regressions/NAME``); what it learns goes to ``build/fuzz/NAME/corpus``, never to the
repository. libFuzzer enforces the per-input time limit
(``-timeout``) and the RSS limit (``-rss_limit_mb``). A finding — an exception the target does
not allow, a hang, a blow-up — stops the worker and leaves its input in
``build/fuzz/NAME/findings/``; the driver counts it and resumes with the rest of the budget (at
most :data:`MAX_FINDINGS` times a target). Per target it prints executions, time, executions per
second and per CPU-second of fuzzing (the workers' own CPU past their setup: the rate that
holds on a shared machine) and findings, and writes them to ``build/fuzz/summary.json`` as each
target ends; it exits non-zero when anything was found.

A finding becomes a regression: copy its input to ``regressions/NAME/`` (replayed by
``make test``), write a unit test, fix the parser.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path[:0] = [str(ROOT), str(HERE)]

DEFAULT_BUDGET = 1_000_000
MAX_FINDINGS = 5
# What coverage is measured in: our packages, and the pure-Python parsers they call.
INSTRUMENTED = ("xdn", "disseminator", "deploy", "tomllib", "fuzz_targets", "fuzz_grpc")
_DONE = re.compile(r"Done (\d+) runs in (\d+) second")
_STATUS = re.compile(r"^#(\d+)\s", re.MULTILINE)
# libFuzzer dictionaries (dicts/NAME.dict): tokens of each input's syntax, so that mutations
# build structure (a TOML table, an XML declaration) instead of waiting for it byte by byte.
DICTIONARIES = {
    "site_toml": ("toml", "site_toml"),
    "topology_toml": ("toml", "topology_toml"),
    "policy_toml": ("toml", "policy_toml"),
    "mapping_toml": ("toml", "mapping_toml"),
    "xml_document": ("xml",),
    "xml_publish": ("xml",),
    "xml_export": ("xml",),
    "nquads": ("nquads",),
    "provenance": ("nquads",),
    "notification": ("nquads",),
}
_VERDICT = re.compile(r"ERROR: libFuzzer: ([a-z-]+(?: after \d+ seconds)?)")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')
_STAT_RUNS = re.compile(r"stat::number_of_executed_units: (\d+)")
_SETUP_MARK = "xdn-fuzz setup cpu-s: "
_SETUP = re.compile(re.escape(_SETUP_MARK) + r"([0-9.]+)")


def _worker(name: str, libfuzzer_args: list[str]) -> None:
    """Run one target under atheris (in this process; libFuzzer owns it from here)."""
    import atheris

    logging.disable(logging.CRITICAL)  # refusals are logged by the site: not news here
    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        from fuzz_targets import load_all

        fuzz_target = load_all()[name]
        fuzz_target.setup()
        for folder in libfuzzer_args:  # each seed once: imports (instrumented) what it reaches
            if os.path.isdir(folder):
                for seed in sorted(Path(folder).iterdir()):
                    with contextlib.suppress(fuzz_target.expected):
                        fuzz_target.run(seed.read_bytes())
    expected, run = fuzz_target.expected, fuzz_target.run

    def one_input(data: bytes) -> None:
        with contextlib.suppress(expected):
            run(data)

    atheris.Setup([sys.argv[0], *libfuzzer_args], one_input)
    # What the fuzzing proper is measured against (the driver subtracts it from the worker's CPU).
    print(f"{_SETUP_MARK}{time.process_time():.3f}", flush=True)
    atheris.Fuzz()


def _executed(log: str) -> int:
    for pattern in (_STAT_RUNS, _DONE):
        found = pattern.findall(log)
        if found:
            value = found[-1]
            return int(value[0] if isinstance(value, tuple) else value)
    status = _STATUS.findall(log)
    return int(status[-1]) if status else 0


def _signature(log: str) -> str:
    """What a worker found, in one line: the escaped exception and where it was raised, or
    libFuzzer's verdict (timeout, out-of-memory)."""
    lines = [line.strip() for line in log.splitlines()]
    if "=== Uncaught Python exception: ===" in lines:
        start = lines.index("=== Uncaught Python exception: ===")
        error = lines[start + 1].split(":", 1)[0] if start + 1 < len(lines) else "?"
        frames = [m.groups() for m in map(_FRAME.match, lines[start:]) if m is not None]
        ours = [f for f in frames if f[0].startswith(str(ROOT)) and "/tests/fuzz/" not in f[0]]
        path, line, function = (ours or frames or [("?", "?", "?")])[-1]
        path = path.removeprefix(str(ROOT) + "/")
        return f"{error} at {path}:{line} in {function}"
    verdict = _VERDICT.search(log)
    return verdict.group(1) if verdict else "worker failed without a verdict"


def _max_len(*folders: Path) -> int:
    sizes = [p.stat().st_size for f in folders if f.is_dir() for p in f.iterdir()]
    return max(4096, 2 * max(sizes, default=0))


def _run_worker(command: list[str], log_file: IO[bytes]) -> tuple[int, float]:
    """Run one worker to its end: its exit code and the CPU seconds it used (user + system,
    its own: other workers running beside it are not counted)."""
    worker = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(worker.pid, 0)
    worker.returncode = os.waitstatus_to_exitcode(status)
    return worker.returncode, usage.ru_utime + usage.ru_stime


def _campaign(name: str, args: argparse.Namespace) -> dict[str, Any]:
    out = args.out / name
    corpus, findings = out / "corpus", out / "findings"
    corpus.mkdir(parents=True, exist_ok=True)
    findings.mkdir(parents=True, exist_ok=True)
    seeds, regressions = HERE / "corpus" / name, HERE / "regressions" / name
    from fuzz_seeds import all_seeds  # signed under this run's PKI, unlike the committed ones

    for seed_name, data in all_seeds().get(name, {}).items():
        (corpus / f"fresh-{seed_name}").write_bytes(data)
    folders = [str(corpus), str(seeds)] + ([str(regressions)] if regressions.is_dir() else [])
    remaining, executed, found, started = args.budget, 0, [], time.monotonic()
    fuzz_cpu = 0.0  # CPU seconds of the workers past their setup: the rate on a shared machine
    signatures: set[str] = set()
    repeats = 0
    log_path = out / "log.txt"
    dictionary = []
    if name in DICTIONARIES:
        (out / "dict").write_text(
            "".join((HERE / "dicts" / f"{part}.dict").read_text() for part in DICTIONARIES[name])
        )
        dictionary = [f"-dict={out / 'dict'}"]
    log_path.write_bytes(b"")
    with log_path.open("ab") as log_file:  # the workers write to it as they go (tail -f)
        while remaining > 0 and len(found) < MAX_FINDINGS:
            before = set(findings.iterdir())
            command = [
                sys.executable,
                str(Path(__file__)),
                "--worker",
                name,
                "--",
                f"-runs={remaining}",
                f"-timeout={args.timeout}",
                f"-rss_limit_mb={args.rss_mb}",
                f"-max_len={_max_len(seeds, regressions)}",
                f"-artifact_prefix={findings}/",
                "-print_final_stats=1",
                f"-seed={args.seed}",
                *dictionary,
                *folders,
            ]
            start = log_path.stat().st_size
            returncode, cpu = _run_worker(command, log_file)
            with log_path.open("rb") as written:
                written.seek(start)
                output = written.read().decode("utf-8", "replace")
            setup = _SETUP.search(output)
            fuzz_cpu += max(0.0, cpu - (float(setup.group(1)) if setup else 0.0))
            ran = _executed(output)
            executed += ran
            remaining -= ran
            if returncode == 0:
                break
            signature = _signature(output)
            new = sorted(set(findings.iterdir()) - before)
            if signature in signatures:
                repeats += 1  # the same bug again: fuzzing on would find only it
                if repeats >= 2:
                    break
            else:
                signatures.add(signature)
                where = str(new[0].relative_to(ROOT)) if new else f"see {log_path}"
                found.append(f"{signature} ({where})")
            if ran == 0:
                break  # it fails before fuzzing: nothing more to learn by retrying
    seconds = time.monotonic() - started
    return {
        "executions": executed,
        "seconds": round(seconds, 1),
        "executions_per_second": round(executed / seconds) if seconds else 0,
        "fuzz_cpu_seconds": round(fuzz_cpu, 1),
        "executions_per_cpu_second": round(executed / fuzz_cpu) if fuzz_cpu else 0,
        "findings": len(found),
        "finding_inputs": found,
        "corpus_entries": sum(1 for _ in corpus.iterdir()),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        _worker(argv[1], argv[3:])  # --worker NAME -- libFuzzer arguments
        return 0
    from fuzz_targets import PKI_ENV, SCRATCH_ENV

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--budget",
        type=int,
        default=int(os.environ.get("FUZZ_RUNS", DEFAULT_BUDGET)),
        help="executions per target in total (env FUZZ_RUNS; default 1,000,000)",
    )
    parser.add_argument(
        "--targets",
        default=os.environ.get("FUZZ_TARGETS", ""),
        help="comma-separated targets (default: all)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=int(os.environ.get("FUZZ_JOBS", 1)),
        help="targets fuzzed at once, one worker process each (env FUZZ_JOBS; default 1)",
    )
    parser.add_argument("--timeout", type=int, default=10, help="seconds per input")
    parser.add_argument("--rss-mb", type=int, default=2048, help="RSS limit of a worker")
    parser.add_argument("--seed", type=int, default=1, help="libFuzzer's random seed")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "fuzz")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()
    os.environ.setdefault(PKI_ENV, str(args.out / "pki"))  # one PKI for the run and its workers
    shm = Path("/dev/shm")
    scratch = tempfile.mkdtemp(prefix="xdn-fuzz-run-", dir=shm if shm.is_dir() else None)
    os.environ[SCRATCH_ENV] = scratch
    try:
        return _run(args, parser)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _print_row(name: str, row: dict[str, Any]) -> None:
    print(
        f"{name:<20} {row['executions']:>11,} {row['seconds']:>8} "
        f"{row['executions_per_second']:>7} {row['executions_per_cpu_second']:>10} "
        f"{row['findings']:>8}",
        flush=True,
    )
    for finding in row["finding_inputs"]:
        print(f"    finding: {finding}", flush=True)


def _write_summary(args: argparse.Namespace, summary: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``summary.json``: the run's settings and, per target, executions, seconds, rates and
    findings."""
    args.out.mkdir(parents=True, exist_ok=True)
    report = {
        "budget_per_target": args.budget,
        "timeout_s": args.timeout,
        "rss_limit_mb": args.rss_mb,
        "seed": args.seed,
        "jobs": args.jobs,
        "targets": summary,
        "total_executions": sum(r["executions"] for r in summary.values()),
        "total_findings": sum(r["findings"] for r in summary.values()),
    }
    (args.out / "summary.json").write_text(json.dumps(report, indent=2) + "\n")
    return report


def _run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from fuzz_seeds import all_seeds
    from fuzz_targets import load_all

    names = sorted(load_all())
    if args.targets:
        wanted = args.targets.split(",")
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            parser.error(f"unknown target(s): {', '.join(unknown)}; known: {', '.join(names)}")
        names = wanted
    summary: dict[str, dict[str, Any]] = {}
    print(
        f"{'target':<20} {'executions':>11} {'seconds':>8} {'exec/s':>7} "
        f"{'exec/cpu-s':>10} {'findings':>8}",
        flush=True,
    )
    all_seeds()  # the run's PKI, made once before the workers start
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        running = {pool.submit(_campaign, name, args): name for name in names}
        for done in concurrent.futures.as_completed(running):  # each row as it finishes
            summary[running[done]] = row = done.result()
            _print_row(running[done], row)
            _write_summary(args, summary)  # so far: a long run stopped early still has one
    report = _write_summary(args, {name: summary[name] for name in names})
    print(
        f"total: {report['total_executions']:,} executions, "
        f"{report['total_findings']} findings; summary in {args.out / 'summary.json'}"
    )
    return 1 if report["total_findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
