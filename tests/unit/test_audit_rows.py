"""audit.rows: the pure per-row functions of the audit, without Spark (the report:
test_audit_report.py)."""

from __future__ import annotations

import functools
import ssl
from datetime import UTC, datetime
from typing import Any

from audit.rows import (
    DESCRIPTION_FIELDS,
    describe_graph,
    parse_row,
    walk_paths,
)
from xdn import certs
from xdn.crypto import generate_private_key, load_private_key_pem
from xdn.provenance import (
    ContentFacts,
    Hop,
    LeafRanges,
    RefusalFacts,
    Signer,
    failure_notice,
    node_description,
    notice_uri,
    originate,
    relay_many,
)
from xdn.rdf import canonical_lines, parse_nquads

NOW = datetime(2026, 1, 5, tzinfo=UTC)
D1 = certs.node_uri("d1")


@functools.cache
def world() -> dict[str, Any]:
    ca = certs.create_ca("ca", now=NOW)
    cert, key = certs.issue(*ca, name="pub", role="publisher", now=NOW)
    d1_cert, d1_key = certs.issue(
        *ca, name="d1", role="site", attributes={certs.BLOCK_FIELD: "B"}, now=NOW
    )
    signer = Signer(
        node_uri=certs.node_uri("pub"), private_key=load_private_key_pem(key), certificate=cert
    )
    site = Signer(node_uri=D1, private_key=load_private_key_pem(d1_key), certificate=d1_cert)
    content = ContentFacts(document_id="d", publisher="P", manifest_root=b"\x01", leaf_count=3)
    message = originate(
        signer,
        message_uri=signer.node_uri + "msg/d/1",
        recipient_uri=D1,
        content=content,
        timestamp_ms=7,
    )
    hops = [
        Hop(message_uri=f"{D1}msg/d/{n}", recipient_uri=f"https://s{n}.xdn.example/", leaves=r)
        for n, r in ((1, LeafRanges(((0, 1),))), (2, LeafRanges(((1, 3),))))
    ]
    batch = relay_many(message, site, hops, timestamp_ms=9)
    return {
        "ca": ca[0],
        "cert": cert.decode(),
        "d1_cert": d1_cert.decode(),
        "message": message,
        "batch": batch,
    }


def graph_lines(name: str, message: Any = None) -> list[str]:
    message = message or world()["message"]
    return canonical_lines(q for q in message.quads if q.g is not None and q.g.value == name)


def test_parse_row() -> None:
    assert parse_row("  # comment") is None
    assert parse_row("<urn:s> <urn:p> <urn:o> .") == {
        "line": None,
        "graph": None,
        "error": "quad in the default graph",
    }
    row = parse_row('<urn:s> <urn:p> "x"@EN <urn:g> .')
    assert row == {"line": '<urn:s> <urn:p> "x"@en <urn:g> .', "graph": "urn:g", "error": None}
    bad = parse_row("<urn:s> <urn:p> _:o <urn:g> .")
    assert bad is not None and str(bad["error"]).startswith("blank node as object")


def test_describe_graph_reads_each_kind() -> None:
    uri = world()["message"].uri
    sig = describe_graph(uri + "#e1s", graph_lines(uri + "#e1s"))
    assert set(sig) == {name for name, _ in DESCRIPTION_FIELDS}
    assert (sig["kind"], sig["signed_graph"], sig["error"]) == ("signature", uri + "#e1", None)
    assert sig["certificate"] == ssl.PEM_cert_to_DER_cert(world()["cert"])
    assert sig["batch"] is None
    env = describe_graph(uri + "#e1", graph_lines(uri + "#e1"))
    assert (env["env_kind"], env["timestamp_ms"]) == ("publication", 7)
    assert env["leaves"] == [{"start": 0, "end": 3}] and env["leaf_count"] is None
    content = describe_graph(uri + "#c1", graph_lines(uri + "#c1"))
    assert (content["kind"], content["document_id"], content["leaf_count"]) == ("content", "d", 3)
    assert content["leaves"] is None
    node = describe_graph(
        "https://pub.xdn.example/#cert",
        canonical_lines(
            parse_nquads(node_description("https://pub.xdn.example/", world()["cert"].encode()))
        ),
    )
    assert node["kind"] == "node" and node["cert_pem"].split() == world()["cert"].split()
    broken = describe_graph(uri + "#e1", graph_lines(uri + "#e1")[1:])
    assert broken["kind"] == "envelope" and broken["error"].startswith(f"graph <{uri}#e1>")


def test_describe_graph_reads_batch_signatures_and_leaf_ranges() -> None:
    first, second = world()["batch"]
    sigs = [describe_graph(m.uri + "#e2s", graph_lines(m.uri + "#e2s", m)) for m in (first, second)]
    assert [s["error"] for s in sigs] == [None, None]
    assert sigs[0]["value"] == sigs[1]["value"]  # one signature over the batch root
    assert [(s["batch"]["index"], s["batch"]["size"]) for s in sigs] == [(0, 2), (1, 2)]
    assert all(len(s["batch"]["path"]) == 1 and len(s["batch"]["path"][0]) == 32 for s in sigs)
    assert sigs[0]["certificate"] == ssl.PEM_cert_to_DER_cert(world()["d1_cert"])
    env = describe_graph(second.uri + "#e2", graph_lines(second.uri + "#e2", second))
    assert (env["env_kind"], env["leaves"]) == ("relay", [{"start": 1, "end": 3}])


