"""``xdn provenance canonicalize|show|verify`` on real messages built with xdn.provenance."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cli.admin._provenance import graph_at_fault
from cli.main import main
from xdn import certs, crypto
from xdn.provenance import (
    ContentFacts,
    Hop,
    LeafRanges,
    Message,
    ProvenanceLog,
    RefusalFacts,
    Signer,
    failure_notice,
    message_uri,
    node_description,
    notice_uri,
    originate,
    receipt,
    relay,
    relay_many,
)
from xdn.rdf import Literal, Quad, serialise

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "rdf-canon"
PAIRS = sorted(VECTORS.glob("test*-in.nq"))
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
XSD_LONG = "http://www.w3.org/2001/XMLSchema#long"
NODES = {"acme": "publisher", "d1": "site", "d2": "site", "alice": "subscriber"}
AT = ("--at", "2025-06-16T00:00:00")  # certificates are valid for a year from NOW


@dataclass(frozen=True)
class World:
    ca: Path
    certs: dict[str, bytes]
    message: Message  # acme → d1 → d2 → alice (receipt)
    notice: Message  # alice refuses a document
    dir: Path
    carried: Message  # acme → d1 (one hop of a batch of two) → alice, certificates carried
    keys: dict[str, bytes]  # private keys (PEM) by node name

    def file(self, name: str, data: bytes) -> Path:
        path = self.dir / name
        path.write_bytes(data)
        return path

    def with_descriptions(self, message: Message, *nodes: str) -> bytes:
        descriptions = b"".join(
            node_description(certs.node_uri(n), self.certs[n]) for n in nodes or NODES
        )
        return descriptions + message.to_nquads()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    root = tmp_path_factory.mktemp("provenance-cli")
    ca_cert, ca_key = certs.create_ca("xdn-ca", now=NOW)
    (root / "ca.pem").write_bytes(ca_cert)
    pems, keys, signers = {}, {}, {}
    for name, role in NODES.items():
        attributes = {certs.BLOCK_FIELD: "Order"} if role == "site" else {}
        cert, key = certs.issue(
            ca_cert, ca_key, name=name, role=role, attributes=attributes, now=NOW
        )
        pems[name], keys[name] = cert, key
        signers[name] = Signer(
            node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(key)
        )
    content = ContentFacts(
        document_id="order 7",
        publisher="acme",
        manifest_root=bytes(range(32)),
        leaf_count=2,
    )

    def mid(node: str, hop: str) -> str:
        return message_uri(certs.node_uri(node), "order 7", hop)

    m = originate(
        signers["acme"],
        message_uri=mid("acme", "1"),
        recipient_uri=certs.node_uri("d1"),
        content=content,
        timestamp_ms=1_750_000_000_000,
    )
    m = relay(
        m,
        signers["d1"],
        message_uri=mid("d1", "a"),
        recipient_uri=certs.node_uri("d2"),
        leaves=LeafRanges(((0, 2),)),
        timestamp_ms=1_750_000_000_010,
    )
    m = relay(
        m,
        signers["d2"],
        message_uri=mid("d2", "b"),
        recipient_uri=certs.node_uri("alice"),
        leaves=LeafRanges(((0, 1),)),
        timestamp_ms=1_750_000_000_035,
    )
    m = receipt(m, signers["alice"], message_uri=mid("alice", "r"), timestamp_ms=1_750_000_000_042)
    notice = failure_notice(
        signers["alice"],
        message_uri=notice_uri(certs.node_uri("alice"), "n1"),
        refusal=RefusalFacts(
            kind="document",
            reason="manifest signature does not verify",
            publisher="acme",
            document_id="order 8",
            received_from=certs.node_uri("d2"),
        ),
        timestamp_ms=1_750_000_001_000,
    )
    return World(ca=root / "ca.pem", certs=pems, message=m, notice=notice, dir=root,
                 carried=_carried(content, pems, keys), keys=keys)


def _carrying(name: str, pems: dict[str, bytes], keys: dict[str, bytes]) -> Signer:
    return Signer(node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(
        keys[name]), certificate=pems[name])


def _carried(content: ContentFacts, pems: dict[str, bytes], keys: dict[str, bytes]) -> Message:
    """acme → d1 → alice, every signature graph carrying its signer's certificate; d1 signs
    its hop to alice in one batch with a hop to d2."""
    def mid(node: str, hop: str) -> str:
        return message_uri(certs.node_uri(node), "order 7", hop)

    m = originate(_carrying("acme", pems, keys), message_uri=mid("acme", "c"),
                  recipient_uri=certs.node_uri("d1"), content=content,
                  timestamp_ms=1_750_000_000_000)
    to_alice, _ = relay_many(m, _carrying("d1", pems, keys), [
        Hop(message_uri=mid("d1", "c-alice"), recipient_uri=certs.node_uri("alice"),
            leaves=LeafRanges(((0, 1),))),
        Hop(message_uri=mid("d1", "c-d2"), recipient_uri=certs.node_uri("d2"),
            leaves=LeafRanges(((1, 2),))),
    ], timestamp_ms=1_750_000_000_005)
    return receipt(to_alice, _carrying("alice", pems, keys), message_uri=mid("alice", "c"),
                   timestamp_ms=1_750_000_000_009)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["provenance", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# --------------------------------------------------------------------------- canonicalize


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.name.removesuffix("-in.nq"))
def test_canonicalize_matches_the_w3c_vectors_byte_for_byte(
    path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    expected = path.with_name(path.name.replace("-in.nq", "-rdfc10.nq")).read_bytes()
    assert main(["provenance", "canonicalize", str(path)]) == 0
    assert capsysbinary.readouterr().out == expected


def test_canonicalize_reads_stdin(
    monkeypatch: pytest.MonkeyPatch, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    data = b'<http://e/s> <http://e/p> "b\xef\xbf\xbe" .\n<http://e/a> <http://e/p> "a"@EN .\n'
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(data)))
    assert main(["provenance", "canonicalize", "-"]) == 0
    assert capsysbinary.readouterr().out == (
        b'<http://e/a> <http://e/p> "a"@en .\n<http://e/s> <http://e/p> "b\\uFFFE" .\n'
    )


@pytest.mark.parametrize(
    ("data", "refusal"),
    [
        (b"_:b <http://e/p> <http://e/o> .\n", "N-Quads line 1: blank node as subject"),
        (b"\n<http://e/s> <http://e/p> <http://e/%zz> .\n", "N-Quads line 2: IRI 'http://e/%zz'"),
        (b'<http://e/s> <http://e/p> "x"@not_a_tag .\n', "N-Quads line 1: expected an IRI"),
    ],
)
def test_canonicalize_refuses_malformed_input(
    world: World, capsys: pytest.CaptureFixture[str], data: bytes, refusal: str
) -> None:
    code, out, err = run(capsys, "canonicalize", str(world.file("bad.nq", data)))
    assert (code, out) == (2, "")
    assert err.startswith(f"xdn: refused: {refusal}")


def test_oversized_input_is_refused_before_parsing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    path = world.file("big.nq", world.message.to_nquads())
    for action in ("canonicalize", "show", "verify"):
        code, _, err = run(capsys, action, str(path), "--max-bytes", "1000")
        assert code == 2
        assert err == f"xdn: refused: {path}: input is larger than 1000 bytes\n"


# ---------------------------------------------------------------------------------- show


def test_show_prints_graphs_hops_signers_and_timing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    path = world.file("m.nq", world.with_descriptions(world.message, "acme", "d1", "d2"))
    code, out, _ = run(capsys, "show", str(path))
    assert code == 0
    assert f"message <{world.message.uri}>" in out
    assert "document 'order 7' of publisher 'acme'" in out
    assert "manifest root 000102" in out and "(2 leaves)" in out
    assert "fragments carried (1): manifest leaves 0-1" in out
    assert "graphs (10):" in out
    assert "content    <https://acme.xdn.example/msg/order%207/1#c1>  (5 quads)" in out
    hops = re.findall(r"\d\. (\w+) +<https://(\w+)\.xdn\.example/>", out)
    assert hops == [("publication", "acme"), ("relay", "d1"), ("relay", "d2"), ("receipt", "alice")]
    assert "-> <https://d2.xdn.example/>" in out
    assert "at 2025-06-15T15:06:40.010+00:00, took 10 ms" in out
    assert "took 25 ms" in out and "took 7 ms" in out
    assert "fragments (2): manifest leaves 0-2" in out
    assert "<https://d1.xdn.example/>  certificate CN=d1, role site" in out
    assert "<https://alice.xdn.example/>  certificate unknown" in out


def test_show_takes_certificates_from_cert_files_and_logs(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    log = world.dir / "alice.log"
    with ProvenanceLog(log, node_uri=certs.node_uri("alice"), cert_pem=world.certs["alice"]):
        pass
    cert = world.file("acme.pem", world.certs["acme"])
    path = world.file("bare.nq", world.message.to_nquads())
    code, out, _ = run(capsys, "show", str(path), "--log", str(log), "--cert", str(cert))
    assert code == 0
    assert "certificate CN=alice, role subscriber" in out
    assert "certificate CN=acme, role publisher" in out
    assert "<https://d1.xdn.example/>  certificate unknown" in out


def test_show_a_failure_notice(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "show", str(world.file("n.nq", world.notice.to_nquads())))
    assert code == 0
    assert "FAILURE NOTICE: refused a document" in out
    assert "reason: manifest signature does not verify" in out
    assert "document id: order 8" in out
    assert "received from: <https://d2.xdn.example/>" in out
    assert "1. refusal" in out


# -------------------------------------------------------------------------------- verify


def test_verify_a_valid_message_against_the_ca(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    path = world.file("m.nq", world.with_descriptions(world.message))
    code, out, err = run(capsys, "verify", str(path), "--ca", str(world.ca), *AT)
    assert (code, err) == (0, "")
    assert out.startswith(f"valid: <{world.message.uri}>: 10 graphs, every signature verifies")
    assert "note:" not in out
    code, out, _ = run(capsys, "verify", str(world.file("n.nq", world.notice.to_nquads())),
                       "--cert", str(world.file("alice.pem", world.certs["alice"])))
    assert code == 0 and "note: no --ca given" in out


def _tampered(message: Message, graph_suffix: str, old: str, new: str) -> bytes:
    quads = set(message.quads)
    (hit,) = [
        q for q in quads
        if q.g and q.g.value.endswith(graph_suffix) and q.o == Literal(old, XSD_LONG)
    ]
    quads.remove(hit)
    quads.add(Quad(hit.s, hit.p, Literal(new, XSD_LONG), hit.g))
    return serialise(sorted(quads, key=repr))


def test_verify_a_tampered_message_names_the_graph(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    descriptions = b"".join(node_description(certs.node_uri(n), world.certs[n]) for n in NODES)
    forged = _tampered(world.message, "/msg/order%207/a#e2", "1750000000010", "1750000000011")
    path = world.file("tampered.nq", descriptions + forged)
    code, out, err = run(capsys, "verify", str(path), "--ca", str(world.ca), *AT)
    assert (code, out) == (2, "")
    graph = "https://d1.xdn.example/msg/order%207/a#e2"
    assert err.startswith(f"xdn: refused: graph <{graph}>: signature graph <{graph}s> does not")


def test_verify_refuses_unknown_signers_and_foreign_certificates(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    known = world.with_descriptions(world.message, "acme", "d1", "alice")  # not d2
    partial = world.file("partial.nq", known)
    code, _, err = run(capsys, "verify", str(partial))
    assert code == 2
    assert re.match(r"xdn: refused: graph <https://d2\.xdn\.example/.*#e3s>: signer "
                    r"<https://d2\.xdn\.example/> is not a known node", err)
    other_ca, _ = certs.create_ca("other-ca", now=NOW)
    full = world.file("full.nq", world.with_descriptions(world.message))
    code, _, err = run(capsys, "verify", str(full), "--ca", str(world.file("o.pem", other_ca)), *AT)
    assert code == 2
    assert err.startswith("xdn: refused: signer <https://")
    assert "not issued by the trusted CA" in err


def test_verify_refuses_a_malformed_message_naming_the_graph(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = b"\n".join(
        line for line in world.message.to_nquads().split(b"\n") if not line.endswith(b"#e2s> .")
    )
    code, _, err = run(capsys, "verify", str(world.file("broken.nq", broken)))
    assert code == 2
    assert err.startswith("xdn: refused: graph <https://d1.xdn.example/msg/order%207/a#e2>")


def test_graph_at_fault_blames_the_graph_a_signature_fails_to_cover() -> None:
    assert graph_at_fault("signature graph <a#e1s> does not verify graph <a#e1> under") == (
        "graph <a#e1>: signature graph <a#e1s> does not verify graph <a#e1> under"
    )
    assert graph_at_fault("graph <x>: bad") == "graph <x>: bad"
    assert graph_at_fault("condition 9: graph <y> is signed by <z>") == (
        "graph <y>: condition 9: graph <y> is signed by <z>"
    )
    assert graph_at_fault("nothing named") == "nothing named"


@pytest.mark.parametrize("action", ["canonicalize", "show", "verify"])
def test_each_action_has_help(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["provenance", action, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: xdn provenance {action}")


# ------------------------------------------------------------ certificates the message carries


def test_verify_with_only_the_ca_uses_the_carried_certificates(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    path = world.file("carried.nq", world.carried.to_nquads())
    code, out, err = run(capsys, "verify", str(path), "--ca", str(world.ca), *AT)
    assert (code, err) == (0, "")
    assert out.startswith(f"valid: <{world.carried.uri}>: 8 graphs, every signature verifies")
    other_ca, _ = certs.create_ca("xdn-ca", now=NOW)  # same name, another key
    code, _, err = run(capsys, "verify", str(path), "--ca", str(world.file("o.pem", other_ca)),
                       *AT)
    assert code == 2
    assert err.startswith("xdn: refused: graph <https://acme.xdn.example/msg/order%207/c#c1s>")
    assert "invalid CA signature" in err


def test_show_names_carried_certificates_and_batch_signatures(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "show", str(world.file("c.nq", world.carried.to_nquads())))
    assert code == 0
    assert "<https://d1.xdn.example/>  certificate CN=d1, role site" in out
    assert "<https://alice.xdn.example/>  certificate CN=alice, role subscriber" in out
    assert "c-alice#e2 (batch)" in out
    assert "fragments (1): manifest leaves 0-1" in out


def test_verify_refuses_a_carried_chain_altered_after_signing(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    graph = "https://d1.xdn.example/msg/order%207/c-alice#e2"
    forged = _tampered(world.carried, "/c-alice#e2", "1750000000005", "1750000000006")
    code, out, err = run(capsys, "verify", str(world.file("cf.nq", forged)), "--ca",
                         str(world.ca), *AT)
    assert (code, out) == (2, "")
    assert err.startswith(f"xdn: refused: graph <{graph}>: signature graph <{graph}s> does not")


def test_verify_refuses_a_relay_signed_with_a_subscriber_certificate(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    content = world.carried.content()
    alice = _carrying("alice", world.certs, world.keys)
    m = originate(_carrying("acme", world.certs, world.keys),
                  message_uri=message_uri(certs.node_uri("acme"), "order 7", "r"),
                  recipient_uri=alice.node_uri, content=content, timestamp_ms=1_750_000_000_000)
    m = relay(m, alice, message_uri=message_uri(alice.node_uri, "order 7", "r"),
              recipient_uri=certs.node_uri("d2"), leaves=LeafRanges(((0, 2),)),
              timestamp_ms=1_750_000_000_001)
    code, _, err = run(capsys, "verify", str(world.file("role.nq", m.to_nquads())), "--ca",
                       str(world.ca), *AT)
    assert code == 2
    assert err.startswith("xdn: refused: graph <https://alice.xdn.example/msg/order%207/r#e2>: "
                          "a relay must be signed by a site")
