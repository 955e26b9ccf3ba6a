"""A subscriber takes key messages only from the publisher's key service (issue #13).

A dishonest site relays every key message. Here it alters a rekey so that it looks like our
removal, seals us a path of a far-future epoch, forges document-key grants, strips signatures,
signs with other certificates and relabels another group's rekey. Each is refused with a typed
error, recorded in ``refused.jsonl``, and leaves the keyring exactly as it was; the genuine
messages that follow still apply and the documents encrypted under them still open.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from subscriber.session import Session, SubscriberSetup
from tests.unit.chain_fixtures import relayed, signer_of
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, encode
from xdn.errors import CertificateError, PeerError, ProtocolError, SignatureError
from xdn.grpc_tls import TlsFiles
from xdn.lkh import (
    Enrolment,
    GroupController,
    KeySigner,
    MemberKeys,
    MemberPath,
    RekeyMessage,
    Signed,
    seal_document_keys,
    seal_path,
    signed_bytes,
)
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import (
    dissemination_to_pb,
    document_keys_to_pb,
    enrolment_to_pb,
    rekey_to_pb,
)

NOW = datetime.now(UTC)
PUBLISHER = "production-dept"  # as in the shared ``pki`` fixture (conftest.py)
SITE = "d1"  # the site of the shared ``pki`` fixture, which relays to carol
CONCEPT = "WorkOrder"
OTHER = "qa-company"

Encoder = Callable[[str, int, bytes], pb.Dissemination]


@pytest.fixture(scope="module")
def more_pki(pki: dict[str, tuple[bytes, bytes]]) -> dict[str, tuple[bytes, bytes]]:
    ca = pki["ca"]
    return {
        **pki,
        OTHER: certs.issue(*ca, name=OTHER, role="publisher", now=NOW),
        "rogue": certs.issue(*certs.create_ca("test-ca", now=NOW), name=PUBLISHER,
                             role="publisher", now=NOW),
    }


@pytest.fixture(scope="module")
def encoder(pki: dict[str, tuple[bytes, bytes]]) -> Encoder:
    """Encode the sample order's WorkOrder fragments under a given epoch's group key."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
    sample = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(sample), mapping)
    cert_pem, key_pem = pki[PUBLISHER]
    signer = crypto.load_private_key_pem(key_pem)
    site = signer_of(SITE, pki[SITE])

    def encode_at(document_id: str, epoch: int, group_key: bytes) -> pb.Dissemination:
        keys = {
            c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=epoch, group_key=group_key)
            for c in {n.concept for n in mapped}
        }
        encoded = encode(mapped, document_id=document_id, publisher=PUBLISHER, version=1,
                         issued_at_ms=1000, keys=keys, signer=signer)
        message = provenance.originate(
            provenance.Signer(
                node_uri=certs.node_uri(PUBLISHER), private_key=signer, certificate=cert_pem
            ),
            message_uri=f"{certs.node_uri(PUBLISHER)}msg/{document_id}/v1",
            recipient_uri=certs.node_uri(SITE),
            content=provenance.ContentFacts(
                document_id=document_id, publisher=PUBLISHER,
                manifest_root=encoded.manifest.root,
                leaf_count=encoded.manifest.leaf_count,
            ),
            timestamp_ms=1000,
        )
        whole = dissemination_to_pb(
            encoded.signed_manifest,
            [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
            provenance=message.to_nquads(), publisher_certificate=cert_pem,
        )
        ours = [f.fragment_id for f in whole.fragments if f.concept == CONCEPT]
        return relayed(whole, site, recipient="carol", fragment_ids=ours)

    return encode_at


def _key_signer(pki: dict[str, tuple[bytes, bytes]], name: str = PUBLISHER) -> KeySigner:
    cert_pem, key_pem = pki[name]
    return KeySigner(
        publisher=certs.credential_from_pem(cert_pem).name,
        private_key=crypto.load_private_key_pem(key_pem),
        certificate=cert_pem,
    )


@dataclasses.dataclass
class KeyService:
    """The publisher's side: one group of (PUBLISHER, CONCEPT), its signed messages."""

    pki: dict[str, tuple[bytes, bytes]]
    group: GroupController = dataclasses.field(
        default_factory=lambda: GroupController(publisher=PUBLISHER, concept=CONCEPT)
    )

    @property
    def signer(self) -> KeySigner:
        return _key_signer(self.pki)

    @property
    def carol_key(self) -> crypto.PublicKey:
        return certs.public_key_of(self.pki["carol"][0])

    @property
    def carol(self) -> str:
        """carol's member id (her certificate, as groups know her)."""
        return certs.credential_from_pem(self.pki["carol"][0]).member_id

    def epoch(
        self, *, joins: tuple[str, ...] = (), leaves: tuple[str, ...] = ()
    ) -> tuple[pb.GroupRekey, list[pb.KeyMessage]]:
        """One epoch; the name ``carol`` in ``joins``/``leaves`` stands for her member id."""
        joins, leaves = (
            tuple(self.carol if m == "carol" else m for m in ms) for ms in (joins, leaves)
        )
        change = self.group.plan(joins=joins, leaves=leaves)
        self.group.apply(change)
        keys = {m: self.carol_key for m in change.joined}  # everyone's key is carol's: unused
        enrolments = [
            enrolment_to_pb(self.signer.sign(e))
            for e in change.enrolments(keys)
            if e.member == self.carol
        ]
        return rekey_to_pb(self.signer.sign(change.message)), enrolments

    def refresh(self) -> pb.KeyMessage:
        refresh = self.group.path_refresh(self.carol, self.carol_key)
        return enrolment_to_pb(self.signer.sign(refresh))


@pytest.fixture
def session(tmp_path: Path, pki: dict[str, tuple[bytes, bytes]]) -> Iterator[Session]:
    cert_pem, key_pem = pki["carol"]
    setup = SubscriberSetup(
        name="carol", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="unused:0", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "carol.nq",
    )
    s = Session(setup, clock=lambda: NOW)
    s.report.grants = {PUBLISHER: [CONCEPT]}
    try:
        yield s
    finally:
        s.close()


def _snapshot(session: Session) -> tuple[bytes | None, list[bytes | None], list[str]]:
    """Everything a key message may change: our path, the group keys, pending refreshes."""
    epochs = range(1, 8)
    return (
        session.keyring.group_state(PUBLISHER, CONCEPT),
        [session.keyring.get(PUBLISHER, CONCEPT, e) for e in epochs],
        [f"{p}/{c}" for p, c in session.keyring.stale()],
    )


def _refusals(session: Session) -> list[dict[str, object]]:
    path = session.setup.out_dir / "refused.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _refused(
    session: Session,
    handler: Callable[[Any], None],
    message: object,
    error: type[PeerError],
    match: str | None = None,
) -> None:
    """``handler(message)`` is refused with ``error``, recorded, and changes nothing."""
    before, refusals = _snapshot(session), len(_refusals(session))
    with pytest.raises(error, match=match):
        handler(message)
    assert _snapshot(session) == before
    assert len(_refusals(session)) == refusals + 1


