"""xdn.provenance: signed envelope chains, well-formedness, tampering, the provenance log."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xdn import crypto, ids
from xdn.errors import ProtocolError, ProvenanceError, SignatureError, UsageError
from xdn.provenance import (
    ContentFacts,
    Hop,
    LeafRanges,
    Message,
    ProvenanceLog,
    Signer,
    check_extendable,
    message_uri,
    node_description,
    originate,
    read_node_description,
    receipt,
    relay,
    relay_many,
    verify_message,
)
from xdn.provenance import _vocab as v
from xdn.provenance._message import _Hop, _seal, shape_of
from xdn.provenance._shape import extend
from xdn.rdf import IRI, Literal, Quad, canonicalise, parse_nquads, serialise

NODES = ("pub", "d1", "d2", "s1", "s2")
XDN = "https://xdn.example.org/ns#"
MSG = "http://purl.org/webofneeds/message#"


def uri(name: str) -> str:
    return f"https://{name}.xdn.example/"


@functools.cache
def signers() -> dict[str, Signer]:
    return {n: Signer(node_uri=uri(n), private_key=crypto.generate_private_key()) for n in NODES}


def keys() -> dict[str, crypto.PublicKey]:
    return {s.node_uri: s.private_key.public_key() for s in signers().values()}


CONTENT = ContentFacts(
    document_id="order 7", publisher="ACME", manifest_root=bytes(range(32)), leaf_count=10
)
ALL = LeafRanges(((0, 10),))
SOME = LeafRanges(((0, 3), (5, 7)))  # what d2 forwards to s1: two runs of leaves
FIRST = LeafRanges(((0, 3),))
LAST = LeafRanges(((7, 10),))


def mid(node: str, hop: str) -> str:
    return f"{uri(node)}msg/order%207/{hop}"


@functools.cache
def chain() -> tuple[Message, Message, Message, Message]:
    """publisher → d1 → d2 → s1 (receipt), one message per stage."""
    s = signers()
    m1 = originate(
        s["pub"],
        message_uri=mid("pub", "1"),
        recipient_uri=uri("d1"),
        content=CONTENT,
        timestamp_ms=1_000,
    )
    m2 = relay(
        m1,
        s["d1"],
        message_uri=mid("d1", "a"),
        recipient_uri=uri("d2"),
        leaves=ALL,
        timestamp_ms=1_010,
    )
    m3 = relay(
        m2,
        s["d2"],
        message_uri=mid("d2", "b"),
        recipient_uri=uri("s1"),
        leaves=SOME,
        timestamp_ms=1_025,
    )
    m4 = receipt(m3, s["s1"], message_uri=mid("s1", "r"), timestamp_ms=1_040)
    return m1, m2, m3, m4


def full() -> Message:
    return chain()[3]


def edit(message: Message, change: Callable[[set[Quad]], None]) -> bytes:
    quads = set(message.quads)
    change(quads)
    return serialise(sorted(quads, key=repr))


def replace_object(
    graph_suffix: str, predicate: str, new: IRI | Literal, subject_suffix: str = ""
) -> Callable[[set[Quad]], None]:
    def change(quads: set[Quad]) -> None:
        hits = [
            q
            for q in quads
            if q.g
            and q.g.value.endswith(graph_suffix)
            and q.p.value == predicate
            and q.s.value.endswith(subject_suffix)
        ]
        assert len(hits) == 1, hits
        quads.remove(hits[0])
        quads.add(Quad(hits[0].s, hits[0].p, new, hits[0].g))

    return change


def verify_bytes(data: bytes, public_keys: dict[str, crypto.PublicKey] | None = None) -> None:
    verify_message(Message.from_nquads(data), keys() if public_keys is None else public_keys)


# ------------------------------------------------------------------------------ round trip


def test_four_hop_chain_verifies_at_every_stage() -> None:
    for message in chain():
        verify_message(message, keys())
    m4 = full()
    assert m4.uri == mid("s1", "r")
    assert m4.leaves() == SOME  # a receipt names what its subscriber received
    assert [m.leaves() for m in chain()[:3]] == [ALL, ALL, SOME]
    assert m4.content() == CONTENT
    assert (m4.sender, m4.recipient, m4.document_id) == (uri("s1"), None, "order 7")


def test_nquads_round_trip_is_canonical() -> None:
    data = full().to_nquads()
    again = Message.from_nquads(data)
    assert again == full() and again.to_nquads() == data
    assert b"_:" not in data and data.endswith(b" .\n")


def test_each_hop_is_checked_as_a_full_reading_would_check_it() -> None:
    for built in chain():  # relay and receipt check only the graphs they add
        reread = shape_of(Message.from_nquads(built.to_nquads()))
        shape = shape_of(built)
        assert (shape.envelopes, dict(shape.signatures), shape.content) == (
            reread.envelopes, dict(reread.signatures), reread.content,
        )
        assert {n: set(g) for n, g in shape.graphs.items()} == {
            n: set(g) for n, g in reread.graphs.items()
        }


def test_a_hop_that_does_not_wrap_the_outermost_envelope_is_refused() -> None:
    m1, m2, m3, _ = chain()
    added = [q for q in m3.quads if q not in m2.quads]  # d2's envelope wraps m2's, not m1's
    with pytest.raises(ProvenanceError, match="outermost envelope"):
        extend(shape_of(m1), added)
    with pytest.raises(ProvenanceError, match="exactly one new envelope"):
        extend(shape_of(m2), [q for q in added if q.g and q.g.value.endswith("#e3")])


@pytest.mark.parametrize(
    "text",
    [
        "0-3 5-7 ",  # trailing space
        "0-3  5-7",  # two spaces
        "0-3,5-7",
        "00-3 5-7",  # leading zero
        "0-3 5-07",
        "5-7 0-3",  # unsorted
        "0-3 3-7",  # adjacent: one run, so one spelling
        "0-5 3-7",  # overlapping
        "3-3",  # empty run
        "4-2",
        "",
        "-1-3",
        "0x0-3",
        "0-3\n5-7",
        "\u0663-\u0665",  # non-ASCII (Arabic-Indic) digits
    ],
)
def test_carried_leaves_in_a_non_canonical_spelling_are_refused_naming_the_envelope(
    text: str,
) -> None:
    data = edit(chain()[2], replace_object("#e3", v.CARRIES_LEAVES.value, Literal(text)))
    with pytest.raises(ProvenanceError, match=rf"graph <{mid('d2', 'b')}#e3>: xdn:carriesLeaves"):
        Message.from_nquads(data)


@pytest.mark.parametrize("term", [Literal("0-3 5-7", v.XSD_LONG), IRI("urn:x:leaves")])
def test_carried_leaves_must_be_a_plain_literal(term: IRI | Literal) -> None:
    data = edit(chain()[2], replace_object("#e3", v.CARRIES_LEAVES.value, term))
    with pytest.raises(ProvenanceError, match=r"#e3>: .* needs <.*#string> literals for"):
        Message.from_nquads(data)


def test_an_envelope_must_name_its_leaves_exactly_once() -> None:
    def drop(quads: set[Quad]) -> None:
        quads -= {q for q in quads if q.p == v.CARRIES_LEAVES and q.g and q.g.value.endswith("#e3")}

    def twice(quads: set[Quad]) -> None:
        (old,) = [q for q in quads if q.p == v.CARRIES_LEAVES and q.g and q.g.value.endswith("#e3")]
        quads.add(Quad(old.s, old.p, Literal("0-1"), old.g))

    for change in (drop, twice):
        with pytest.raises(ProvenanceError, match=r"#e3>: .*carriesLeaves"):
            Message.from_nquads(edit(chain()[2], change))


def test_a_hop_carrying_leaves_its_previous_hop_did_not_carry_is_refused() -> None:
    """Even signed by its sender: d2's hop may only narrow what d1 forwarded."""
    s, narrow = signers(), relay(
        chain()[0], signers()["d1"], message_uri=mid("d1", "n"), recipient_uri=uri("d2"),
        leaves=FIRST, timestamp_ms=1_010,
    )
    with pytest.raises(UsageError, match="subset"):
        relay(narrow, s["d2"], message_uri=mid("d2", "n"), recipient_uri=uri("s1"),
              leaves=SOME, timestamp_ms=1_020)
    shape = shape_of(narrow)
    outer = shape.outermost
    sig = shape.signatures[outer.name]
    hop = _Hop(  # what relay() refuses to build, built and signed by hand
        message=mid("d2", "n"), number=3, kind=v.RELAY, sender=uri("d2"), recipient=uri("s1"),
        timestamp_ms=1_020, document_id="order 7", leaves=SOME, contains=outer.name,
        remote_message=outer.message,
    )
    sealed = _seal(s["d2"], hop, [(sig.name, outer.name, sig.value)])
    with pytest.raises(ProvenanceError, match=r"#e3>: document or fragments differ"):
        Message(quads=narrow.quads | frozenset(sealed))


