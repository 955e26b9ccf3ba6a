"""Policy-change notices: their facts, their graph, verified under the CA, tampering and
misdirection refused (xdn.provenance.policy_notice, xdn.policy_notices)."""

from __future__ import annotations

import functools

import pytest

from tests.unit.receipt_fixtures import NOW, PUBLISHER, Pki, make_pki
from xdn import certs, provenance
from xdn.errors import PolicyNoticeError, ProvenanceError, SignatureError, UsageError
from xdn.policy_notices import (
    check_accompanies,
    policy_change,
    read_policy_notice,
    sign_policy_notice,
)
from xdn.provenance import _vocab as v
from xdn.rdf import IRI, Literal, Quad, parse_nquads, serialise

T = int(NOW.timestamp() * 1000)


@functools.cache
def pki() -> Pki:
    return make_pki()


def fingerprint(name: str) -> str:
    return certs.credential_from_pem(pki().parties[name][0]).fingerprint


def change(**overrides: object) -> provenance.PolicyChangeFacts:
    facts = policy_change(
        publisher=PUBLISHER, subscriber="alice", certificate=fingerprint("alice"),
        previous_version=4, previous={"MachineSetting", "WorkOrder"},
        version=5, current={"WorkOrder", "Quality"}, at_ms=T,
    )
    assert facts is not None
    return provenance.PolicyChangeFacts(**{
        f: getattr(facts, f) for f in facts.__dataclass_fields__
    } | overrides)  # type: ignore[arg-type]


def signed(facts: provenance.PolicyChangeFacts | None = None, *, by: str = PUBLISHER) -> bytes:
    return sign_policy_notice(pki().signer(by), facts or change(), timestamp_ms=T).to_nquads()


def chains() -> provenance.ChainVerifier:
    return provenance.ChainVerifier(pki().ca)


def entitled(**overrides: object) -> dict[str, object]:
    return {
        "publisher": PUBLISHER, "publisher_certificate": pki().parties[PUBLISHER][0],
        "subscriber": "alice", "certificate": fingerprint("alice"), "policy_version": 5,
        "concepts": {"WorkOrder", "Quality"},
    } | overrides


def test_the_change_is_what_was_gained_and_lost_and_none_when_nothing_changed() -> None:
    facts = change()
    assert (facts.gained, facts.lost) == ({"Quality"}, {"MachineSetting"})
    assert facts.subscriber == "https://alice.xdn.example/"
    same = {"publisher": PUBLISHER, "subscriber": "alice", "certificate": "ab",
            "at_ms": T}
    assert policy_change(**same, previous_version=4, previous={"A"}, version=5,
                         current={"A"}) is None
    assert policy_change(**same, previous_version=5, previous={"A"}, version=5,
                         current={"B"}) is None  # not a newer version
    lost_all = policy_change(**same, previous_version=1, previous={"A", "B"}, version=2,
                             current=())
    assert lost_all is not None and lost_all.lost == {"A", "B"} and not lost_all.gained
    with pytest.raises(ValueError, match="newer"):
        change(version=4)
    with pytest.raises(ValueError, match="gained or lost"):
        change(gained=frozenset(), lost=frozenset())
    with pytest.raises(ValueError, match="both"):
        change(gained=frozenset({"A"}), lost=frozenset({"A"}))


def test_its_graph_says_the_change_and_reads_back() -> None:
    message = sign_policy_notice(pki().signer(PUBLISHER), change(), timestamp_ms=T)
    uri = f"https://{PUBLISHER}.xdn.example/policy/v5/{fingerprint('alice')}"
    assert message.uri == uri
    c1 = IRI(uri + "#c1")
    node = IRI(uri + "#change")
    quads = message.quads
    assert Quad(node, v.RDF_TYPE, v.POLICY_CHANGE, c1) in quads
    assert Quad(node, v.GAINS, Literal("Quality"), c1) in quads
    assert Quad(node, v.LOSES, Literal("MachineSetting"), c1) in quads
    assert Quad(node, v.SUBSCRIBER, IRI("https://alice.xdn.example/"), c1) in quads
    assert Quad(IRI(uri), v.HAS_MESSAGE_TYPE, v.POLICY_NOTICE, IRI(uri + "#e1")) in quads
    assert provenance.read_policy_change(
        c1.value, [q for q in quads if q.g == c1]
    ) == change()
    assert message.policy_change == change() and message.refusal is None
    assert provenance.Message.from_nquads(message.to_nquads()) == message
    with pytest.raises(UsageError):
        message.leaves()
    with pytest.raises(UsageError):  # final: nothing relays it
        provenance.relay(message, pki().signer("d1"), message_uri=uri + "x",
                         recipient_uri="https://d2.xdn.example/",
                         leaves=provenance.LeafRanges(((0, 1),)), timestamp_ms=T)


def test_it_verifies_under_the_ca_and_with_the_publishers_key() -> None:
    notice = read_policy_notice(signed(), chains(), at=NOW)
    assert notice.publisher.name == PUBLISHER and notice.change == change()
    assert notice.summary() == "policy v5 of production-dept: you gain Quality, lose MachineSetting"
    assert notice.notification_id.startswith("policy-") and len(notice.notification_id) == 47
    key = certs.public_key_of(pki().parties[PUBLISHER][0])
    provenance.verify_message(notice.message, {notice.message.sender: key})
    check_accompanies(notice, **entitled())  # type: ignore[arg-type]


def _tampered(data: bytes, old: str, new: str) -> bytes:
    text = data.decode()
    assert old in text
    return text.replace(old, new).encode()