def _flip(data: bytes, at: int | None = None) -> bytes:
    out = bytearray(data)
    out[len(out) // 2 if at is None else at] ^= 0x01
    return bytes(out)


def _opens(session: Session, encoder: Encoder, document_id: str, service: KeyService) -> bool:
    """A document the publisher encrypts now opens and is receipted."""
    group = service.group
    return bool(session.on_dissemination(encoder(document_id, group.epoch, group.group_key)))


def test_an_altered_rekey_is_refused_and_the_genuine_one_still_applies(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]], encoder: Encoder,
) -> None:
    """Attack 1: one byte of a rekey changed, so that it would look like our removal."""
    service = KeyService(more_pki)
    rekey, (enrolment,) = service.epoch(joins=("carol", "dave", "erin"))
    session.on_rekey(rekey)
    session.on_enrolment(enrolment)
    assert _opens(session, encoder, "order-1", service)

    genuine, _ = service.epoch(leaves=("dave",))
    altered = pb.GroupRekey()
    altered.CopyFrom(genuine)
    altered.message = _flip(genuine.message, at=len(genuine.message) - 5)  # a wrapped key
    _refused(session, session.on_rekey, altered, SignatureError, "does not verify")
    unsigned = pb.GroupRekey()
    unsigned.CopyFrom(genuine)
    unsigned.ClearField("signature")
    _refused(session, session.on_rekey, unsigned, SignatureError, "is not signed")
    assert _refusals(session)[0] == {
        "publisher": PUBLISHER, "key_message": "rekey", "concept": CONCEPT, "epoch": 2,
        "reason": f"rekey of {PUBLISHER}/{CONCEPT} epoch 2: the publisher's signature does "
                  "not verify",
    }
    assert session.report.keys_refused == 2

    session.on_rekey(genuine)
    assert session.keyring.get(PUBLISHER, CONCEPT, 2) is not None
    assert _opens(session, encoder, "order-2", service)


