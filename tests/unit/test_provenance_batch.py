"""Batch signatures: one ECDSA signature over the Merkle root of up to MAX_BATCH hops.

From the bottom up: the codec's :func:`root_from_inclusion` that a verifier rebuilds a root
with, :func:`sign_batch` / :func:`batch_root` / :class:`BatchCache`, then :func:`relay_many`,
whose hops share one signature value yet each verify alone, and the refusal of any alteration
of a batch signature graph.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn import certs, crypto
from xdn.codec import InclusionProof, MerkleTree, leaf_hash, root_from_inclusion
from xdn.errors import ProvenanceError, SignatureError
from xdn.provenance import (
    MAX_BATCH,
    BatchProof,
    ChainVerifier,
    ContentFacts,
    Hop,
    LeafRanges,
    Message,
    Signer,
    _fanout,
    message_uri,
    originate,
    relay,
    relay_fanout,
    relay_many,
    verify_message,
)
from xdn.provenance import _vocab as v
from xdn.provenance._batch import BatchCache, batch_root, sign_batch
from xdn.provenance._message import _signature_quads, shape_of, signing_input
from xdn.rdf import IRI, Literal, Quad, serialise

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
DOCUMENT = "order 7"
CONTENT = ContentFacts(
    document_id=DOCUMENT, publisher="acme", manifest_root=bytes(range(32)), leaf_count=8
)
ALL = LeafRanges(((0, 8),))


# ------------------------------------------------------------------------------ a small PKI


@functools.cache
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("xdn-ca", now=NOW)


@functools.cache
def credential(name: str) -> tuple[bytes, bytes]:
    role = {"acme": "publisher", "d1": "site", "d2": "site"}.get(name, "subscriber")
    attributes = {certs.BLOCK_FIELD: "Order"} if role == "site" else {}
    return certs.issue(*ca(), name=name, role=role, attributes=attributes, now=NOW)


@functools.cache
def signer(name: str) -> Signer:
    cert_pem, key_pem = credential(name)
    return Signer(node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(key_pem),
                  certificate=cert_pem)


def keys(*names: str) -> dict[str, crypto.PublicKey]:
    return {certs.node_uri(n): certs.public_key_of(credential(n)[0]) for n in names}


def mid(node: str, hop: str) -> str:
    return message_uri(certs.node_uri(node), DOCUMENT, hop)


@functools.cache
def published() -> Message:
    """acme → d1."""
    return originate(signer("acme"), message_uri=mid("acme", "v1"),
                     recipient_uri=certs.node_uri("d1"), content=CONTENT, timestamp_ms=1_000)


def hops(count: int, leaves: LeafRanges = ALL) -> list[Hop]:
    return [
        Hop(message_uri=mid("d1", f"to-s{i}"), recipient_uri=certs.node_uri(f"s{i}"),
            leaves=leaves)
        for i in range(count)
    ]


@functools.cache
def fan_out() -> tuple[Message, ...]:
    """d1 relays acme's publication to s0 … s4, one batch; each hop carries other leaves."""
    spread = [
        Hop(message_uri=h.message_uri, recipient_uri=h.recipient_uri,
            leaves=LeafRanges(((i, i + 2),)))
        for i, h in enumerate(hops(5))
    ]
    return tuple(relay_many(published(), signer("d1"), spread, timestamp_ms=1_010))


def signature_graph(message: Message) -> list[Quad]:
    name = IRI(message.uri + "#e2s")
    return sorted((q for q in message.quads if q.g == name), key=repr)


def objects(message: Message, predicate: IRI) -> list[str]:
    return [q.o.value for q in signature_graph(message) if q.p == predicate]


# ------------------------------------------------------------------ root_from_inclusion


@pytest.mark.parametrize("size", [*range(1, 71), 1024])
def test_root_from_inclusion_rebuilds_the_root_from_every_leaf(size: int) -> None:
    entries = [f"graph {i}".encode() for i in range(size)]
    tree = MerkleTree.from_entries(entries)
    indexes = range(size) if size <= 70 else (0, 1, 511, 512, 1022, 1023)
    for index in indexes:
        assert root_from_inclusion(leaf_hash(entries[index]), tree.inclusion_proof(index)) == (
            tree.root
        )


