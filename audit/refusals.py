"""Refusals in the audit: the failure notices parties signed when they refused something.

Theory of operation
-------------------
A subscriber that refuses a document, a CRL or a key message appends a *failure notice* to its
provenance log (:func:`xdn.provenance.failure_notice`, issue #13): one content graph naming
what was refused, the reason and the site it came from, wrapped in one ``xdn:Refusal``
envelope, each signed. The audit trusts a notice no more than any other graph:

* :func:`refusals` — one row per notice envelope, joined with its content graph and both
  signature verdicts (from :func:`audit.transforms.verify_signatures`). A notice is
  ``verified`` when both signatures verify and its envelope is sound: signed by the sender it
  names, its message URI in that sender's ``refusal/`` space, wrapping the content graph of
  its own message and referencing that graph's signature with its value. Why it is unsound
  (``problem``) goes to the failures (:func:`audit.transforms.failures`); a signature that does
  not verify is a failure already, as everywhere.
* :func:`refusal_counts` — the verified notices counted per kind and per site the refused
  thing came from (``unknown`` when the notice does not say).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from audit.transforms import _first_problem, _sound, _text

__all__ = ["refusal_counts", "refusals"]

UNKNOWN_SITE = "unknown"


def _verdicts(results: DataFrame, prefix: str) -> DataFrame:
    return results.select(
        F.col("signed_graph").alias(f"{prefix}signed"),
        F.col("sig_graph").alias(f"{prefix}sig_graph"),
        F.col("value").alias(f"{prefix}sig_value"),
        F.col("node").alias(f"{prefix}signer"),
        F.col("verified").alias(f"{prefix}signature_ok"),
    )


def _problem() -> Column:
    """The first reason a notice envelope (joined with its content, ``c_*``) is unsound."""
    reference = F.struct(
        F.col("c_sig_graph").alias("signature_graph"),
        F.col("c_graph").alias("signed_graph"),
        F.col("c_sig_value").alias("value"),
    )
    return _first_problem(
        (F.size("content") != 1, F.lit("a failure notice needs exactly one content graph")),
        (
            F.col("content")[0] != F.concat("message", F.lit("#c1")),
            F.lit("wraps a content graph of another message"),
        ),
        (F.col("refusal").isNull(), F.lit("its failure notice content graph is in no log")),
        (F.col("e_sig_graph").isNull(), F.lit("notice envelope is not signed")),
        (
            F.col("e_signer") != F.col("sender"),
            _text(
                "signed by <", F.col("e_signer"), "> but names <", F.col("sender"), "> as sender"
            ),
        ),
        (
            ~F.col("message").startswith(F.concat("sender", F.lit("refusal/"))),
            _text(
                "condition 11: notice URI is outside the notice space of <", F.col("sender"), ">"
            ),
        ),
        (F.col("c_sig_graph").isNull(), F.lit("its content graph is not signed")),
        (
            F.col("c_signer") != F.col("sender"),
            _text("its content graph is signed by <", F.col("c_signer"), ">, not its sender"),
        ),
        (
            F.col("references") != F.array(reference),
            F.lit("condition 5: does not reference exactly its content graph's signature"),
        ),
    )


def refusals(described: DataFrame, results: DataFrame) -> DataFrame:
    """Every failure notice in the logs, with what it says and whether it verifies.

    Args:
        described: :func:`audit.transforms.describe_graphs`.
        results: :func:`audit.transforms.verify_signatures`.

    Returns:
        ``(notice, message, subscriber, kind, publisher, document, version, key_message,
        concept, epoch, site, reason, manifest_root, sequence, timestamp_ms, time, verified,
        problem)``; ``subscriber`` is the party that refused, ``site`` the node the refused
        thing came from (null when unknown), ``sequence`` the number of the publisher's signed
        sequence a gap (kind ``gap``) names (null for every other kind).
    """
    notices = _sound(described, "envelope").where(F.col("env_kind") == "refusal")
    contents = _sound(described, "refusal").select(F.col("graph").alias("c_graph"), "refusal")
    joined = (
        notices.select("graph", "message", "sender", "timestamp_ms", "content", "references")
        .join(_verdicts(results, "e_"), F.col("graph") == F.col("e_signed"), "left")
        .join(contents, F.col("c_graph") == F.col("content")[0], "left")
        .join(_verdicts(results, "c_"), F.col("c_graph") == F.col("c_signed"), "left")
    )
    problem = _problem()
    signed = F.coalesce(F.col("e_signature_ok"), F.lit(False)) & F.coalesce(
        F.col("c_signature_ok"), F.lit(False)
    )
    return joined.select(
        F.col("graph").alias("notice"),
        "message",
        F.col("sender").alias("subscriber"),
        "refusal.kind",
        "refusal.publisher",
        F.col("refusal.document_id").alias("document"),
        "refusal.version",
        "refusal.key_message",
        "refusal.concept",
        "refusal.epoch",
        F.col("refusal.received_from").alias("site"),
        "refusal.reason",
        "refusal.manifest_root",
        "refusal.sequence",
        "timestamp_ms",
        F.timestamp_millis("timestamp_ms").alias("time"),
        (problem.isNull() & signed).alias("verified"),
        problem.alias("problem"),
    )


def refusal_counts(table: DataFrame) -> DataFrame:
    """Verified refusals counted per kind and per site → ``(by, value, refusals)``, where
    ``by`` is ``"kind"`` or ``"site"``."""
    verified = table.where(F.col("verified"))
    by_kind = verified.groupBy(F.lit("kind").alias("by"), F.col("kind").alias("value")).count()
    site = F.coalesce(F.col("site"), F.lit(UNKNOWN_SITE))
    by_site = verified.groupBy(F.lit("site").alias("by"), site.alias("value")).count()
    return by_kind.union(by_site).withColumnRenamed("count", "refusals")