def test_a_publication_carrying_leaves_beyond_its_manifest_is_refused() -> None:
    data = edit(chain()[0], replace_object("#e1", v.CARRIES_LEAVES.value, Literal("0-11")))
    with pytest.raises(ProvenanceError, match=r"#e1>: carries a leaf beyond the 10"):
        Message.from_nquads(data)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("0", "at least 1"),
        ("-4", "at least 1"),
        ("010", "malformed xsd:long"),
        ("ten", "malformed xsd:long"),
    ],
)
def test_a_malformed_leaf_count_is_refused_naming_the_content_graph(text: str, match: str) -> None:
    data = edit(chain()[0], replace_object("#c1", v.LEAF_COUNT.value, Literal(text, v.XSD_LONG)))
    with pytest.raises(ProvenanceError, match=rf"graph <{C1}>: .*{match}"):
        Message.from_nquads(data)


def test_latest_graphs_are_what_each_hop_added() -> None:
    m1, m2, _, m4 = chain()
    names = {q.g.value for q in parse_nquads(m1.latest_graphs_nquads()) if q.g}
    assert names == {mid("pub", "1") + s for s in ("#c1", "#c1s", "#e1", "#e1s")}
    names = {q.g.value for q in parse_nquads(m2.latest_graphs_nquads()) if q.g}
    assert names == {mid("d1", "a") + "#e2", mid("d1", "a") + "#e2s"}
    layers = b"".join(m.latest_graphs_nquads() for m in chain())
    assert set(parse_nquads(layers)) == set(m4.quads)


