"""ChainVerifier: Algorithm 2 under the certificates the signature graphs carry.

A dev PKI (one CA, a publisher, two sites, a subscriber) signs acme → d1 → d2 → alice
(receipt). The chain verifies; then each way a dishonest party could make one pass is refused
with a typed error whose message names the graph at fault: a graph signed without a
certificate, a certificate of another CA, revoked, expired or not yet valid, of the wrong role
for its hop, or naming another node than the signature graph; an envelope forged by an impostor
(own key and certificate of the same name, from another CA or of another role), or altered
after signing; a content graph signed by another publisher than the one it names.
"""

from __future__ import annotations

import base64
import functools
from datetime import UTC, datetime, timedelta

import pytest

from xdn import certs, crypto
from xdn.errors import ProvenanceError, SignatureError
from xdn.provenance import (
    ChainVerifier,
    ContentFacts,
    Hop,
    LeafRanges,
    Message,
    RefusalFacts,
    Signer,
    VerifiedChain,
    failure_notice,
    message_uri,
    notice_uri,
    originate,
    receipt,
    relay,
    relay_many,
    verify_message,
)
from xdn.provenance import _vocab as v
from xdn.provenance._batch import BatchCache, SignerKey
from xdn.provenance._message import _signature, shape_of
from xdn.rdf import IRI, Literal, Quad, canonicalise

NOW = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
DOCUMENT = "order 7"
ROLES = {"acme": "publisher", "qa-company": "publisher", "d1": "site", "d2": "site",
         "alice": "subscriber", "bob": "subscriber"}
CONTENT = ContentFacts(
    document_id=DOCUMENT, publisher="acme", manifest_root=bytes(range(32)), leaf_count=8
)
ALL, SOME = LeafRanges(((0, 8),)), LeafRanges(((0, 2), (5, 8)))

Pair = tuple[bytes, bytes]


@functools.cache
def ca() -> Pair:
    return certs.create_ca("xdn-ca", now=NOW - timedelta(days=1))


@functools.cache
def other_ca(name: str) -> Pair:
    return certs.create_ca(name, now=NOW - timedelta(days=1))


def issue(name: str, *, role: str | None = None, by: Pair | None = None,
          now: datetime = NOW, days: int = 365) -> Pair:
    role = role or ROLES[name]
    attributes = {certs.BLOCK_FIELD: "Order"} if role == "site" else {}
    return certs.issue(*(by or ca()), name=name, role=role, attributes=attributes, now=now,
                       days=days)


@functools.cache
def credential(name: str) -> Pair:
    return issue(name)


def signer(name: str, pair: Pair | None = None, *, node: str | None = None,
           carry: bool = True) -> Signer:
    """``name``'s signer (its own certificate by default), optionally claiming ``node``."""
    cert_pem, key_pem = pair or credential(name)
    return Signer(node_uri=certs.node_uri(node or name),
                  private_key=crypto.load_private_key_pem(key_pem),
                  certificate=cert_pem if carry else None)


def mid(node: str, hop: str) -> str:
    return message_uri(certs.node_uri(node), DOCUMENT, hop)


def build(
    *,
    acme: Signer | None = None,
    d1: Signer | None = None,
    d2: Signer | None = None,
    alice: Signer | None = None,
    content: ContentFacts = CONTENT,
) -> list[Message]:
    """acme → d1 → d2 → alice, with any party's signer replaced."""
    acme, d1, d2 = acme or signer("acme"), d1 or signer("d1"), d2 or signer("d2")
    alice = alice or signer("alice")
    m1 = originate(acme, message_uri=mid("acme", "v1"), recipient_uri=certs.node_uri("d1"),
                   content=content, timestamp_ms=1_000)
    m2 = relay(m1, d1, message_uri=mid("d1", "to-d2"), recipient_uri=certs.node_uri("d2"),
               leaves=ALL, timestamp_ms=1_010)
    m3 = relay(m2, d2, message_uri=mid("d2", "to-alice"), recipient_uri=certs.node_uri("alice"),
               leaves=SOME, timestamp_ms=1_020)
    m4 = receipt(m3, alice, message_uri=mid("alice", "r"), timestamp_ms=1_030)
    return [m1, m2, m3, m4]


@functools.cache
def genuine() -> tuple[Message, ...]:
    return tuple(build())


C1, E1 = mid("acme", "v1") + "#c1", mid("acme", "v1") + "#e1"
E2, E3, E4 = mid("d1", "to-d2") + "#e2", mid("d2", "to-alice") + "#e3", mid("alice", "r") + "#e4"


