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
from typing import Any

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit import transforms as t
from audit.refusals import refusal_counts, refusals
from audit.report import (
    MAX_LISTED_REFUSALS,
    AuditSummary,
    Failure,
    FanOut,
    HopLatency,
    Refusal,
    refused_what,
    render_report,
)
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
    refusals: DataFrame
    refusal_counts: DataFrame
    cached: tuple[DataFrame, ...]


def read_logs(spark: SparkSession, log_paths: Sequence[str]) -> DataFrame:
    """All lines of all log files under ``log_paths`` → ``(value, source)``."""
    try:
        lines = spark.read.option("recursiveFileLookup", "true").text(list(log_paths))
    except AnalysisException as exc:
        raise UsageError(f"cannot read provenance logs: {exc.getMessage()}") from None
    return lines.select("value", F.col("_metadata.file_path").alias("source"))


def build_tables(lines: DataFrame, *, ca_pem: bytes, at: datetime) -> AuditTables:
    """Compose the transforms over ``(value, source)`` lines (lazily; nothing runs yet)."""
    parsed = t.parse_lines(lines).cache()
    graphs = t.collect_graphs(parsed).cache()
    described = t.describe_graphs(graphs).cache()
    sigs = t.signatures(described)
    nodes = t.verify_nodes(t.node_certificates(described), ca_pem=ca_pem, at=at)
    results = t.verify_signatures(sigs, graphs, nodes).cache()
    chains = t.check_chains(t.envelopes(described), results, t.contents(described)).cache()
    paths = t.reconstruct_paths(chains).cache()
    notices = refusals(described, results).cache()
    return AuditTables(
        signatures=results,
        chains=chains,
        paths=paths,
        latency=t.hop_latency(chains),
        fan_out=t.fan_out(chains),
        failures=t.failures(t.graph_failures(described, parsed), results, chains, notices),
        refusals=notices,
        refusal_counts=refusal_counts(notices),
        cached=(parsed, graphs, described, results, chains, paths, notices),
    )


def summarise(tables: AuditTables) -> AuditSummary:
    """Collect the counts and findings of ``tables`` into an :class:`AuditSummary`."""
    verdict = F.col("verified").cast("int")
    counts = (  # three one-row aggregates, one job
        tables.signatures.agg(F.sum(verdict).alias("verified"), F.count("*").alias("signatures"))
        .crossJoin(tables.chains.agg(F.count("*").alias("messages")))
        .crossJoin(
            tables.paths.agg(
                F.countDistinct(F.when(F.col("chain_ok"), F.col("leaf"))).alias("chains_ok"),
                F.countDistinct(F.when(~F.col("chain_ok"), F.col("leaf"))).alias("broken"),
                F.sum(F.when(F.col("receipt") & F.col("chain_ok"), F.col("fragments"))).alias(
                    "delivered"
                ),
            )
        )
        .crossJoin(
            tables.refusals.agg(
                F.count(F.when(F.col("verified"), True)).alias("refusals"),
                F.count(F.when(~F.col("verified"), True)).alias("refusals_unverified"),
            )
        )
        .first()
    )
    assert counts is not None  # aggregates always yield one row
    verified = counts.verified or 0
    return AuditSummary(
        messages=counts.messages,
        signatures_verified=verified,
        signatures_failed=counts.signatures - verified,
        chains_ok=counts.chains_ok,
        chains_broken=counts.broken,
        fragments_delivered=counts.delivered or 0,
        refusals_verified=counts.refusals,
        refusals_unverified=counts.refusals_unverified,
        failures=tuple(
            sorted(Failure(r.graph, r.node, r.reason) for r in tables.failures.collect())
        ),
        latencies=tuple(
            sorted(
                (
                    HopLatency(
                        sender=r.sender,
                        receiver=r.receiver,
                        hops=r.hops,
                        mean_ms=float(r.mean_ms),
                        max_ms=r.max_ms,
                    )
                    for r in tables.latency.collect()
                ),
                key=lambda h: (h.sender, h.receiver),
            )
        ),
        **_refusals(tables),
        fan_out=tuple(
            sorted(
                (
                    FanOut(
                        node=r.node,
                        inbound=r.inbound,
                        outbound=r.outbound,
                        max_fan_out=r.max_fan_out,
                    )
                    for r in tables.fan_out.collect()
                ),
                key=lambda f: f.node,
            )
        ),
    )


def _refusals(tables: AuditTables) -> dict[str, Any]:
    """The refusal counts per kind and per site, and the first refusals by time."""
    counts: dict[str, list[tuple[str, int]]] = {"kind": [], "site": []}
    for row in tables.refusal_counts.collect():
        counts[row.by].append((row.value, row.refusals))
    listed = tables.refusals.orderBy("timestamp_ms", "notice").limit(MAX_LISTED_REFUSALS).collect()
    return {
        "refusals_by_kind": tuple(sorted(counts["kind"])),
        "refusals_by_site": tuple(sorted(counts["site"])),
        "refusals": tuple(
            Refusal(
                time=datetime.fromtimestamp(r.timestamp_ms / 1000, UTC).isoformat(
                    timespec="milliseconds"
                ),
                subscriber=r.subscriber,
                kind=r.kind or "",
                publisher=r.publisher or "",
                what=refused_what(r.asDict()),
                site=r.site or "",
                reason=r.reason or "",
                verified=r.verified,
            )
            for r in listed
        ),
    }


def _session(master: str) -> tuple[SparkSession, bool]:
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    builder = (
        SparkSession.builder.master(master)
        .appName("xdn-audit")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("local"):
        # local Python workers must run this interpreter: they import xdn and audit.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # one machine: a few shuffle partitions per core, not the cluster default of 200
        builder = builder.config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
    return builder.getOrCreate(), True


def run_audit(
    log_paths: Sequence[str],
    *,
    ca_pem: bytes,
    out_dir: Path,
    master: str = "local[*]",
    at: datetime | None = None,
    progress: Progress | None = None,
) -> AuditSummary:
    """Audit the provenance logs under ``log_paths``; write tables and report to ``out_dir``.

    Args:
        log_paths: log files or directories (read recursively), local or any Spark-readable URI.
        ca_pem: the network CA certificate every node certificate must chain to.
        out_dir: where ``signatures/``, ``chains/``, ``paths/``, ``refusals/`` (Parquet) and
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
        for name in ("signatures", "chains", "paths", "refusals"):
            getattr(tables, name).write.mode("overwrite").parquet(str(Path(out_dir) / name))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "report.html").write_text(render_report(summary), encoding="utf-8")
        say(
            f"{summary.messages} messages, {summary.signatures_verified} signatures verified, "
            f"{summary.signatures_failed} failed, {summary.chains_ok} chains ok, "
            f"{summary.chains_broken} broken, {summary.fragments_delivered} fragments delivered, "
            f"{summary.refusals_verified} refusals"
        )
        return summary
    finally:
        for frame in tables.cached if tables is not None else ():
            frame.unpersist()
        if owned:
            spark.stop()