def test_content_names_the_manifest_only_and_never_grows_with_the_document() -> None:
    content = [q for q in chain()[0].quads if q.g == IRI(C1)]
    assert {q.p for q in content} == {
        v.RDF_TYPE, v.DOCUMENT_ID, v.PUBLISHER, v.MANIFEST_ROOT, v.LEAF_COUNT,
    }
    assert Literal(bytes(range(32)).hex().upper(), v.XSD_HEX) in {q.o for q in content}
    huge = ContentFacts(document_id="order 7", publisher="ACME", manifest_root=bytes(range(32)),
                        leaf_count=7_600)
    big = originate(signers()["pub"], message_uri=mid("pub", "1"), recipient_uri=uri("d1"),
                    content=huge, timestamp_ms=1_000)
    assert len(big.quads) == len(chain()[0].quads)  # the same graphs, only numbers differ

    def unsigned_size(message: Message) -> int:  # signature values vary in length (DER)
        return len(canonicalise(q for q in message.quads if q.p != v.HAS_SIGNATURE_VALUE))

    assert unsigned_size(big) - unsigned_size(chain()[0]) < 16


def test_a_hop_names_its_leaves_in_space_that_grows_with_runs_not_leaves() -> None:
    s = signers()
    big = originate(s["pub"], message_uri=mid("pub", "1"), recipient_uri=uri("d1"),
                    content=ContentFacts(document_id="order 7", publisher="ACME",
                                         manifest_root=bytes(32), leaf_count=7_600),
                    timestamp_ms=1)
    runs = LeafRanges(((0, 120), (300, 7_600)))
    hop = relay(big, s["d1"], message_uri=mid("d1", "big"), recipient_uri=uri("d2"),
                leaves=runs, timestamp_ms=2)
    (carried,) = [q.o for q in hop.quads if q.p == v.CARRIES_LEAVES
                  and q.g and q.g.value.endswith("#e2")]
    assert carried == Literal("0-120 300-7600")
    assert hop.leaves().count == 7_420
    verify_message(hop, keys())