def test_root_from_inclusion_refuses_a_path_that_does_not_fit_the_size() -> None:
    tree = MerkleTree.from_entries([bytes([i]) for i in range(8)])
    proof = tree.inclusion_proof(3)
    leaf = leaf_hash(bytes([3]))
    longer = InclusionProof(leaf_index=3, tree_size=8, path=(*proof.path, bytes(32)))
    shorter = InclusionProof(leaf_index=3, tree_size=8, path=proof.path[:-1])
    assert root_from_inclusion(leaf, longer) is None
    assert root_from_inclusion(leaf, shorter) is None
    with pytest.raises(ValueError):
        root_from_inclusion(b"short", proof)


# ----------------------------------------------------------------- sign_batch, batch_root


@functools.cache
def batch_key() -> crypto.PrivateKey:
    return crypto.generate_private_key()


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[bytes], int]:
    size = draw(st.one_of(st.integers(1, 70), st.just(MAX_BATCH)))
    salt = draw(st.binary(max_size=8))
    return [salt + i.to_bytes(2, "big") for i in range(size)], draw(st.integers(0, size - 1))


@settings(max_examples=60, deadline=None)
@given(batches())
def test_sign_batch_and_batch_root_round_trip(batch: tuple[list[bytes], int]) -> None:
    inputs, index = batch
    signature, proofs = sign_batch(batch_key(), inputs)
    assert [(p.index, p.size) for p in proofs] == [(i, len(inputs)) for i in range(len(inputs))]
    root = MerkleTree.from_entries(inputs).root
    assert batch_root(inputs[index], proofs[index]) == root
    BatchCache().verify(batch_key().public_key(), root, signature, size=len(inputs))


def _refused(inputs: list[bytes], index: int, proof: BatchProof, signature: bytes) -> None:
    """The proof leads nowhere, or to a root the signature does not cover."""
    with pytest.raises(SignatureError):
        root = batch_root(inputs[index], proof)
        BatchCache().verify(batch_key().public_key(), root, signature, size=proof.size)


@settings(max_examples=60, deadline=None)
@given(batches(), st.data())
def test_any_flipped_path_byte_wrong_index_or_wrong_size_fails(
    batch: tuple[list[bytes], int], data: st.DataObject
) -> None:
    inputs, index = batch
    signature, proofs = sign_batch(batch_key(), inputs)
    proof = proofs[index]
    if proof.path:
        at = data.draw(st.integers(0, len(proof.path) - 1))
        byte = data.draw(st.integers(0, 31))
        bit = data.draw(st.integers(0, 7))
        hashes = list(proof.path)
        flipped = bytearray(hashes[at])
        flipped[byte] ^= 1 << bit
        hashes[at] = bytes(flipped)
        _refused(inputs, index, BatchProof(index=index, size=proof.size, path=tuple(hashes)),
                 signature)
    if len(inputs) > 1:
        other = data.draw(st.integers(0, len(inputs) - 1).filter(lambda i: i != index))
        _refused(inputs, index, BatchProof(index=other, size=proof.size, path=proof.path),
                 signature)
        _refused(inputs, other, proof, signature)  # another graph at this one's place
    size = data.draw(st.integers(index + 1, MAX_BATCH).filter(lambda n: n != len(inputs)))
    _refused(inputs, index, BatchProof(index=index, size=size, path=proof.path), signature)


def test_a_batch_holds_one_to_max_batch_graphs() -> None:
    with pytest.raises(ValueError, match="1 to 1024"):
        sign_batch(batch_key(), [])
    with pytest.raises(ValueError, match="1 to 1024"):
        sign_batch(batch_key(), [b"g"] * (MAX_BATCH + 1))
    for index, size in ((0, 0), (1, 1), (-1, 2), (0, MAX_BATCH + 1)):
        with pytest.raises(ValueError, match="out of range"):
            BatchProof(index=index, size=size, path=())


# ------------------------------------------------------------------------------ BatchCache


@pytest.fixture
def verify_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[bytes]]:
    """Counts the ECDSA verifications (crypto.verify calls), recording the signed data."""
    calls: list[bytes] = []
    real = crypto.verify

    def counting(key: crypto.PublicKey, signature: bytes, data: bytes) -> None:
        calls.append(data)
        real(key, signature, data)

    monkeypatch.setattr(crypto, "verify", counting)
    yield calls


def test_the_cache_verifies_a_batch_once(verify_calls: list[bytes]) -> None:
    inputs = [b"a", b"b", b"c"]
    signature, proofs = sign_batch(batch_key(), inputs)
    public = batch_key().public_key()
    cache = BatchCache()
    for graph, proof in zip(inputs, proofs, strict=True):
        cache.verify(public, batch_root(graph, proof), signature, size=3)
    assert len(verify_calls) == 1
    other, _ = sign_batch(batch_key(), inputs)  # another signature of the same root
    cache.verify(public, batch_root(inputs[0], proofs[0]), other, size=3)
    assert len(verify_calls) == 2


