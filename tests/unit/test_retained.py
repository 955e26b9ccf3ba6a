"""State at subscribe time: document-key grants, retention at publisher and site, held documents."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from disseminator.store import Append, Retained, Store
from publisher.keystore import KeyStore
from subscriber.session import Session, SubscriberSetup
from tests.unit.chain_fixtures import relayed, signer_of
from xdn import certs, crypto
from xdn.errors import DecryptError, ProtocolError
from xdn.grpc_tls import TlsFiles
from xdn.lkh import (
    DocumentKeyGrant,
    GroupController,
    KeySigner,
    open_document_keys,
    seal_document_keys,
)
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import document_keys_to_pb, enrolment_to_pb

NOW = datetime.now(UTC)
PUBLISHER = "production-dept"
SITE = "d1"  # the site of the shared ``pki`` fixture (conftest.py)
GROUP_KEY = b"\x22" * 32
MEMBER_KEY = crypto.generate_private_key()


# ---- the grant ------------------------------------------------------------------------------
def _grant(keys: dict[str, bytes], **header: str) -> DocumentKeyGrant:
    fields = {"publisher": PUBLISHER, "concept": "Step", "member": "carol", **header}
    return seal_document_keys(**fields, keys=keys, public_key=MEMBER_KEY.public_key())


@given(
    st.dictionaries(
        st.text(alphabet="abcdefgh.%0123456789", min_size=1, max_size=20),
        st.binary(min_size=32, max_size=32),
        max_size=8,
    )
)
def test_a_grant_opens_to_exactly_its_keys(keys: dict[str, bytes]) -> None:
    grant = DocumentKeyGrant.from_bytes(_grant(keys).to_bytes())
    assert open_document_keys(grant, MEMBER_KEY) == keys


def test_a_grant_opens_only_with_the_members_key() -> None:
    grant = _grant({"k": b"\x01" * 32})
    with pytest.raises(DecryptError):
        open_document_keys(grant, crypto.generate_private_key())


@pytest.mark.parametrize("field", ["publisher", "concept", "member"])
def test_a_grant_relabelled_for_another_header_does_not_open(field: str) -> None:
    grant = _grant({"k": b"\x01" * 32})
    relabelled = DocumentKeyGrant(
        **{
            "publisher": grant.publisher,
            "concept": grant.concept,
            "member": grant.member,
            field: "other",
        },
        sealed=grant.sealed,
    )
    with pytest.raises(DecryptError):
        open_document_keys(relabelled, MEMBER_KEY)


def test_malformed_grant_bytes_are_a_protocol_error() -> None:
    data = _grant({"k": b"\x01" * 32}).to_bytes()
    for bad in (data[:-1], data + b"\x00", b"XLE1" + data[4:], b""):
        with pytest.raises(ProtocolError):
            DocumentKeyGrant.from_bytes(bad)


def test_document_keys_must_be_32_bytes() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        _grant({"k": b"\x01" * 31})


# ---- retention at the publisher's key service ------------------------------------------------
def test_key_store_keeps_the_latest_version_of_the_last_n_documents(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER, retain=2)
    try:
        for doc, version, epoch in (("a", 1, 1), ("b", 1, 1), ("a", 2, 2), ("c", 1, 3)):
            store.commit(doc, version, [("Step", epoch, f"{doc}.v{version}", bytes([epoch]) * 32)])
        # "b" fell out of the window (last two: a v2, c); "a" v1 was replaced by v2.
        assert set(store.retained_keys("Step", before_epoch=9)) == {"a.v2", "c.v1"}
        assert set(store.retained_keys("Step", before_epoch=3)) == {"a.v2"}
        assert store.retained_keys("Other", before_epoch=9) == {}
        assert store.next_version("a") == 3
    finally:
        store.close()


def test_key_store_without_retention_keeps_no_keys(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER, retain=0)
    try:
        store.commit("a", 1, [("Step", 1, "a.v1", b"\x01" * 32)])
        assert store.retained_keys("Step", before_epoch=9) == {}
    finally:
        store.close()


# ---- retention at a site ---------------------------------------------------------------------
def test_site_retains_the_last_n_documents_per_publisher_atomically_with_routing() -> None:
    store = Store(":memory:", retain=2)
    for publisher, doc, version in (("p", "a", 1), ("p", "b", 1), ("q", "x", 1), ("p", "a", 2),
                                     ("p", "c", 1)):
        store.commit_routing(
            document=(publisher, doc, version),
            appends=[Append(kind="subscriber", name="alice", payload=b"d")],
            retained=Retained(publisher=publisher, document=doc, version=version,
                              payload=f"{doc}{version}".encode()),
        )
    kept = [(r.publisher, r.document, r.version, r.payload) for r in store.retained()]
    assert kept == [("q", "x", 1, b"x1"), ("p", "a", 2, b"a2"), ("p", "c", 1, b"c1")]
    assert Store(":memory:").retained() == []


# ---- held documents and retained views at the subscriber ------------------------------------
def _session(tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], concepts: list[str]) -> Session:
    cert_pem, key_pem = pki["carol"]
    setup = SubscriberSetup(
        name="carol", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="unused:0", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "carol.nq", retained=True,
    )
    session = Session(setup, clock=lambda: NOW)
    session.report.grants = {PUBLISHER: concepts}
    return session


def _key_signer(pki: dict[str, tuple[bytes, bytes]]) -> KeySigner:
    cert_pem, key_pem = pki[PUBLISHER]
    return KeySigner(
        publisher=PUBLISHER, private_key=crypto.load_private_key_pem(key_pem),
        certificate=cert_pem,
    )


def _join(session: Session, pki: dict[str, tuple[bytes, bytes]], concept: str) -> None:
    """Enrol carol in a group of ``concept``, as the key service does before granting keys."""
    carol = certs.credential_from_pem(pki["carol"][0]).member_id
    change = GroupController(publisher=PUBLISHER, concept=concept).plan(joins=[carol])
    carol_key = crypto.load_private_key_pem(pki["carol"][1]).public_key()
    (enrolment,) = change.enrolments({carol: carol_key})
    session.on_enrolment(enrolment_to_pb(_key_signer(pki).sign(enrolment)))


def _records(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "out" / "received.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_document_without_keys_is_held_then_opened_when_its_keys_are_granted(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]],
    document: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    diss, doc_keys = document
    concepts = sorted({f.concept for f in diss.fragments})
    session = _session(tmp_path, pki, concepts)
    try:
        assert session.on_dissemination(diss, sequence=1) == b""
        assert _records(tmp_path) == [] and len(session.keyring.held()) == 1
        assert session.keyring.applied("unused:0") == 1  # acknowledged, kept durably
        carol_key = crypto.load_private_key_pem(pki["carol"][1]).public_key()
        grant = seal_document_keys(publisher=PUBLISHER, concept="all", member=session.member_id,
                                   keys=doc_keys, public_key=carol_key)
        signed = document_keys_to_pb(_key_signer(pki).sign(grant))
        with pytest.raises(ProtocolError, match="a group we are not in"):
            session.on_document_keys(signed)  # the grant comes after its enrolment
        assert len(session.keyring.held()) == 1
        _join(session, pki, "all")
        session.on_document_keys(signed)
        session.release_held(2)
        records = _records(tmp_path)
        assert [r["document"] for r in records] == ["order-1"]
        assert set(records[0]["fragments"].values()) == set(concepts)  # type: ignore[attr-defined]
        assert session.keyring.held() == []
        # No group key was ever given: only this document's keys.
        assert session.keyring.get(PUBLISHER, concepts[0], 1) is None
    finally:
        session.close()


def test_document_keys_for_another_member_are_refused(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]],
) -> None:
    session = _session(tmp_path, pki, [])
    try:
        grant = seal_document_keys(publisher=PUBLISHER, concept="Step", member="dave",
                                   keys={}, public_key=MEMBER_KEY.public_key())
        with pytest.raises(ProtocolError, match="for 'dave'"):
            session.on_document_keys(document_keys_to_pb(_key_signer(pki).sign(grant)))
    finally:
        session.close()


def _keyed_session(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], concepts: list[str]
) -> Session:
    session = _session(tmp_path, pki, sorted(concepts))
    for concept in concepts:
        session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
    return session


def _partial(
    pki: dict[str, tuple[bytes, bytes]], diss: pb.Dissemination
) -> tuple[pb.Dissemination, list[str], list[str]]:
    """What site d1 relays to carol when it holds only half the concepts of ``diss`` (as
    the publisher sent it to d1): its hop names the leaves it forwards."""
    concepts = sorted({f.concept for f in diss.fragments})
    kept, dropped = concepts[: len(concepts) // 2], concepts[len(concepts) // 2 :]
    ids = [f.fragment_id for f in diss.fragments if f.concept in kept]
    partial = relayed(diss, signer_of(SITE, pki[SITE]), recipient="carol", fragment_ids=ids)
    return partial, kept, dropped


def test_a_retained_document_may_lack_concepts_the_site_did_not_hold(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]],
    published: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    partial, kept, dropped = _partial(pki, published[0])
    session = _keyed_session(tmp_path, pki, kept + dropped)
    try:
        session.subscribed_at_ms = 5000  # the document (issued at 1000) predates us
        assert session.on_dissemination(partial, sequence=1)
        (record,) = _records(tmp_path)
        assert record["missing"] == dropped
        assert set(record["fragments"].values()) == set(kept)  # type: ignore[attr-defined]
    finally:
        session.close()


def test_a_live_document_must_hold_every_granted_concept(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]],
    published: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    partial, kept, dropped = _partial(pki, published[0])
    session = _keyed_session(tmp_path, pki, kept + dropped)
    try:
        session.subscribed_at_ms = 500  # subscribed before the document was issued
        assert session.on_dissemination(partial, sequence=1) == b""
        assert _records(tmp_path) == []
        refused = (tmp_path / "out" / "refused.jsonl").read_text()
        assert "could not be decrypted or verified" in refused
    finally:
        session.close()