def verifier(revoked: frozenset[int] = frozenset()) -> ChainVerifier:
    return ChainVerifier(ca()[0], revoked=lambda: revoked)


def serial(pair: Pair) -> int:
    return certs.credential_from_pem(pair[0]).serial


# ---------------------------------------------------------------------------------- valid


def test_a_genuine_chain_verifies_at_every_stage_and_names_its_signers() -> None:
    chains = [verifier().verify(m, at=NOW) for m in genuine()]
    names = [[c.name for c in chain.signers] for chain in chains]
    assert names == [["acme"], ["acme", "d1"], ["acme", "d1", "d2"],
                     ["acme", "d1", "d2", "alice"]]
    last = chains[-1]
    assert isinstance(last, VerifiedChain)
    assert [c.role for c in last.signers] == ["publisher", "site", "site", "subscriber"]
    assert last.publisher is not None and last.publisher.name == "acme"
    assert last.publisher.fingerprint == last.signers[0].fingerprint
    assert last.signers[1].fingerprint == certs.credential_from_pem(credential("d1")[0]).fingerprint
    public = {certs.node_uri(n): certs.public_key_of(credential(n)[0])
              for n in ("acme", "d1", "d2", "alice")}
    verify_message(genuine()[-1], public)  # the same chain under keys given by the caller


def test_every_signature_graph_carries_its_signers_certificate() -> None:
    for sig in shape_of(genuine()[-1]).signatures.values():
        name = sig.signer.removeprefix("https://").split(".")[0]
        assert sig.certificate is not None
        assert certs.credential_from_pem(
            b"-----BEGIN CERTIFICATE-----\n" + base64.encodebytes(sig.certificate)
            + b"-----END CERTIFICATE-----\n"
        ).name == name


def test_a_failure_notice_verifies_with_no_publisher() -> None:
    notice = failure_notice(
        signer("alice"), message_uri=notice_uri(certs.node_uri("alice"), "n1"),
        refusal=RefusalFacts(kind="crl", reason="stale"), timestamp_ms=1_000,
    )
    chain = verifier().verify(notice, at=NOW)
    assert chain.publisher is None and [c.name for c in chain.signers] == ["alice"]


def test_the_crl_in_force_is_read_at_every_verification() -> None:
    revoked: set[int] = set()
    chains = ChainVerifier(ca()[0], revoked=lambda: frozenset(revoked))
    chains.verify(genuine()[2], at=NOW)
    revoked.add(serial(credential("d2")))  # a new CRL: what verified may no longer
    with pytest.raises(SignatureError, match=rf"signature graph <{E3}s>: .*'d2' was revoked"):
        chains.verify(genuine()[2], at=NOW)
    chains.verify(genuine()[1], at=NOW)  # d2 took no part in this one


# -------------------------------------------------------------------------------- refused


def test_a_graph_signed_without_a_certificate_is_refused() -> None:
    chain = build(d2=signer("d2", carry=False))
    with pytest.raises(SignatureError,
                       match=rf"signature graph <{E3}s> carries no signer certificate"):
        verifier().verify(chain[-1], at=NOW)
    bare = build(acme=signer("acme", carry=False))
    with pytest.raises(SignatureError, match=rf"signature graph <{C1}s> carries no signer"):
        verifier().verify(bare[0], at=NOW)


@pytest.mark.parametrize(
    ("ca_name", "match"),
    [("rogue-ca", "was not issued by the trusted CA"),
     ("xdn-ca", "has an invalid CA signature")],  # the trusted CA's name, another key
    ids=["other-name", "same-name"],
)
def test_a_certificate_from_another_ca_is_refused(ca_name: str, match: str) -> None:
    chain = build(d1=signer("d1", issue("d1", by=other_ca(ca_name))))
    with pytest.raises(SignatureError, match=rf"signature graph <{E2}s>: .*{match}"):
        verifier().verify(chain[-1], at=NOW)


def test_a_revoked_certificate_is_refused() -> None:
    for name, graph in (("acme", C1), ("d1", E2), ("alice", E4)):
        with pytest.raises(SignatureError,
                           match=rf"signature graph <{graph}s>: .*'{name}' was revoked"):
            verifier(frozenset({serial(credential(name))})).verify(genuine()[-1], at=NOW)


