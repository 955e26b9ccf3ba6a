"""The subscriber's checks on what arrives: tampering is refused with a clear error."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from subscriber.session import Session, SubscriberSetup, open_dissemination
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, encode
from xdn.errors import CertificateError, DecryptError, ProtocolError
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import dissemination_to_pb

NOW = datetime.now(UTC)
GROUP_KEY = b"\x11" * 32


@pytest.fixture(scope="module")
def pki() -> dict[str, tuple[bytes, bytes]]:
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        "production-dept": certs.issue(*ca, name="production-dept", role="publisher", now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
    }


@pytest.fixture(scope="module")
def dissemination(pki: dict[str, tuple[bytes, bytes]]) -> pb.Dissemination:
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
    doc = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(doc), mapping)
    cert_pem, key_pem = pki["production-dept"]
    signer_key = crypto.load_private_key_pem(key_pem)
    encoded = encode(
        mapped,
        document_id="order-1",
        publisher="production-dept",
        version=1,
        issued_at_ms=1,
        keys={
            c: ConceptKey(publisher="production-dept", concept=c, epoch=1, group_key=GROUP_KEY)
            for c in {n.concept for n in mapped}
        },
        signer=signer_key,
    )
    message = provenance.originate(
        provenance.Signer(
            node_uri=certs.node_uri("production-dept"), private_key=signer_key,
            certificate=cert_pem,
        ),
        message_uri="https://production-dept.xdn.example/msg/order-1/v1",
        recipient_uri=certs.node_uri("alice"),
        content=provenance.ContentFacts(
            document_id="order-1",
            publisher="production-dept",
            manifest_root=encoded.manifest.root,
            leaf_count=encoded.manifest.leaf_count,
        ),
        timestamp_ms=1,
    )
    return dissemination_to_pb(
        encoded.signed_manifest,
        [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
        provenance=message.to_nquads(),
        publisher_certificate=cert_pem,
    )


def _keys(publisher: str, concept: str, epoch: int) -> bytes | None:
    return GROUP_KEY if (publisher, epoch) == ("production-dept", 1) else None


def _open(message: pb.Dissemination, ca_pem: bytes) -> object:
    return open_dissemination(message, ca_pem=ca_pem, keys=_keys, at=NOW)


def test_untouched_dissemination_opens(pki, dissemination) -> None:  # type: ignore[no-untyped-def]
    view = _open(dissemination, pki["ca"][0])
    assert b"xdn:view" in view.to_bytes()  # type: ignore[attr-defined]


def test_one_flipped_ciphertext_byte_is_refused(pki, dissemination) -> None:  # type: ignore[no-untyped-def]
    tampered = pb.Dissemination()
    tampered.CopyFrom(dissemination)
    blob = bytearray(tampered.fragments[3].cipher_value)
    blob[len(blob) // 2] ^= 0x01
    tampered.fragments[3].cipher_value = bytes(blob)
    with pytest.raises(DecryptError, match="fragment could not be decrypted or verified"):
        _open(tampered, pki["ca"][0])


def test_moved_fragment_is_refused(pki, dissemination) -> None:  # type: ignore[no-untyped-def]
    tampered = pb.Dissemination()
    tampered.CopyFrom(dissemination)
    tampered.fragments[2].concept = tampered.fragments[5].concept + "X"
    with pytest.raises(DecryptError):
        _open(tampered, pki["ca"][0])


def test_publisher_certificate_from_another_ca_is_refused(pki, dissemination) -> None:  # type: ignore[no-untyped-def]
    other_ca = certs.create_ca("test-ca", now=NOW)
    with pytest.raises(CertificateError):
        _open(dissemination, other_ca[0])


def test_manifest_claiming_another_publisher_is_refused(pki, dissemination) -> None:  # type: ignore[no-untyped-def]
    tampered = pb.Dissemination()
    tampered.CopyFrom(dissemination)
    tampered.manifest.publisher = "qa-company"
    with pytest.raises(ProtocolError, match="signed by 'production-dept'"):
        _open(tampered, pki["ca"][0])


def test_session_records_refusal_and_writes_no_view(  # type: ignore[no-untyped-def]
    tmp_path: Path, pki, dissemination
) -> None:
    cert_pem, key_pem = pki["alice"]
    setup = SubscriberSetup(
        name="alice",
        tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="unused:0",
        out_dir=tmp_path / "out",
        state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq",
    )
    session = Session(setup, clock=lambda: NOW)
    try:
        for concept in {f.concept for f in dissemination.fragments}:
            session.keyring.put("production-dept", concept, 1, GROUP_KEY)
        tampered = pb.Dissemination()
        tampered.CopyFrom(dissemination)
        tampered.fragments[0].cipher_value = b"\x00" + tampered.fragments[0].cipher_value[1:]
        assert session.on_dissemination(tampered) == b""
        refused = [json.loads(line) for line in (tmp_path / "out" / "refused.jsonl").open()]
        assert refused == [
            {
                "publisher": "production-dept",
                "document": "order-1",
                "reason": "fragment could not be decrypted or verified",
                "kind": "document",
                "version": 1,
            }
        ]
        assert not list((tmp_path / "out" / "views").rglob("*.xml"))
        receipt = session.on_dissemination(dissemination)
        assert receipt, "the untouched document is accepted and receipted"
        assert len(list((tmp_path / "out" / "views").rglob("*.xml"))) == 1
    finally:
        session.close()


def test_received_jsonl_is_completed_from_the_database_after_a_crash(tmp_path: Path) -> None:
    """received.jsonl is an export (appended without fsync): the keyring database keeps the
    lines not yet synced, and start-up appends those the file lacks."""
    from subscriber.export import reconcile
    from subscriber.store import Inbox, Keyring

    keyring = Keyring(tmp_path / "keyring.sqlite")
    inbox = Inbox(tmp_path / "out")
    try:
        for n in (1, 2, 3):
            record = {"publisher": "p", "document": f"d{n}", "version": 1, "fragments": {}}
            keyring.accept(record, address="site:1", sequence=n)
            if n < 3:
                inbox.record(record)  # the third line never reached the disk
        path = tmp_path / "out" / "received.jsonl"
        assert len(path.read_text().splitlines()) == 2
        reconcile(keyring, Inbox(tmp_path / "out"))
        documents = [json.loads(line)["document"] for line in path.read_text().splitlines()]
        assert documents == ["d1", "d2", "d3"]
    finally:
        keyring.close()


def test_grants_follow_the_queue_across_a_reconnect(tmp_path: Path, pki) -> None:  # type: ignore[no-untyped-def]
    """A change applied from the queue outlives a reconnect; a queue the site lost does not."""
    cert_pem, key_pem = pki["alice"]
    setup = SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="d2:1", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq",
    )

    def subscribed(resumed_after: int, concepts: list[str]) -> pb.Subscribed:
        grant = pb.Grant(publisher="production-dept", concepts=concepts)
        return pb.Subscribed(resumed_after=resumed_after, grants=[grant])

    session = Session(setup, clock=lambda: NOW)
    try:
        first = session.grants_at_resume(subscribed(0, ["A", "B"]))
        assert first == {"production-dept": ["A", "B"]}
        session.keyring.set_applied(setup.connect, 4)
        session.on_grants_changed(
            pb.GrantsChanged(grants=[pb.Grant(publisher="production-dept", concepts=["A"])]), 5
        )
        assert session.report.grants == {"production-dept": ["A"]}
        assert session.keyring.applied(setup.connect) == 5
    finally:
        session.close()

    again = Session(setup, clock=lambda: NOW)  # a restart; the site resumes after 5 and its
    try:  # registration already shows a later change (to C) that is still queued for us
        assert again.grants_at_resume(subscribed(5, ["C"])) == {"production-dept": ["A"]}
        # The site lost our queue (resumes before what we applied): its word stands.
        assert again.grants_at_resume(subscribed(2, ["C"])) == {"production-dept": ["C"]}
    finally:
        again.close()


# ---- the chain a subscriber receives: verified, addressed to it, acked as the whole chain ----
def _session(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], diss: pb.Dissemination
) -> Session:
    """alice's session, holding the group keys of every concept of ``diss``."""
    cert_pem, key_pem = pki["alice"]
    setup = SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="unused:0", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq",
    )
    session = Session(setup, clock=lambda: NOW)
    for concept in {f.concept for f in diss.fragments}:
        session.keyring.put("production-dept", concept, 1, GROUP_KEY)
    return session