def test_fan_out_gives_distinct_verifiable_messages() -> None:
    s, m1 = signers(), chain()[0]
    to_d2 = relay(
        m1,
        s["d1"],
        message_uri=mid("d1", "x"),
        recipient_uri=uri("d2"),
        leaves=FIRST,
        timestamp_ms=2,
    )
    to_s2 = relay(
        m1,
        s["d1"],
        message_uri=mid("d1", "y"),
        recipient_uri=uri("s2"),
        leaves=LAST,
        timestamp_ms=2,
    )
    assert to_d2.uri != to_s2.uri and to_d2.latest_graphs_nquads() != to_s2.latest_graphs_nquads()
    for message in (to_d2, to_s2):
        verify_message(message, keys())
    verify_message(receipt(to_s2, s["s2"], message_uri=mid("s2", "r"), timestamp_ms=3), keys())


# ------------------------------------------------------------------------------- misuse


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (
            lambda: relay(
                chain()[0],
                signers()["d1"],
                message_uri=mid("d1", "z"),
                recipient_uri=uri("d2"),
                leaves=LeafRanges(((9, 11),)),  # leaf 10 is beyond the manifest
                timestamp_ms=1,
            ),
            UsageError,
            "subset",
        ),
        (
            lambda: relay(
                chain()[2],
                signers()["s1"],
                message_uri=mid("s1", "z"),
                recipient_uri=uri("d2"),
                leaves=LAST,  # s1 got SOME, not these
                timestamp_ms=1,
            ),
            UsageError,
            "subset",
        ),
        (
            lambda: relay(
                chain()[0],
                signers()["d1"],
                message_uri=mid("d2", "z"),
                recipient_uri=uri("d2"),
                leaves=FIRST,
                timestamp_ms=1,
            ),
            UsageError,
            "must start with",
        ),
        (
            lambda: relay(
                chain()[0],
                signers()["d1"],
                message_uri=mid("d1", "z#x"),
                recipient_uri=uri("d2"),
                leaves=FIRST,
                timestamp_ms=1,
            ),
            UsageError,
            "no fragment",
        ),
        (
            lambda: relay(
                chain()[0],
                signers()["d1"],
                message_uri=mid("d1", "z"),
                recipient_uri=uri("d2"),
                leaves="0-3",  # type: ignore[arg-type]
                timestamp_ms=1,
            ),
            TypeError,
            "LeafRanges",
        ),
        (
            lambda: receipt(
                full(), signers()["s1"], message_uri=mid("s1", "again"), timestamp_ms=1
            ),
            UsageError,
            "final",
        ),
        (
            lambda: receipt(
                chain()[2], signers()["s1"], message_uri=mid("pub", "1"), timestamp_ms=1
            ),
            UsageError,
            "must start with",
        ),
        (
            lambda: relay(
                chain()[1],
                signers()["d1"],
                message_uri=mid("d1", "a"),
                recipient_uri=uri("d2"),
                leaves=FIRST,
                timestamp_ms=1,
            ),
            UsageError,
            "already used",
        ),
        (
            lambda: receipt(
                chain()[2], signers()["s1"], message_uri=mid("s1", "t"), timestamp_ms=True
            ),
            TypeError,
            "timestamp",
        ),
        (
            lambda: Signer(
                node_uri="https://d1.xdn.example", private_key=signers()["d1"].private_key
            ),
            ValueError,
            "end with",
        ),
        (
            lambda: ContentFacts(document_id="d", publisher="P", manifest_root=b"r", leaf_count=0),
            ValueError,
            "at least one leaf",
        ),
        (
            lambda: ContentFacts(
                document_id="d", publisher="P", manifest_root=b"r", leaf_count=True
            ),
            TypeError,
            "leaf_count must be an int",
        ),
        (
            lambda: ContentFacts(document_id="d", publisher="P", manifest_root=b"", leaf_count=1),
            ValueError,
            "manifest_root",
        ),
        (
            lambda: relay_many(
                chain()[0], signers()["d1"], [(mid("d1", "z"), uri("d2"), ALL)],  # type: ignore[list-item]
                timestamp_ms=1,
            ),
            TypeError,
            "Hop values",
        ),
        (
            lambda: relay_many(
                chain()[0],
                signers()["d1"],
                [Hop(message_uri=mid("d1", "z"), recipient_uri=uri(n), leaves=ALL)
                 for n in ("d2", "s2")],
                timestamp_ms=1,
            ),
            UsageError,
            "used by two hops",
        ),
    ],
)
def test_misuse_is_refused_early(
    call: Callable[[], object], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        call()


def test_signer_repr_hides_the_key() -> None:
    assert "private" not in repr(signers()["d1"]).lower()


# ------------------------------------------------------------------------------ tampering

E2 = mid("d1", "a") + "#e2"
C1 = mid("pub", "1") + "#c1"


@pytest.mark.parametrize(
    ("predicate", "value"),
    [
        (v.MANIFEST_ROOT, Literal("AB" * 32, v.XSD_HEX)),  # another manifest
        (v.LEAF_COUNT, Literal("11", v.XSD_LONG)),  # one leaf more
        (v.PUBLISHER, Literal("EVIL")),
    ],
)
def test_altered_content_quad_is_refused_naming_the_graph(predicate: IRI, value: Literal) -> None:
    data = edit(full(), replace_object("#c1", predicate.value, value))
    with pytest.raises(SignatureError, match=rf"<{C1}s> does not verify graph <{C1}>"):
        verify_bytes(data)


def test_altered_carried_leaves_are_refused_naming_the_envelope() -> None:
    """A site widens what an upstream hop says it forwarded (still within what came before)."""
    e3 = mid("d2", "b") + "#e3"
    data = edit(full(), replace_object("#e3", v.CARRIES_LEAVES.value, Literal("0-7")))
    Message.from_nquads(data)  # well-formed: 0-7 lies within d1's hop, SOME within 0-7
    with pytest.raises(SignatureError, match=rf"<{e3}s> does not verify graph <{e3}>"):
        verify_bytes(data)


def test_altered_envelope_quad_is_refused_naming_the_graph() -> None:
    data = edit(
        full(),
        replace_object(
            "#e2", MSG + "hasSentTimestamp", Literal("999", "http://www.w3.org/2001/XMLSchema#long")
        ),
    )
    with pytest.raises(SignatureError, match=rf"does not verify graph <{E2}>"):
        verify_bytes(data)


def test_altered_signature_value_breaks_the_reference() -> None:
    sig = "http://icp.it-risk.iwvi.uni-koblenz.de/ontologies/signature.owl#hasSignatureValue"
    data = edit(full(), replace_object("#c1s", sig, Literal("MEUCIQ==")))
    with pytest.raises(ProvenanceError, match=rf"condition 5: graph <{mid('pub', '1')}#e1>"):
        verify_bytes(data)
    outer = edit(full(), replace_object("#e4s", sig, Literal("MEUCIQ==")))
    with pytest.raises(SignatureError, match=r"#e4s> does not verify"):
        verify_bytes(outer)


def test_extra_quad_in_unsigned_signature_graph_is_refused() -> None:
    def add(quads: set[Quad]) -> None:
        g = IRI(mid("s1", "r") + "#e4s")
        quads.add(Quad(g, IRI(XDN + "note"), Literal("hi"), g))

    with pytest.raises(ProvenanceError, match="unexpected property"):
        verify_bytes(edit(full(), add))


@pytest.mark.parametrize(
    ("graph", "match"),
    [
        (C1 + "s", r"condition 3: graph <.*#c1> is not signed"),
        (E2, r"condition 4: contained envelope <.*#e2> is missing"),
        (mid("s1", "r") + "#e4s", r"condition 3: graph <.*#e4> is not signed"),
        (C1, r"condition 8: signature graph <.*#c1s> signs"),
    ],
)
def test_dropped_graph_is_refused(graph: str, match: str) -> None:
    data = edit(
        full(),
        lambda quads: quads.difference_update({q for q in quads if q.g and q.g.value == graph}),
    )
    with pytest.raises(ProvenanceError, match=match):
        Message.from_nquads(data)


def test_quad_in_default_graph_is_refused() -> None:
    data = full().to_nquads() + b"<http://e/s> <http://e/p> <http://e/o> .\n"
    with pytest.raises(ProvenanceError, match="condition 1"):
        Message.from_nquads(data)


def test_blank_node_is_refused() -> None:
    data = full().to_nquads() + f"_:b <http://e/p> <http://e/o> <{E2}> .\n".encode()
    with pytest.raises(ProvenanceError, match="blank node"):
        Message.from_nquads(data)


def test_reordered_chain_is_refused() -> None:
    s, m1 = signers(), chain()[0]  # m1 is addressed to d1, but d2 relays it first
    wrong = relay(
        m1,
        s["d2"],
        message_uri=mid("d2", "q"),
        recipient_uri=uri("d1"),
        leaves=FIRST,
        timestamp_ms=5,
    )
    wrong = relay(
        wrong,
        s["d1"],
        message_uri=mid("d1", "q"),
        recipient_uri=uri("s1"),
        leaves=FIRST,
        timestamp_ms=6,
    )
    with pytest.raises(ProvenanceError, match=r"condition 9: graph <.*d2.*#e2> was added by"):
        verify_message(wrong, keys())


def test_chain_cut_and_spliced_onto_another_message_is_refused() -> None:
    m2, m3 = chain()[1], chain()[2]
    layer = m3.latest_graphs_nquads()
    fan = relay(
        chain()[0],
        signers()["d1"],
        message_uri=mid("d1", "other"),
        recipient_uri=uri("d2"),
        leaves=FIRST,
        timestamp_ms=1,
    )
    with pytest.raises(ProvenanceError, match="condition"):
        Message.from_nquads(fan.to_nquads() + layer)
    assert Message.from_nquads(m2.to_nquads() + layer) == m3


def test_wrong_signer_key_is_refused() -> None:
    public_keys = keys() | {uri("d1"): crypto.generate_private_key().public_key()}
    with pytest.raises(SignatureError, match=rf"does not verify graph <{E2}> under the key of"):
        verify_message(full(), public_keys)


def test_unknown_signer_is_refused() -> None:
    public_keys = {k: v for k, v in keys().items() if k != uri("d2")}
    with pytest.raises(SignatureError, match=r"#e3s>: signer <https://d2.xdn.example/> is not"):
        verify_message(full(), public_keys)


def test_forged_signer_uri_is_refused() -> None:
    rogue = Signer(node_uri=uri("d1"), private_key=crypto.generate_private_key())
    forged = relay(
        chain()[0],
        rogue,
        message_uri=mid("d1", "f"),
        recipient_uri=uri("d2"),
        leaves=FIRST,
        timestamp_ms=1,
    )
    with pytest.raises(SignatureError, match=r"#e2s> does not verify graph <.*#e2> under the key"):
        verify_message(forged, keys())


def test_signer_other_than_sender_is_refused() -> None:
    def resign(quads: set[Quad]) -> None:
        replace_object(
            "#e4s",
            "http://icp.it-risk.iwvi.uni-koblenz.de/ontologies/signature.owl#"
            "hasVerificationCertificate",
            IRI(uri("s2")),
        )(quads)

    with pytest.raises(SignatureError, match=r"condition 9: graph <.*#e4> is signed by <.*s2"):
        verify_bytes(edit(full(), resign))


# One quad changed anywhere — altered, dropped, moved or added — never verifies.


def _mutations() -> st.SearchStrategy[Callable[[set[Quad]], None]]:
    ordered = sorted(full().quads, key=repr)
    index = st.integers(0, len(ordered) - 1)
    graphs = sorted({q.g for q in ordered if q.g}, key=repr)
    terms = st.one_of(
        st.sampled_from([q.s for q in ordered] + [q.o for q in ordered]),
        st.text(max_size=5).map(Literal),
        st.sampled_from(graphs),
    )

    def swap(i: int, pos: str, term: IRI | Literal) -> Callable[[set[Quad]], None]:
        def change(quads: set[Quad]) -> None:
            old = ordered[i]
            parts = {"s": old.s, "p": old.p, "o": old.o, "g": old.g} | {pos: term}
            try:
                new = Quad(parts["s"], parts["p"], parts["o"], parts["g"])  # type: ignore[arg-type]
            except TypeError:
                new = Quad(old.s, old.p, Literal("tampered"), old.g)
            quads.discard(old)
            quads.add(new)  # if ``new`` was there already, the change is a drop

        return change

    def add(s: IRI | Literal, o: IRI | Literal, g: IRI) -> Callable[[set[Quad]], None]:
        subject = s if isinstance(s, IRI) else IRI("urn:x:tamper")
        return lambda quads: quads.add(Quad(subject, IRI("urn:x:extra"), o, g))

    literal_quads = [q for q in ordered if isinstance(q.o, Literal)]

    def relabel(i: int, digits: str) -> Callable[[set[Quad]], None]:
        old = literal_quads[i]
        assert isinstance(old.o, Literal)
        value = digits if old.o.value.isdigit() else old.o.value[:-1] + "Z" + digits
        new = Quad(old.s, old.p, Literal(value, old.o.datatype, old.o.language), old.g)

        def change(quads: set[Quad]) -> None:
            quads.discard(old)
            quads.add(new)

        return change

    return st.one_of(
        st.builds(swap, index, st.sampled_from("spog"), terms),
        st.builds(add, terms, terms, st.sampled_from(graphs)),
        st.builds(relabel, st.integers(0, len(literal_quads) - 1), st.from_regex(r"\A[1-9]\Z")),
    )


def test_an_envelope_naming_an_empty_document_is_refused_as_malformed() -> None:
    """Found by the property below: the empty id reached the URI code as a ValueError."""
    data = edit(full(), replace_object("#e2", v.DOCUMENT_ID.value, Literal("")))
    with pytest.raises(ProvenanceError, match="must not be empty"):
        verify_bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutations())
