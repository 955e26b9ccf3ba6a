"""The Spark audit over real provenance logs of a small network (one shared local session)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from audit_logs import NOW, T0, Network, make_network
from pyspark.sql import Row, SparkSession
from pyspark.testing.utils import assertDataFrameEqual

from audit import transforms as t
from audit.job import run_audit
from audit.report import AuditSummary
from xdn import crypto
from xdn.errors import UsageError
from xdn.provenance import (
    ProvenanceLog,
    RefusalFacts,
    Signer,
    failure_notice,
    notice_uri,
)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Network:
    return make_network(tmp_path_factory.mktemp("logs"))


def test_clean_network_passes(spark: SparkSession, network: Network, tmp_path: Path) -> None:
    lines: list[str] = []
    summary = run_audit(
        [str(network.clean)], ca_pem=network.ca_pem, out_dir=tmp_path, at=NOW, progress=lines.append
    )
    assert summary.failures == () and summary.ok, summary.failures
    assert (summary.messages, summary.signatures_verified, summary.signatures_failed) == (6, 7, 0)
    # delivered: s1 got leaves 0-4 6-10 (8), s2 got 4-6 (2)
    assert (summary.chains_ok, summary.chains_broken, summary.fragments_delivered) == (2, 0, 10)
    assert len(lines) >= 4 and "6 messages" in lines[-1] and "10 fragments" in lines[-1]
    uri = {k: v.uri for k, v in network.nodes.items()}
    paths = spark.read.parquet(str(tmp_path / "paths")).where(f"subscriber = '{uri['s1']}'")
    assert [(p.nodes, p.leaves, p.fragments, p.hops, p.chain_ok) for p in paths.collect()] == [
        (
            [uri["pub"], uri["d1"], uri["d2"], uri["s1"]],
            [Row(start=0, end=4), Row(start=6, end=10)],
            8,
            3,  # pub → d1 → d2 → s1: s1's receipt acknowledges the last hop, it is not one
            True,
        )
    ]
    signatures = spark.read.parquet(str(tmp_path / "signatures"))
    batch = signatures.where("batch_size IS NOT NULL").collect()
    assert sorted((s.node, s.batch_size, s.verified) for s in batch) == [(uri["d1"], 2, True)] * 2
    chains = spark.read.parquet(str(tmp_path / "chains")).where(f"node = '{uri['s2']}'")
    assert [c.leaves for c in chains.collect()] == [[Row(start=4, end=6)]]
    fan = {f.node: f.max_fan_out for f in summary.fan_out}
    assert fan[uri["d1"]] == 2 and fan[uri["d2"]] == 1
    latency = {(h.sender, h.receiver): h.mean_ms for h in summary.latencies}
    assert latency[(uri["d2"], uri["s1"])] == 30.0
    assert "Every chain verifies" in (tmp_path / "report.html").read_text()
    for table in ("signatures", "chains"):
        assert (tmp_path / table).is_dir()


@dataclass(frozen=True, slots=True, kw_only=True)
class Attacked:
    summary: AuditSummary
    report: str
    tampered: str  # the envelope graph altered in d1's log


@pytest.fixture(scope="module")
def attacked(
    spark: SparkSession, network: Network, tmp_path_factory: pytest.TempPathFactory
) -> Attacked:
    """One audit of the forged network after one quad of d1's log was altered (a batch-signed
    envelope of doc1) and one hash of a batch inclusion path in d1's log flipped (doc3)."""
    root = tmp_path_factory.mktemp("attacked")
    shutil.copytree(network.forged, root / "logs")
    tampered = network.nodes["d1"].mid("doc1", "a") + "#e2"
    log = root / "logs" / "d1" / "provenance.nq"
    text = log.read_text()
    old = f'"{T0 + 1010}"^^<http://www.w3.org/2001/XMLSchema#long> <{tampered}> .'
    assert text.count(old) == 1
    text = text.replace(old, old.replace(str(T0 + 1010), str(T0 + 1011)))
    graph = re.escape(network.tampered["batch path"] + "s")
    path = re.compile(rf'(#batchPath> ")([0-9A-F])(.*" <{graph}> \.)')
    assert len(path.findall(text)) == 1
    text = path.sub(lambda m: m[1] + ("1" if m[2] == "0" else "0") + m[3], text)
    log.write_text(text)
    summary = run_audit([str(root / "logs")], ca_pem=network.ca_pem, out_dir=root / "out", at=NOW)
    return Attacked(
        summary=summary, report=(root / "out" / "report.html").read_text(), tampered=tampered
    )


