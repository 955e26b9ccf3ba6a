"""What the provenance audit costs at scale: throughput against ECDSA, and peak memory (issue #17).

* ``audit_envelopes_per_s_per_core_vs_p384`` — ``xdn audit`` (a separate process, default
  settings: ``local[*]``, the partitions and memory it derives itself) over logs of
  :data:`FULL_ENVELOPES` envelopes (``--quick``: :data:`QUICK_ENVELOPES`) written with our own
  API, sites signing in batches (:mod:`benchmarks.audit_corpus`; generated once and cached
  under ``build/bench/audit-logs/``, not measured): envelopes ÷ wall seconds of the whole
  command ÷ the machine's cores. Baseline: single-core P-384 ECDSA verifications per second
  (``xdn.crypto.verify``), measured in the same run. Goal ≥ 50. The audit must pass (exit 0):
  every signature in the corpus verifies.
* ``audit_peak_rss_mb_10m`` — the peak of the summed resident memory of the audit's whole
  process tree (the driver's Python, its JVM, the Python workers), sampled every
  :data:`SAMPLE_S` seconds (:mod:`benchmarks.tree_memory`). Goal ≤ 3,000 MB. Baseline: the
  machine's memory.

``XDN_BENCH_AUDIT_ENVELOPES`` overrides the size (to measure at an intermediate size); the
figure's note always names the size it was measured at.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.audit_corpus import Corpus, CorpusSpec, corpus
from benchmarks.harness import Result, best_of, ratio_result
from benchmarks.tree_memory import PeakSampler
from xdn import crypto
from xdn.paths import REPO_ROOT

FULL_ENVELOPES = 10_000_000
QUICK_ENVELOPES = 20_000
SAMPLE_S = 0.25
#: Longest a full run may take before it is killed (10 million envelopes on a shared machine).
TIMEOUT_S = 6 * 3600


def p384_verifies_per_s() -> float:
    """Single-core P-384 ECDSA verifications per second (``xdn.crypto.verify``)."""
    key = crypto.generate_private_key("P-384")
    data = b"x" * 200
    signature = crypto.sign(key, data)
    public = key.public_key()
    return 1.0 / best_of(lambda: crypto.verify(public, signature, data), repeat=5, min_time=0.2)


def _audit(logs: Corpus, out: Path) -> tuple[float, float, str]:
    """Run ``xdn audit`` over ``logs``; wall seconds, peak tree RSS (MB) and its last line.

    Raises:
        RuntimeError: the audit failed (exit status other than 0).
    """
    ca = out / "ca.pem"
    ca.write_bytes(logs.ca_pem)
    args = [sys.executable, "-m", "cli", "audit", str(logs.logs), "--ca", str(ca)]
    args += ["--out", str(out / "report")]
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
    )
    with tempfile.TemporaryFile() as output:
        started = time.perf_counter()
        child = subprocess.Popen(args, cwd=REPO_ROOT, env=env, stdout=output, stderr=output)
        with PeakSampler(child.pid, every_s=SAMPLE_S) as sampler:
            try:
                status = child.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
                raise
        elapsed = time.perf_counter() - started
        output.seek(0)
        text = output.read().decode(errors="replace")
    if status != 0:
        raise RuntimeError(f"xdn audit exited {status}:\n{text[-4000:]}")
    last = [line for line in text.splitlines() if "messages," in line]
    return elapsed, sampler.peak_mb, last[-1] if last else ""


def run(quick: bool) -> list[Result]:
    size = int(os.environ.get("XDN_BENCH_AUDIT_ENVELOPES") or 0) or (
        QUICK_ENVELOPES if quick else FULL_ENVELOPES
    )
    logs = corpus(CorpusSpec(envelopes=size))
    verifies = p384_verifies_per_s()
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="xdn-bench-audit-") as folder:
        elapsed, peak_mb, summary = _audit(logs, Path(folder))
    per_core = logs.envelopes / elapsed / cores
    where = (
        f"{logs.envelopes:,} envelopes ({logs.documents:,} documents, "
        f"{logs.bytes_stored / 1e6:,.0f} MB gzip) in {elapsed:,.1f} s on {cores} cores; {summary}"
    )
    memory = _total_memory_mb()
    return [
        ratio_result(
            name="audit_envelopes_per_s_per_core_vs_p384",
            value=per_core,
            unit="env/s/core",
            baseline="P-384 verifies/s, one core",
            baseline_value=verifies,
            goal=">= 50",
            note=where,
        ),
        ratio_result(
            name="audit_peak_rss_mb_10m",
            value=peak_mb,
            unit="MB",
            baseline="machine memory (MB)",
            baseline_value=memory,
            goal="<= 3000 MB",
            note=("" if logs.envelopes >= FULL_ENVELOPES else "NOT at 10 M: ") + where,
        ),
    ]


def _total_memory_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024
    return 0.0
