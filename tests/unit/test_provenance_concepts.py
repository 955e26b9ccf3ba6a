"""The content graph names each concept's run of manifest leaves and the document version
(what the audit needs to judge entitlement by concept), in space that grows with concepts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from xdn import certs, crypto
from xdn.errors import ProvenanceError
from xdn.provenance import (
    ChainVerifier,
    ContentFacts,
    LeafRanges,
    Signer,
    originate,
    read_content,
    relay,
    verify_message,
)
from xdn.provenance import _vocab as v
from xdn.rdf import IRI, Literal, Quad, canonicalise

PUB, D1, S1 = "https://pub.example/", "https://d1.example/", "https://s1.example/"


def _signer(node: str) -> Signer:
    return Signer(node_uri=node, private_key=crypto.generate_private_key())


def _content(
    leaf_count: int, runs: tuple[tuple[str, int, int], ...], version: int | None = 3
) -> ContentFacts:
    return ContentFacts(
        document_id="order 7",
        publisher="ACME",
        manifest_root=bytes(range(32)),
        leaf_count=leaf_count,
        version=version,
        concepts=runs,
    )


def _content_quads(content: ContentFacts) -> list[Quad]:
    message = originate(
        _signer(PUB),
        message_uri=f"{PUB}msg/order%207/v3",
        recipient_uri=D1,
        content=content,
        timestamp_ms=1_000,
    )
    return [q for q in message.quads if q.g == IRI(f"{PUB}msg/order%207/v3#c1")]


RUNS = (("Machine", 0, 120), ("Quality Report", 120, 300), ("Material", 300, 7_600))


def test_concept_runs_and_version_round_trip() -> None:
    content = _content(7_600, RUNS)
    quads = _content_quads(content)
    said = [q.o for q in quads if q.p == v.CONCEPT_LEAVES]
    assert said == [Literal("0-120 Machine\n120-300 Quality Report\n300-7600 Material")]
    assert read_content(f"{PUB}msg/order%207/v3#c1", quads) == content


def test_a_content_graph_without_them_still_reads() -> None:
    content = _content(5, (), version=None)
    quads = _content_quads(content)
    assert {q.p for q in quads} == {
        v.RDF_TYPE,
        v.DOCUMENT_ID,
        v.PUBLISHER,
        v.MANIFEST_ROOT,
        v.LEAF_COUNT,
    }
    assert read_content(f"{PUB}msg/order%207/v3#c1", quads) == content


@pytest.mark.parametrize(
    "runs",
    [
        (("Machine", 0, 120),),  # does not cover every leaf
        (("Machine", 0, 120), ("Material", 100, 7_600)),  # overlap
        (("Machine", 0, 120), ("Machine", 120, 7_600)),  # a concept twice
        (("", 0, 7_600),),
        (("Mach\nine", 0, 7_600),),  # a line break would split the literal
    ],
)
def test_runs_must_partition_the_leaves(runs: tuple[tuple[str, int, int], ...]) -> None:
    with pytest.raises(ValueError, match="concept"):
        _content(7_600, runs)


@pytest.mark.parametrize(
    "text",
    [
        "0-120",
        "x-120 Machine",
        "0-7600Machine",
        "0-100 Machine",
        "01-7600 Machine",
        "100-7600 Material\n0-100 Machine",  # not in leaf order
        "0-100 Machine\n100-7600 Machine",
    ],
)
def test_a_bad_concept_run_is_named(text: str) -> None:
    quads = _content_quads(_content(7_600, (("Machine", 0, 7_600),)))
    g = quads[0].g
    doc = IRI(f"{PUB}msg/order%207/v3#document")
    bad = [q for q in quads if q.p != v.CONCEPT_LEAVES] + [
        Quad(doc, v.CONCEPT_LEAVES, Literal(text), g)
    ]
    with pytest.raises(ProvenanceError, match="conceptLeaves"):
        read_content(f"{PUB}msg/order%207/v3#c1", bad)


def test_the_growth_is_per_concept_and_small() -> None:
    """13 concepts (every concept of the demo ontology) over a 7,600-fragment document: the
    content graph grows by two triples (the version and the runs: ~150 bytes each, canonical
    N-Quads) and ~20 bytes per concept (578 bytes here), never per fragment."""
    thirteen = tuple(
        (f"Concept{i:02d}", i * 584, 7_600 if i == 12 else (i + 1) * 584) for i in range(13)
    )
    bare = len(canonicalise(_content_quads(_content(7_600, (), version=None))))
    named = len(canonicalise(_content_quads(_content(7_600, thirteen))))
    tenfold = tuple((c, a * 10, b * 10) for c, a, b in thirteen)
    assert named - bare < 2 * 160 + 13 * 24
    grown = len(canonicalise(_content_quads(_content(76_000, tenfold)))) - named
    assert grown <= 2 * 13 + 1  # one more digit per number, no more


def test_every_hop_and_the_subscriber_still_verify() -> None:
    now = datetime.now(UTC)
    ca = certs.create_ca("test CA", now=now)

    def node(name: str, role: str) -> Signer:
        block = {certs.BLOCK_FIELD: "WorkOrder"} if role == "site" else None
        cert, key = certs.issue(*ca, name=name, role=role, attributes=block, now=now)
        return Signer(
            node_uri=certs.node_uri(name),
            private_key=crypto.load_private_key_pem(key),
            certificate=cert,
        )

    pub, d1 = node("ACME", "publisher"), node("d1", "site")
    content = _content(7_600, RUNS)
    m1 = originate(
        pub,
        message_uri=f"{pub.node_uri}msg/order%207/v3",
        recipient_uri=d1.node_uri,
        content=content,
        timestamp_ms=1_000,
    )
    m2 = relay(
        m1,
        d1,
        message_uri=f"{d1.node_uri}msg/order%207/a",
        recipient_uri=S1,
        leaves=LeafRanges.parse("0-120"),
        timestamp_ms=1_010,
    )
    verify_message(
        m2, {pub.node_uri: pub.private_key.public_key(), d1.node_uri: d1.private_key.public_key()}
    )
    chain = ChainVerifier(ca[0]).verify(m2, at=now)
    assert chain is not None