def test_any_single_quad_change_breaks_verification(mutation: Callable[[set[Quad]], None]) -> None:
    data = edit(full(), mutation)
    if set(parse_nquads(data)) == set(full().quads):  # the mutation happened to be a no-op
        return
    with pytest.raises((ProvenanceError, SignatureError)):
        verify_bytes(data)


# ------------------------------------------------------------------------------------ log


CERT = b"""-----BEGIN CERTIFICATE-----
MIIBfzCCAQWgAwIBAgIUBmFrZS1jZXJ0aWZpY2F0ZS1ieXRlczAKBggqhkjOPQQD
-----END CERTIFICATE-----
"""


def test_node_description_round_trips() -> None:
    graph = node_description(uri("d1"), CERT)
    quads = parse_nquads(graph)
    assert {q.g for q in quads} == {IRI(uri("d1") + "#cert")}
    node, pem = read_node_description(uri("d1") + "#cert", quads)
    assert node == uri("d1") and pem.split() == CERT.split()
    with pytest.raises(UsageError):
        node_description(uri("d1"), b"not a certificate")


def test_log_starts_with_node_description_and_appends_each_hop(tmp_path: Path) -> None:
    path = tmp_path / "d1.nq"
    with ProvenanceLog(path, node_uri=uri("d1"), cert_pem=CERT) as log:
        log.append(chain()[1])
        with pytest.raises(UsageError, match="cannot log"):
            log.append(chain()[2])
    with ProvenanceLog(path, node_uri=uri("d1"), cert_pem=CERT) as log:
        log.append(chain()[1])  # reopened: appends, no second description
    data = path.read_bytes()
    assert data.startswith(node_description(uri("d1"), CERT))
    assert data.count(b"NodeDescription") == 1
    assert data.count(chain()[1].latest_graphs_nquads()) == 2
    with pytest.raises(UsageError, match="closed"):
        log.append(chain()[1])


