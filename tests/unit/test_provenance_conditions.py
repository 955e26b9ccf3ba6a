"""The paper's 11 well-formedness conditions, one refusal each (see docs/provenance.md).

Each case starts from a valid chain (publication → relay → relay) and breaks exactly one
condition; the refusal must name that condition. Conditions 1 to 8, 10 and 11 are structural
and refused when the dataset is read; condition 9 needs the signers' keys.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest

from xdn import crypto
from xdn.errors import ProvenanceError, SignatureError
from xdn.provenance import (
    ContentFacts,
    LeafRanges,
    Message,
    Signer,
    message_uri,
    originate,
    relay,
    verify_message,
)
from xdn.provenance import _vocab as v
from xdn.rdf import IRI, Literal, Quad

DOC = "order-7"


def uri(name: str) -> str:
    return f"https://{name}.xdn.example/"


@cache
def signers() -> dict[str, Signer]:
    return {
        n: Signer(node_uri=uri(n), private_key=crypto.generate_private_key())
        for n in ("pub", "d1", "d2", "s1")
    }


def mid(node: str, hop: str) -> str:
    return message_uri(uri(node), DOC, hop)


@cache
def chain() -> tuple[Message, Message, Message]:
    s = signers()
    m1 = originate(
        s["pub"],
        message_uri=mid("pub", "v1"),
        recipient_uri=uri("d1"),
        content=ContentFacts(
            document_id=DOC, publisher="pub", manifest_root=b"\x07" * 32, leaf_count=10
        ),
        timestamp_ms=1,
    )
    m2 = relay(
        m1,
        s["d1"],
        message_uri=mid("d1", "a"),
        recipient_uri=uri("d2"),
        leaves=LeafRanges(((0, 4),)),
        timestamp_ms=2,
    )
    m3 = relay(
        m2,
        s["d2"],
        message_uri=mid("d2", "b"),
        recipient_uri=uri("s1"),
        leaves=LeafRanges(((0, 2),)),
        timestamp_ms=3,
    )
    return m1, m2, m3


def _rename(quads: frozenset[Quad], old: str, new: str) -> frozenset[Quad]:
    """Every IRI equal to ``old`` or starting with ``old#`` renamed (graph names included)."""

    def term(t: object) -> object:
        if isinstance(t, IRI) and (t.value == old or t.value.startswith(old + "#")):
            return IRI(new + t.value[len(old) :])
        return t

    return frozenset(Quad(term(q.s), term(q.p), term(q.o), term(q.g)) for q in quads)  # type: ignore[arg-type]


def _graph(message: Message, name: str) -> frozenset[Quad]:
    return frozenset(q for q in message.quads if q.g is not None and q.g.value == name)


def _default_graph(m: Message) -> frozenset[Quad]:
    return m.quads | {Quad(IRI(m.uri), v.HAS_SENDER, IRI(uri("d2")), None)}


def _no_envelope(m: Message) -> frozenset[Quad]:
    c1 = mid("pub", "v1") + "#c1"
    return _graph(m, c1) | _graph(m, c1 + "s")


def _unsigned(m: Message) -> frozenset[Quad]:
    return m.quads - _graph(m, mid("pub", "v1") + "#c1s")


def _broken_chain(m: Message) -> frozenset[Quad]:
    e2 = mid("d1", "a") + "#e2"
    return m.quads - _graph(m, e2)


def _reference_value(m: Message) -> frozenset[Quad]:
    ref = IRI(mid("d2", "b") + "#e3-ref1")
    (old,) = [q for q in m.quads if q.s == ref and q.p == v.HAS_SIGNATURE_VALUE]
    return (m.quads - {old}) | {Quad(ref, v.HAS_SIGNATURE_VALUE, Literal("AAAA"), old.g)}


def _two_outermost(m: Message) -> frozenset[Quad]:
    other = _rename(chain()[0].quads, mid("pub", "v1"), mid("pub", "v2"))
    return m.quads | other


def _signs_a_signature(m: Message) -> frozenset[Quad]:
    """A signature graph that signs another signature graph (named after it, as required)."""
    target = mid("pub", "v1") + "#c1s"
    extra = IRI(target + "s")
    return m.quads | {
        Quad(extra, v.RDF_TYPE, v.SIGNATURE, extra),
        Quad(extra, v.HAS_SIGNATURE_VALUE, Literal("AAAA"), extra),
        Quad(extra, v.HAS_VERIFICATION_CERTIFICATE, IRI(uri("pub")), extra),
        Quad(extra, v.HAS_SIGNED_GRAPH, IRI(target), extra),
        Quad(extra, v.HAS_GRAPH_SIGNING_METHOD, v.SIGNING_METHOD, extra),
    }


