"""Thin entry point of the audit: read the logs, run the transforms, write tables and report.

Everything that decides anything lives in :mod:`audit.transforms` (DataFrame → DataFrame) and
:mod:`audit.report` (summary → HTML); this module only does I/O: the Spark session, reading
log files (any Spark-readable URI), Parquet and HTML output, and the actions that collect the
summary. Runs unchanged on an embedded ``local[*]`` Spark or on a cluster (``master`` or
``spark-submit``; how the session is made and the code shipped: :mod:`audit.cluster`); an
already active session (a test's, ``spark-submit``'s) is reused and left running.

The input directories are listed first and only provenance logs are read
(:mod:`audit.inputs`); the skipped files are reported in one line. Long runs print a progress
line (:mod:`audit.progress`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from py4j.protocol import Py4JError
from pyspark import Accumulator
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from audit import entitlements as E
from audit import faults, trust
from audit import transforms as t
from audit.cluster import SessionOptions, open_session, set_partitions
from audit.grants import PolicyFile, load_policies
from audit.inputs import (
    LogFile,
    LogFiles,
    Skipped,
    find_logs,
    is_local,
    is_log_name,
    skipped_line,
)
from audit.overview import (
    Rows,
    collect_all,
    delivery_overview,
    delivery_queries,
    failure_overview,
    failure_queries,
    node_infos,
    node_queries,
    recipient_overview,
    recipient_queries,
)
from audit.progress import ProgressLine
from audit.refusals import refusal_counts, refusals
from audit.report import (
    MAX_LISTED_REFUSALS,
    AuditSummary,
    CrlUsed,
    FanOut,
    HopLatency,
    PolicyUsed,
    Refusal,
    refused_what,
    render_report,
)
from xdn.errors import UsageError
from xdn.ontology import Ontology

__all__ = [
    "AuditTables",
    "build_tables",
    "list_logs",
    "read_logs",
    "read_parsed",
    "run_audit",
    "summarise",
]

log = logging.getLogger(__name__)

Progress = Callable[[str], None]

#: The ontology and the signed policy versions the audit judges entitlement by.
Policies = tuple[Ontology, Sequence[PolicyFile]]


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditTables:
    """The audit's output tables (lazy DataFrames; the heavy ones :func:`cut`)."""

    signatures: DataFrame
    chains: DataFrame
    paths: DataFrame
    latency: DataFrame
    fan_out: DataFrame
    failures: DataFrame
    refusals: DataFrame
    refusal_counts: DataFrame
    recipients: DataFrame
    nodes: DataFrame
    cached: tuple[DataFrame, ...]
    policies: tuple[PolicyUsed, ...] = ()


