"""Each fault class planted alone in otherwise clean logs is found, and named by its class;
renewed, rotated and expired-since certificates raise nothing (one audit for all plants)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_logs import Planted, make_planted
from pyspark.sql import SparkSession

from audit import faults
from audit.job import run_audit
from audit.report import AuditSummary

pytestmark = pytest.mark.spark


@dataclass(frozen=True, slots=True, kw_only=True)
class Audited:
    planted: Planted
    summary: AuditSummary
    out: Path
    found: dict[str, list[tuple[str, str]]]  # document → sorted (class, graph)


def _document(graph: str) -> str:
    """The document of a message graph ``https://NODE/msg/DOC/HOP#…``."""
    return graph.split("/msg/", 1)[1].split("/", 1)[0] if "/msg/" in graph else ""


@pytest.fixture(scope="module")
def audited(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Audited:
    """One audit (judged now, long after the logs were signed) of all plants and controls,
    with the CA's CRL revoking s3."""
    root = tmp_path_factory.mktemp("planted")
    planted = make_planted(root)
    summary = run_audit(
        [str(planted.logs)], ca_pem=planted.ca_pem, out_dir=root / "out",
        crl_pems=[planted.crl_pem], ontology_paths=[planted.ontology],
        policy_paths=[planted.policy],
    )
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for f in summary.failures:
        found[_document(f.graph)].append((f.kind, f.graph))
    return Audited(
        planted=planted, summary=summary, out=root / "out",
        found={doc: sorted(rows) for doc, rows in found.items()},
    )


def test_renewed_rotated_and_expired_since_certificates_raise_nothing(audited: Audited) -> None:
    for control in audited.planted.controls:
        assert control not in audited.found, (control, audited.found[control])


def test_nothing_is_found_but_what_was_planted(audited: Audited) -> None:
    assert set(audited.found) == set(audited.planted.expected), audited.summary.failures


@pytest.mark.parametrize(
    "document",
    [
        "no-receipt",
        "no-delivery",
        "twice",
        "resent",
        "revoked",
        "backwards",
        "subscriber-relays",
        "other-publisher",
        "unentitled",
        "look-alike",
        "over-granted",
        "incomplete",
        "partial",
    ],
)
def test_a_planted_fault_is_found_by_its_class(audited: Audited, document: str) -> None:
    assert audited.found.get(document) == audited.planted.expected[document]


def test_reasons_say_what_is_wrong(audited: Audited) -> None:
    reasons = {(f.kind, _document(f.graph)): f.reason for f in audited.summary.failures}
    s1, s3 = audited.planted.nodes["s1"].uri, audited.planted.nodes["s3"].uri
    assert reasons[("receipt", "no-receipt")] == f"delivery to <{s1}> has no receipt"
    assert "clock-skew tolerance 2000 ms" in reasons[("time-order", "backwards")]
    assert "stamped 10000 ms before" in reasons[("time-order", "backwards")]
    assert reasons[("role", "subscriber-relays")] == (
        "a relay signed under a subscriber certificate (it needs a site certificate)"
    )
    assert reasons[("role", "other-publisher")] == (
        "its content graph names publisher 'pub' but is signed by 'pub2'"
    )
    assert "logged more than once" in reasons[("duplicate", "twice")]
    mallory, d2 = (audited.planted.nodes[n].uri for n in ("mallory", "d2"))
    assert reasons[("forged-signer", "look-alike")] == (
        f"forged signer: certificate is for <{mallory}>, not <{d2}>"
    )
    s4 = audited.planted.nodes["s4"].uri
    assert reasons[("entitlement", "unentitled")] == (
        f"delivered to <{s4}> after version 2 of pub's policy granted it nothing "
        "(from 2026-01-05T00:00:10.000Z)"
    )
    revoked = [
        f.reason for f in audited.summary.failures
        if f.kind == "revocation" and "delivered" in f.reason
    ]
    assert len(revoked) == 1 and revoked[0].startswith(f"delivered to <{s3}> at ")


def test_the_failures_table_has_the_class(spark: SparkSession, audited: Audited) -> None:
    table = spark.read.parquet(str(audited.out / "failures"))
    assert table.columns == ["graph", "node", "reason", "class"]
    assert table.where("class IS NULL").count() == 0
    classes = {r["class"] for r in table.select("class").distinct().collect()}
    assert classes == {
        "receipt", "duplicate", "revocation", "time-order", "role", "entitlement",
        "forged-signer", "completeness",
    }


def test_the_clock_skew_tolerance(spark: SparkSession) -> None:
    chains = spark.createDataFrame(
        [("e2", "e1", "d1", 1_000, 2_500), ("f2", "f1", "d1", 1_000, 1_000 + 2_000)],
        "envelope string, parent string, node string, timestamp_ms bigint, parent_ms bigint",
    )
    assert [r.graph for r in faults.time_order(chains, 1_000).collect()] == ["e2", "f2"]
    assert [r.graph for r in faults.time_order(chains, 1_500).collect()] == ["f2"]
    assert faults.time_order(chains, 2_000).count() == 0  # exactly the tolerance is fine


def test_entitlement_and_completeness_reasons_name_concepts(audited: Audited) -> None:
    reasons = {(f.kind, _document(f.graph)): f.reason for f in audited.summary.failures}
    c1, w1 = (audited.planted.nodes[n].uri for n in ("c1", "w1"))
    assert reasons[("entitlement", "over-granted")] == (
        f"delivered MachineSetting of pub's over-granted v1 to <{c1}>, which policy version 1 "
        "does not grant it"
    )
    assert reasons[("completeness", "incomplete")] == (
        f"<{c1}> was due Production of pub's incomplete v1 and never received it"
    )
    assert reasons[("completeness", "partial")] == (
        f"<{w1}> received pub's partial v1 without MachineSetting, Measurement, which it was due"
    )


def test_who_received_what(spark: SparkSession, audited: Audited) -> None:
    table = spark.read.parquet(str(audited.out / "recipients"))
    names = {node.uri: name for name, node in audited.planted.nodes.items()}
    status = {
        (r.document_id, names[r.subscriber]): r.status
        for r in table.where("document_version = 1").collect()
    }
    assert status == {
        ("ok-concepts", "w1"): "received", ("ok-concepts", "c1"): "received",
        ("over-granted", "w1"): "received", ("over-granted", "c1"): "received",
        ("incomplete", "w1"): "received", ("incomplete", "c1"): "missing",
        ("partial", "w1"): "partial", ("partial", "c1"): "received",
        ("ok-refused", "w1"): "received", ("ok-refused", "c1"): "refused",
        ("ok-unregistered", "w1"): "received",
    }
    row = table.where("document_id = 'partial' AND status = 'partial'").first()
    assert row is not None
    assert (row.received, row.due, row.missing) == (
        ["Production"], ["MachineSetting", "Measurement", "Production"],
        ["MachineSetting", "Measurement"],
    )