# ---- ids that need escaping in message URIs -----------------------------------------------
@pytest.mark.parametrize("document_id", ["order 7", "café", "2024/03/order", "../x", "a#b?c"])
def test_message_uri_escapes_any_document_id_and_the_chain_verifies(document_id: str) -> None:
    s = signers()
    content = ContentFacts(
        document_id=document_id, publisher="ACME", manifest_root=b"\x05" * 32,
        leaf_count=1,
    )
    m1 = originate(s["pub"], message_uri=message_uri(uri("pub"), document_id, "v1"),
                   recipient_uri=uri("d1"), content=content, timestamp_ms=1)
    m2 = relay(m1, s["d1"], message_uri=message_uri(uri("d1"), document_id, "v1", "link-d 2"),
               recipient_uri=uri("s1"), leaves=LeafRanges(((0, 1),)), timestamp_ms=2)
    m3 = receipt(m2, s["s1"], message_uri=message_uri(uri("s1"), document_id, "v1", "received"),
                 timestamp_ms=3)
    verify_message(m3, keys())
    prefix = f"msg/{ids.segment(document_id)}/v1"
    assert all(prefix in e.message for e in shape_of(m3).envelopes)
    assert m3.document_id == document_id  # the literal keeps the original text
    assert Message.from_nquads(m3.to_nquads()) == m3


