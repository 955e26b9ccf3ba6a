"""The Spark audit over real provenance logs of a small network (one shared local session)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark.sql import Row, SparkSession
from pyspark.testing.utils import assertDataFrameEqual

from audit import transforms as t
from audit.job import run_audit
from audit.report import AuditSummary
from xdn import certs, crypto
from xdn.errors import UsageError
from xdn.provenance import (
    ContentFacts,
    FragmentFact,
    Message,
    ProvenanceLog,
    RefusalFacts,
    Signer,
    failure_notice,
    notice_uri,
    originate,
    receipt,
    relay,
)

pytestmark = pytest.mark.spark

NOW = datetime(2026, 1, 5, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    signer: Signer
    cert_pem: bytes

    @property
    def uri(self) -> str:
        return self.signer.node_uri

    def mid(self, document: str, hop: str) -> str:
        return f"{self.uri}msg/{document}/{hop}"


def _node(name: str, ca: tuple[bytes, bytes]) -> Node:
    cert, key = certs.issue(
        *ca, name=name, role="site", attributes={certs.BLOCK_FIELD: "WorkOrder"}, now=NOW
    )
    uri = certs.node_uri(name)
    return Node(
        signer=Signer(node_uri=uri, private_key=crypto.load_private_key_pem(key)), cert_pem=cert
    )


def _content(document: str, ids: str) -> ContentFacts:
    return ContentFacts(
        document_id=document,
        publisher="ACME",
        manifest_root=b"\x07" * 32,
        fragments=tuple(
            FragmentFact(
                fragment_id=f, concept=f"urn:c:{f}", ciphertext_sha256=crypto.sha256(f.encode())
            )
            for f in ids.split()
        ),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    ca_pem: bytes
    nodes: dict[str, Node]
    clean: Path  # logs of doc1: pub → d1 ⇉ (d2 → s1, s2)
    forged: Path  # clean + doc2 through a node whose certificate is not from the CA


def _write_logs(root: Path, nodes: dict[str, Node], hops: list[tuple[str, Message]]) -> Path:
    for name, message in hops:
        node = nodes[name]
        with ProvenanceLog(
            root / name / "provenance.nq", node_uri=node.uri, cert_pem=node.cert_pem
        ) as log:
            log.append(message)
    return root


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    ca = certs.create_ca("xdn test CA", now=NOW)
    nodes = {n: _node(n, ca) for n in ("pub", "d1", "d2", "s1", "s2")}
    nodes["d9"] = _node("d9", certs.create_ca("rogue CA", now=NOW))
    n = nodes
    m1 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc1", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc1", "f1 f2 f3"),
        timestamp_ms=1_000,
    )
    to_d2 = relay(
        m1,
        n["d1"].signer,
        message_uri=n["d1"].mid("doc1", "a"),
        recipient_uri=n["d2"].uri,
        fragment_ids={"f1", "f2"},
        timestamp_ms=1_010,
    )
    to_s2 = relay(
        m1,
        n["d1"].signer,
        message_uri=n["d1"].mid("doc1", "b"),
        recipient_uri=n["s2"].uri,
        fragment_ids={"f3"},
        timestamp_ms=1_012,
    )
    to_s1 = relay(
        to_d2,
        n["d2"].signer,
        message_uri=n["d2"].mid("doc1", "c"),
        recipient_uri=n["s1"].uri,
        fragment_ids={"f1", "f2"},
        timestamp_ms=1_030,
    )
    doc1 = [
        ("pub", m1),
        ("d1", to_d2),
        ("d1", to_s2),
        ("d2", to_s1),
        (
            "s1",
            receipt(
                to_s1, n["s1"].signer, message_uri=n["s1"].mid("doc1", "r"), timestamp_ms=1_060
            ),
        ),
        (
            "s2",
            receipt(
                to_s2, n["s2"].signer, message_uri=n["s2"].mid("doc1", "r"), timestamp_ms=1_020
            ),
        ),
    ]
    m2 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc2", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc2", "g1"),
        timestamp_ms=2_000,
    )
    via_d9 = relay(
        m2,
        n["d1"].signer,
        message_uri=n["d1"].mid("doc2", "a"),
        recipient_uri=n["d9"].uri,
        fragment_ids={"g1"},
        timestamp_ms=2_010,
    )
    rogue = relay(
        via_d9,
        n["d9"].signer,
        message_uri=n["d9"].mid("doc2", "b"),
        recipient_uri=n["s1"].uri,
        fragment_ids={"g1"},
        timestamp_ms=2_020,
    )
    doc2 = [("pub", m2), ("d1", via_d9), ("d9", rogue)]
    root = tmp_path_factory.mktemp("logs")
    yield Network(
        ca_pem=ca[0],
        nodes=nodes,
        clean=_write_logs(root / "clean", nodes, doc1),
        forged=_write_logs(root / "forged", nodes, doc1 + doc2),
    )


def test_clean_network_passes(spark: SparkSession, network: Network, tmp_path: Path) -> None:
    lines: list[str] = []
    summary = run_audit(
        [str(network.clean)], ca_pem=network.ca_pem, out_dir=tmp_path, at=NOW, progress=lines.append
    )
    assert summary.failures == () and summary.ok, summary.failures
    assert (summary.messages, summary.signatures_verified, summary.signatures_failed) == (6, 7, 0)
    assert (summary.chains_ok, summary.chains_broken, summary.fragments_delivered) == (2, 0, 3)
    assert len(lines) >= 4 and "6 messages" in lines[-1]
    uri = {k: v.uri for k, v in network.nodes.items()}
    paths = spark.read.parquet(str(tmp_path / "paths")).where("fragment_id = 'f1'").collect()
    assert [(p.nodes, p.subscriber, p.chain_ok) for p in paths] == [
        ([uri["pub"], uri["d1"], uri["d2"], uri["s1"]], uri["s1"], True)
    ]
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
    """One audit of the forged network after one quad of d1's log was altered as well."""
    root = tmp_path_factory.mktemp("attacked")
    shutil.copytree(network.forged, root / "logs")
    tampered = network.nodes["d1"].mid("doc1", "a") + "#e2"
    log = root / "logs" / "d1" / "provenance.nq"
    text = log.read_text()
    old = f'"1010"^^<http://www.w3.org/2001/XMLSchema#long> <{tampered}> .'
    assert text.count(old) == 1
    log.write_text(text.replace(old, old.replace("1010", "1011")))
    summary = run_audit([str(root / "logs")], ca_pem=network.ca_pem, out_dir=root / "out", at=NOW)
    return Attacked(
        summary=summary, report=(root / "out" / "report.html").read_text(), tampered=tampered
    )