def test_the_cache_refuses_a_wrong_signature_every_time(verify_calls: list[bytes]) -> None:
    inputs = [b"a", b"b"]
    signature, proofs = sign_batch(batch_key(), inputs)
    root = batch_root(inputs[0], proofs[0])
    cache = BatchCache()
    wrong_key = crypto.generate_private_key().public_key()
    forged, _ = sign_batch(crypto.generate_private_key(), inputs)
    for _ in range(2):  # a failure is never remembered as a success
        with pytest.raises(SignatureError):
            cache.verify(wrong_key, root, signature, size=2)
        with pytest.raises(SignatureError):
            cache.verify(batch_key().public_key(), root, forged, size=2)
    assert len(verify_calls) == 4
    with pytest.raises(SignatureError):  # a root the signature does not cover
        cache.verify(batch_key().public_key(), leaf_hash(b"x"), signature, size=2)
    cache.verify(batch_key().public_key(), root, signature, size=2)


def test_the_cache_is_bounded(verify_calls: list[bytes]) -> None:
    cache = BatchCache(capacity=2)
    public = batch_key().public_key()
    batches_ = [sign_batch(batch_key(), [bytes([i]), b"x"]) for i in range(3)]
    roots = [batch_root(bytes([i]), proofs[0]) for i, (_, proofs) in enumerate(batches_)]
    for root, (signature, _) in zip(roots, batches_, strict=True):
        cache.verify(public, root, signature, size=2)
    assert len(verify_calls) == 3
    cache.verify(public, roots[2], batches_[2][0], size=2)  # still remembered
    cache.verify(public, roots[0], batches_[0][0], size=2)  # the oldest went first
    assert len(verify_calls) == 4


# ------------------------------------------------------------------------------ relay_many


def test_all_hops_of_a_batch_share_one_signature_value_and_each_verifies_alone() -> None:
    messages = fan_out()
    values = {objects(m, v.HAS_SIGNATURE_VALUE)[0] for m in messages}
    assert len(values) == 1
    for index, message in enumerate(messages):
        assert objects(message, v.HAS_GRAPH_SIGNING_METHOD) == [v.BATCH_SIGNING_METHOD.value]
        assert objects(message, v.BATCH_INDEX) == [str(index)]
        assert objects(message, v.BATCH_SIZE) == ["5"]
        path = objects(message, v.BATCH_PATH)[0].split(" ")
        assert len(path) == (1 if index == 4 else 3)  # leaf 4 of 5 hangs below the root
        assert message.recipient == certs.node_uri(f"s{index}")
        assert message.leaves() == LeafRanges(((index, index + 2),))
        alone = Message.from_nquads(message.to_nquads())  # nothing shared with its siblings
        verify_message(alone, keys("acme", "d1"))
        chain = ChainVerifier(ca()[0]).verify(alone, at=NOW)
        assert [c.name for c in chain.signers] == ["acme", "d1"]


def test_a_single_hop_gets_a_plain_signature() -> None:
    (only,) = relay_many(published(), signer("d1"), hops(1), timestamp_ms=1_010)
    assert objects(only, v.HAS_GRAPH_SIGNING_METHOD) == [v.SIGNING_METHOD.value]
    assert objects(only, v.BATCH_INDEX) == objects(only, v.BATCH_SIZE) == []
    same = relay(published(), signer("d1"), message_uri=mid("d1", "to-s0"),
                 recipient_uri=certs.node_uri("s0"), leaves=ALL, timestamp_ms=1_010)
    assert shape_of(same).outermost == shape_of(only).outermost  # (ECDSA values differ)
    assert relay_many(published(), signer("d1"), [], timestamp_ms=1) == []