def _failures(attacked: Attacked, document: str) -> list[tuple[str, str, str]]:
    """The failures of ``document`` but missing receipts (the forged documents' deliveries to
    s1 have none: :func:`test_deliveries_without_receipts_are_found`)."""
    return [
        (f.graph, f.node, f.reason)
        for f in attacked.summary.failures
        if document in f.graph and f.kind != "receipt"
    ]


def test_deliveries_without_receipts_are_found(attacked: Attacked, network: Network) -> None:
    d1, d2, d9 = (network.nodes[n] for n in ("d1", "d2", "d9"))
    s1 = network.nodes["s1"].uri
    missing = sorted((f.graph, f.node) for f in attacked.summary.failures if f.kind == "receipt")
    assert missing == sorted(
        [
            (d9.mid("doc2", "b") + "#e3", s1),  # d9 is no site of this CA, s1 is a subscriber
            (d1.mid("doc3", "c") + "#e2", s1),
            (d2.mid("doc3", "d") + "#e3", s1),
            (d1.mid("doc4", "a") + "#e2", s1),
        ]
    )


def test_altered_envelope_quad_is_reported_as_exactly_that_graph(
    attacked: Attacked, network: Network
) -> None:
    doc1 = _failures(attacked, "/doc1/")
    assert [(graph, node) for graph, node, _ in doc1] == [
        (attacked.tampered, network.nodes["d1"].uri)
    ]
    assert "does not verify" in doc1[0][2]
    assert [f.kind for f in attacked.summary.failures if "/doc1/" in f.graph] == ["signature"]
    # d1 → d2 → s1 breaks; d1 → s2, signed in the same batch, still verifies (2 leaves), and
    # so does d1 → s2 of doc3 (2 leaves)
    assert attacked.summary.fragments_delivered == 4 and not attacked.summary.ok


def test_log_signed_by_uncertified_key_is_a_forged_signer(
    attacked: Attacked, network: Network
) -> None:
    d9 = network.nodes["d9"]
    doc2 = _failures(attacked, "/doc2/")
    assert [(graph, node) for graph, node, _ in doc2] == [(d9.mid("doc2", "b") + "#e3", d9.uri)]
    assert doc2[0][2].startswith("forged signer: ")
    kinds = {f.kind for f in attacked.summary.failures if f.graph == doc2[0][0]}
    assert kinds == {"forged-signer", "receipt"}  # a foreign CA; s1 signed no receipt of it
    assert "not issued by the trusted CA" in doc2[0][2]
    summary = attacked.summary
    assert len(summary.failures) == 5 + 4 and summary.signatures_failed == 4  # 4 receipts
    assert (summary.messages, summary.chains_ok, summary.chains_broken) == (17, 2, 5)
    assert "forged signer" in attacked.report and "9 failure(s)" in attacked.report


def test_leaves_outside_the_parent_runs_and_a_tampered_batch_path_are_flagged(
    attacked: Attacked, network: Network
) -> None:
    d1, d2 = network.nodes["d1"].uri, network.nodes["d2"].uri
    assert _failures(attacked, "/doc3/") == [
        (network.tampered["batch path"], d1, "signature does not verify"),
        (network.tampered["leaves"], d2, "carries manifest leaves that what it wraps does not"),
    ]
    kinds = {f.graph: f.kind for f in attacked.summary.failures if f.kind != "receipt"}
    assert (kinds[network.tampered["batch path"]], kinds[network.tampered["leaves"]]) == (
        "signature",
        "chain",  # a chain that breaks
    )


