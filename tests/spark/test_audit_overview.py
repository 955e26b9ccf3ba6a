"""What the report collects stays bounded however large the tables: a synthetic log of 60,000
failures, 5,000 document versions to 40 subscribers and 200,000 receipts over a month gives a
summary of bounded size and a page under 2 MB."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from audit.overview import MAX_BUCKETS, delivery_overview, failure_overview, recipient_overview
from audit.report import (
    MAX_FAILURE_GROUPS,
    MAX_LISTED_FAILURES,
    MAX_NAMED_PER_STATUS,
    MAX_VERSIONS,
    AuditSummary,
    render_report,
)

pytestmark = pytest.mark.spark

T0 = 1_767_571_200_000
MONTH_MS = 30 * 86_400_000


def test_the_summary_of_a_large_log_is_bounded(spark: SparkSession) -> None:
    n = F.col("id")
    failures = spark.range(60_000).select(
        F.concat(F.lit("https://d1.example/msg/doc"), n.cast("string"), F.lit("/a#e2")).alias(
            "graph"
        ),
        F.concat(F.lit("https://s"), (n % 700).cast("string"), F.lit(".example/")).alias("node"),
        F.lit("delivery has no receipt " + "x" * 200).alias("reason"),
        F.when(n % 3 == 0, "receipt").otherwise("duplicate").alias("class"),
    )
    said = failure_overview(failures)
    assert said["failure_total"] == 60_000 and said["failure_group_total"] == 1_400
    assert len(said["failure_groups"]) == MAX_FAILURE_GROUPS
    assert len(said["failures"]) == MAX_LISTED_FAILURES
    assert said["failure_groups"][0].failures >= said["failure_groups"][-1].failures

    pairs = spark.range(5_000 * 40).select((n / 40).cast("long").alias("v"), (n % 40).alias("s"))
    recipients = pairs.select(
        F.concat(F.lit("https://pub.example/msg/doc/v"), F.col("v").cast("string")).alias(
            "publication"
        ),
        F.lit("doc").alias("document_id"),
        F.col("v").alias("document_version"),
        F.lit("pub").alias("publisher"),
        (F.lit(T0) + F.col("v")).alias("published_ms"),
        F.concat(F.lit("https://s"), F.col("s").cast("string"), F.lit(".example/")).alias(
            "subscriber"
        ),
        F.when(F.col("s") == 0, "missing")
        .when(F.col("s") == 1, "refused")
        .otherwise("received")
        .alias("status"),
    )
    seen = recipient_overview(recipients)
    assert seen["version_total"] == 5_000 and len(seen["versions"]) == MAX_VERSIONS
    first = seen["versions"][0]
    assert first.version == 0 and len(first.received) == MAX_NAMED_PER_STATUS
    assert dict(first.counts) == {"received": 38, "missing": 1, "refused": 1}
    assert dict(seen["recipient_counts"])["received"] == 5_000 * 38

    at = F.lit(T0) + (n * (MONTH_MS // 200_000))
    paths = spark.range(200_000).select(
        F.array(at, at + 5, at + 20 + n % 100).alias("timestamps_ms"),
        F.lit(True).alias("receipt"),
        F.lit(True).alias("chain_ok"),
    )
    over = delivery_overview(paths)
    assert 0 < len(over["timeline"]) <= MAX_BUCKETS and over["bucket_ms"] == 86_400_000
    assert sum(p.deliveries for p in over["timeline"]) == 200_000
    assert over["end_to_end"].count == 200_000 and over["end_to_end"].max_ms == 119

    summary = AuditSummary(
        messages=10**6,
        signatures_verified=10**6,
        signatures_failed=0,
        chains_ok=1,
        chains_broken=0,
        fragments_delivered=1,
        **said,
        **seen,
        **over,
    )
    assert len(render_report(summary).encode()) < 2_000_000
