"""Thin entry point of the audit: read the logs, run the transforms, write tables and report.

Everything that decides anything lives in :mod:`audit.transforms` (DataFrame → DataFrame) and
:mod:`audit.report` (summary → HTML); this module only does I/O: the Spark session, reading
log files (any Spark-readable URI), Parquet and HTML output, and the actions that collect the
summary. Runs unchanged on an embedded ``local[*]`` Spark or on a cluster (``master`` or
``spark-submit``); an already active session (a test's, ``spark-submit``'s) is reused and left
running.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit import transforms as t
from audit.report import AuditSummary, Failure, FanOut, HopLatency, render_report
from xdn.errors import UsageError

__all__ = ["AuditTables", "build_tables", "read_logs", "run_audit", "summarise"]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditTables:
    """The audit's output tables (lazy DataFrames; the heavy ones cached)."""

    signatures: DataFrame
    chains: DataFrame
    paths: DataFrame
    latency: DataFrame
    fan_out: DataFrame
    failures: DataFrame
    cached: tuple[DataFrame, ...]


def read_logs(spark: SparkSession, log_paths: Sequence[str]) -> DataFrame:
    """All lines of all log files under ``log_paths`` → ``(value, source)``."""
    try:
        lines = spark.read.option("recursiveFileLookup", "true").text(list(log_paths))
    except AnalysisException as exc:
        raise UsageError(f"cannot read provenance logs: {exc.getMessage()}") from None
    return lines.select("value", F.col("_metadata.file_path").alias("source"))


def build_tables(lines: DataFrame, *, ca_pem: bytes, at: datetime) -> AuditTables:
    """Compose the transforms over ``(value, source)`` lines (one action: the chain depth)."""
    parsed = t.parse_lines(lines).cache()
    graphs = t.collect_graphs(parsed).cache()
    described = t.describe_graphs(graphs).cache()
    sigs = t.signatures(described)
    nodes = t.verify_nodes(t.node_certificates(described), ca_pem=ca_pem, at=at)
    results = t.verify_signatures(sigs, graphs, nodes).cache()
    chains = t.check_chains(t.envelopes(described), sigs, results, t.contents(described)).cache()
    depth = chains.agg(F.max("number")).first()[0] or 1  # type: ignore[index]
    paths = t.reconstruct_paths(chains, int(depth)).cache()
    return AuditTables(
        signatures=results, chains=chains, paths=paths, latency=t.hop_latency(chains),
        fan_out=t.fan_out(chains),
        failures=t.failures(t.graph_failures(described, parsed), results, chains),
        cached=(parsed, graphs, described, results, chains, paths),
    )


def summarise(tables: AuditTables) -> AuditSummary:
    """Collect the counts and findings of ``tables`` into an :class:`AuditSummary`."""
    verdict = F.col("verified").cast("int")
    signed = tables.signatures.agg(F.sum(verdict), F.count("*")).first()
    chained = tables.paths.agg(
        F.countDistinct(F.when(F.col("chain_ok"), F.col("leaf"))),
        F.countDistinct(F.when(~F.col("chain_ok"), F.col("leaf"))),
        F.count(F.when(F.col("receipt") & F.col("chain_ok"), True)),
    ).first()
    assert signed is not None and chained is not None  # aggregates always yield one row
    verified, total = signed[0] or 0, signed[1]
    return AuditSummary(
        messages=tables.chains.count(),
        signatures_verified=verified,
        signatures_failed=total - verified,
        chains_ok=chained[0],
        chains_broken=chained[1],
        fragments_delivered=chained[2],
        failures=tuple(sorted(Failure(r.graph, r.node, r.reason)
                              for r in tables.failures.collect())),
        latencies=tuple(sorted(
            (HopLatency(sender=r.sender, receiver=r.receiver, hops=r.hops,
                        mean_ms=float(r.mean_ms), max_ms=r.max_ms)
             for r in tables.latency.collect()), key=lambda h: (h.sender, h.receiver))),
        fan_out=tuple(sorted(
            (FanOut(node=r.node, inbound=r.inbound, outbound=r.outbound,
                    max_fan_out=r.max_fan_out) for r in tables.fan_out.collect()),
            key=lambda f: f.node)),
    )


def _session(master: str) -> tuple[SparkSession, bool]:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    if master.startswith("local"):
        # local Python workers must run this interpreter: they import xdn and audit.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master).appName("xdn-audit")
        .config("spark.ui.showConsoleProgress", "false").getOrCreate()
    )
    return spark, True


def run_audit(
    log_paths: Sequence[str], *, ca_pem: bytes, out_dir: Path, master: str = "local[*]",
    at: datetime | None = None, progress: Progress | None = None,
) -> AuditSummary:
    """Audit the provenance logs under ``log_paths``; write tables and report to ``out_dir``.

    Args:
        log_paths: log files or directories (read recursively), local or any Spark-readable URI.
        ca_pem: the network CA certificate every node certificate must chain to.
        out_dir: where ``signatures/``, ``chains/``, ``paths/``, ``failures/`` (Parquet) and
            ``report.html`` go.
        master: Spark master when no session is active.
        at: when node certificates must be valid (default: now).
        progress: called with one line per stage.
    """
    if isinstance(log_paths, str) or not log_paths:
        raise UsageError("give at least one log path (a sequence of paths)")
    say: Progress = progress or log.info
    spark, owned = _session(master)
    tables = None
    try:
        say(f"reading provenance logs from {len(log_paths)} location(s)")
        lines = read_logs(spark, [str(p) for p in log_paths])
        say("verifying signatures and chains")
        tables = build_tables(lines, ca_pem=ca_pem, at=at or datetime.now(UTC))
        say("reconstructing fragment paths")
        summary = summarise(tables)
        say(f"writing Parquet tables and report to {out_dir}")
        for name in ("signatures", "chains", "paths", "failures"):
            getattr(tables, name).write.mode("overwrite").parquet(str(Path(out_dir) / name))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "report.html").write_text(render_report(summary), encoding="utf-8")
        say(
            f"{summary.messages} messages, {summary.signatures_verified} signatures verified, "
            f"{summary.signatures_failed} failed, {summary.chains_ok} chains ok, "
            f"{summary.chains_broken} broken, {summary.fragments_delivered} fragments delivered"
        )
        return summary
    finally:
        for frame in tables.cached if tables is not None else ():
            frame.unpersist()
        if owned:
            spark.stop()