def test_a_carried_certificate_other_than_the_logged_one_is_flagged(
    attacked: Attacked, network: Network
) -> None:
    d1 = network.nodes["d1"].uri
    assert _failures(attacked, "/doc4/") == [
        (
            network.tampered["certificate"],
            d1,
            f"carries a signer certificate that is not <{d1}>'s: certificate is for "
            f"<{network.nodes['d2'].uri}>, not <{d1}>",
        )
    ]
    assert {f.kind for f in attacked.summary.failures if "/doc4/" in f.graph} == {
        "certificate", "receipt"
    }


def test_parse_and_collect_graphs(spark: SparkSession) -> None:
    g = "<https://d1.xdn.example/msg/d/a#e2>"
    lines = spark.createDataFrame(
        [
            (f'<urn:b> <urn:p> "x"@EN {g} .', "log1"),
            ("", "log1"),
            ("# note", "log1"),
            (f"<urn:a>  <urn:p>\t<urn:o> {g} .", "log2"),
            ("_:b <urn:p> <urn:o> .", "log2"),
            ("<urn:a> <urn:p> <urn:o> .", "log2"),
        ],
        ["value", "source"],
    )
    parsed = t.parse_lines(lines)
    errors = parsed.where("error IS NOT NULL").select("source", "error")
    assertDataFrameEqual(
        errors,
        [
            Row(source="log2", error="blank node as subject: blank nodes are not allowed"),
            Row(source="log2", error="quad in the default graph"),
        ],
    )
    assertDataFrameEqual(
        t.collect_graphs(parsed),
        [
            Row(
                graph=g[1:-1],
                lines=[f"<urn:a> <urn:p> <urn:o> {g} .", f'<urn:b> <urn:p> "x"@en {g} .'],
                sources=["log1", "log2"],
            )
        ],
    )


def test_reconstruct_paths_reports_missing_hops(spark: SparkSession) -> None:
    leaves = "array<struct<start:bigint,end:bigint>>"
    chains = spark.createDataFrame(
        [
            ("e1", None, "pub", "publication", 0, True, "d", [(0, 9)]),
            ("e2", "e1", "d1", "relay", 5, True, "d", [(0, 2), (5, 7)]),
            ("e3", "e2", "s1", "receipt", 9, True, "d", [(0, 2), (5, 7)]),
            ("x3", "gone", "s2", "receipt", 9, True, "d", [(2, 5)]),
            ("y1", None, "pub", "publication", 0, False, "other", [(0, 1)]),
        ],
        "envelope string, parent string, node string, kind string, timestamp_ms bigint, "
        f"hop_ok boolean, document_id string, leaves {leaves}",
    )
    paths = t.reconstruct_paths(chains).select(
        "leaf", "leaves", "fragments", "nodes", "subscriber", "missing_envelope", "chain_ok"
    )
    assertDataFrameEqual(
        paths,
        [
            Row(
                leaf="e3",
                leaves=[Row(start=0, end=2), Row(start=5, end=7)],
                fragments=4,
                nodes=["pub", "d1", "s1"],
                subscriber="s1",
                missing_envelope=None,
                chain_ok=True,
            ),
            Row(
                leaf="x3",
                leaves=[Row(start=2, end=5)],
                fragments=3,
                nodes=["s2"],
                subscriber="s2",
                missing_envelope="gone",
                chain_ok=False,
            ),
            Row(
                leaf="y1",
                leaves=[Row(start=0, end=1)],
                fragments=1,
                nodes=["pub"],
                subscriber=None,
                missing_envelope=None,
                chain_ok=False,
            ),
        ],
    )