def test_more_than_max_batch_hops_are_split_into_batches(verify_calls: list[bytes]) -> None:
    messages = relay_many(published(), signer("d1"), hops(MAX_BATCH + 6), timestamp_ms=1_010)
    assert len(messages) == MAX_BATCH + 6
    first, second = messages[:MAX_BATCH], messages[MAX_BATCH:]
    assert len({objects(m, v.HAS_SIGNATURE_VALUE)[0] for m in first}) == 1
    assert len({objects(m, v.HAS_SIGNATURE_VALUE)[0] for m in second}) == 1
    assert objects(first[0], v.HAS_SIGNATURE_VALUE) != objects(second[0], v.HAS_SIGNATURE_VALUE)
    assert {objects(m, v.BATCH_SIZE)[0] for m in first} == {str(MAX_BATCH)}
    assert {objects(m, v.BATCH_SIZE)[0] for m in second} == {"6"}
    assert [objects(m, v.BATCH_INDEX)[0] for m in second] == [str(i) for i in range(6)]
    sample = [first[0], first[1], first[700], first[-1], second[0], second[-1]]
    verifier = ChainVerifier(ca()[0])
    verify_calls.clear()
    for message in sample:
        verifier.verify(message, at=NOW)
    # acme's two plain signatures once (the same in every chain), and one check per batch
    assert len(verify_calls) == 2 + 2


# ------------------------------------------------------------------------------ relay_fanout


def _without_own_signature_value(graphs: bytes, hop_uri: str) -> list[bytes]:
    """The lines of a hop's graphs but its own (randomised) ECDSA signature value."""
    own = f"<{hop_uri}#e2s> <{v.HAS_SIGNATURE_VALUE.value}> ".encode()
    return [line for line in graphs.splitlines() if not line.startswith(own)]


