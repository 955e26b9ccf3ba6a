"""Provenance logs of a small network, written with our own API and the real PKI, for the
audit's tests (the shared-session suite and the two-process cluster test).

``make_network(root)`` writes two sets of logs: ``clean`` (doc1: pub → d1 ⇉ (d2 → s1, s2), d1's
two hops signed as one batch) and ``forged`` (clean + doc2 through a node whose certificate is
not from the CA, doc3 with a dishonest relay and doc4 with a masked signer certificate).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from xdn import certs, crypto
from xdn.provenance import (
    ContentFacts,
    Hop,
    LeafRanges,
    Message,
    ProvenanceLog,
    Signer,
    originate,
    receipt,
    relay,
    relay_many,
    signing_input,
)
from xdn.rdf import Literal, Quad, canonicalise, parse_nquads

NOW = datetime(2026, 1, 5, tzinfo=UTC)
#: Envelope times (ms since the epoch) are T0 + a few ms: inside every certificate's validity.
T0 = int(NOW.timestamp() * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    signer: Signer
    cert_pem: bytes

    @property
    def uri(self) -> str:
        return self.signer.node_uri

    def mid(self, document: str, hop: str) -> str:
        return f"{self.uri}msg/{document}/{hop}"

    def hop(self, document: str, hop: str, to: Node, leaves: str) -> Hop:
        return Hop(
            message_uri=self.mid(document, hop),
            recipient_uri=to.uri,
            leaves=LeafRanges.parse(leaves),
        )


def _node(name: str, ca: tuple[bytes, bytes], role: str = "site") -> Node:
    block = {certs.BLOCK_FIELD: "WorkOrder"} if role == "site" else None
    cert, key = certs.issue(*ca, name=name, role=role, attributes=block, now=NOW)
    uri = certs.node_uri(name)
    return Node(
        signer=Signer(node_uri=uri, private_key=crypto.load_private_key_pem(key), certificate=cert),
        cert_pem=cert,
    )


def _content(document: str, leaf_count: int) -> ContentFacts:
    return ContentFacts(
        document_id=document,
        publisher="pub",  # the name on the publisher's certificate
        manifest_root=b"\x07" * 32,
        leaf_count=leaf_count,
    )


def _claiming(message: Message, node: Node, leaves: str) -> bytes:
    """The graphs ``node`` added to ``message``, its envelope rewritten to carry ``leaves`` and
    signed again: a dishonest site signing what it claims (relay() refuses to build this)."""
    quads = [
        Quad(q.s, q.p, Literal(leaves), q.g) if q.p.value.endswith("#carriesLeaves") else q
        for q in parse_nquads(message.latest_graphs_nquads())
    ]
    named = {q.g.value for q in quads if q.g is not None}
    (envelope,) = (g for g in named if re.fullmatch(rf"{re.escape(message.uri)}#e[0-9]+", g))
    signed = [q for q in quads if q.g is not None and q.g.value == envelope]
    value = base64.b64encode(crypto.sign(node.signer.private_key, signing_input(signed)))
    return canonicalise(
        Quad(q.s, q.p, Literal(value.decode()), q.g)
        if q.p.value.endswith("#hasSignatureValue")
        and q.g is not None
        and q.g.value == envelope + "s"
        else q
        for q in quads
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Network:
    ca_pem: bytes
    nodes: dict[str, Node]
    clean: Path  # logs of doc1: pub → d1 ⇉ (d2 → s1, s2), d1's two hops signed as one batch
    forged: Path  # clean + doc2 through a node whose certificate is not from the CA + doc3, doc4
    tampered: dict[str, str]  # what is wrong in the forged logs: envelope graphs by name


def _write_logs(
    root: Path, nodes: dict[str, Node], hops: list[tuple[str, Message | bytes]]
) -> Path:
    for name, message in hops:
        node = nodes[name]
        with ProvenanceLog(
            root / name / "provenance.nq", node_uri=node.uri, cert_pem=node.cert_pem
        ) as log:
            if isinstance(message, Message):
                log.append(message)
            else:
                log.append_raw(message)
    return root


def _doc1(n: dict[str, Node]) -> list[tuple[str, Message | bytes]]:
    """doc1 (10 leaves): pub → d1 ⇉ (d2: 0-4 6-10 → s1; s2: 4-6), both receipted."""
    m1 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc1", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc1", 10),
        timestamp_ms=T0 + 1_000,
    )
    to_d2, to_s2 = relay_many(
        m1,
        n["d1"].signer,
        [n["d1"].hop("doc1", "a", n["d2"], "0-4 6-10"), n["d1"].hop("doc1", "b", n["s2"], "4-6")],
        timestamp_ms=T0 + 1_010,
    )
    to_s1 = relay(
        to_d2,
        n["d2"].signer,
        message_uri=n["d2"].mid("doc1", "c"),
        recipient_uri=n["s1"].uri,
        leaves=LeafRanges.parse("0-4 6-10"),
        timestamp_ms=T0 + 1_030,
    )
    return [
        ("pub", m1),
        ("d1", to_d2),
        ("d1", to_s2),
        ("d2", to_s1),
        (
            "s1",
            receipt(
                to_s1, n["s1"].signer, message_uri=n["s1"].mid("doc1", "r"), timestamp_ms=T0 + 1_060
            ),
        ),
        (
            "s2",
            receipt(
                to_s2, n["s2"].signer, message_uri=n["s2"].mid("doc1", "r"), timestamp_ms=T0 + 1_020
            ),
        ),
    ]


def _doc2(n: dict[str, Node]) -> list[tuple[str, Message | bytes]]:
    """doc2: pub → d1 → d9 (certified by a rogue CA) → s1."""
    m2 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc2", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc2", 1),
        timestamp_ms=T0 + 2_000,
    )
    via_d9 = relay(
        m2,
        n["d1"].signer,
        message_uri=n["d1"].mid("doc2", "a"),
        recipient_uri=n["d9"].uri,
        leaves=LeafRanges.parse("0-1"),
        timestamp_ms=T0 + 2_010,
    )
    rogue = relay(
        via_d9,
        n["d9"].signer,
        message_uri=n["d9"].mid("doc2", "b"),
        recipient_uri=n["s1"].uri,
        leaves=LeafRanges.parse("0-1"),
        timestamp_ms=T0 + 2_020,
    )
    return [("pub", m2), ("d1", via_d9), ("d9", rogue)]


def _doc3(n: dict[str, Node]) -> list[tuple[str, Message | bytes]]:
    """doc3 (6 leaves): pub → d1 ⇉ batch of 3 (d2: 0-2, s2: 2-4, s1: 4-6); s2 receipts; d2
    relays to s1 claiming 0-3 (re-signed: a leaf its parent's runs do not hold)."""
    m3 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc3", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc3", 6),
        timestamp_ms=T0 + 3_000,
    )
    d1 = n["d1"]
    to_d2, to_s2, to_s1 = relay_many(
        m3,
        d1.signer,
        [
            d1.hop("doc3", "a", n["d2"], "0-2"),
            d1.hop("doc3", "b", n["s2"], "2-4"),
            d1.hop("doc3", "c", n["s1"], "4-6"),
        ],
        timestamp_ms=T0 + 3_010,
    )
    honest = relay(
        to_d2,
        n["d2"].signer,
        message_uri=n["d2"].mid("doc3", "d"),
        recipient_uri=n["s1"].uri,
        leaves=LeafRanges.parse("0-2"),
        timestamp_ms=T0 + 3_020,
    )
    return [
        ("pub", m3),
        ("d1", to_d2),
        ("d1", to_s2),
        ("d1", to_s1),
        ("d2", _claiming(honest, n["d2"], "0-3")),
        (
            "s2",
            receipt(
                to_s2, n["s2"].signer, message_uri=n["s2"].mid("doc3", "r"), timestamp_ms=T0 + 3_030
            ),
        ),
    ]