def test_message_uri_needs_a_hop_and_text_parts() -> None:
    assert message_uri(uri("d1"), "x", "v1", "a/b") == f"{uri('d1')}msg/x/v1/a%2Fb"
    with pytest.raises(ValueError):
        message_uri(uri("d1"), "x")
    with pytest.raises(ValueError):
        message_uri(uri("d1"), "", "v1")
    with pytest.raises(TypeError):
        message_uri(uri("d1"), "x", 1)  # type: ignore[arg-type]


def test_an_unescaped_message_uri_is_still_refused() -> None:
    """Minting by hand without escaping is the bug the helper removes: it stays an error."""
    with pytest.raises(UsageError, match="must start with"):
        originate(signers()["pub"], message_uri=f"{uri('pub')}msg/order 7/v1",
                  recipient_uri=uri("d1"), content=CONTENT, timestamp_ms=1)


def test_a_peers_chain_is_extendable_only_for_its_document_leaves_and_unused_uri() -> None:
    _, m2, m3, m4 = chain()
    check_extendable(m3, document_id="order 7", leaves=SOME, message_uri=mid("s1", "r"))
    check_extendable(m2, document_id="order 7", leaves=LeafRanges.parse("0-10"))
    # fewer than the chain names: a peer withheld some; the next hop names what came
    check_extendable(m3, document_id="order 7", leaves=FIRST)
    refused = [
        (m3, "order 8", SOME, None, "about document 'order 7', not 'order 8'"),
        (m4, "order 7", SOME, None, "ends in a receipt or a refusal"),
        (m3, "order 7", ALL, None, "carries leaves 0-3 5-7 of the manifest, but leaves 0-10"),
        (m2, "order 7", LeafRanges(((0, 11),)), None, "carries leaves 0-10"),
        (m3, "order 7", SOME, mid("d1", "a"), "already uses the message URI"),
    ]
    for message, document, leaves, hop_uri, match in refused:
        with pytest.raises(ProtocolError, match=match):
            check_extendable(message, document_id=document, leaves=leaves, message_uri=hop_uri)