@pytest.mark.parametrize("count", [1, 2, 3, MAX_BATCH + 1, MAX_BATCH + 2])
def test_relay_fanout_writes_what_relay_many_writes(count: int) -> None:
    spread = [
        Hop(message_uri=h.message_uri, recipient_uri=h.recipient_uri,
            leaves=LeafRanges(((i % 7, i % 7 + 1),)))
        for i, h in enumerate(hops(count))
    ]
    fanned = relay_fanout(published(), signer("d1"), spread, timestamp_ms=1_010)
    whole = relay_many(published(), signer("d1"), spread, timestamp_ms=1_010)
    assert len(fanned.graphs) == count
    assert len(fanned.batch_heads) == -(-count // MAX_BATCH)
    for index in sorted({0, min(1, count - 1), count // 2, count - 1}):
        uri = spread[index].message_uri
        assert _without_own_signature_value(fanned.graphs[index], uri) == (
            _without_own_signature_value(whole[index].latest_graphs_nquads(), uri)
        )
        # the chain as received plus the hop's graphs is the whole message, and it verifies
        alone = Message.from_nquads(published().to_nquads() + fanned.graphs[index])
        assert alone.recipient == certs.node_uri(f"s{index}")
        ChainVerifier(ca()[0]).verify(alone, at=NOW)
    for batch, head in enumerate(fanned.batch_heads):
        first = batch * MAX_BATCH
        assert head.uri == spread[first].message_uri
        assert head.latest_graphs_nquads() == fanned.graphs[first]


def test_a_hop_written_from_its_template_is_checked_against_its_quads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = _fanout._Template.envelope

    def skewed(self: _fanout._Template, hop: _fanout._Hop) -> list[str]:
        return [line.replace("carriesLeaves", "carriesLeaveZ") for line in original(self, hop)]

    monkeypatch.setattr(_fanout._Template, "envelope", skewed)
    with pytest.raises(ProvenanceError, match="written from its template differs"):
        relay_fanout(published(), signer("d1"), hops(3), timestamp_ms=1_010)


# ------------------------------------------------- altered batch signature graphs are refused


def _replace(message: Message, predicate: IRI, new: Literal | None) -> bytes:
    """``message`` with the object of ``predicate`` in its batch signature graph replaced
    (or the quad dropped, ``new`` None)."""
    quads = set(message.quads)
    (old,) = [q for q in signature_graph(message) if q.p == predicate]
    quads.remove(old)
    if new is not None:
        quads.add(Quad(old.s, old.p, new, old.g))
    return serialise(sorted(quads, key=repr))


def _flip_path(path: str) -> str:
    first = "0" if path[0] != "0" else "1"
    return first + path[1:]


def _altered() -> list[tuple[str, IRI, Callable[[Message], Literal]]]:
    return [
        ("index", v.BATCH_INDEX, lambda m: Literal("2", v.XSD_LONG)),
        ("size", v.BATCH_SIZE, lambda m: Literal("6", v.XSD_LONG)),
        ("size-8", v.BATCH_SIZE, lambda m: Literal("8", v.XSD_LONG)),
        ("path", v.BATCH_PATH, lambda m: Literal(_flip_path(objects(m, v.BATCH_PATH)[0]))),
        ("path-hash", v.BATCH_PATH,
         lambda m: Literal(" ".join(reversed(objects(m, v.BATCH_PATH)[0].split(" "))))),
        ("path-short", v.BATCH_PATH,
         lambda m: Literal(objects(m, v.BATCH_PATH)[0].rsplit(" ", 1)[0])),
        ("value", v.HAS_SIGNATURE_VALUE,
         lambda m: Literal(objects(fan_out()[0], v.HAS_SIGNATURE_VALUE)[0][:-4] + "AAA=")),
        ("value-other", v.HAS_SIGNATURE_VALUE,  # a genuine value of another graph
         lambda m: Literal(shape_of(published()).signatures[published().uri + "#e1"].value)),
    ]


@pytest.mark.parametrize(("what", "predicate", "new"), _altered(), ids=[a[0] for a in _altered()])
def test_an_altered_batch_signature_graph_is_refused_naming_it(
    what: str, predicate: IRI, new: Callable[[Message], Literal]
) -> None:
    message = fan_out()[1]
    data = _replace(message, predicate, new(message))
    graph = f"{message.uri}#e2"
    for verify in (
        lambda m: verify_message(m, keys("acme", "d1")),
        lambda m: ChainVerifier(ca()[0]).verify(m, at=NOW),
    ):
        with pytest.raises(SignatureError, match=rf"<{graph}s> does not verify graph <{graph}>"):
            verify(Message.from_nquads(data))


def published_signature_graph() -> list[Quad]:
    name = IRI(published().uri + "#e1s")
    return [q for q in published().quads if q.g == name]


@pytest.mark.parametrize(
    ("predicate", "new", "match"),
    [
        (v.BATCH_INDEX, Literal("5", v.XSD_LONG), "is not a batch position"),
        (v.BATCH_INDEX, Literal("-1", v.XSD_LONG), "is not a batch position"),
        (v.BATCH_SIZE, Literal("1025", v.XSD_LONG), "is not a batch position"),
        (v.BATCH_INDEX, Literal("1"), "needs <.*#long> literals"),
        (v.BATCH_INDEX, None, "has 0 values"),
        (v.BATCH_SIZE, None, "has 0 values"),
        (v.BATCH_PATH, Literal("ab" * 32), "upper-case SHA-256 hex"),
        (v.BATCH_PATH, Literal("AB" * 31), "upper-case SHA-256 hex"),
        (v.BATCH_PATH, Literal(""), "upper-case SHA-256 hex"),
    ],
)
def test_a_malformed_batch_position_is_refused_naming_the_graph(
    predicate: IRI, new: Literal | None, match: str
) -> None:
    message = fan_out()[1]
    with pytest.raises(ProvenanceError, match=rf"graph <{message.uri}#e2s>: .*{match}"):
        Message.from_nquads(_replace(message, predicate, new))


def test_a_plain_signature_relabelled_as_a_batch_is_refused() -> None:
    (plain,) = relay_many(published(), signer("d1"), hops(1), timestamp_ms=1_010)
    quads = set(plain.quads)
    (method,) = [q for q in signature_graph(plain) if q.p == v.HAS_GRAPH_SIGNING_METHOD]
    quads.remove(method)
    quads |= {
        Quad(method.s, method.p, v.BATCH_SIGNING_METHOD, method.g),
        Quad(method.s, v.BATCH_INDEX, Literal("0", v.XSD_LONG), method.g),
        Quad(method.s, v.BATCH_SIZE, Literal("1", v.XSD_LONG), method.g),
    }
    relabelled = Message(quads=frozenset(quads))
    with pytest.raises(SignatureError, match=r"#e2s> does not verify graph <.*#e2>"):
        verify_message(relabelled, keys("acme", "d1"))
    with pytest.raises(SignatureError, match=r"#e2s> does not verify graph <.*#e2>"):
        ChainVerifier(ca()[0]).verify(relabelled, at=NOW)


def _batch_of_one(plain: Message) -> Message:
    """``plain``'s hop re-signed by d1 as a batch of one (index 0, size 1, no path)."""
    shape = shape_of(plain)
    name = plain.uri + "#e2"
    raw, (proof,) = sign_batch(signer("d1").private_key, [signing_input(shape.graphs[name])])
    value = base64.b64encode(raw).decode()
    graph = _signature_quads(signer("d1"), IRI(name), value, proof)
    rest = {q for q in plain.quads if q.g != IRI(name + "s")}
    return Message(quads=frozenset(rest | set(graph)))


def test_a_batch_signature_relabelled_as_plain_is_refused() -> None:
    (plain,) = relay_many(published(), signer("d1"), hops(1), timestamp_ms=1_010)
    batched = _batch_of_one(plain)
    assert objects(batched, v.BATCH_PATH) == []
    verify_message(batched, keys("acme", "d1"))  # a genuine batch of one verifies
    ChainVerifier(ca()[0]).verify(batched, at=NOW)
    quads = set(batched.quads) - {
        q for q in signature_graph(batched)
        if q.p in (v.BATCH_INDEX, v.BATCH_SIZE, v.HAS_GRAPH_SIGNING_METHOD)
    }
    (any_quad,) = [q for q in signature_graph(batched) if q.p == v.HAS_SIGNED_GRAPH]
    quads.add(Quad(any_quad.s, v.HAS_GRAPH_SIGNING_METHOD, v.SIGNING_METHOD, any_quad.g))
    relabelled = Message(quads=frozenset(quads))
    with pytest.raises(SignatureError, match=r"#e2s> does not verify graph <.*#e2>"):
        verify_message(relabelled, keys("acme", "d1"))
    many = fan_out()[2]  # a real batch member relabelled as plain
    quads = set(many.quads) - {
        q for q in signature_graph(many)
        if q.p in (v.BATCH_INDEX, v.BATCH_SIZE, v.BATCH_PATH, v.HAS_GRAPH_SIGNING_METHOD)
    }
    quads.add(Quad(IRI(many.uri + "#e2s"), v.HAS_GRAPH_SIGNING_METHOD, v.SIGNING_METHOD,
                   IRI(many.uri + "#e2s")))
    with pytest.raises(SignatureError, match=r"#e2s> does not verify graph <.*#e2>"):
        ChainVerifier(ca()[0]).verify(Message(quads=frozenset(quads)), at=NOW)


def test_batch_fields_on_a_plain_signature_are_refused() -> None:
    (plain,) = relay_many(published(), signer("d1"), hops(1), timestamp_ms=1_010)
    g = IRI(plain.uri + "#e2s")
    quads = set(plain.quads) | {Quad(g, v.BATCH_INDEX, Literal("0", v.XSD_LONG), g)}
    with pytest.raises(ProvenanceError, match=rf"<{plain.uri}#e2s> has unexpected property"):
        Message(quads=frozenset(quads))


@pytest.mark.parametrize("index", range(9))
def test_any_change_to_a_batch_signature_graph_breaks_verification(index: int) -> None:
    """Each quad of a batch member's signature graph, dropped or with another object."""
    message = fan_out()[3]
    graph = signature_graph(message)
    assert len(graph) == 9  # type, value, signer, signed graph, method, cert, index, size, path
    old = graph[index]
    replacement = (
        Literal(old.o.value[:-2] + ("AA" if not old.o.value.endswith("AA") else "BB"),
                old.o.datatype)
        if isinstance(old.o, Literal) and old.p != v.BATCH_SIZE
        else Literal("6", v.XSD_LONG) if old.p == v.BATCH_SIZE
        else IRI("https://d2.xdn.example/")
    )
    for new in (None, replacement):
        quads = set(message.quads) - {old}
        if new is not None:
            quads.add(Quad(old.s, old.p, new, old.g))
        with pytest.raises((ProvenanceError, SignatureError)):
            ChainVerifier(ca()[0]).verify(Message(quads=frozenset(quads)), at=NOW)


def test_a_verifier_checks_a_plain_signature_once_and_trusts_what_it_signed(
    verify_calls: list[bytes],
) -> None:
    verifier = ChainVerifier(ca()[0])
    message = published()
    verify_calls.clear()
    verifier.verify(message, at=NOW)
    verifier.verify(message, at=NOW)  # the same chain again (say, in a receipt)
    assert len(verify_calls) == 2  # its content and publication signatures, once each
    relayed = relay_many(message, signer("d1"), hops(3), timestamp_ms=1_010)
    verifier.remember(relayed[0], at=NOW)  # d1 signed this batch itself
    verify_calls.clear()
    for hop in relayed:
        verifier.verify(hop, at=NOW)
    assert verify_calls == []
    altered = Message.from_nquads(
        relayed[0].to_nquads().replace(b'"1010"', b'"1011"')  # the hop's timestamp changed
    )
    with pytest.raises(SignatureError, match="does not verify"):
        verifier.verify(altered, at=NOW)