def _resigned(message: pb.GroupRekey, cert_pem: bytes, key_pem: bytes) -> pb.GroupRekey:
    """``message`` with a signature over its signed bytes by another key and certificate."""
    forged = pb.GroupRekey()
    forged.CopyFrom(message)
    rekey = RekeyMessage.from_bytes(message.message)
    forged.signature = crypto.sign(crypto.load_private_key_pem(key_pem), signed_bytes(rekey))
    forged.publisher_certificate = cert_pem
    return forged


def test_a_rekey_signed_with_another_certificate_is_refused(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]],
) -> None:
    service = KeyService(more_pki)
    _, (enrolment,) = service.epoch(joins=("carol", "dave"))
    session.on_enrolment(enrolment)
    genuine, _ = service.epoch(leaves=("dave",))
    for name, error, match in (
        (OTHER, SignatureError, f"signed by '{OTHER}'"),
        ("rogue", CertificateError, "invalid CA signature"),  # look-alike CA, our name
        ("carol", CertificateError, "expected 'publisher'"),  # a subscriber's certificate
    ):
        forged = _resigned(genuine, *more_pki[name])
        _refused(session, session.on_rekey, forged, error, match)
    session.on_rekey(genuine)
    assert session.keyring.get(PUBLISHER, CONCEPT, 2) is not None


def test_another_groups_rekey_relabelled_as_ours_is_refused(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]], encoder: Encoder,
) -> None:
    ours, other = KeyService(more_pki), KeyService(
        more_pki, GroupController(publisher=PUBLISHER, concept="Invoice")
    )
    _, (enrolment,) = ours.epoch(joins=("carol", "dave"))
    session.on_enrolment(enrolment)
    other.epoch(joins=("carol", "dave"))
    theirs, _ = other.epoch(leaves=("dave",))  # epoch 2 of the other group
    relabelled = pb.GroupRekey()
    relabelled.CopyFrom(theirs)
    relabelled.concept = CONCEPT
    relabelled.message = dataclasses.replace(
        RekeyMessage.from_bytes(theirs.message), concept=CONCEPT
    ).to_bytes()
    _refused(session, session.on_rekey, relabelled, SignatureError,
             f"rekey of {PUBLISHER}/{CONCEPT} epoch 2")
    genuine, _ = ours.epoch(leaves=("dave",))
    session.on_rekey(genuine)
    assert _opens(session, encoder, "order-2", ours)


def test_a_path_for_a_far_future_epoch_is_refused(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]], encoder: Encoder,
) -> None:
    """Attack 2: a site seals us a path of epoch 99 with our own public key."""
    service = KeyService(more_pki)
    _, (enrolment,) = service.epoch(joins=("carol", "dave"))
    session.on_enrolment(enrolment)
    fake_path = MemberPath(publisher=PUBLISHER, concept=CONCEPT, epoch=99, member=session.member_id,
                           keys=((500, b"\x05" * 32), (501, b"\x06" * 32)))
    fake = seal_path(fake_path, service.carol_key)
    unsigned = enrolment_to_pb(service.signer.sign(fake))
    unsigned.ClearField("publisher_certificate")
    _refused(session, session.on_enrolment, unsigned, SignatureError, "is not signed")
    for name, error in ((OTHER, SignatureError), ("rogue", CertificateError),
                        ("carol", CertificateError)):
        cert_pem, key_pem = more_pki[name]
        forged = Signed(
            message=fake,
            signature=crypto.sign(crypto.load_private_key_pem(key_pem), signed_bytes(fake)),
            certificate=cert_pem,
        )
        _refused(session, session.on_enrolment, enrolment_to_pb(forged), error)
    genuine_signature = Signed(  # the genuine enrolment's signature on the fake one
        message=fake,
        signature=service.signer.sign(_enrolment_of(enrolment)).signature,
        certificate=service.signer.certificate,
    )
    _refused(session, session.on_enrolment, enrolment_to_pb(genuine_signature),
             SignatureError, "does not verify")
    assert session.keyring.get(PUBLISHER, CONCEPT, 99) is None
    genuine, _ = service.epoch(leaves=("dave",))
    session.on_rekey(genuine)  # not taken for an old epoch: we are still at 1
    assert _opens(session, encoder, "order-2", service)