def _remote_logs(spark: SparkSession, location: str) -> LogFiles:
    """List a non-local location (``hdfs://``, ``s3a://``…) with Spark's file systems."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    root = jvm.org.apache.hadoop.fs.Path(location)
    fs = root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    if not fs.exists(root):
        raise FileNotFoundError(f"path does not exist: {location}")
    if not fs.getFileStatus(root).isDirectory():
        qualified = fs.makeQualified(root).toString()  # as Spark names the file it reads
        size = fs.getFileStatus(root).getLen()
        return LogFiles(logs=(LogFile(path=qualified, size=size),), skipped=())
    logs, skipped = [], []
    prefix = fs.makeQualified(root).toString().rstrip("/") + "/"
    files = fs.listFiles(root, True)
    while files.hasNext():
        status = files.next()
        path = status.getPath()
        if is_log_name(path.getName()):
            logs.append(LogFile(path=path.toString(), size=status.getLen()))
        else:
            skipped.append(
                Skipped(
                    path=path.toString().removeprefix(prefix),
                    reason="not named like a provenance log",
                )
            )
    return LogFiles(logs=tuple(logs), skipped=tuple(skipped))


def list_logs(spark: SparkSession | None, locations: Sequence[str]) -> LogFiles:
    """The provenance logs under ``locations`` (:mod:`audit.inputs`); non-local locations need
    ``spark``.

    Raises:
        UsageError: a location does not exist or cannot be listed, or none holds a log.
    """
    found: list[LogFiles] = []
    try:
        for location in locations:
            if is_local(location):
                found.append(find_logs([location]))
            elif spark is None:
                raise UsageError(f"cannot list {location} before Spark runs")
            else:
                found.append(_remote_logs(spark, location))
    except (OSError, Py4JError) as exc:
        raise UsageError(f"cannot read provenance logs: {exc}") from None
    logs = LogFiles(
        logs=tuple(f for part in found for f in part.logs),
        skipped=tuple(f for part in found for f in part.skipped),
    )
    if not logs.logs:
        raise UsageError(
            f"cannot read provenance logs: no provenance log (*.nq, *.nq.gz, rotated) under "
            f"{', '.join(locations)}"
        )
    return logs


def read_logs(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame:
    """All lines of ``files`` → ``(value, source, file_size)``; lines longer than
    :data:`audit.transforms.MAX_LINE_BYTES` are skipped by the reader (and reported by
    :func:`audit.transforms.file_problems`), so one enormous line costs no memory."""
    paths = [f"file://{f.path}" if f.path.startswith("/") else f.path for f in files]
    try:
        lines = spark.read.option(
            "mapreduce.input.linerecordreader.line.maxlength", str(t.MAX_LINE_BYTES)
        ).text(paths)
    except AnalysisException as exc:
        raise UsageError(f"cannot read provenance logs: {exc.getMessage()}") from None
    return lines.select(
        "value",
        F.col("_metadata.file_path").alias("source"),
        F.col("_metadata.file_size").alias("file_size"),
    )


def read_parsed(spark: SparkSession, locations: Sequence[str]) -> DataFrame:
    """The parsed log lines an earlier run saved (``--save-parquet``), to audit again with new
    logs without parsing the old ones again.

    Raises:
        UsageError: a location does not hold such Parquet.
    """
    try:
        saved = spark.read.parquet(*locations)
    except AnalysisException as exc:
        raise UsageError(f"cannot read saved lines: {exc.getMessage()}") from None
    expected = t.parse_lines(
        spark.createDataFrame([], "value string, source string, file_size bigint")
    )
    if set(saved.columns) != set(expected.columns):
        raise UsageError(
            f"{', '.join(locations)}: not lines saved by xdn audit --save-parquet "
            f"(columns {sorted(saved.columns)})"
        )
    return saved.select(*expected.columns)


def cut(frame: DataFrame) -> DataFrame:
    """``frame``, computed on its first use and kept (memory, then disk) for every later one,
    with its plan cut there: what is built on it plans as if it were a table. Spark plans a
    DataFrame by analysing its whole lineage, and the audit's tables feed each other (chains
    into paths into recipients, all into failures), so uncut the plans grow with every step
    and planning, not data, would dominate small audits. Release with :func:`release`."""
    return frame.localCheckpoint(eager=False)


def release(frame: DataFrame) -> None:
    """Drop what :func:`cut` kept of ``frame`` (a no-op for any other DataFrame)."""
    plan = frame._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


def build_tables(
    lines: DataFrame,
    *,
    ca_pem: bytes,
    counters: tuple[Accumulator[int], Accumulator[int]] | None = None,
    revoked: Sequence[tuple[str, int]] = (),
    clock_skew_ms: int = faults.CLOCK_SKEW_MS,
    policies: Policies | None = None,
    previous: DataFrame | None = None,
) -> AuditTables:
    """Compose the transforms over ``(value, source, file_size)`` lines (lazily; nothing runs
    yet, except, with ``policies``, the small collects of :func:`audit.entitlements.grant_table`);
    ``counters``: accumulators of lines and envelopes read, for progress; ``revoked``:
    ``(serial, revoked_ms)`` from the CRLs known at the audit's time
    (:func:`audit.trust.read_revocations`); certificates are judged at each signing time;
    ``policies``: the ontology and signed policy versions to judge entitlement by concept and
    completeness with (:func:`audit.grants.load_policies`); ``previous``: lines an earlier run
    parsed and saved (:func:`read_parsed`), audited with these."""
    lines_read, envelopes_read = counters or (None, None)
    parsed = t.parse_lines(lines, lines_read)
    if previous is not None:
        parsed = parsed.unionByName(previous)
    parsed = cut(parsed)
    graphs = cut(t.collect_graphs(parsed))
    described = cut(t.describe_graphs(graphs, envelopes_read))
    sigs = t.signatures(described)
    crl = trust.revocations(lines.sparkSession, revoked) if revoked else None
    nodes = cut(
        trust.judge_certificates(
            trust.held_certificates(described, sigs), ca_pem=ca_pem, revoked=crl
        )
    )
    verified = t.verify_signatures(sigs, graphs, nodes)
    results = cut(trust.in_time(verified, trust.signing_times(described)))
    chains = cut(t.check_chains(t.envelopes(described), results, t.contents(described)))
    paths = cut(t.reconstruct_paths(chains))
    notices = cut(refusals(described, results))
    grants: DataFrame | None = None
    used: tuple[PolicyUsed, ...] = ()
    if policies is not None:
        ontology, files = policies
        grants, used = E.grant_table(
            nodes, faults.policy_changes(described, results), ontology, files
        )
    received = cut(E.recipients(chains, paths, nodes, notices, grants))
    findings = [
        faults.repeated_lines(graphs),
        faults.resent(chains),
        faults.receipts(chains, nodes, E.refused_deliveries(chains, paths, notices)),
        faults.revoked_deliveries(chains, nodes),
        faults.time_order(chains, clock_skew_ms),
        faults.roles(chains),
        faults.entitlement(chains, described, results),
    ]
    if grants is not None:
        findings += [
            E.concept_entitlement(chains, paths, nodes, grants),
            E.completeness(received),
        ]
    found = t.failures(t.graph_failures(described, parsed), results, chains, notices, findings)
    return AuditTables(
        signatures=results.drop("verifying"),
        chains=chains,
        paths=paths,
        latency=t.hop_latency(chains),
        fan_out=t.fan_out(chains),
        failures=found,
        refusals=notices,
        refusal_counts=refusal_counts(notices),
        recipients=received,
        nodes=nodes,
        cached=(parsed, graphs, described, nodes, results, chains, paths, notices, received),
        policies=used,
    )


def summarise(tables: AuditTables, crls: tuple[CrlUsed, ...] = ()) -> AuditSummary:
    """Collect the counts and findings of ``tables`` into an :class:`AuditSummary` (bounded:
    :mod:`audit.overview`); ``crls``: the CRLs the audit was given. Everything but the
    delivery time series (whose buckets depend on the first result) is one Spark job."""
    verdict = F.col("verified").cast("int")
    queries = {
        "signatures": tables.signatures.agg(
            F.sum(verdict).alias("verified"), F.count("*").alias("signatures")
        ),
        "messages": tables.chains.agg(F.count("*").alias("messages")),
        "chains": tables.paths.agg(
            F.countDistinct(F.when(F.col("chain_ok"), F.col("leaf"))).alias("chains_ok"),
            F.countDistinct(F.when(~F.col("chain_ok"), F.col("leaf"))).alias("broken"),
            F.sum(F.when(F.col("receipt") & F.col("chain_ok"), F.col("fragments"))).alias(
                "delivered"
            ),
        ),
        "refusal_totals": tables.refusals.agg(
            F.count(F.when(F.col("verified"), True)).alias("refusals"),
            F.count(F.when(~F.col("verified"), True)).alias("refusals_unverified"),
        ),
        "latency": tables.latency,
        "fan_out": tables.fan_out,
        "refusal_counts": tables.refusal_counts,
        "refusals_first": tables.refusals.orderBy("timestamp_ms", "notice").limit(
            MAX_LISTED_REFUSALS
        ),
        **failure_queries(tables.failures),
        **recipient_queries(tables.recipients),
        **delivery_queries(tables.paths),
        **node_queries(tables.nodes),
    }
    rows = collect_all(queries)
    (sigs,), (chains,), (paths,), (refused,) = (
        rows[q] for q in ("signatures", "messages", "chains", "refusal_totals")
    )  # aggregates always yield one row
    verified = sigs.verified or 0
    return AuditSummary(
        messages=chains.messages,
        signatures_verified=verified,
        signatures_failed=sigs.signatures - verified,
        chains_ok=paths.chains_ok,
        chains_broken=paths.broken,
        fragments_delivered=paths.delivered or 0,
        refusals_verified=refused.refusals,
        refusals_unverified=refused.refusals_unverified,
        **failure_overview(tables.failures, rows),
        **recipient_overview(tables.recipients, rows),
        **delivery_overview(tables.paths, rows),
        nodes=node_infos(tables.nodes, rows),
        policies=tables.policies,
        crls=crls,
        latencies=tuple(
            sorted(
                (
                    HopLatency(
                        sender=r.sender,
                        receiver=r.receiver,
                        hops=r.hops,
                        mean_ms=float(r.mean_ms),
                        max_ms=r.max_ms,
                        p50_ms=float(r.p50_ms),
                        p90_ms=float(r.p90_ms),
                        p99_ms=float(r.p99_ms),
                    )
                    for r in rows["latency"]
                ),
                key=lambda h: (h.sender, h.receiver),
            )
        ),
        **_refusals(rows),
        fan_out=tuple(
            sorted(
                (
                    FanOut(
                        node=r.node,
                        inbound=r.inbound,
                        outbound=r.outbound,
                        max_fan_out=r.max_fan_out,
                    )
                    for r in rows["fan_out"]
                ),
                key=lambda f: f.node,
            )
        ),
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _refusals(rows: Rows) -> dict[str, Any]:
    """The refusal counts per kind and per site, and the first refusals by time."""
    counts: dict[str, list[tuple[str, int]]] = {"kind": [], "site": []}
    for row in rows["refusal_counts"]:
        counts[row.by].append((row.value, row.refusals))
    return {
        "refusals_by_kind": tuple(sorted(counts["kind"])),
        "refusals_by_site": tuple(sorted(counts["site"])),
        "refusals": tuple(
            Refusal(
                time=_iso(r.timestamp_ms),
                subscriber=r.subscriber,
                kind=r.kind or "",
                publisher=r.publisher or "",
                what=refused_what(r.asDict()),
                site=r.site or "",
                reason=r.reason or "",
                verified=r.verified,
            )
            for r in rows["refusals_first"]
        ),
    }


def run_audit(
    log_paths: Sequence[str],
    *,
    ca_pem: bytes,
    out_dir: Path,
    master: str = "local[*]",
    session: SessionOptions | None = None,
    at: datetime | None = None,
    progress: Progress | None = None,
    progress_every_s: float = 10.0,
    crl_pems: Sequence[bytes] = (),
    clock_skew_ms: int = faults.CLOCK_SKEW_MS,
    ontology_paths: Sequence[Path] = (),
    policy_paths: Sequence[Path] = (),
    from_parquet: Sequence[str] = (),
    save_parquet: Path | None = None,
) -> AuditSummary:
    """Audit the provenance logs under ``log_paths``; write tables and report to ``out_dir``.

    Args:
        log_paths: log files or directories (read recursively), local or any Spark-readable URI;
            in directories only provenance logs are read (:mod:`audit.inputs`).
        ca_pem: the network CA certificate every node certificate must chain to.
        out_dir: where ``signatures/``, ``chains/``, ``paths/``, ``refusals/``, ``failures/``,
            ``latency/``, ``fan_out/`` (Parquet) and ``report.html`` go.
        master: Spark master when no session is active (``session`` overrides it).
        session: how to start Spark when no session is active (:mod:`audit.cluster`).
        at: what the audit knows as of (default: now): CRLs issued later are not used.
            Certificates are judged at the time each signature was made.
        progress: called with one line per stage, and a progress line every
            ``progress_every_s`` seconds while Spark works.
        crl_pems: the CA's CRLs (PEM); a delivery or signature after a revocation fails.
        clock_skew_ms: how far a hop may be stamped before the hop it wraps
            (:func:`audit.faults.time_order`).
        ontology_paths / policy_paths: the ontology and the publishers' signed policy versions
            (each with its ``.sig``): deliveries are judged by concept and every entitled
            subscriber must have received each version (:mod:`audit.entitlements`).
        from_parquet: parsed lines saved by an earlier run (``save_parquet``), audited with
            the logs (give only logs that run did not read: a line read twice is a
            ``duplicate``).
        save_parquet: where to save every parsed line of this run (those of ``from_parquet``
            too), for the next run to start from.

    Raises:
        UsageError: no log path, a CRL not signed by the CA, a negative clock skew, a policy
            that does not read, validate or verify under its publisher's certificate.
    """
    if isinstance(log_paths, str) or not log_paths:
        raise UsageError("give at least one log path (a sequence of paths)")
    if clock_skew_ms < 0:
        raise UsageError("the clock-skew tolerance cannot be negative")
    if save_parquet is not None and str(save_parquet) in {str(p) for p in from_parquet}:
        raise UsageError("--save-parquet must not overwrite what --from-parquet reads")
    revoked = trust.read_revocations(crl_pems, ca_pem, at=at or datetime.now(UTC))
    crls = trust.crls_used(crl_pems, ca_pem, at=at or datetime.now(UTC))
    policies = load_policies(ontology_paths, policy_paths) if policy_paths else None
    say: Progress = progress or log.info
    locations = [str(p) for p in log_paths]
    local = None if not all(is_local(p) for p in locations) else list_logs(None, locations)
    with open_session(session or SessionOptions(master=master), say=say) as spark:
        files = local or list_logs(spark, locations)
        if (skipped := skipped_line(files.skipped)) is not None:
            say(skipped)
        set_partitions(spark, session or SessionOptions(master=master), files.total_bytes, say)
        counters = (spark.sparkContext.accumulator(0), spark.sparkContext.accumulator(0))
        with ProgressLine(
            say, lines=counters[0], envelopes=counters[1], every_s=progress_every_s
        ) as ticker:
            judging = {
                "revoked": revoked,
                "clock_skew_ms": clock_skew_ms,
                "policies": policies,
                "previous": read_parsed(spark, list(from_parquet)) if from_parquet else None,
            }
            return _audit(
                spark, files, ca_pem, out_dir, judging, counters, ticker, crls, save_parquet
            )


def _audit(
    spark: SparkSession,
    files: LogFiles,
    ca_pem: bytes,
    out_dir: Path,
    judging: dict[str, Any],
    counters: tuple[Accumulator[int], Accumulator[int]],
    ticker: ProgressLine,
    crls: tuple[CrlUsed, ...] = (),
    save_parquet: Path | None = None,
) -> AuditSummary:
    def say(stage: str) -> None:
        ticker.stage(stage)
        ticker.say(stage)

    tables = None
    try:
        say(f"reading {len(files.logs)} provenance log(s), {files.total_bytes:,} bytes")
        lines = read_logs(spark, files.logs)
        say("verifying signatures and chains")
        tables = build_tables(lines, ca_pem=ca_pem, counters=counters, **judging)
        tables = _with_silent_files(spark, tables, files)
        # computed once: the report's groups, Parquet and CSV read it; one partition per
        # shuffle partition (a union of every finding has one per part of each finding)
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
        tables = replace(tables, failures=cut(tables.failures.coalesce(partitions)))
        say("reconstructing fragment paths")
        summary = summarise(tables, crls)
        say(f"writing Parquet tables and report to {out_dir}")
        for name in _TABLES:
            getattr(tables, name).write.mode("overwrite").parquet(str(Path(out_dir) / name))
        tables.failures.coalesce(1).write.mode("overwrite").option("header", True).csv(
            str(Path(out_dir) / "failures.csv")
        )
        if save_parquet is not None:
            tables.cached[0].write.mode("overwrite").parquet(str(save_parquet))
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / "report.html").write_text(render_report(summary), encoding="utf-8")
        ticker.say(f"read {ticker.totals()}")
        ticker.say(
            f"{summary.messages} messages, {summary.signatures_verified} signatures verified, "
            f"{summary.signatures_failed} failed, {summary.chains_ok} chains ok, "
            f"{summary.chains_broken} broken, {summary.fragments_delivered} fragments delivered, "
            f"{summary.refusals_verified} refusals"
        )
        return summary
    finally:
        if tables is not None:  # (a session may run many audits: release what this one held)
            for frame in (*tables.cached, tables.failures):
                release(frame)


def _same_file(path: str) -> str:
    """A path as Spark's ``_metadata.file_path`` and as a listing give it, made comparable."""
    return unquote(re.sub(r"^file:(//)?", "", path))


def _with_silent_files(spark: SparkSession, tables: AuditTables, files: LogFiles) -> AuditTables:
    """``tables`` with a failure for each non-empty uncompressed log that gave no line at all
    (every line too long to read): :func:`audit.transforms.file_problems` sees only files with
    lines. Collects one row per log file read, not per line."""
    parsed = tables.cached[0]
    read = {_same_file(r.source) for r in parsed.select("source").distinct().collect()}
    silent = [
        f for f in files.logs if f.size > 0 and not f.compressed and _same_file(f.path) not in read
    ]
    if not silent:
        return tables
    reason = f"no line read: every line is longer than {t.MAX_LINE_BYTES} bytes"
    rows = spark.createDataFrame(
        [("", f.path, reason, "malformed") for f in silent], tables.failures.schema
    )
    return replace(tables, failures=tables.failures.union(rows))


_TABLES = (
    "signatures",
    "chains",
    "paths",
    "refusals",
    "failures",
    "latency",
    "fan_out",
    "recipients",
)
