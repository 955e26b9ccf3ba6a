"""What a subscriber holds, whom it trusts, and that every refusal shows (issue #13).

A Session is fed disseminations directly, as a dishonest site would: forged ones while keys are
missing are refused and never held; the held store is capped per publisher; a publisher the
CRL in force revokes is refused; a CRL older than the one in force, or not the CA's, is refused;
a stale CRL makes documents wait for a fresh one.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from subscriber.notices import sign_notice
from subscriber.session import Session, SubscriberSetup
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, encode
from xdn.errors import PeerError
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.rdf import Quad, parse_nquads
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import dissemination_to_pb

NOW = datetime.now(UTC).replace(microsecond=0)
PUBLISHER = "production-dept"
GROUP_KEY = b"\x33" * 32
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"

Pki = dict[str, tuple[bytes, bytes]]


@pytest.fixture(scope="module")
def pki() -> Pki:
    ca = certs.create_ca("test-ca", now=NOW - timedelta(days=1))
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW - timedelta(days=1)),
        "carol": certs.issue(*ca, name="carol", role="subscriber", now=NOW),
    }


@pytest.fixture(scope="module")
def issue(pki: Pki) -> Iterator[object]:
    """``issue(document_id, version)``: a genuine, signed dissemination of the sample."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
    mapped = map_document(xmlsafe.parse_file(SAMPLE), mapping)
    keys = {
        c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=1, group_key=GROUP_KEY)
        for c in {n.concept for n in mapped}
    }
    cert_pem, key_pem = pki[PUBLISHER]
    signer = crypto.load_private_key_pem(key_pem)

    def make(document_id: str = "order-1", version: int = 1) -> pb.Dissemination:
        encoded = encode(mapped, document_id=document_id, publisher=PUBLISHER, version=version,
                         issued_at_ms=1000, keys=keys, signer=signer)
        message = provenance.originate(
            provenance.Signer(
                node_uri=certs.node_uri(PUBLISHER), private_key=signer, certificate=cert_pem
            ),
            message_uri=f"{certs.node_uri(PUBLISHER)}msg/{document_id}/v{version}",
            recipient_uri=certs.node_uri("carol"),
            content=provenance.ContentFacts(
                document_id=document_id, publisher=PUBLISHER,
                manifest_root=encoded.manifest.root,
                leaf_count=encoded.manifest.leaf_count,
            ),
            timestamp_ms=1000,
        )
        return dissemination_to_pb(
            encoded.signed_manifest,
            [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
            provenance=message.to_nquads(), publisher_certificate=cert_pem,
        )

    yield make


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def _setup(tmp_path: Path, pki: Pki, **options: object) -> SubscriberSetup:
    cert_pem, key_pem = pki["carol"]
    return SubscriberSetup(
        name="carol", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="site:1", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "carol.nq", **options,  # type: ignore[arg-type]
    )


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _session(tmp_path: Path, pki: Pki, clock: Clock, **options: object) -> Session:
    session = Session(_setup(tmp_path, pki, **options), clock=clock)
    session.report.grants = {PUBLISHER: []}
    return session


def _crl(pki: Pki, *, revoked: tuple[str, ...] = (), issued: datetime = NOW,
         days: int = 30, ca: tuple[bytes, bytes] | None = None) -> bytes:
    serials = [(certs.credential_from_pem(pki[name][0]).serial, issued) for name in revoked]
    return certs.create_crl(*(ca or pki["ca"]), serials, now=issued,
                            next_update=issued + timedelta(days=days))


def _refusals(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "out" / "refused.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _accepted(tmp_path: Path) -> list[str]:
    path = tmp_path / "out" / "received.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [f"{r['document']}.v{r['version']}" for r in map(json.loads, lines)]


def _give_keys(session: Session, message: pb.Dissemination) -> None:
    for concept in {f.concept for f in message.fragments}:
        session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        session.release_held(9, publisher=PUBLISHER, concept=concept)


# ---- verify before holding --------------------------------------------------------------------
def _forged(message: pb.Dissemination, how: str, pki: Pki) -> pb.Dissemination:
    forged = pb.Dissemination()
    forged.CopyFrom(message)
    if how == "resigned":  # the manifest signed by another key, the certificate kept
        sig = bytearray(forged.manifest.signature)
        sig[-5] ^= 0x01
        forged.manifest.signature = bytes(sig)
    elif how == "unsigned":
        forged.manifest.signature = b""
    elif how == "ciphertext":
        blob = bytearray(forged.fragments[1].cipher_value)
        blob[-1] ^= 0x01
        forged.fragments[1].cipher_value = bytes(blob)
    elif how == "other-ca":
        other = certs.create_ca("test-ca", now=NOW)
        forged.manifest.publisher_certificate = certs.issue(
            *other, name=PUBLISHER, role="publisher", now=NOW
        )[0]
    elif how == "not-a-publisher":
        forged.manifest.publisher_certificate = pki["carol"][0]
    return forged


@pytest.mark.parametrize(
    "how", ["resigned", "unsigned", "ciphertext", "other-ca", "not-a-publisher"]
)
def test_a_forged_document_whose_keys_are_missing_is_refused_not_held(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock, how: str
) -> None:
    genuine = issue()  # type: ignore[operator]
    session = _session(tmp_path, pki, clock)
    try:
        assert session.on_dissemination(_forged(genuine, how, pki), sequence=1) == b""
        assert session.keyring.held_count() == 0
        assert session.keyring.applied("site:1") == 1  # acknowledged: the site may drop it
        (refusal,) = _refusals(tmp_path)
        assert refusal["kind"] == "unverified" and refusal["document"] == "order-1"
        assert str(refusal["reason"]).startswith("not held: ")
        assert session.report.refused == 1 and session.report.refusals == {"unverified": 1}
        # The genuine document is held, and opened once its keys come.
        session.on_dissemination(genuine, sequence=2)
        assert session.keyring.held_count() == 1
        _give_keys(session, genuine)
        assert _accepted(tmp_path) == ["order-1.v1"] and session.keyring.held_count() == 0
    finally:
        session.close()


def test_a_key_message_reads_only_the_documents_waiting_for_its_group(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    message = issue()  # type: ignore[operator]
    concepts = sorted({f.concept for f in message.fragments})
    session = _session(tmp_path, pki, clock)
    try:
        session.on_dissemination(message, sequence=1)
        assert [h.payload for h in session.keyring.waiting(PUBLISHER, concepts[0])] == [
            message.SerializeToString()
        ]
        assert session.keyring.waiting(PUBLISHER, "NoSuchConcept") == []
        assert session.keyring.waiting("qa-company") == []
        for concept in concepts[:-1]:  # some keys: still waiting, for the last group only
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
            session.release_held(2, publisher=PUBLISHER, concept=concept)
        assert session.keyring.waiting(PUBLISHER, concepts[0]) == []
        assert len(session.keyring.waiting(PUBLISHER, concepts[-1])) == 1
        assert _accepted(tmp_path) == []
        _give_keys(session, message)
        assert _accepted(tmp_path) == ["order-1.v1"]
    finally:
        session.close()


# ---- the cap ----------------------------------------------------------------------------------
def test_past_the_count_cap_the_oldest_held_is_dropped_and_reported(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    session = _session(tmp_path, pki, clock, max_held_documents=2)
    try:
        docs = [issue(f"order-{n}") for n in (1, 2, 3)]  # type: ignore[operator]
        for n, message in enumerate(docs, 1):
            session.on_dissemination(message, sequence=n)
        assert session.keyring.held_count() == 2
        (refusal,) = _refusals(tmp_path)
        assert refusal["kind"] == "overflow" and refusal["document"] == "order-1"
        assert "held store of production-dept full (2 documents" in str(refusal["reason"])
        assert session.report.refusals == {"overflow": 1}
        _give_keys(session, docs[0])
        assert sorted(_accepted(tmp_path)) == ["order-2.v1", "order-3.v1"]
    finally:
        session.close()


def test_past_the_byte_cap_the_oldest_held_is_dropped_and_too_big_is_refused(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    size = len(issue().SerializeToString())  # type: ignore[operator]
    session = _session(tmp_path, pki, clock, max_held_bytes=size * 3 // 2)
    try:
        session.on_dissemination(issue("order-1"), sequence=1)  # type: ignore[operator]
        session.on_dissemination(issue("order-2"), sequence=2)  # type: ignore[operator]
        assert [h.document for h in session.keyring.held_entries()] == ["order-2"]
        assert [r["document"] for r in _refusals(tmp_path)] == ["order-1"]
    finally:
        session.close()
    small = _session(tmp_path / "small", pki, clock, max_held_bytes=size // 2)
    try:
        small.on_dissemination(issue("order-1"), sequence=1)  # type: ignore[operator]
        assert small.keyring.held_count() == 0
        (refusal,) = _refusals(tmp_path / "small")
        assert refusal["kind"] == "overflow" and "exceed the held store's cap" in str(
            refusal["reason"]
        )
    finally:
        small.close()


# ---- revocation -------------------------------------------------------------------------------
def test_a_revoked_publishers_genuinely_signed_document_is_refused(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    held, keyed = issue("held-before"), issue("keyed")  # type: ignore[operator]
    session = _session(tmp_path, pki, clock)
    try:
        session.on_dissemination(held, sequence=1)  # held (no keys yet), checked and genuine
        assert session.keyring.held_count() == 1
        session.on_crl(_crl(pki, revoked=(PUBLISHER,)), sequence=2)
        assert session.crl is not None and session.keyring.held_count() == 0  # dropped, shown
        for concept in {f.concept for f in keyed.fragments}:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        assert session.on_dissemination(keyed, sequence=3) == b""  # keys held: refused at open
        unkeyed = issue("unkeyed")  # type: ignore[operator]
        unkeyed.fragments[0].epoch = 2  # (a key it lacks: checked before holding)
        session.on_dissemination(unkeyed, sequence=4)
        refusals = _refusals(tmp_path)
        assert [(r["kind"], r["document"]) for r in refusals] == [
            ("revoked", "held-before"), ("revoked", "keyed"), ("revoked", "unkeyed"),
        ]
        assert all("revoked by" in str(r["reason"]) for r in refusals)
        assert _accepted(tmp_path) == [] and session.keyring.held_count() == 0
        assert session.report.refusals == {"revoked": 3}
    finally:
        session.close()


def test_an_older_crl_is_refused_also_after_a_restart(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    older = _crl(pki, revoked=(PUBLISHER,), issued=NOW - timedelta(hours=2))
    newer = _crl(pki, issued=NOW - timedelta(hours=1))  # the publisher reinstated (say)
    session = _session(tmp_path, pki, clock)
    try:
        session.on_crl(newer, sequence=1)
        session.on_crl(older, sequence=2)
        assert session.crl is not None and session.crl.pem == newer
        (refusal,) = _refusals(tmp_path)
        assert refusal["kind"] == "crl"
        assert "is older than CRL number" in str(refusal["reason"])
        assert session.report.refused == 0 and session.report.refusals == {"crl": 1}
    finally:
        session.close()
    again = _session(tmp_path, pki, clock, local_crl=older)  # restart with the old file
    try:
        assert again.crl is not None and again.crl.pem == newer  # kept durably
        assert [r["kind"] for r in _refusals(tmp_path)] == ["crl", "crl"]
        for concept in {f.concept for f in issue().fragments}:  # type: ignore[operator]
            again.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        assert again.on_dissemination(issue(), sequence=3)  # type: ignore[operator]
    finally:
        again.close()


def test_a_crl_not_signed_by_the_ca_is_refused(
    tmp_path: Path, pki: Pki, clock: Clock
) -> None:
    other = certs.create_ca("test-ca", now=NOW)
    session = _session(tmp_path, pki, clock)
    try:
        session.on_crl(_crl(pki, ca=other), sequence=1)
        session.on_crl(b"-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n", sequence=2)
        assert session.crl is None and session.keyring.crl() is None
        assert [r["kind"] for r in _refusals(tmp_path)] == ["crl", "crl"]
    finally:
        session.close()


def test_a_local_crl_file_is_used_until_the_site_relays_a_newer_one(
    tmp_path: Path, pki: Pki, clock: Clock
) -> None:
    local = _crl(pki, issued=NOW - timedelta(hours=1))
    session = _session(tmp_path, pki, clock, local_crl=local)
    try:
        assert session.crl is not None and session.crl.pem == local
        relayed = _crl(pki, revoked=(PUBLISHER,))
        session.on_crl(relayed, sequence=1)
        assert session.crl.pem == relayed and session.keyring.crl() == (session.crl.number, relayed)
        assert _refusals(tmp_path) == []
    finally:
        session.close()


def test_a_stale_crl_holds_documents_until_a_fresh_one_comes(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock
) -> None:
    message = issue()  # type: ignore[operator]
    session = _session(tmp_path, pki, clock, crl_grace=timedelta(hours=1))
    try:
        session.on_crl(_crl(pki, issued=NOW - timedelta(days=2), days=1), sequence=1)
        for concept in {f.concept for f in message.fragments}:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        clock.now = NOW - timedelta(days=1, minutes=-30)  # past nextUpdate, in the grace: opened
        assert session.on_dissemination(issue("in-grace"), sequence=2)  # type: ignore[operator]
        clock.now = NOW
        assert session.on_dissemination(message, sequence=3) == b""
        assert session.keyring.held_count() == 1 and _accepted(tmp_path) == ["in-grace.v1"]
        assert session.keyring.waiting("", "")  # waiting for a CRL, not for keys
        _give_keys(session, message)  # a key message changes nothing: still waiting
        assert session.keyring.held_count() == 1
        session.on_crl(_crl(pki), sequence=4)  # fresh: the held document opens
        assert _accepted(tmp_path) == ["in-grace.v1", "order-1.v1"]
        assert session.keyring.held_count() == 0 and _refusals(tmp_path) == []
    finally:
        session.close()


def test_setup_refuses_caps_that_hold_nothing(tmp_path: Path, pki: Pki) -> None:
    base = _setup(tmp_path, pki)
    for bad in ({"max_held_documents": 0}, {"max_held_bytes": 0},
                {"crl_grace": timedelta(seconds=-1)}):
        with pytest.raises(ValueError):
            replace(base, **bad)


# ---- refusals reach the audit: signed failure notices in the provenance log -------------------
def _notices(tmp_path: Path, pki: Pki) -> list[provenance.RefusalFacts]:
    """The failure notices in carol's provenance log, each verified under her certificate."""
    messages: dict[str, set[Quad]] = defaultdict(set)
    for quad in parse_nquads((tmp_path / "carol.nq").read_bytes()):
        if quad.g is not None and "/refusal/" in quad.g.value:
            messages[quad.g.value.split("#")[0]].add(quad)
    carol = certs.node_uri("carol")
    keys = {carol: certs.public_key_of(pki["carol"][0])}
    out = []
    for uri in sorted(messages):
        notice = provenance.Message(quads=frozenset(messages[uri]))
        provenance.verify_message(notice, keys)
        assert notice.sender == carol and notice.refusal is not None
        out.append(notice.refusal)
    return out


@pytest.mark.parametrize("keys", [True, False], ids=["refused-at-open", "refused-before-held"])
def test_a_refused_forged_document_appends_a_signed_notice(
    tmp_path: Path, pki: Pki, issue: object, clock: Clock, keys: bool
) -> None:
    genuine = issue()  # type: ignore[operator]
    forged = _forged(genuine, "resigned", pki)
    session = _session(tmp_path, pki, clock)
    session.report.served_by = "d2"
    try:
        if keys:
            for concept in {f.concept for f in genuine.fragments}:
                session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        assert session.on_dissemination(forged, sequence=1) == b""
        (refusal,) = _refusals(tmp_path)
        (notice,) = _notices(tmp_path, pki)
        assert notice == provenance.RefusalFacts(
            kind="document" if keys else "unverified",
            reason=str(refusal["reason"]),
            publisher=PUBLISHER,
            document_id="order-1",
            version=1,
            manifest_root=genuine.manifest.root,
            received_from=certs.node_uri("d2"),
        )
        # the same notice waits for the site, to travel to the publisher
        (queued,) = session.notices.batch(limit=10, max_bytes=10**6)
        assert session.notice_ready.is_set()
        assert provenance.Message.from_nquads(queued[1]).refusal == notice
        receipt = session.on_dissemination(genuine, sequence=2)
        assert bool(receipt) == keys  # the genuine one is opened (or held): no notice for it
        assert len(_notices(tmp_path, pki)) == 1
        assert session.notices.count() == 1
    finally:
        session.close()


def test_refused_crls_and_key_messages_append_signed_notices(
    tmp_path: Path, pki: Pki, clock: Clock
) -> None:
    session = _session(tmp_path, pki, clock)  # not subscribed yet: the hop is unknown
    try:
        session.on_crl(b"-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n", sequence=1)
        session.report.served_by = "d2"
        rekey = pb.GroupRekey(publisher=PUBLISHER, concept="WorkOrder", epoch=7)  # unsigned
        with pytest.raises(PeerError):
            session.on_rekey(rekey)
        assert session.report.refusals == {"crl": 1, "key": 1}
        crl, key = sorted(_notices(tmp_path, pki), key=lambda n: n.kind)
        assert (crl.kind, crl.publisher, crl.received_from) == ("crl", None, None)
        assert crl.reason == _refusals(tmp_path)[0]["reason"]
        assert (key.key_message, key.publisher, key.concept, key.epoch, key.document_id) == (
            "rekey", PUBLISHER, "WorkOrder", 7, None,
        )
        assert key.received_from == certs.node_uri("d2")
        assert key.reason == _refusals(tmp_path)[1]["reason"]
    finally:
        session.close()


def test_a_notice_that_cannot_be_built_never_stops_a_refusal(
    pki: Pki, caplog: pytest.LogCaptureFixture
) -> None:
    signer = provenance.Signer(
        node_uri=certs.node_uri("carol"), private_key=crypto.load_private_key_pem(pki["carol"][1])
    )
    odd_site = sign_notice(signer, at=NOW, kind="document", reason="r", served_by="a b")
    assert odd_site is not None and odd_site.refusal is not None
    assert odd_site.refusal.received_from is None  # no node URI can be made of that name
    no_document = sign_notice(signer, at=NOW, kind="document", reason="r", version=3)
    assert no_document is not None and no_document.refusal is not None
    assert no_document.refusal.version is None  # a version of no known document is dropped
    with caplog.at_level("ERROR", logger="subscriber.notices"):
        assert sign_notice(signer, at=NOW, kind="whim", reason="r") is None
    assert "could not be signed" in caplog.text