def _reissued(
    diss: pb.Dissemination, pair: tuple[bytes, bytes], *, name: str = "production-dept",
    publisher: str = "production-dept", recipient: str = "alice", carry: bool = True,
) -> pb.Dissemination:
    """``diss`` with its provenance re-issued by ``name`` (holding ``pair``), naming
    ``publisher`` in its content graph, to ``recipient``."""
    cert_pem, key_pem = pair
    message = provenance.originate(
        provenance.Signer(node_uri=certs.node_uri(name),
                          private_key=crypto.load_private_key_pem(key_pem),
                          certificate=cert_pem if carry else None),
        message_uri=provenance.message_uri(certs.node_uri(name), "order-1", "v1"),
        recipient_uri=certs.node_uri(recipient),
        content=provenance.ContentFacts(
            document_id="order-1", publisher=publisher,
            manifest_root=diss.manifest.root, leaf_count=diss.manifest.leaf_count,
        ),
        timestamp_ms=1,
    )
    out = pb.Dissemination()
    out.CopyFrom(diss)
    out.provenance = message.to_nquads()
    return out


def test_the_ack_carries_the_whole_receipt_chain_which_verifies(  # type: ignore[no-untyped-def]
    tmp_path: Path, pki, dissemination
) -> None:
    session = _session(tmp_path, pki, dissemination)
    try:
        ack = session.on_dissemination(dissemination)
    finally:
        session.close()
    chain = provenance.Message.from_nquads(ack)
    assert chain.sender == certs.node_uri("alice") and chain.recipient is None
    received = provenance.Message.from_nquads(dissemination.provenance)
    assert received.quads < chain.quads  # the chain as received, plus our receipt
    verified = provenance.ChainVerifier(pki["ca"][0]).verify(chain, at=NOW)
    assert [(c.name, c.role) for c in verified.signers] == [
        ("production-dept", "publisher"), ("alice", "subscriber"),
    ]
    assert chain.leaves() == received.leaves()