def test_leaf_ranges_beyond_a_spark_bigint_are_a_malformed_envelope() -> None:
    uri = world()["message"].uri
    lines = [
        line.replace('"0-3"', f'"0-{2**63}"') if "carriesLeaves" in line else line
        for line in graph_lines(uri + "#e1")
    ]
    assert lines != graph_lines(uri + "#e1")
    env = describe_graph(uri + "#e1", lines)
    assert env["kind"] == "envelope" and "reach beyond any manifest" in env["error"]


def hop(envelope: str, parent: str | None, kind: str = "relay", ok: bool = True) -> dict[str, Any]:
    return {
        "envelope": envelope,
        "parent": parent,
        "node": envelope.upper(),
        "kind": kind,
        "timestamp_ms": 1,
        "hop_ok": ok,
        "leaves": [{"start": 0, "end": 2}],
    }


def test_walk_paths_handles_fan_out_gaps_and_cycles() -> None:
    paths = walk_paths(
        [
            hop("p", None, "publication"),
            hop("a", "p"),
            hop("b", "a", "receipt"),
            hop("c", "a", ok=False),
            hop("x", "missing", "receipt"),
        ]
    )
    summary = {p["leaf"]: (p["nodes"], p["missing_envelope"], p["chain_ok"]) for p in paths}
    assert summary == {
        "b": (["P", "A", "B"], None, True),
        "c": (["P", "A", "C"], None, False),
        "x": (["X"], "missing", False),
    }
    assert [p["subscriber"] for p in paths] == ["B", None, "X"]
    assert paths[0]["leaves"] == [{"start": 0, "end": 2}]
    assert walk_paths([hop("u", "v"), hop("v", "u")]) == []  # a pure cycle has no leaf
    looped = walk_paths([hop("u", "v"), hop("v", "u"), hop("w", "u", "receipt")])
    assert looped[0]["leaf"] == "w" and looped[0]["chain_ok"] is False


def test_describe_graph_reads_a_failure_notice() -> None:
    signer = Signer(node_uri=certs.node_uri("s1"), private_key=generate_private_key())
    facts = RefusalFacts(
        kind="document", reason="bad proof", publisher="P", document_id="d", version=2,
        manifest_root=b"\xab", received_from="https://d2.xdn.example/",
    )
    notice = failure_notice(
        signer, message_uri=notice_uri(signer.node_uri, "n1"), refusal=facts, timestamp_ms=9
    )

    def lines(name: str) -> list[str]:
        return canonical_lines(q for q in notice.quads if q.g is not None and q.g.value == name)

    content = describe_graph(notice.uri + "#c1", lines(notice.uri + "#c1"))
    assert set(content) == {name for name, _ in DESCRIPTION_FIELDS}
    assert (content["kind"], content["error"]) == ("refusal", None)
    assert content["refusal"] == {
        "kind": "document", "reason": "bad proof", "publisher": "P", "document_id": "d",
        "version": 2, "manifest_root": "ab", "key_message": None, "concept": None,
        "epoch": None, "received_from": "https://d2.xdn.example/", "sequence": None,
    }
    env = describe_graph(notice.uri + "#e1", lines(notice.uri + "#e1"))
    assert (env["env_kind"], env["sender"], env["recipient"]) == ("refusal", signer.node_uri, None)
    assert (env["document_id"], env["leaves"], env["content"]) == (
        None, None, [notice.uri + "#c1"],
    )
    unreasoned = [line for line in lines(notice.uri + "#c1") if "#reason>" not in line]
    broken = describe_graph(notice.uri + "#c1", unreasoned)
    assert broken["kind"] == "refusal" and broken["error"].startswith(f"graph <{notice.uri}#c1>")


def test_describe_graph_reads_the_sequence_number_of_a_gap() -> None:
    signer = Signer(node_uri=certs.node_uri("s1"), private_key=generate_private_key())
    facts = RefusalFacts(kind="gap", reason="document #7 was withheld", publisher="P",
                         sequence=7, received_from="https://d2.xdn.example/")
    notice = failure_notice(
        signer, message_uri=notice_uri(signer.node_uri, "g7"), refusal=facts, timestamp_ms=9
    )
    name = notice.uri + "#c1"
    content = describe_graph(
        name, canonical_lines(q for q in notice.quads if q.g is not None and q.g.value == name)
    )
    assert (content["kind"], content["error"]) == ("refusal", None)
    assert content["refusal"]["kind"] == "gap" and content["refusal"]["sequence"] == 7
    assert (content["refusal"]["document_id"], content["refusal"]["version"]) == (None, None)


def test_a_node_described_with_several_certificates_holds_them_all() -> None:
    """A renewed node's rotated logs each start with a description of the certificate it held
    then: gathered, one graph with one certificate quad per certificate."""
    node = "https://pub.xdn.example/"
    ca = certs.create_ca("ca", now=NOW)
    first, renewed = (
        certs.issue(*ca, name="pub", role="publisher", now=NOW)[0] for _ in range(2)
    )
    lines = sorted(
        set(
            canonical_lines(parse_nquads(node_description(node, first)))
            + canonical_lines(parse_nquads(node_description(node, renewed)))
        )
    )
    assert len(lines) == 3  # one type quad, two certificates
    row = describe_graph(node + "#cert", lines)
    assert row["error"] is None and row["node_uri"] == node
    assert sorted("".join(p.split()) for p in row["cert_pems"]) == sorted(
        "".join(c.decode().split()) for c in (first, renewed)
    )
    assert describe_graph(node + "#cert", lines[:1])["error"] is not None  # no certificate
