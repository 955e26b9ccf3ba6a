"""What the report shows, collected from the audit's tables: small values only.

Every function here runs Spark aggregates whose results are bounded whatever the size of the
logs — per (class, node) groups cut to :data:`audit.report.MAX_FAILURE_GROUPS`, the first
:data:`audit.report.MAX_VERSIONS` document versions with at most
:data:`audit.report.MAX_NAMED_PER_STATUS` subscribers named per status, a time series of at
most :data:`MAX_BUCKETS` buckets — or grow with the network (one row per node), never with the
number of envelopes.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
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
    "delivery_overview",
    "failure_overview",
    "node_infos",
    "recipient_overview",
]

#: The time series has at most this many buckets, each one of :data:`BUCKET_WIDTHS_MS`.
MAX_BUCKETS = 60
BUCKET_WIDTHS_MS = tuple(
    s * 1000 for s in (1, 2, 5, 10, 30, 60, 300, 600, 1800, 3600, 6 * 3600, 86_400, 7 * 86_400)
)


def node_infos(nodes: DataFrame) -> tuple[NodeInfo, ...]:
    """Every node holding a certificate the CA issued it: URI, name and role (one row per
    node: the newest certificate's)."""
    newest = F.max_by(F.struct("name", "role"), "not_before_ms")
    rows = (
        nodes.where(F.col("problem").isNull())
        .groupBy("node")
        .agg(newest.alias("c"))
        .select("node", "c.name", "c.role")
        .collect()
    )
    return tuple(sorted(NodeInfo(r.node, r.name or "", r.role or "") for r in rows))


def failure_overview(failures: DataFrame) -> dict[str, Any]:
    """How many failures, the largest (class, node) groups with their first example, and the
    first failures (sorted)."""
    groups = failures.groupBy("class", "node").agg(
        F.count("*").alias("failures"),
        F.min_by(F.struct("graph", "reason"), "graph").alias("first"),
    )
    counted = groups.agg(F.sum("failures").alias("total"), F.count("*").alias("groups")).first()
    assert counted is not None  # an aggregate always yields one row
    largest = groups.orderBy(F.desc("failures"), "class", "node").limit(MAX_FAILURE_GROUPS)
    first = failures.orderBy("graph", "node", "reason", "class").limit(MAX_LISTED_FAILURES)
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
            for r in largest.collect()
        ),
        "failures": tuple(Failure(r.graph, r.node, r.reason, r["class"]) for r in first.collect()),
    }


def recipient_overview(recipients: DataFrame) -> dict[str, Any]:
    """Who received each document version (the earliest :data:`MAX_VERSIONS`), and the
    (version, subscriber) pairs per status."""
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
    total = versions.count()
    earliest = versions.orderBy("published_ms", "publication").limit(MAX_VERSIONS).collect()
    statuses = {r.status: r["count"] for r in recipients.groupBy("status").count().collect()}
    return {
        "version_total": total,
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
            for r in earliest
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


def delivery_overview(paths: DataFrame) -> dict[str, Any]:
    """End-to-end latency (publication → receipt, sound chains) as percentiles, and receipts
    and their latency over time (at most :data:`MAX_BUCKETS` buckets)."""
    receipts = paths.where(F.col("receipt") & F.col("chain_ok")).select(
        F.element_at("timestamps_ms", -1).alias("at_ms"),
        (F.element_at("timestamps_ms", -1) - F.col("timestamps_ms")[0]).alias("latency_ms"),
    )
    whole = receipts.agg(
        F.count("*").alias("n"),
        *percentiles("latency_ms"),
        F.max("latency_ms").alias("max_ms"),
        F.min("at_ms").alias("first_ms"),
        F.max("at_ms").alias("last_ms"),
    ).first()
    if whole is None or not whole.n:
        return {"end_to_end": None, "timeline": (), "bucket_ms": 0}
    width = _bucket_ms(whole.last_ms - whole.first_ms)
    start = whole.first_ms - whole.first_ms % width
    bucket = F.floor((F.col("at_ms") - start) / width).cast("long")
    series = (
        receipts.groupBy(bucket.alias("bucket"))
        .agg(F.count("*").alias("n"), *percentiles("latency_ms"))
        .orderBy("bucket")
        .collect()
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