def test_an_expired_or_not_yet_valid_certificate_is_refused() -> None:
    short = issue("d2", days=2)
    chain = build(d2=signer("d2", short))
    verifier().verify(chain[-1], at=NOW + timedelta(days=1))
    with pytest.raises(SignatureError, match=rf"signature graph <{E3}s>: .*'d2' is not valid at"):
        verifier().verify(chain[-1], at=NOW + timedelta(days=3))
    later = build(d1=signer("d1", issue("d1", now=NOW + timedelta(days=10))))
    with pytest.raises(SignatureError, match=rf"signature graph <{E2}s>: .*'d1' is not valid at"):
        verifier().verify(later[-1], at=NOW)
    with pytest.raises(SignatureError, match=r"is not valid at"):  # everyone's, a year on
        verifier().verify(genuine()[-1], at=NOW + timedelta(days=400))


@pytest.mark.parametrize(
    ("party", "role", "graph", "kind", "needed"),
    [
        ("d1", "subscriber", E2, "relay", "site"),
        ("d2", "publisher", E3, "relay", "site"),
        ("alice", "site", E4, "receipt", "subscriber"),
        ("acme", "site", E1, "publication", "publisher"),
    ],
)
def test_a_hop_signed_with_a_certificate_of_the_wrong_role_is_refused(
    party: str, role: str, graph: str, kind: str, needed: str
) -> None:
    chain = build(**{party: signer(party, issue(party, role=role))})  # type: ignore[arg-type]
    with pytest.raises(
        SignatureError,
        match=rf"graph <{graph}>: a {kind} must be signed by a {needed}, but '{party}' "
        rf"holds a {role} certificate",
    ):
        verifier().verify(chain[-1], at=NOW)


def test_a_subscriber_relaying_with_its_own_certificate_is_refused() -> None:
    """alice, a genuine subscriber, poses as a site: she relays under her own name and cert."""
    m2 = genuine()[1]
    forged = relay(m2, signer("alice"), message_uri=mid("alice", "x"),
                   recipient_uri=certs.node_uri("bob"), leaves=SOME, timestamp_ms=1_020)
    # d1 addressed it to d2, so condition 9 refuses first; re-addressed, the role does
    with pytest.raises(ProvenanceError, match=r"condition 9: graph <.*alice.*#e3> was added by"):
        verifier().verify(forged, at=NOW)
    m1 = genuine()[0]
    to_alice = relay(m1, signer("d1"), message_uri=mid("d1", "to-alice"),
                     recipient_uri=certs.node_uri("alice"), leaves=ALL, timestamp_ms=1_010)
    onward = relay(to_alice, signer("alice"), message_uri=mid("alice", "x"),
                   recipient_uri=certs.node_uri("bob"), leaves=SOME, timestamp_ms=1_020)
    graph = mid("alice", "x") + "#e3"
    with pytest.raises(SignatureError, match=rf"graph <{graph}>: a relay must be signed by a site"):
        verifier().verify(onward, at=NOW)


def test_a_certificate_naming_another_node_than_the_signature_graph_is_refused() -> None:
    """d1 signs d2's hop under d2's URI, but can only carry its own certificate."""
    chain = build(d2=signer("d1", node="d2"))
    with pytest.raises(
        SignatureError,
        match=rf"signature graph <{E3}s> names signer <https://d2\.xdn\.example/> but carries "
        r"the certificate of 'd1'",
    ):
        verifier().verify(chain[-1], at=NOW)


@pytest.mark.parametrize(
    ("impostor", "match"),
    [
        (lambda: issue("d1", by=other_ca("xdn-ca")), r"<{g}s>: .*invalid CA signature"),
        (lambda: issue("d1", by=other_ca("rogue-ca")), r"<{g}s>: .*not issued by the trusted CA"),
        (lambda: issue("d1", role="subscriber"), r"<{g}>: a relay must be signed by a site"),
        (lambda: issue("d1", role="publisher"), r"<{g}>: a relay must be signed by a site"),
    ],
    ids=["other-ca-same-name", "other-ca", "same-ca-subscriber", "same-ca-publisher"],
)
def test_an_envelope_forged_by_an_impostor_with_its_own_certificate_is_refused(
    impostor: object, match: str
) -> None:
    """The impostor rewrites d1's hop (here: to forward to bob) and re-signs it with its own
    key and a certificate named d1 — from another CA, or the real CA's for another role."""
    pair = impostor()  # type: ignore[operator]
    forged = relay(genuine()[0], signer("d1", pair), message_uri=mid("d1", "to-d2"),
                   recipient_uri=certs.node_uri("d2"), leaves=ALL, timestamp_ms=1_010)
    with pytest.raises(SignatureError, match=match.format(g=E2)):
        verifier().verify(forged, at=NOW)


