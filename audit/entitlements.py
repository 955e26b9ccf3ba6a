"""Entitlement by concept, completeness, and who received what: DataFrame → DataFrame.

Theory of operation
-------------------
A publication's content graph names the document version and each concept's run of manifest
leaves (``xdn:conceptLeaves``, from the publisher's signed range table), so the concepts a hop
carries are the concepts whose run its leaf ranges touch. The publishers' signed policies,
evaluated over time (:mod:`audit.grants`, a small table broadcast to every task), say what
each subscriber certificate was ``allowed`` and ``required`` to receive at any instant.
Everything here is native Spark SQL (higher-order functions over the runs, broadcast range
joins); no Python runs per row and nothing grows on the driver.

* :func:`publications` — the sound publications: document, version, publisher, time, runs.
* :func:`rooted` — every envelope of a rebuilt path with the publication it descends from.
* :func:`concept_entitlement` (``entitlement``) — a relay to a subscriber carrying a concept
  that no policy version in force at the relay's time allowed it (within the grace after a
  change, either version counts).
* :func:`recipients` — who received what: per publication and subscriber, the concepts its
  receipts carry, those it was due (``required`` at the publication's time, if policies are
  given), whether it refused the version (a verified failure notice naming it) and a
  ``status``: ``received``, ``partial`` (some due concept missing), ``missing`` (no receipt
  at all), ``refused``. A subscriber is due a version only while it is *registered* per the
  logs: between the first and the last hop it took part in (a relay to it, its receipt).
* :func:`completeness` (``completeness``) — the ``partial`` and ``missing`` rows.

Publications whose content graph names no concepts (logs from before the graph did) and
publishers with no policy given are not judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import astuple
from datetime import UTC, datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audit.faults import POLICY_GRACE_MS, _deliveries, _finding, _subscribers, _text
from audit.grants import (
    GRANT_SCHEMA,
    PolicyFile,
    SubscriberCertificate,
    check_signed,
    grant_intervals,
)
from audit.report import PolicyUsed
from xdn.ontology import Ontology
from xdn.policy import Policy

__all__ = [
    "STATUSES",
    "completeness",
    "concept_entitlement",
    "grant_table",
    "publications",
    "recipients",
    "refused_deliveries",
    "refused_versions",
    "rooted",
]

#: The status of a (publication, subscriber) row of :func:`recipients`.
STATUSES = ("received", "partial", "missing", "refused")


def publications(chains: DataFrame) -> DataFrame:
    """→ ``(publication, document_id, document_version, publisher, published_ms, concepts)``
    of every sound publication hop."""
    return chains.where((F.col("kind") == "publication") & F.col("hop_ok")).select(
        F.col("envelope").alias("publication"),
        "document_id",
        "document_version",
        F.col("named_publisher").alias("publisher"),
        F.col("timestamp_ms").alias("published_ms"),
        "concepts",
    )


def rooted(paths: DataFrame) -> DataFrame:
    """→ ``(envelope, publication)``: each envelope of a rebuilt path and the first envelope of
    its path (a publication when the path reaches one)."""
    return paths.select(
        F.explode("envelopes").alias("envelope"), F.col("envelopes")[0].alias("publication")
    ).distinct()


def concepts_carried(leaves: str, runs: str) -> Column:
    """The concepts (names) whose run of ``runs`` the leaf ranges ``leaves`` touch."""
    touched = F.filter(
        runs,
        lambda c: F.exists(leaves, lambda r: (r["start"] < c["end"]) & (c["start"] < r["end"])),
    )
    return F.transform(touched, lambda c: c["concept"])


def _in_piece(at: str) -> Column:
    return (F.col("g_from_ms") <= F.col(at)) & (F.col(at) < F.col("g_to_ms"))


def _grants(grants: DataFrame) -> DataFrame:
    return F.broadcast(grants.select(*(F.col(c).alias("g_" + c) for c in grants.columns)))


def _concept_list(names: Column) -> Column:
    return F.array_join(F.array_sort(names), ", ")


def concept_entitlement(
    chains: DataFrame, paths: DataFrame, nodes: DataFrame, grants: DataFrame
) -> DataFrame:
    """Relays to subscribers carrying a concept no policy version in force allowed them (see
    the module docstring) → findings ``(graph, node, reason, class)``.

    Args:
        grants: :func:`audit.grants.grant_intervals` rows (:data:`audit.grants.GRANT_SCHEMA`).
    """
    delivered = (
        _deliveries(chains, nodes)
        .select("envelope", "node", "recipient", "timestamp_ms", "leaves")
        .join(rooted(paths), "envelope")
        .join(publications(chains), "publication")
        .select(
            "envelope",
            "node",
            "recipient",
            "timestamp_ms",
            "publisher",
            "document_id",
            "document_version",
            concepts_carried("leaves", "concepts").alias("carried"),
        )
        .where(F.size("carried") > 0)
    )
    judged = delivered.join(
        _grants(grants),
        (F.col("recipient") == F.col("g_subscriber"))
        & (F.col("publisher") == F.col("g_publisher"))
        & _in_piece("timestamp_ms"),
    )
    per_delivery = judged.groupBy(
        "envelope", "node", "recipient", "publisher", "document_id", "document_version", "carried"
    ).agg(
        F.array_distinct(F.flatten(F.collect_list("g_allowed"))).alias("allowed"),
        F.array_join(F.array_sort(F.array_distinct(F.collect_list("g_versions"))), ", ").alias(
            "versions"
        ),
    )
    outside = F.array_except("carried", "allowed")
    return per_delivery.where(F.size(outside) > 0).select(
        *_finding(
            F.col("envelope"),
            F.col("node"),
            _text(
                "delivered ",
                _concept_list(outside),
                " of ",
                F.col("publisher"),
                "'s ",
                F.col("document_id"),
                F.coalesce(
                    F.concat(F.lit(" v"), F.col("document_version").cast("string")), F.lit("")
                ),
                " to <",
                F.col("recipient"),
                ">, which policy version ",
                F.col("versions"),
                " does not grant it",
            ),
            "entitlement",
        )
    )


def refused_versions(chains: DataFrame, notices: DataFrame) -> DataFrame:
    """→ ``(publication, subscriber, refused)``: the document versions each subscriber refused
    in a verified failure notice naming the publisher, document and version."""
    named = notices.where(F.col("verified") & F.col("document").isNotNull()).select(
        "subscriber",
        "publisher",
        F.col("document").alias("document_id"),
        F.col("version").alias("document_version"),
    )
    return (
        named.join(
            publications(chains).select(
                "publication", "publisher", "document_id", "document_version"
            ),
            ["publisher", "document_id", "document_version"],
        )
        .select("publication", "subscriber", F.lit(True).alias("refused"))
        .distinct()
    )


def refused_deliveries(chains: DataFrame, paths: DataFrame, notices: DataFrame) -> DataFrame:
    """→ ``(envelope)``: relays of a version to a subscriber that refused it (a signed notice
    instead of a receipt: :func:`audit.faults.receipts` expects none)."""
    relays = chains.where(F.col("kind") == "relay").select(
        "envelope", F.col("recipient").alias("subscriber")
    )
    return (
        relays.join(rooted(paths), "envelope")
        .join(refused_versions(chains, notices), ["publication", "subscriber"])
        .select("envelope")
    )


def _registered(chains: DataFrame, nodes: DataFrame) -> DataFrame:
    """→ ``(subscriber, first_ms, last_ms)``: the span of the hops each subscriber took part
    in (relays to it, its receipts)."""
    subscribers = F.broadcast(_subscribers(nodes).select(F.col("recipient").alias("subscriber")))
    relays = chains.where(F.col("kind") == "relay").select(
        F.col("recipient").alias("subscriber"), "timestamp_ms"
    )
    receipts = chains.where(F.col("kind") == "receipt").select(
        F.col("node").alias("subscriber"), "timestamp_ms"
    )
    return (
        relays.union(receipts)
        .join(subscribers, "subscriber")
        .groupBy("subscriber")
        .agg(F.min("timestamp_ms").alias("first_ms"), F.max("timestamp_ms").alias("last_ms"))
    )


def _intersection(arrays: Column) -> Column:
    return F.aggregate(
        F.slice(arrays, 2, 1 << 30), arrays[0], lambda acc, a: F.array_intersect(acc, a)
    )


def recipients(
    chains: DataFrame,
    paths: DataFrame,
    nodes: DataFrame,
    notices: DataFrame,
    grants: DataFrame | None = None,
) -> DataFrame:
    """Who received what, per publication and subscriber (see the module docstring).

    Args:
        notices: :func:`audit.refusals.refusals` (only verified notices count).
        grants: :func:`audit.grants.grant_intervals` rows, or ``None`` (nothing is due).

    Returns:
        ``(publication, document_id, document_version, publisher, published_ms, subscriber,
        received, due, missing, refused, status)``; ``received``, ``due`` and ``missing`` are
        concept names (``due`` and ``missing`` null without policies).
    """
    pubs = publications(chains)
    refused = refused_versions(chains, notices)
    got = (
        chains.where(F.col("kind") == "receipt")
        .select("envelope", F.col("node").alias("subscriber"), "leaves")
        .join(rooted(paths), "envelope")
        .groupBy("publication", "subscriber")
        .agg(F.flatten(F.collect_list("leaves")).alias("got"))
    )
    keys = got.select("publication", "subscriber").union(
        refused.select("publication", "subscriber")
    )
    if grants is not None:
        due = (
            pubs.where(F.col("concepts").isNotNull())
            .join(
                _grants(grants),
                (F.col("publisher") == F.col("g_publisher")) & _in_piece("published_ms"),
            )
            .join(
                F.broadcast(_registered(chains, nodes)),
                F.col("g_subscriber") == F.col("subscriber"),
            )
            .where(F.col("published_ms").between(F.col("first_ms"), F.col("last_ms")))
            .groupBy("publication", "subscriber")
            .agg(
                F.first("concepts").alias("concepts"),
                _intersection(F.collect_list("g_required")).alias("required"),
            )
            .select(
                "publication",
                "subscriber",
                F.array_intersect(
                    "required", F.transform("concepts", lambda c: c["concept"])
                ).alias("due"),
            )
            .where(F.size("due") > 0)
        )
        keys = keys.union(due.select("publication", "subscriber"))
    rows = (
        keys.distinct()
        .join(pubs, "publication")
        .join(got, ["publication", "subscriber"], "left")
        .join(refused, ["publication", "subscriber"], "left")
    )
    if grants is not None:
        rows = rows.join(due, ["publication", "subscriber"], "left")
    else:
        rows = rows.withColumn("due", F.lit(None).cast("array<string>"))
    have = F.coalesce(F.col("got"), F.array().cast("array<struct<start:bigint,end:bigint>>"))
    covered = F.filter(
        "concepts",
        lambda c: F.exists(have, lambda r: (r["start"] <= c["start"]) & (c["end"] <= r["end"])),
    )
    received = F.coalesce(concepts_carried("got", "concepts"), F.array().cast("array<string>"))
    missing = F.array_except("due", F.transform(covered, lambda c: c["concept"]))
    refused_flag = F.coalesce(F.col("refused"), F.lit(False))
    status = (
        F.when(refused_flag, F.lit("refused"))
        .when(F.col("got").isNull(), F.lit("missing"))
        .when(F.size(missing) > 0, F.lit("partial"))
        .otherwise(F.lit("received"))
    )
    return rows.select(
        "publication",
        "document_id",
        "document_version",
        "publisher",
        "published_ms",
        "subscriber",
        received.alias("received"),
        "due",
        missing.alias("missing"),
        refused_flag.alias("refused"),
        status.alias("status"),
    )


def completeness(received: DataFrame) -> DataFrame:
    """Subscribers due a version that they never received, or received without some due
    concept (and did not refuse) → findings ``(graph, node, reason, class)``.

    Args:
        received: :func:`recipients`.
    """
    version = F.coalesce(F.concat(F.lit(" v"), F.col("document_version").cast("string")), F.lit(""))
    what = _text(F.col("publisher"), "'s ", F.col("document_id"), version)
    reason = F.when(
        F.col("status") == "missing",
        _text(
            "<",
            F.col("subscriber"),
            "> was due ",
            _concept_list(F.col("due")),
            " of ",
            what,
            " and never received it",
        ),
    ).otherwise(
        _text(
            "<",
            F.col("subscriber"),
            "> received ",
            what,
            " without ",
            _concept_list(F.col("missing")),
            ", which it was due",
        ),
    )
    return received.where(F.col("status").isin("missing", "partial")).select(
        *_finding(F.col("publication"), F.col("subscriber"), reason, "completeness")
    )


def grant_table(
    nodes: DataFrame,
    changes: DataFrame,
    ontology: Ontology,
    files: Sequence[PolicyFile],
    *,
    grace_ms: int = POLICY_GRACE_MS,
) -> tuple[DataFrame, tuple[PolicyUsed, ...]]:
    """The grants of every subscriber certificate in the logs under the signed ``files``
    (:func:`audit.grants.grant_intervals`), and which versions were in force from when.

    Collects to the driver only what grows with the network, never with the logs: the
    publisher and subscriber certificates (one row each) and the earliest policy-change notice
    per (publisher, version).

    Args:
        nodes: :func:`audit.trust.judge_certificates`.
        changes: :func:`audit.faults.policy_changes`.

    Raises:
        UsageError: a policy that no certificate of its publisher in the logs signed.
    """
    parties = F.col("role").isin("publisher", "subscriber")
    issued = nodes.where(F.col("problem").isNull() & parties)
    held = issued.select("role", "name", "node", "cert_pem", "revoked_ms").distinct().collect()
    publisher_certs: dict[str, list[str]] = {}
    for row in (r for r in held if r.role == "publisher"):
        publisher_certs.setdefault(row.name, []).append(row.cert_pem)
    policies = check_signed(files, publisher_certs)
    starts = {
        (r.publisher, r.version): r.start_ms
        for r in changes.groupBy("publisher", "version")
        .agg(F.min("changed_at_ms").alias("start_ms"))
        .collect()
    }
    holders = [  # (one collect for both roles: the nodes' certificates, one row each)
        SubscriberCertificate(node=r.node, cert_pem=r.cert_pem, revoked_ms=r.revoked_ms)
        for r in held
        if r.role == "subscriber"
    ]
    rows = grant_intervals(holders, policies, starts, ontology, grace_ms=grace_ms)
    table = nodes.sparkSession.createDataFrame([astuple(g) for g in rows], GRANT_SCHEMA)
    lowest = {
        p.publisher: min(q.version for q in policies if q.publisher == p.publisher)
        for p in policies
    }

    def since(policy: Policy) -> str:
        start = starts.get((policy.publisher, policy.version))
        if policy.version == lowest[policy.publisher] or start is None:
            return ""
        return datetime.fromtimestamp(start / 1000, UTC).isoformat(timespec="milliseconds")

    used = tuple(
        PolicyUsed(
            publisher=p.publisher,
            version=p.version,
            source=p.source,
            digest=p.digest,
            in_force_from=since(p),
            used=p.version == lowest[p.publisher] or (p.publisher, p.version) in starts,
        )
        for p in sorted(policies, key=lambda p: (p.publisher, p.version))
    )
    return table, used
