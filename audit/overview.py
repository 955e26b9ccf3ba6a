"""What the report shows, collected from the audit's tables: small values only.

Every function here runs Spark aggregates whose results are bounded whatever the size of the
logs — per (class, node) groups cut to :data:`audit.report.MAX_FAILURE_GROUPS`, the first
:data:`audit.report.MAX_VERSIONS` document versions with at most
:data:`audit.report.MAX_NAMED_PER_STATUS` subscribers named per status, a time series of at
most :data:`MAX_BUCKETS` buckets — or grow with the network (one row per node), never with the
number of envelopes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F

from audit.entitlements import STATUSES
from audit.report import (
    MAX_FAILURE_GROUPS,
    MAX_LISTED_FAILURES,
    MAX_NAMED_PER_STATUS,
    MAX_VERSIONS,
    Failure,
    FailureGroup,
    NodeInfo,
    Percentiles,
    TimePoint,
    VersionRecipients,
)
from audit.transforms import percentiles

__all__ = [
    "BUCKET_WIDTHS_MS",
    "MAX_BUCKETS",
    "Rows",
    "collect_all",
    "delivery_overview",
    "delivery_queries",
    "failure_overview",
    "failure_queries",
    "node_infos",
    "node_queries",
    "recipient_overview",
    "recipient_queries",
]

#: Collected results by query name (:func:`collect_all`).
Rows = Mapping[str, list[Row]]


def _as_row(value: Any) -> Any:
    if isinstance(value, dict):
        return Row(**{k: _as_row(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_as_row(v) for v in value]
    return value


def collect_all(queries: Mapping[str, DataFrame]) -> dict[str, list[Row]]:
    """The rows of every (small) query, collected in one Spark job instead of one each.

    Each query's rows become JSON text tagged with its name and the queries are unioned; a
    sorted, limited query keeps its order (Spark computes it in one ordered partition).
    Values come back as JSON gives them: numbers, text, booleans, lists, nested rows.
    """
    parts = [
        frame.select(
            F.lit(name).alias("query"),
            F.to_json(F.struct(*frame.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        for name, frame in queries.items()
    ]
    found: dict[str, list[Row]] = {name: [] for name in queries}
    for r in functools.reduce(DataFrame.union, parts).collect():
        found[r.query].append(_as_row(json.loads(r.row)))
    return found


#: The time series has at most this many buckets, each one of :data:`BUCKET_WIDTHS_MS`.
MAX_BUCKETS = 60
BUCKET_WIDTHS_MS = tuple(
    s * 1000 for s in (1, 2, 5, 10, 30, 60, 300, 600, 1800, 3600, 6 * 3600, 86_400, 7 * 86_400)
)


def node_queries(nodes: DataFrame) -> dict[str, DataFrame]:
    """What :func:`node_infos` collects (for :func:`collect_all`)."""
    newest = F.max_by(F.struct("name", "role"), "not_before_ms")
    issued = nodes.where(F.col("problem").isNull()).groupBy("node").agg(newest.alias("c"))
    return {"nodes": issued.select("node", "c.name", "c.role")}


def node_infos(nodes: DataFrame, rows: Rows | None = None) -> tuple[NodeInfo, ...]:
    """Every node holding a certificate the CA issued it: URI, name and role (one row per
    node: the newest certificate's); ``rows``: :func:`node_queries` already collected."""
    got = rows if rows is not None else collect_all(node_queries(nodes))
    return tuple(sorted(NodeInfo(r.node, r.name or "", r.role or "") for r in got["nodes"]))


def failure_queries(failures: DataFrame) -> dict[str, DataFrame]:
    """What :func:`failure_overview` collects (for :func:`collect_all`)."""
    groups = failures.groupBy("class", "node").agg(
        F.count("*").alias("failures"),
        F.min_by(F.struct("graph", "reason"), "graph").alias("first"),
    )
    return {
        "failure_counts": groups.agg(
            F.sum("failures").alias("total"), F.count("*").alias("groups")
        ),
        "failure_groups": groups.orderBy(F.desc("failures"), "class", "node").limit(
            MAX_FAILURE_GROUPS
        ),
        "failures_first": failures.orderBy("graph", "node", "reason", "class").limit(
            MAX_LISTED_FAILURES
        ),
    }


def failure_overview(failures: DataFrame, rows: Rows | None = None) -> dict[str, Any]:
    """How many failures, the largest (class, node) groups with their first example, and the
    first failures (sorted); ``rows``: :func:`failure_queries` already collected."""
    got = rows if rows is not None else collect_all(failure_queries(failures))
    (counted,) = got["failure_counts"]  # an aggregate always yields one row
    return {
        "failure_total": counted.total or 0,
        "failure_group_total": counted.groups,
        "failure_groups": tuple(
            FailureGroup(
                r["class"] or "",
                r.node or "",
                r.failures,
                r.first.graph or "",
                r.first.reason or "",
            )
            for r in got["failure_groups"]
        ),
        "failures": tuple(
            Failure(r.graph, r.node, r.reason, r["class"]) for r in got["failures_first"]
        ),
    }


def recipient_queries(recipients: DataFrame) -> dict[str, DataFrame]:
    """What :func:`recipient_overview` collects (for :func:`collect_all`)."""
    per_status = [
        F.slice(
            F.array_sort(F.collect_list(F.when(F.col("status") == s, F.col("subscriber")))),
            1,
            MAX_NAMED_PER_STATUS,
        ).alias(s)
        for s in STATUSES
    ]
    counts = [F.count(F.when(F.col("status") == s, True)).alias(f"n_{s}") for s in STATUSES]
    versions = recipients.groupBy(
        "publication", "publisher", "document_id", "document_version", "published_ms"
    ).agg(*per_status, *counts)
    return {
        "version_total": versions.agg(F.count("*").alias("versions")),
        "versions_earliest": versions.orderBy("published_ms", "publication").limit(MAX_VERSIONS),
        "recipient_statuses": recipients.groupBy("status").agg(F.count("*").alias("pairs")),
    }


def recipient_overview(recipients: DataFrame, rows: Rows | None = None) -> dict[str, Any]:
    """Who received each document version (the earliest :data:`MAX_VERSIONS`), and the
    (version, subscriber) pairs per status; ``rows``: :func:`recipient_queries` collected."""
    got = rows if rows is not None else collect_all(recipient_queries(recipients))
    statuses = {r.status: r.pairs for r in got["recipient_statuses"]}
    return {
        "version_total": got["version_total"][0].versions,
        "recipient_counts": tuple((s, statuses[s]) for s in STATUSES if s in statuses),
        "versions": tuple(
            VersionRecipients(
                publisher=r.publisher or "",
                document=r.document_id or "",
                version=r.document_version,
                published_ms=r.published_ms,
                received=tuple(r.received),
                partial=tuple(r.partial),
                missing=tuple(r.missing),
                refused=tuple(r.refused),
                counts=tuple((s, r[f"n_{s}"]) for s in STATUSES if r[f"n_{s}"]),
            )
            for r in got["versions_earliest"]
        ),
    }


def _bucket_ms(span_ms: int) -> int:
    for width in BUCKET_WIDTHS_MS:
        if span_ms < width * MAX_BUCKETS:
            return width
    return -(-span_ms // MAX_BUCKETS)  # (longer than a year of weeks: an even split)


def _percentiles(row: Any) -> Percentiles:
    return Percentiles(
        count=row.n,
        p50_ms=float(row.p50_ms),
        p90_ms=float(row.p90_ms),
        p99_ms=float(row.p99_ms),
        max_ms=float(row.max_ms),
    )


def _receipts(paths: DataFrame) -> DataFrame:
    return paths.where(F.col("receipt") & F.col("chain_ok")).select(
        F.element_at("timestamps_ms", -1).alias("at_ms"),
        (F.element_at("timestamps_ms", -1) - F.col("timestamps_ms")[0]).alias("latency_ms"),
    )


def delivery_queries(paths: DataFrame) -> dict[str, DataFrame]:
    """What :func:`delivery_overview` collects first (for :func:`collect_all`)."""
    whole = _receipts(paths).agg(
        F.count("*").alias("n"),
        *percentiles("latency_ms"),
        F.max("latency_ms").alias("max_ms"),
        F.min("at_ms").alias("first_ms"),
        F.max("at_ms").alias("last_ms"),
    )
    return {"deliveries": whole}


def delivery_overview(paths: DataFrame, rows: Rows | None = None) -> dict[str, Any]:
    """End-to-end latency (publication → receipt, sound chains) as percentiles, and receipts
    and their latency over time (at most :data:`MAX_BUCKETS` buckets); ``rows``:
    :func:`delivery_queries` already collected (the time series is one more job)."""
    got = rows if rows is not None else collect_all(delivery_queries(paths))
    whole = got["deliveries"][0] if got["deliveries"] else None
    receipts = _receipts(paths)
    if whole is None or not whole.n:
        return {"end_to_end": None, "timeline": (), "bucket_ms": 0}
    width = _bucket_ms(whole.last_ms - whole.first_ms)
    start = whole.first_ms - whole.first_ms % width
    bucket = F.floor((F.col("at_ms") - start) / width).cast("long")
    series = sorted(  # (at most MAX_BUCKETS rows: sorted here, no sampling job for a sort)
        receipts.groupBy(bucket.alias("bucket"))
        .agg(F.count("*").alias("n"), *percentiles("latency_ms"))
        .collect(),
        key=lambda r: r.bucket,
    )
    return {
        "end_to_end": _percentiles(whole),
        "bucket_ms": width,
        "timeline": tuple(
            TimePoint(
                start_ms=start + r.bucket * width,
                deliveries=r.n,
                p50_ms=float(r.p50_ms),
                p99_ms=float(r.p99_ms),
            )
            for r in series
        ),
    }