def test_an_envelope_re_signed_with_another_key_under_the_genuine_certificate_is_refused() -> None:
    stolen_name = Signer(node_uri=certs.node_uri("d1"),
                         private_key=crypto.generate_private_key(),
                         certificate=credential("d1")[0])
    forged = relay(genuine()[0], stolen_name, message_uri=mid("d1", "to-d2"),
                   recipient_uri=certs.node_uri("d2"), leaves=ALL, timestamp_ms=1_010)
    with pytest.raises(SignatureError,
                       match=rf"signature graph <{E2}s> does not verify graph <{E2}> under"):
        verifier().verify(forged, at=NOW)


def _altered(message: Message, graph: str, predicate: IRI, new: Literal | IRI) -> Message:
    quads = set(message.quads)
    (old,) = [q for q in quads if q.g == IRI(graph) and q.p == predicate]
    quads.remove(old)
    quads.add(Quad(old.s, old.p, new, old.g))
    return Message(quads=frozenset(quads))


@pytest.mark.parametrize(
    ("graph", "predicate", "new"),
    [
        (E2, v.CARRIES_LEAVES, Literal("0-3 5-8")),  # still between what d2 and acme carry
        (E3, v.CARRIES_LEAVES, Literal("0-8")),
        (E3, v.HAS_SENT_TIMESTAMP, Literal("1021", v.XSD_LONG)),
        (E4, v.HAS_RECEIVED_TIMESTAMP, Literal("9", v.XSD_LONG)),
        (C1, v.MANIFEST_ROOT, Literal("AB" * 32, v.XSD_HEX)),
        (C1, v.LEAF_COUNT, Literal("9", v.XSD_LONG)),
    ],
)
def test_a_graph_altered_after_signing_is_refused_naming_it(
    graph: str, predicate: IRI, new: Literal
) -> None:
    forged = _altered(genuine()[-1], graph, predicate, new)  # still well-formed
    with pytest.raises(SignatureError,
                       match=rf"signature graph <{graph}s> does not verify graph <{graph}>"):
        verifier().verify(forged, at=NOW)


def test_a_swapped_carried_certificate_is_refused() -> None:
    """d1's signature graph made to carry d2's genuine certificate: it names d1, not d2."""
    d2_der = shape_of(genuine()[2]).signatures[E3].certificate
    assert d2_der is not None
    forged = _altered(genuine()[-1], E2 + "s", v.SIGNER_CERTIFICATE,
                      Literal(base64.b64encode(d2_der).decode(), v.XSD_BASE64))
    with pytest.raises(SignatureError, match=rf"<{E2}s> names signer <.*d1.*> but carries "
                                             r"the certificate of 'd2'"):
        verifier().verify(forged, at=NOW)
    garbage = _altered(genuine()[-1], E2 + "s", v.SIGNER_CERTIFICATE,
                       Literal(base64.b64encode(b"not a certificate").decode(), v.XSD_BASE64))
    with pytest.raises(SignatureError, match=rf"<{E2}s>: the signer certificate is not DER"):
        verifier().verify(garbage, at=NOW)


def test_a_content_graph_signed_by_another_publisher_than_it_names_is_refused() -> None:
    """qa-company, a genuine publisher, publishes a document in acme's name."""
    m1 = originate(signer("qa-company"), message_uri=mid("qa-company", "v1"),
                   recipient_uri=certs.node_uri("d1"), content=CONTENT, timestamp_ms=1_000)
    c1 = mid("qa-company", "v1") + "#c1"
    with pytest.raises(SignatureError,
                       match=rf"graph <{c1}> names publisher 'acme' but is signed by 'qa-company'"):
        verifier().verify(m1, at=NOW)
    m2 = relay(m1, signer("d1"), message_uri=mid("d1", "x"), recipient_uri=certs.node_uri("d2"),
               leaves=ALL, timestamp_ms=1_010)
    with pytest.raises(SignatureError, match=rf"graph <{c1}> names publisher 'acme'"):
        verifier().verify(m2, at=NOW)  # relayed, it stays refused


def test_content_and_publication_signed_under_different_certificates_are_refused() -> None:
    """acme holds two valid certificates; the publication envelope is re-signed under the
    second: each graph verifies, but the publisher is not one credential."""
    second = signer("acme", issue("acme"))
    m1 = genuine()[0]
    shape = shape_of(m1)
    envelope = list(shape.graphs[E1])
    signature, _ = _signature(second, IRI(E1), envelope)
    rest = {q for q in m1.quads if q.g != IRI(E1 + "s")}
    resigned = Message(quads=frozenset(rest | set(signature)))
    with pytest.raises(SignatureError,
                       match=rf"graph <{C1}> and <{E1}> are signed under different certificates"):
        verifier().verify(resigned, at=NOW)