def test_leaves_within_is_an_exact_subset_test_over_merged_runs(spark: SparkSession) -> None:
    leaves = "array<struct<start:bigint,end:bigint>>"
    cases = spark.createDataFrame(
        [
            ("equal", [(0, 4), (6, 10)], [(0, 4), (6, 10)], True),
            ("inside", [(1, 2), (7, 10)], [(0, 4), (6, 10)], True),
            ("straddles the gap", [(3, 7)], [(0, 4), (6, 10)], False),
            ("in the gap", [(4, 6)], [(0, 4), (6, 10)], False),
            ("one run beyond", [(0, 4), (9, 11)], [(0, 4), (6, 10)], False),
            ("parent unknown", [(0, 1)], None, False),
        ],
        f"case string, runs {leaves}, parents {leaves}, expected boolean",
    )
    got = cases.select("case", t.leaves_within("runs", "parents").alias("within"), "expected")
    assert [(r.case, r.within) for r in got.collect()] == [
        (r.case, r.expected) for r in cases.collect()
    ]


def test_unreadable_or_missing_logs_are_a_usage_error(
    spark: SparkSession, network: Network, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="cannot read provenance logs"):
        run_audit([str(tmp_path / "absent")], ca_pem=network.ca_pem, out_dir=tmp_path, at=NOW)
    with pytest.raises(UsageError, match="at least one log path"):
        run_audit(str(network.clean), ca_pem=network.ca_pem, out_dir=tmp_path)


# ----------------------------------------------------------------------------- refusals


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    summary: AuditSummary
    out: Path
    forged: str  # the message URI of the notice signed by a key that is not s1's


@pytest.fixture(scope="module")
def refused(
    spark: SparkSession, network: Network, tmp_path_factory: pytest.TempPathFactory
) -> Refused:
    """One audit of the clean network after s1 and s2 signed failure notices, and a notice in
    s1's name was forged with another key."""
    root = tmp_path_factory.mktemp("refused")
    shutil.copytree(network.clean, root / "logs")
    n = network.nodes
    d1, d2 = n["d1"].uri, n["d2"].uri

    def add(node: str, hop: str, facts: RefusalFacts, at: int, key: Signer | None = None) -> str:
        signer = key or n[node].signer
        message = failure_notice(
            signer,
            message_uri=notice_uri(signer.node_uri, hop),
            refusal=facts,
            timestamp_ms=T0 + at,
        )
        path = root / "logs" / node / "provenance.nq"
        with ProvenanceLog(path, node_uri=n[node].uri, cert_pem=n[node].cert_pem) as log:
            log.append(message)
        return message.uri

    forged_doc = RefusalFacts(kind="document", reason="manifest signature does not verify",
                              publisher="ACME", document_id="doc9", version=2,
                              manifest_root=b"\x09" * 32, received_from=d2)
    add("s1", "a", forged_doc, 3_000)
    add("s1", "b", RefusalFacts(kind="key", reason="rekey not signed by the key service",
                                publisher="ACME", key_message="rekey", concept="urn:c:f1",
                                epoch=4, received_from=d2), 3_100)
    add("s2", "a", RefusalFacts(kind="crl", reason="CRL not signed by the CA"), 3_200)
    add("s2", "g", RefusalFacts(kind="gap", reason="document #7 of ACME was withheld",
                                publisher="ACME", sequence=7, received_from=d2), 3_250)
    add("s2", "b", RefusalFacts(kind="unverified", reason="not held: bad proof",
                                publisher="ACME", document_id="doc8", version=1,
                                received_from=d1), 3_300)
    impostor = Signer(node_uri=n["s1"].uri, private_key=crypto.generate_private_key())
    forged = add("s1", "c", RefusalFacts(kind="revoked", reason="made up", publisher="ACME",
                                         document_id="doc1", received_from=d1), 3_400, impostor)
    out = root / "out"
    summary = run_audit([str(root / "logs")], ca_pem=network.ca_pem, out_dir=out, at=NOW)
    return Refused(summary=summary, out=out, forged=forged)