def test_a_new_version_names_the_previous_versions_message() -> None:
    s = signers()
    second = originate(
        s["pub"], message_uri=mid("pub", "v2"), recipient_uri=uri("d1"), content=CONTENT,
        timestamp_ms=2_000, previous_message=mid("pub", "v1"),
    )
    verify_message(second, keys())
    (publication,) = shape_of(second).envelopes
    assert publication.previous_message == mid("pub", "v1")
    assert chain()[0] is not None and shape_of(chain()[0]).envelopes[0].previous_message is None
    relayed = relay(second, s["d1"], message_uri=mid("d1", "v2"), recipient_uri=uri("d2"),
                    leaves=FIRST, timestamp_ms=2_010)
    verify_message(relayed, keys())


@pytest.mark.parametrize(
    ("previous", "match"),
    [
        (mid("d1", "v1"), "is not another message of the same document by the same publisher"),
        (f"{uri('pub')}msg/order%208/v1", "is not another message of the same document"),
    ],
)
def test_a_previous_version_outside_the_documents_history_is_refused(
    previous: str, match: str
) -> None:
    second = originate(
        signers()["pub"], message_uri=mid("pub", "v2"), recipient_uri=uri("d1"),
        content=CONTENT, timestamp_ms=2_000,
    )
    g = f"{mid('pub', 'v2')}#e1"
    forged = set(second.quads) | {
        Quad(IRI(mid("pub", "v2")), v.HAS_PREVIOUS_MESSAGE, IRI(previous), IRI(g))
    }
    with pytest.raises(ProvenanceError, match=match):
        Message(quads=frozenset(forged))


def test_only_a_publication_names_a_previous_version() -> None:
    _, m2, _, _ = chain()
    g = f"{mid('d1', 'a')}#e2"
    forged = set(m2.quads) | {
        Quad(IRI(mid("d1", "a")), v.HAS_PREVIOUS_MESSAGE, IRI(mid("d1", "z")), IRI(g))
    }
    with pytest.raises(ProvenanceError, match="cannot name a previous version"):
        Message(quads=frozenset(forged))