def test_altered_envelope_quad_is_reported_as_exactly_that_graph(
    attacked: Attacked, network: Network
) -> None:
    doc1 = [f for f in attacked.summary.failures if "/doc1/" in f.graph]
    assert [(f.graph, f.node) for f in doc1] == [(attacked.tampered, network.nodes["d1"].uri)]
    assert "does not verify" in doc1[0].reason
    # d1 → d2 → s1 breaks; d1 → s2 and everything else about doc1 still verifies
    assert attacked.summary.fragments_delivered == 1 and not attacked.summary.ok


def test_log_signed_by_uncertified_key_is_a_forged_signer(
    attacked: Attacked, network: Network
) -> None:
    d9 = network.nodes["d9"]
    doc2 = [f for f in attacked.summary.failures if "/doc2/" in f.graph]
    assert [(f.graph, f.node) for f in doc2] == [(d9.mid("doc2", "b") + "#e3", d9.uri)]
    assert doc2[0].reason.startswith("forged signer: ")
    assert "not issued by the trusted CA" in doc2[0].reason
    summary = attacked.summary
    assert len(summary.failures) == 2 and summary.signatures_failed == 2
    assert (summary.messages, summary.chains_ok, summary.chains_broken) == (9, 1, 2)
    assert "forged signer" in attacked.report and "2 failure(s)" in attacked.report


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
    columns = [
        "envelope",
        "parent",
        "node",
        "kind",
        "timestamp_ms",
        "hop_ok",
        "document_id",
        "fragments",
    ]
    chains = spark.createDataFrame(
        [
            ("e1", None, "pub", "publication", 0, True, "d", ["f", "g"]),
            ("e2", "e1", "d1", "relay", 5, True, "d", ["f"]),
            ("e3", "e2", "s1", "receipt", 9, True, "d", ["f"]),
            ("x3", "gone", "s2", "receipt", 9, True, "d", ["g"]),
            ("y1", None, "pub", "publication", 0, False, "other", ["h"]),
        ],
        columns,
    )
    paths = t.reconstruct_paths(chains).select(
        "leaf", "fragment_id", "nodes", "subscriber", "missing_envelope", "chain_ok"
    )
    assertDataFrameEqual(
        paths,
        [
            Row(
                leaf="e3",
                fragment_id="f",
                nodes=["pub", "d1", "s1"],
                subscriber="s1",
                missing_envelope=None,
                chain_ok=True,
            ),
            Row(
                leaf="x3",
                fragment_id="g",
                nodes=["s2"],
                subscriber="s2",
                missing_envelope="gone",
                chain_ok=False,
            ),
            Row(
                leaf="y1",
                fragment_id="h",
                nodes=["pub"],
                subscriber=None,
                missing_envelope=None,
                chain_ok=False,
            ),
        ],
    )


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
            signer, message_uri=notice_uri(signer.node_uri, hop), refusal=facts, timestamp_ms=at
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
    assert (s.refusals_verified, s.refusals_unverified) == (4, 1)
    assert s.refusals_by_kind == (("crl", 1), ("document", 1), ("key", 1), ("unverified", 1))
    assert s.refusals_by_site == ((d1, 1), (d2, 2), ("unknown", 1))
    # notices are messages of their own: the chains are as in the clean network
    assert (s.messages, s.chains_ok, s.chains_broken, s.fragments_delivered) == (6, 2, 0, 3)
    assert [(r.kind, r.what, r.verified) for r in s.refusals] == [
        ("document", "doc9 v2", True),
        ("key", "rekey of urn:c:f1, epoch 4", True),
        ("crl", "", True),
        ("unverified", "doc8 v1", True),
        ("revoked", "doc1", False),
    ]
    report = (refused.out / "report.html").read_text()
    assert "<h2>Refusals</h2>" in report and "4 refusal(s) signed" in report
    assert "1 notice(s) do not verify" in report and "rekey of urn:c:f1, epoch 4" in report