def test_a_tampered_notice_does_not_verify() -> None:
    data = signed()
    for old, new in (('"Quality"', '"Secret"'), ('"5"^^', '"6"^^'),
                     ("https://alice.xdn.example/", "https://carol.xdn.example/")):
        with pytest.raises(SignatureError):
            read_policy_notice(_tampered(data, old, new), chains(), at=NOW)
    dropped = [q for q in parse_nquads(data) if q.p != v.LOSES]  # a loss hidden
    with pytest.raises(SignatureError):
        read_policy_notice(serialise(dropped), chains(), at=NOW)


def test_a_notice_signed_by_another_party_or_naming_another_publisher_is_refused() -> None:
    with pytest.raises(SignatureError, match="must be signed by a publisher"):
        read_policy_notice(signed(by="d1"), chains(), at=NOW)  # a site forging one
    with pytest.raises(SignatureError, match="names publisher"):
        read_policy_notice(signed(change(publisher="qa-company")), chains(), at=NOW)
    other_ca = provenance.ChainVerifier(certs.create_ca("other", now=NOW)[0])
    with pytest.raises(SignatureError):
        read_policy_notice(signed(), other_ca, at=NOW)
    with pytest.raises(ProvenanceError, match="over the limit"):
        read_policy_notice(signed(), chains(), at=NOW, max_bytes=100)


def test_another_message_is_not_a_policy_notice() -> None:
    refusal = provenance.failure_notice(
        pki().signer(PUBLISHER), refusal=provenance.RefusalFacts(kind="crl", reason="old"),
        message_uri=provenance.notice_uri(certs.node_uri(PUBLISHER), "1"), timestamp_ms=T,
    )
    with pytest.raises(PolicyNoticeError, match="not a policy-change notice"):
        read_policy_notice(refusal.to_nquads(), chains(), at=NOW)


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        ({"subscriber": "carol"}, "is for <https://alice"),
        ({"certificate": "0" * 64}, "is for certificate"),
        ({"publisher": "qa-company"}, "is by 'production-dept'"),
        ({"policy_version": 6}, "is of policy v5"),
        ({"concepts": {"WorkOrder"}}, "'Quality'] gained"),
        ({"concepts": {"WorkOrder", "Quality", "MachineSetting"}}, "'MachineSetting'] lost"),
        ({"publisher_certificate": "qa-company"}, "another certificate"),
    ],
)
def test_a_notice_for_someone_else_or_inconsistent_with_its_entitlement_is_refused(
    overrides: dict[str, object], says: str
) -> None:
    if overrides.get("publisher_certificate") == "qa-company":
        overrides = {"publisher_certificate": pki().parties["qa-company"][0]}
    notice = read_policy_notice(signed(), chains(), at=NOW)
    with pytest.raises(PolicyNoticeError, match=says):
        check_accompanies(notice, **entitled(**overrides))  # type: ignore[arg-type]


def everything() -> provenance.PolicyChangeFacts:
    facts = policy_change(
        publisher=PUBLISHER, subscriber="alice", certificate=fingerprint("alice"),
        previous_version=4, previous={"MachineSetting", "WorkOrder"}, version=5, current=(),
        at_ms=T, everything=True,
    )
    assert facts is not None
    return facts


def test_a_member_that_loses_everything_is_told_so_and_only_with_an_empty_entitlement() -> None:
    facts = everything()
    assert facts.everything and facts.lost == {"MachineSetting", "WorkOrder"}
    assert not change().everything  # (a narrowing says no such thing)
    with pytest.raises(ValueError, match="granted nothing"):
        policy_change(publisher=PUBLISHER, subscriber="alice", certificate="ab",
                      previous_version=4, previous={"A"}, version=5, current={"B"}, at_ms=T,
                      everything=True)
    with pytest.raises(ValueError, match="gains nothing"):
        change(everything=True)
    data = signed(facts)
    c1 = f"https://{PUBLISHER}.xdn.example/policy/v5/{fingerprint('alice')}#c1"
    assert (f'<{c1[:-3]}#change> <{v.LOSES_EVERYTHING.value}> '
            f'"true"^^<{v.XSD_BOOLEAN}> <{c1}> .').encode() in data
    notice = read_policy_notice(data, chains(), at=NOW)
    assert notice.change == facts
    assert notice.summary() == (
        "policy v5 of production-dept: you lose everything (MachineSetting, WorkOrder)"
    )
    check_accompanies(notice, **entitled(concepts=set()))  # type: ignore[arg-type]
    for grants in ({"concepts": {"Quality"}}, {"concepts": set(), "conditional": {"Quality"}}):
        with pytest.raises(PolicyNoticeError, match="everything is lost"):
            check_accompanies(notice, **entitled(**grants))  # type: ignore[arg-type]
    # Saying it (or hiding it) after signing breaks the publisher's signature.
    with pytest.raises(SignatureError):
        read_policy_notice(serialise([q for q in parse_nquads(data)
                                      if q.p != v.LOSES_EVERYTHING]), chains(), at=NOW)
    narrowing = signed(change(gained=frozenset()))  # loses MachineSetting, keeps WorkOrder
    added = [*parse_nquads(narrowing), Quad(
        IRI(c1[:-3] + "#change"), v.LOSES_EVERYTHING, Literal("true", v.XSD_BOOLEAN), IRI(c1)
    )]
    with pytest.raises(SignatureError):
        read_policy_notice(serialise(added), chains(), at=NOW)
    wrong = [q if q.p != v.LOSES_EVERYTHING else Quad(q.s, q.p, Literal("false", v.XSD_BOOLEAN),
                                                      q.g) for q in parse_nquads(data)]
    with pytest.raises(ProvenanceError, match="losesEverything"):
        provenance.read_policy_change(c1, [q for q in wrong if q.g == IRI(c1)])