@pytest.mark.parametrize(
    ("signed_by", "change", "reason"),
    [
        ("production-dept", {"recipient": "bob"},
         "last hop is addressed to <https://bob.xdn.example/>, not to <https://alice.xdn.example/>"),
        ("production-dept", {"carry": False}, "carries no signer certificate"),
        ("qa-company", {}, "names publisher 'production-dept' but is signed by 'qa-company'"),
        ("qa-company", {"publisher": "qa-company"},
         "not signed by the publisher who signed the manifest"),
    ],
    ids=["not-for-us", "no-certificate", "in-another-name", "another-publishers-chain"],
)
def test_a_chain_that_does_not_hold_is_refused_and_not_receipted(  # type: ignore[no-untyped-def]
    tmp_path: Path, pki, dissemination, signed_by: str, change: dict[str, object], reason: str
) -> None:
    pair = pki["production-dept"]
    if signed_by != "production-dept":
        pair = certs.issue(*pki["ca"], name=signed_by, role="publisher", now=NOW)
    forged = _reissued(dissemination, pair, name=signed_by, **change)  # type: ignore[arg-type]
    session = _session(tmp_path, pki, dissemination)
    try:
        assert session.on_dissemination(forged) == b""
        (refusal,) = [json.loads(line) for line in (tmp_path / "out" / "refused.jsonl").open()]
        assert refusal["kind"] == "document" and reason in refusal["reason"]
        assert not list((tmp_path / "out" / "views").rglob("*.xml"))
        assert session.on_dissemination(dissemination), "the genuine chain still goes through"
    finally:
        session.close()