def test_a_forged_notice_is_tampering(refused: Refused, network: Network) -> None:
    s1 = network.nodes["s1"].uri
    failures = [(f.graph, f.node, f.reason) for f in refused.summary.failures]
    assert failures == [
        (refused.forged + "#c1", s1, "signature does not verify"),
        (refused.forged + "#e1", s1, "signature does not verify"),
    ]
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
                timestamp_ms=3_000, verified=True),
            Row(subscriber=uri["s1"], kind="key", publisher="ACME", document=None,
                site=uri["d2"], reason="rekey not signed by the key service",
                timestamp_ms=3_100, verified=True),
            Row(subscriber=uri["s2"], kind="crl", publisher=None, document=None, site=None,
                reason="CRL not signed by the CA", timestamp_ms=3_200, verified=True),
            Row(subscriber=uri["s2"], kind="unverified", publisher="ACME", document="doc8",
                site=uri["d1"], reason="not held: bad proof", timestamp_ms=3_300,
                verified=True),
            Row(subscriber=uri["s1"], kind="revoked", publisher="ACME", document="doc1",
                site=uri["d1"], reason="made up", timestamp_ms=3_400, verified=False),
        ],
    )
    first = table.where("kind = 'document'").first()
    assert first is not None and first.manifest_root == "09" * 32 and first.version == 2
    assert first.time is not None and first.problem is None