def _enrolment_of(message: pb.KeyMessage) -> Enrolment:
    return Enrolment.from_bytes(message.sealed)


def test_forged_document_key_grants_are_refused(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]],
) -> None:
    """Attack 3: document keys the publisher never granted."""
    service = KeyService(more_pki)
    _, (enrolment,) = service.epoch(joins=("carol",))
    session.on_enrolment(enrolment)
    forged_keys = {"forged-key": b"\x07" * 32}
    grant = seal_document_keys(publisher=PUBLISHER, concept=CONCEPT, member=session.member_id,
                               keys=forged_keys, public_key=service.carol_key)
    unsigned = document_keys_to_pb(service.signer.sign(grant))
    unsigned.ClearField("signature")
    _refused(session, session.on_document_keys, unsigned, SignatureError)
    for name, error in ((OTHER, SignatureError), ("rogue", CertificateError),
                        ("carol", CertificateError)):
        cert_pem, key_pem = more_pki[name]
        forged = Signed(
            message=grant,
            signature=crypto.sign(crypto.load_private_key_pem(key_pem), signed_bytes(grant)),
            certificate=cert_pem,
        )
        _refused(session, session.on_document_keys, document_keys_to_pb(forged), error)
    altered = document_keys_to_pb(service.signer.sign(grant))
    altered.sealed = _flip(altered.sealed)
    _refused(session, session.on_document_keys, altered, SignatureError)
    assert session.keyring.document_key("forged-key") is None
    # A genuine grant, but of a group we are not in, is refused too.
    elsewhere = seal_document_keys(publisher=PUBLISHER, concept="Invoice", member=session.member_id,
                                   keys=forged_keys, public_key=service.carol_key)
    _refused(session, session.on_document_keys,
             document_keys_to_pb(service.signer.sign(elsewhere)), ProtocolError, "not in")
    session.on_document_keys(document_keys_to_pb(service.signer.sign(grant)))
    assert session.keyring.document_key("forged-key") == forged_keys["forged-key"]


def test_only_a_verified_rekey_removes_us(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]],
) -> None:
    service = KeyService(more_pki)
    _, (enrolment,) = service.epoch(joins=("carol", "dave"))
    session.on_enrolment(enrolment)
    removal, _ = service.epoch(leaves=("carol",))
    swapped = pb.GroupRekey()
    swapped.CopyFrom(removal)
    swapped.signature = _flip(removal.signature, at=-3)
    _refused(session, session.on_rekey, swapped, SignatureError)
    assert session.keyring.group_state(PUBLISHER, CONCEPT) is not None
    session.on_rekey(removal)
    assert session.keyring.group_state(PUBLISHER, CONCEPT) is None
    assert session.keyring.get(PUBLISHER, CONCEPT, 2) is None
    assert session.keyring.get(PUBLISHER, CONCEPT, 1) is not None  # old documents still open


def test_a_verified_rekey_ahead_asks_for_a_refresh_and_an_old_enrolment_is_ignored(
    session: Session, more_pki: dict[str, tuple[bytes, bytes]], encoder: Encoder,
) -> None:
    service = KeyService(more_pki)
    _, (first,) = service.epoch(joins=("carol", "dave", "erin", "frank"))
    session.on_enrolment(first)
    second, _ = service.epoch(leaves=("dave",))
    session.on_rekey(second)
    service.epoch(leaves=("erin",))  # epoch 3: lost on the way
    fourth, _ = service.epoch(leaves=("frank",))
    forged_ahead = _resigned(fourth, *more_pki[OTHER])
    _refused(session, session.on_rekey, forged_ahead, SignatureError)
    assert session.refresh_requests == []
    session.on_rekey(fourth)
    assert session.refresh_requests == [pb.PathRefresh(publisher=PUBLISHER, concept=CONCEPT)]
    assert session.keyring.stale() == [(PUBLISHER, CONCEPT)]
    at_second = _snapshot(session)
    session.on_enrolment(first)  # a genuine but old enrolment, replayed: ignored
    assert _snapshot(session) == at_second
    session.on_enrolment(service.refresh())  # the key service's answer
    assert session.keyring.stale() == []
    assert _opens(session, encoder, "order-4", service)
    session.on_enrolment(first)  # and once more, now further behind
    assert MemberKeys.from_bytes(
        session.keyring.group_state(PUBLISHER, CONCEPT) or b""
    ).epoch == 4
