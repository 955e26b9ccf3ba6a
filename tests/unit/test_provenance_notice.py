"""xdn.provenance failure notices: built, verified, well-formed, and any tampering refused."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from xdn import crypto
from xdn.errors import ProvenanceError, SignatureError, UsageError
from xdn.provenance import (
    REFUSAL_KINDS,
    ContentFacts,
    LeafRanges,
    Message,
    ProvenanceLog,
    RefusalFacts,
    Signer,
    failure_notice,
    graph_type,
    message_uri,
    notice_uri,
    originate,
    read_refusal,
    receipt,
    relay,
    verify_message,
)
from xdn.provenance._message import _Hop, _seal, shape_of
from xdn.rdf import IRI, Literal, Quad, parse_nquads, serialise

XDN = "https://xdn.example.org/ns#"
MSG = "http://purl.org/webofneeds/message#"
RDF_TYPE = IRI("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
XSD_LONG = "http://www.w3.org/2001/XMLSchema#long"
SITE = "https://d2.xdn.example/"


@functools.cache
def signers() -> dict[str, Signer]:
    return {
        n: Signer(node_uri=f"https://{n}.xdn.example/", private_key=crypto.generate_private_key())
        for n in ("pub", "d2", "s1")
    }


def keys() -> dict[str, crypto.PublicKey]:
    return {s.node_uri: s.private_key.public_key() for s in signers().values()}


DOCUMENT = RefusalFacts(
    kind="document",
    reason="manifest signature does not verify",
    publisher="ACME",
    document_id="order 7",
    version=3,
    manifest_root=bytes(range(32)),
    received_from=SITE,
)
KEY = RefusalFacts(
    kind="key",
    reason="key message signature does not verify",
    publisher="ACME",
    key_message="rekey",
    concept="https://onto.example/c#Price",
    epoch=4,
    received_from=SITE,
)
CRL = RefusalFacts(kind="crl", reason="CRL from the site: not signed by the CA")
GAP = RefusalFacts(
    kind="gap", reason="document #7 of ACME was withheld", publisher="ACME", sequence=7,
    received_from=SITE,
)


def notice(facts: RefusalFacts = DOCUMENT, hop: str = "1767571200000-9f3c") -> Message:
    s1 = signers()["s1"]
    return failure_notice(
        s1, message_uri=notice_uri(s1.node_uri, hop), refusal=facts, timestamp_ms=1_767_571_200_000
    )


def edit(message: Message, change: Callable[[set[Quad]], None]) -> bytes:
    quads = set(message.quads)
    change(quads)
    return serialise(sorted(quads, key=repr))


def check(data: bytes) -> None:
    verify_message(Message.from_nquads(data), keys())


# ----------------------------------------------------------------------------- building


@pytest.mark.parametrize(
    "facts", [DOCUMENT, KEY, CRL, GAP], ids=["document", "key", "crl", "gap"]
)
def test_a_notice_verifies_and_round_trips(facts: RefusalFacts) -> None:
    message = notice(facts)
    verify_message(message, keys())
    again = Message.from_nquads(message.to_nquads())
    verify_message(again, keys())
    assert again == message and again.refusal == facts
    assert (again.sender, again.recipient) == (signers()["s1"].node_uri, None)
    with pytest.raises(UsageError, match="failure notice: it carries no document"):
        again.leaves()
    assert again.uri == "https://s1.xdn.example/refusal/1767571200000-9f3c"


def test_the_notice_is_one_content_graph_and_one_refusal_envelope_each_signed() -> None:
    message = notice()
    names = {q.g.value.removeprefix(message.uri) for q in message.quads if q.g is not None}
    assert names == {"#c1", "#c1s", "#e1", "#e1s"}
    kind = {q.o for q in message.quads if q.p.value == MSG + "hasMessageType"}
    assert kind == {IRI(XDN + "Refusal")}
    envelope = shape_of(message).outermost
    assert (envelope.kind, envelope.document_id, envelope.contains) == ("refusal", "", None)
    content = [q for q in message.quads if q.g is not None and q.g.value.endswith("#c1")]
    assert graph_type(message.uri + "#c1", content) == "refusal"
    assert read_refusal(message.uri + "#c1", content) == DOCUMENT
    # what was refused is named; nothing but names, numbers, the root and the reason
    predicates = {q.p.value.removeprefix(XDN) for q in content}
    assert predicates == {
        "http://www.w3.org/1999/02/22-rdf-syntax-ns#type",
        "refusalKind",
        "reason",
        "publisher",
        "documentId",
        "version",
        "manifestRoot",
        "receivedFrom",
    }


def test_the_latest_graphs_of_a_notice_are_all_of_it(tmp_path: Path) -> None:
    message = notice()
    assert message.latest_graphs_nquads() == message.to_nquads()
    s1 = signers()["s1"]
    path = tmp_path / "provenance.nq"
    cert = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    with ProvenanceLog(path, node_uri=s1.node_uri, cert_pem=cert) as log:
        log.append(message)
    logged = {q for q in parse_nquads(path.read_bytes()) if q.g and "/refusal/" in q.g.value}
    assert logged == set(message.quads)


def test_notices_of_every_kind_build() -> None:
    for kind in sorted(REFUSAL_KINDS - {"key", "crl"}):
        verify_message(notice(RefusalFacts(kind=kind, reason="why", publisher="P")), keys())


def test_a_notice_does_not_claim_a_document_chain() -> None:
    message = notice()
    with pytest.raises(UsageError, match="failure notice"):
        message.content()
    with pytest.raises(UsageError, match="failure notice"):
        _ = message.document_id


# ------------------------------------------------------------------------------- misuse


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"kind": "bogus"}, "refusal kind"),
        ({"reason": ""}, "reason"),
        ({"publisher": ""}, "publisher"),
        ({"version": -1}, "version"),
        ({"document_id": None}, "needs the document id"),
        ({"manifest_root": b""}, "manifest_root"),
        ({"concept": "urn:c"}, "only a key refusal"),
        ({"kind": "key"}, "names its key message"),
        ({"kind": "crl", "document_id": None, "version": None, "manifest_root": None}, "CRL"),
        ({"received_from": "https://d2.xdn.example"}, "end with"),
        ({"sequence": 3}, "only a gap names a sequence"),
        ({"kind": "gap", "document_id": None, "version": None, "manifest_root": None,
          "publisher": None, "sequence": 3}, "with its publisher"),
        ({"kind": "gap", "sequence": -1}, "sequence is out of range"),
    ],
)
def test_refusal_facts_are_checked(fields: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {
        "kind": "document",
        "reason": "r",
        "publisher": "P",
        "document_id": "d",
        "version": 1,
        "manifest_root": b"\x01",
    }
    with pytest.raises(ValueError, match=match):
        RefusalFacts(**(base | fields))


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"key_message": "grant"}, ValueError, "key_message must be one of"),
        ({"document_id": "d"}, ValueError, "names a group"),
        ({"epoch": True}, TypeError, "epoch"),
        ({"key_message": None}, ValueError, "names its key message"),
    ],
)
def test_key_refusals_name_a_group_not_a_document(
    fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    base: dict[str, Any] = {
        "kind": "key", "reason": "r", "key_message": "rekey", "concept": "c", "epoch": 1
    }
    with pytest.raises(error, match=match):
        RefusalFacts(**(base | fields))


def test_building_checks_the_uri_space_and_the_arguments() -> None:
    s1 = signers()["s1"]
    with pytest.raises(UsageError, match="must start with"):
        failure_notice(
            s1,
            message_uri=message_uri(s1.node_uri, "order 7", "refused"),
            refusal=DOCUMENT,
            timestamp_ms=1,
        )
    with pytest.raises(UsageError, match="must start with"):
        failure_notice(
            s1,
            message_uri=notice_uri(signers()["d2"].node_uri, "x"),
            refusal=DOCUMENT,
            timestamp_ms=1,
        )
    with pytest.raises(TypeError, match="RefusalFacts"):
        failure_notice(
            s1,
            message_uri=notice_uri(s1.node_uri, "x"),
            refusal="refused",  # type: ignore[arg-type]
            timestamp_ms=1,
        )
    with pytest.raises(ValueError, match="at least one segment"):
        notice_uri(s1.node_uri)


def test_a_notice_is_final() -> None:
    s = signers()
    with pytest.raises(UsageError, match="final"):
        relay(
            notice(),
            s["d2"],
            message_uri=notice_uri(s["d2"].node_uri, "x"),
            recipient_uri=s["pub"].node_uri,
            leaves=LeafRanges(((0, 1),)),
            timestamp_ms=2,
        )
    with pytest.raises(UsageError, match="final"):
        receipt(notice(), s["s1"], message_uri=notice_uri(s["s1"].node_uri, "r"), timestamp_ms=2)


# ----------------------------------------------------------------------- well-formedness


def test_an_envelope_wrapping_a_notice_is_refused() -> None:
    """Even signed by the right parties, nothing may extend a notice (it is final)."""
    message, d2 = notice(), signers()["d2"]
    outer = shape_of(message).outermost
    sig = shape_of(message).signatures[outer.name]
    relayed = message_uri(d2.node_uri, "x", "relayed")
    hop = _Hop(
        message=relayed,
        number=2,
        kind=IRI(XDN + "Relay"),
        sender=d2.node_uri,
        recipient=signers()["pub"].node_uri,
        timestamp_ms=2,
        document_id="x",
        leaves=LeafRanges(((0, 1),)),
        contains=outer.name,
        remote_message=outer.message,
    )
    sealed = _seal(d2, hop, [(sig.name, outer.name, sig.value)])
    with pytest.raises(ProvenanceError, match="refusal envelope cannot be relayed"):
        Message(quads=message.quads | frozenset(sealed))


def test_a_publication_cannot_take_a_notice_for_its_content() -> None:
    pub = signers()["pub"]
    content = ContentFacts(
        document_id="d",
        publisher="P",
        manifest_root=b"\x01",
        leaf_count=1,
    )
    m = originate(
        pub,
        message_uri=message_uri(pub.node_uri, "d", "1"),
        recipient_uri=SITE,
        content=content,
        timestamp_ms=1,
    )
    c1 = IRI(m.uri + "#c1")

    def swap(quads: set[Quad]) -> None:
        quads -= {q for q in quads if q.g == c1}
        quads.add(Quad(IRI(m.uri + "#notice"), RDF_TYPE, IRI(XDN + "FailureNotice"), c1))

    with pytest.raises(ProvenanceError, match="not a content graph"):
        Message.from_nquads(edit(m, swap))


def _set(graph: str, predicate: str, obj: IRI | Literal | None) -> Callable[[set[Quad]], None]:
    """Set the ``predicate`` of graph ``#graph``'s main subject (the message in an envelope,
    the notice in the content graph) to ``obj``, or drop it when ``obj`` is None."""

    def change(quads: set[Quad]) -> None:
        name = next(q.g for q in quads if q.g is not None and q.g.value.endswith(graph))
        base = name.value.split("#")[0]
        subject = IRI(base + "#notice" if graph == "#c1" else base)
        quads -= {q for q in quads if q.g == name and q.p.value == predicate}
        if obj is not None:
            quads.add(Quad(subject, IRI(predicate), obj, name))

    return change


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (_set("#e1", XDN + "documentId", Literal("order 7")), "carries no document"),
        (_set("#e1", XDN + "carriesLeaves", Literal("0-1")), "carries no document"),
        (_set("#e1", MSG + "hasRecipient", IRI(SITE)), "must not name a recipient"),
        (_set("#e1", MSG + "hasContent", None), "hasContent"),
        (_set("#c1", XDN + "colour", Literal("red")), "unexpected property"),
        (_set("#c1", XDN + "version", Literal("-3", XSD_LONG)), "non-negative"),
        (_set("#c1", XDN + "refusalKind", Literal("whim")), "refusal kind"),
        (_set("#c1", XDN + "reason", None), "expected exactly one"),
        (_set("#c1", XDN + "epoch", Literal("1", XSD_LONG)), "only a key refusal"),
    ],
)
def test_malformed_notices_are_refused_naming_the_graph(
    change: Callable[[set[Quad]], None], match: str
) -> None:
    with pytest.raises(ProvenanceError, match=match):
        Message.from_nquads(edit(notice(), change))


def test_a_notice_outside_its_signers_notice_space_is_refused() -> None:
    """Condition 11: a notice moved below ``msg/`` (all its graph names with it) is refused."""
    message = notice()
    moved = message.to_nquads().replace(b"/refusal/", b"/msg/")
    with pytest.raises(ProvenanceError, match="condition 11"):
        Message.from_nquads(moved)


# ----------------------------------------------------------------------------- tampering


def _quads_of_every_graph() -> list[tuple[str, Quad]]:
    message = notice()
    return sorted(
        ((q.g.value.removeprefix(message.uri), q) for q in message.quads if q.g is not None),
        key=repr,
    )


@pytest.mark.parametrize(
    ("graph", "quad"), _quads_of_every_graph(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_changing_any_quad_of_any_graph_is_refused(graph: str, quad: Quad) -> None:
    message = notice()
    changed = (
        Literal(quad.o.value + "0", quad.o.datatype)
        if isinstance(quad.o, Literal)
        else IRI(quad.o.value + "x")
    )

    def change(quads: set[Quad]) -> None:
        quads.discard(quad)
        quads.add(Quad(quad.s, quad.p, changed, quad.g))

    with pytest.raises((ProvenanceError, SignatureError)):
        check(edit(message, change))


@pytest.mark.parametrize("graph", ["#c1", "#c1s", "#e1", "#e1s"])
def test_dropping_any_graph_is_refused(graph: str) -> None:
    message = notice()

    def drop(quads: set[Quad]) -> None:
        quads -= {q for q in quads if q.g is not None and q.g.value == message.uri + graph}

    with pytest.raises(ProvenanceError):
        check(edit(message, drop))


def test_a_notice_forged_by_another_key_is_refused() -> None:
    forger = Signer(node_uri=signers()["s1"].node_uri, private_key=crypto.generate_private_key())
    forged = failure_notice(
        forger, message_uri=notice_uri(forger.node_uri, "f"), refusal=DOCUMENT, timestamp_ms=1
    )
    with pytest.raises(SignatureError, match="does not verify"):
        verify_message(forged, keys())


def test_a_notice_re_attributed_to_another_party_is_refused() -> None:
    """Renaming the signer in every graph (URI space included) leaves a signature by s1's key
    that d2's key does not verify."""
    moved = notice().to_nquads().replace(b"https://s1.xdn.example/", b"https://d2.xdn.example/")
    with pytest.raises(SignatureError):
        check(moved)