def test_a_batch_hop_verifies_under_its_carried_certificate_and_a_forged_one_does_not() -> None:
    m1 = genuine()[0]
    batch = [Hop(message_uri=mid("d1", f"b{i}"), recipient_uri=certs.node_uri(n), leaves=ALL)
             for i, n in enumerate(("d2", "alice", "bob"))]
    genuine_hops = relay_many(m1, signer("d1"), batch, timestamp_ms=1_010)
    chains = verifier()
    for message in genuine_hops:
        chains.verify(message, at=NOW)
    impostor = signer("d1", issue("d1", by=other_ca("xdn-ca")))
    forged = relay_many(m1, impostor, batch, timestamp_ms=1_010)
    graph = mid("d1", "b1") + "#e2"
    with pytest.raises(SignatureError, match=rf"signature graph <{graph}s>: .*invalid CA"):
        chains.verify(forged[1], at=NOW)


def test_misuse_is_refused_early() -> None:
    with pytest.raises(TypeError, match="Message"):
        verifier().verify(genuine()[0].to_nquads(), at=NOW)  # type: ignore[arg-type]


# ------------------------------------------------------------------ with the caches warm


def test_a_warm_verifier_still_refuses_every_forged_or_altered_graph() -> None:
    """A site's verifier has checked the genuine chain (every signature remembered, each
    certificate's key and its identity kept): a forgery of any of it is checked anew and
    refused, every time, and the genuine chain still verifies after."""
    warm = verifier()
    for message in genuine():
        warm.verify(message, at=NOW)
    stolen_name = Signer(node_uri=certs.node_uri("d1"), private_key=crypto.generate_private_key(),
                         certificate=credential("d1")[0])  # fmt: skip
    re_signed = relay(genuine()[0], stolen_name, message_uri=mid("d1", "to-d2"),
                      recipient_uri=certs.node_uri("d2"), leaves=ALL, timestamp_ms=1_010)
    impostor = relay(genuine()[0], signer("d1", issue("d1", by=other_ca("rogue-ca"))),
                     message_uri=mid("d1", "to-d2"), recipient_uri=certs.node_uri("d2"),
                     leaves=ALL, timestamp_ms=1_010)
    altered = _altered(genuine()[-1], E3, v.CARRIES_LEAVES, Literal("0-8"))
    for _ in range(2):  # a refusal is never remembered as a success
        with pytest.raises(SignatureError, match=rf"<{E2}s> does not verify graph <{E2}>"):
            warm.verify(re_signed, at=NOW)
        with pytest.raises(SignatureError, match=f"<{E2}s>"):
            warm.verify(impostor, at=NOW)
        with pytest.raises(SignatureError, match=rf"<{E3}s> does not verify graph <{E3}>"):
            warm.verify(altered, at=NOW)
    assert [c.name for c in warm.verify(genuine()[-1], at=NOW).signers] == [
        "acme", "d1", "d2", "alice"
    ]


def test_a_signature_remembered_under_one_key_is_not_taken_for_another() -> None:
    """The batch cache files a checked signature under its key's identity: the same bytes
    and signature value under another key are checked (and refused), not recalled."""
    key = crypto.generate_private_key()
    data = b"<https://e/s> <https://e/p> <https://e/o> <https://e/g> .\n"
    signature = crypto.sign(key, data)
    cache = BatchCache()
    cache.verify_plain(SignerKey.of(key.public_key()), data, signature)
    other = SignerKey.of(crypto.generate_private_key().public_key())
    with pytest.raises(SignatureError):
        cache.verify_plain(other, data, signature)
    cache.remember(other, data, crypto.sign(key, b"something else"))
    with pytest.raises(SignatureError):  # remembered for other bytes only
        cache.verify_plain(other, data, signature)


def test_a_message_writes_its_canonical_form_once_and_each_hop_its_own() -> None:
    first, second = genuine()[0], genuine()[1]
    assert first.to_nquads() is first.to_nquads()  # written once
    assert first.to_nquads() == canonicalise(first.quads)
    assert second.to_nquads() == canonicalise(second.quads) != first.to_nquads()
    assert Message.from_nquads(second.to_nquads()) == second