def test_refusals_are_counted_per_kind_and_site(refused: Refused, network: Network) -> None:
    s = refused.summary
    d1, d2 = network.nodes["d1"].uri, network.nodes["d2"].uri
    assert (s.refusals_verified, s.refusals_unverified) == (5, 1)
    assert s.refusals_by_kind == (
        ("crl", 1), ("document", 1), ("gap", 1), ("key", 1), ("unverified", 1)
    )
    assert s.refusals_by_site == ((d1, 1), (d2, 3), ("unknown", 1))
    # notices are messages of their own: the chains are as in the clean network
    assert (s.messages, s.chains_ok, s.chains_broken, s.fragments_delivered) == (6, 2, 0, 10)
    assert [(r.kind, r.what, r.verified) for r in s.refusals] == [
        ("document", "doc9 v2", True),
        ("key", "rekey of urn:c:f1, epoch 4", True),
        ("crl", "", True),
        ("gap", "", True),
        ("unverified", "doc8 v1", True),
        ("revoked", "doc1", False),
    ]
    report = (refused.out / "report.html").read_text()
    assert "<h2>Refusals</h2>" in report and "5 refusal(s) signed" in report
    assert "1 notice(s) do not verify" in report and "rekey of urn:c:f1, epoch 4" in report


def test_a_forged_notice_is_tampering(refused: Refused, network: Network) -> None:
    s1 = network.nodes["s1"].uri
    failures = [(f.graph, f.node, f.reason) for f in refused.summary.failures]
    assert failures == [
        (refused.forged + "#c1", s1, "signature does not verify"),
        (refused.forged + "#e1", s1, "signature does not verify"),
    ]
    assert {f.kind for f in refused.summary.failures} == {"signature"}
    assert not refused.summary.ok and refused.summary.signatures_failed == 2


def test_the_refusals_table(spark: SparkSession, refused: Refused, network: Network) -> None:
    uri = {k: v.uri for k, v in network.nodes.items()}
    table = spark.read.parquet(str(refused.out / "refusals"))
    assertDataFrameEqual(
        table.select("subscriber", "kind", "publisher", "document", "site", "reason",
                     "timestamp_ms", "verified"),
        [
            Row(subscriber=uri["s1"], kind="document", publisher="ACME", document="doc9",
                site=uri["d2"], reason="manifest signature does not verify",
                timestamp_ms=T0 + 3_000, verified=True),
            Row(subscriber=uri["s1"], kind="key", publisher="ACME", document=None,
                site=uri["d2"], reason="rekey not signed by the key service",
                timestamp_ms=T0 + 3_100, verified=True),
            Row(subscriber=uri["s2"], kind="crl", publisher=None, document=None, site=None,
                reason="CRL not signed by the CA", timestamp_ms=T0 + 3_200, verified=True),
            Row(subscriber=uri["s2"], kind="gap", publisher="ACME", document=None,
                site=uri["d2"], reason="document #7 of ACME was withheld",
                timestamp_ms=T0 + 3_250, verified=True),
            Row(subscriber=uri["s2"], kind="unverified", publisher="ACME", document="doc8",
                site=uri["d1"], reason="not held: bad proof", timestamp_ms=T0 + 3_300,
                verified=True),
            Row(subscriber=uri["s1"], kind="revoked", publisher="ACME", document="doc1",
                site=uri["d1"], reason="made up", timestamp_ms=T0 + 3_400, verified=False),
        ],
    )
    first = table.where("kind = 'document'").first()
    assert first is not None and first.manifest_root == "09" * 32 and first.version == 2
    assert first.time is not None and first.problem is None and first.sequence is None
    gap = table.where("kind = 'gap'").first()  # the number of the publisher's sequence
    assert gap is not None and gap.sequence == 7 and gap.version is None