def _out_of_step(m: Message) -> frozenset[Quad]:
    """The last envelope renumbered #e4 (its graph, references and signature follow)."""
    base = mid("d2", "b")
    quads = frozenset(
        Quad(
            *(
                IRI(t.value.replace("#e3", "#e4"))
                if isinstance(t, IRI) and t.value.startswith(base + "#e3")
                else t
                for t in (q.s, q.p, q.o, q.g)
            )
        )
        for q in m.quads
    )
    return quads


def _foreign_uri(m: Message) -> frozenset[Quad]:
    """d2's hop minted in d1's URI space."""
    return _rename(m.quads, mid("d2", "b"), mid("d1", "b"))


STRUCTURAL: dict[int, Callable[[Message], frozenset[Quad]]] = {
    1: _default_graph,
    2: _no_envelope,
    3: _unsigned,
    4: _broken_chain,
    5: _reference_value,
    6: _two_outermost,
    8: _signs_a_signature,
    10: _out_of_step,
    11: _foreign_uri,
}


def test_the_unbroken_chain_is_well_formed_and_verifies() -> None:
    m3 = chain()[2]
    assert Message(quads=m3.quads) == m3
    verify_message(m3, {s.node_uri: s.private_key.public_key() for s in signers().values()})


@pytest.mark.parametrize("condition", sorted(STRUCTURAL))
def test_breaking_one_condition_is_refused_naming_it(condition: int) -> None:
    broken = STRUCTURAL[condition](chain()[2])
    with pytest.raises(ProvenanceError, match=rf"condition {condition}\b"):
        Message(quads=broken)


def test_condition_7_is_implied_by_the_reference_checks() -> None:
    """Condition 7 (one unreferenced signature graph) cannot fail alone: an envelope must
    reference exactly the signatures of what it wraps, so a second unreferenced signature is
    refused there first, as a reference error naming the envelope."""
    m1 = chain()[0]
    e1 = mid("pub", "v1") + "#e1"
    refs = {q for q in m1.quads if q.s.value.startswith(e1 + "-ref")}
    pointers = {q for q in m1.quads if q.p == v.REFERENCES_SIGNATURE}
    with pytest.raises(ProvenanceError, match=rf"graph <{e1}>: must reference exactly"):
        Message(quads=m1.quads - refs - pointers)


def test_condition_9_a_hop_signed_by_another_node_than_its_sender_is_refused() -> None:
    s = signers()
    m2 = chain()[1]
    # d1 signs a hop naming d2 as its sender (d2 never signed it)
    forged = relay(
        m2,
        Signer(node_uri=uri("d2"), private_key=s["d1"].private_key),
        message_uri=mid("d2", "x"),
        recipient_uri=uri("s1"),
        leaves=LeafRanges(((0, 2),)),
        timestamp_ms=3,
    )
    keys = {n.node_uri: n.private_key.public_key() for n in s.values()}
    with pytest.raises(SignatureError, match="does not verify"):
        verify_message(forged, keys)
    # and a hop added by a node the previous hop was not addressed to
    wrong = relay(
        m2,
        s["s1"],
        message_uri=mid("s1", "y"),
        recipient_uri=uri("d2"),
        leaves=LeafRanges(((0, 2),)),
        timestamp_ms=3,
    )
    with pytest.raises(ProvenanceError, match=r"condition 9: graph <.*#e3> was added by"):
        verify_message(wrong, keys)


def test_a_peers_oversized_chain_is_refused_before_it_is_parsed() -> None:
    from xdn.provenance import MAX_CHAIN_BYTES

    data = chain()[2].to_nquads()
    assert Message.from_nquads(data, max_bytes=MAX_CHAIN_BYTES) == chain()[2]
    garbage = b"not n-quads " * (MAX_CHAIN_BYTES // 12 + 1)  # would fail on line 1 if parsed
    with pytest.raises(ProvenanceError, match=rf"over the limit of {MAX_CHAIN_BYTES} bytes"):
        Message.from_nquads(garbage, max_bytes=MAX_CHAIN_BYTES)
