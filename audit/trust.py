"""Certificates judged at the time they signed, and revocations (CRLs) in the audit.

Theory of operation
-------------------
A node holds several certificates over its life: it renews one (a new key, the same name),
rotates keys, and certificates expire after the logs were written. None of that is a fault; a
signature is sound when a certificate the CA issued *to that node* verifies it and was in force
**when it signed**, not when the auditor looks.

1. :func:`held_certificates` — every certificate a node ever presented: those of its node
   descriptions (one per certificate, :func:`audit.rows.describe_graph`) and those its
   signature graphs carry (``xdn:signerCertificate``: a node that renewed its certificate
   keeps appending to a log whose description names the old one).
2. :func:`judge_certificates` — per (node, certificate), once: whether the CA issued it to that
   node (time aside) and its serial, holder, role and validity period, with the time the CRLs
   revoked it (``revoked_ms``, :func:`read_revocations`).
3. :func:`signing_times` — when each signed graph was signed: an envelope's own timestamp, a
   content graph's that of the envelope that wraps it first.
4. :func:`in_time` — per signature that verifies, the certificates it verifies under
   (:func:`audit.verify.judge_signature` returns their serials) are checked at its signing
   time with native Spark expressions (no UDF, no join beyond the times): valid then and not
   yet revoked. A signature made outside every such period is class ``certificate``, one made
   after the certificate was revoked class ``revocation``; either is a signature that does not
   count (the chain breaks there). The role and holder of the certificate in force are kept
   for the role checks (:mod:`audit.faults`).

CRLs (``--crl``, repeatable) must be signed by the CA; a CRL issued after ``--at`` is not
used (the audit sees what was known then). Revocation times come from the CRL entries.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable, Sequence
from datetime import datetime

from cryptography import x509
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from audit import verify as V
from audit.report import CrlUsed
from xdn import certs
from xdn.errors import CertificateError, UsageError

__all__ = [
    "REVOKED_SCHEMA",
    "crls_used",
    "held_certificates",
    "in_time",
    "judge_certificates",
    "read_revocations",
    "revocations",
    "signing_times",
]

REVOKED_SCHEMA = "serial string, revoked_ms bigint"


def read_revocations(
    crl_pems: Sequence[bytes], ca_pem: bytes, *, at: datetime
) -> list[tuple[str, int]]:
    """``(serial, revoked_ms)`` of every certificate the CA's CRLs revoke (earliest time per
    serial); CRLs issued after ``at`` (beyond the CRL clock skew) are not used.

    Raises:
        UsageError: a CRL is malformed or not signed by the CA.
    """
    revoked: dict[str, int] = {}
    for pem in crl_pems:
        try:
            crl = certs.read_crl(pem, ca_pem)
            entries = list(x509.load_pem_x509_crl(pem))
        except (CertificateError, ValueError) as exc:
            raise UsageError(f"cannot use CRL: {exc}") from None
        if crl.this_update - certs.CRL_CLOCK_SKEW > at:
            continue
        for entry in entries:
            when = int(entry.revocation_date_utc.timestamp() * 1000)
            serial = str(entry.serial_number)
            revoked[serial] = min(when, revoked.get(serial, when))
    return sorted(revoked.items())


def crls_used(crl_pems: Sequence[bytes], ca_pem: bytes, *, at: datetime) -> tuple[CrlUsed, ...]:
    """What each CRL given is (number, times, entries) and whether it was used (issued by
    ``at``, within the CRL clock skew: :func:`read_revocations`), newest first.

    Raises:
        UsageError: a CRL is malformed or not signed by the CA.
    """
    out = []
    for pem in crl_pems:
        try:
            crl = certs.read_crl(pem, ca_pem)
        except (CertificateError, ValueError) as exc:
            raise UsageError(f"cannot use CRL: {exc}") from None
        out.append(
            CrlUsed(
                number=crl.number,
                this_update=crl.this_update.isoformat(timespec="seconds"),
                next_update=crl.next_update.isoformat(timespec="seconds"),
                entries=len(crl.serials),
                used=crl.this_update - certs.CRL_CLOCK_SKEW <= at,
            )
        )
    return tuple(sorted(out, key=lambda c: -c.number))


def revocations(spark: SparkSession, revoked: Sequence[tuple[str, int]]) -> DataFrame:
    """The revocations as a (small) DataFrame ``(serial, revoked_ms)``."""
    return spark.createDataFrame(list(revoked), REVOKED_SCHEMA)


def _carried_pem(der: bytes | bytearray | None) -> str | None:
    return None if der is None else ssl.DER_cert_to_PEM_cert(bytes(der))


def held_certificates(described: DataFrame, sigs: DataFrame) -> DataFrame:
    """→ ``(node, cert_pem)``, distinct: every certificate each node logged or signed with.

    Args:
        described: :func:`audit.transforms.describe_graphs`.
        sigs: :func:`audit.transforms.signatures`.
    """
    logged = described.where((F.col("kind") == "node") & F.col("error").isNull()).select(
        F.col("node_uri").alias("node"), F.explode("cert_pems").alias("cert_pem")
    )
    carried_der = sigs.where(F.col("certificate").isNotNull()).select(
        F.col("signer").alias("node"), "certificate"
    ).distinct()  # few distinct pairs: combined before the shuffle
    to_pem = F.udf(_carried_pem, "string", useArrow=False)  # per distinct certificate only
    carried = carried_der.select("node", to_pem("certificate").alias("cert_pem"))
    return logged.union(carried).distinct()


def judge_certificates(
    held: DataFrame, *, ca_pem: bytes, revoked: DataFrame | None = None
) -> DataFrame:
    """→ ``(node, cert_pem, problem, serial, name, role, not_before_ms, not_after_ms,
    revoked_ms)``: ``problem`` is null when the CA issued the certificate to that node (its
    time is judged per signature, :func:`in_time`); ``revoked_ms`` when a CRL revoked it."""
    facts = F.udf(lambda node, pem: V.certificate_facts(node, pem, ca_pem), V.FACTS_TYPE,
                  useArrow=False)  # once per certificate: grows with the nodes, not the log
    judged = held.select("node", "cert_pem", facts("node", "cert_pem").alias("f")).select(
        "node", "cert_pem", "f.*"
    )
    if revoked is None:
        return judged.withColumn("revoked_ms", F.lit(None).cast("bigint"))
    return judged.join(F.broadcast(revoked), "serial", "left")


def signing_times(described: DataFrame) -> DataFrame:
    """→ ``(signed_graph, signed_ms)``: each envelope's timestamp, and for a content graph the
    earliest timestamp of an envelope that wraps it."""
    envs = described.where((F.col("kind") == "envelope") & F.col("error").isNull())
    own = envs.select(F.col("graph").alias("signed_graph"), F.col("timestamp_ms"))
    wrapped = envs.select(F.explode("content").alias("signed_graph"), "timestamp_ms")
    return (
        own.union(wrapped)
        .groupBy("signed_graph")
        .agg(F.min("timestamp_ms").alias("signed_ms"))
    )


def _in_force(at: Column) -> Callable[[Column], Column]:
    def check(c: Column) -> Column:
        return (
            (c["not_before_ms"] <= at)
            & (at <= c["not_after_ms"])
            & (c["revoked_ms"].isNull() | (at < c["revoked_ms"]))
        )

    return check


def _when_text(ms: Column) -> Column:
    return F.date_format(F.timestamp_millis(ms), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def in_time(results: DataFrame, times: DataFrame) -> DataFrame:
    """Judge each verified signature at its signing time (see the module docstring).

    Args:
        results: :func:`audit.transforms.verify_signatures` (with ``verifying``: the facts of
            the certificates the signature verifies under, and ``class``).
        times: :func:`signing_times`.

    Returns:
        ``results`` with ``signed_ms``, ``role`` and ``holder`` (of the certificate in force,
        else of the first that verifies), and ``verified`` / ``reason`` / ``class`` revised.
    """
    at = F.col("signed_ms")
    in_force = F.filter("verifying", _in_force(at))
    revoked_then = F.filter(
        "verifying",
        lambda c: (c["not_before_ms"] <= at) & (at <= c["not_after_ms"]) & (c["revoked_ms"] <= at),
    )
    chosen = F.coalesce(
        F.try_element_at(in_force, F.lit(1)), F.try_element_at("verifying", F.lit(1))
    )
    judged = F.col("verified") & at.isNotNull() & (F.size(in_force) == 0)
    revoked = F.size(revoked_then) > 0
    first_revoked = F.try_element_at(revoked_then, F.lit(1))
    period = F.try_element_at("verifying", F.lit(1))
    reason = F.when(
        judged & revoked,
        F.concat(
            F.lit("signed at "), _when_text(at), F.lit(" under certificate "),
            first_revoked["serial"], F.lit(" of "), F.coalesce(first_revoked["name"], F.lit("?")),
            F.lit(", revoked at "), _when_text(first_revoked["revoked_ms"]),
        ),
    ).when(
        judged,
        F.concat(
            F.lit("signed at "), _when_text(at),
            F.lit(", outside the validity of its certificate (valid "),
            _when_text(period["not_before_ms"]), F.lit(" to "), _when_text(period["not_after_ms"]),
            F.lit(")"),
        ),
    )
    kind = F.when(judged & revoked, F.lit("revocation")).when(judged, F.lit("certificate"))
    return (
        results.join(times, "signed_graph", "left")
        .withColumn("role", chosen["role"])
        .withColumn("holder", chosen["name"])
        .withColumn("time_reason", reason)
        .withColumn("time_class", kind)
        .withColumn("verified", F.col("verified") & F.col("time_reason").isNull())
        .withColumn("reason", F.coalesce("reason", "time_reason"))
        .withColumn("class", F.coalesce("class", "time_class"))
        .drop("time_reason", "time_class")
    )