def _doc4(n: dict[str, Node]) -> list[tuple[str, Message | bytes]]:
    """doc4: pub → d1 → s1, d1's signature graph carrying d2's certificate (signed by d1)."""
    m4 = originate(
        n["pub"].signer,
        message_uri=n["pub"].mid("doc4", "1"),
        recipient_uri=n["d1"].uri,
        content=_content("doc4", 2),
        timestamp_ms=T0 + 4_000,
    )
    masked = Signer(
        node_uri=n["d1"].uri, private_key=n["d1"].signer.private_key, certificate=n["d2"].cert_pem
    )
    to_s1 = relay(
        m4,
        masked,
        message_uri=n["d1"].mid("doc4", "a"),
        recipient_uri=n["s1"].uri,
        leaves=LeafRanges.parse("0-2"),
        timestamp_ms=T0 + 4_010,
    )
    return [("pub", m4), ("d1", to_s1)]


def make_network(root: Path) -> Network:
    """Nodes under a fresh test CA (d9 under a rogue CA) and their logs under ``root``."""
    ca = certs.create_ca("xdn test CA", now=NOW)
    nodes = {n: _node(n, ca) for n in ("d1", "d2")}
    nodes["pub"] = _node("pub", ca, "publisher")
    nodes |= {n: _node(n, ca, "subscriber") for n in ("s1", "s2")}
    nodes["d9"] = _node("d9", certs.create_ca("rogue CA", now=NOW))
    d1, d2 = nodes["d1"], nodes["d2"]
    forged = _doc1(nodes) + _doc2(nodes) + _doc3(nodes) + _doc4(nodes)
    return Network(
        ca_pem=ca[0],
        nodes=nodes,
        clean=_write_logs(root / "clean", nodes, _doc1(nodes)),
        forged=_write_logs(root / "forged", nodes, forged),
        tampered={
            "leaves": d2.mid("doc3", "d") + "#e3",
            "batch path": d1.mid("doc3", "c") + "#e2",
            "certificate": d1.mid("doc4", "a") + "#e2",
        },
    )
