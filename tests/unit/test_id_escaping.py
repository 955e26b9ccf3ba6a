"""Document ids that need escaping travel publisher → site → subscriber: message URIs are
percent-encoded, the id itself stays the original text, and view file names stay in place."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from disseminator.planning import Planner
from disseminator.routing import Registration, RoutingTable
from subscriber.session import Session, SubscriberSetup
from subscriber.store import Inbox
from xdn import certs, crypto, ids, provenance, xmlsafe
from xdn.codec import ConceptKey, encode
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import dissemination_to_pb

NOW = datetime.now(UTC)
PUBLISHER = "production-dept"
GROUP_KEY = b"\x33" * 32
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
AWKWARD = ["order 7", "café", "2024/03/order", "../../escape", ".hidden"]


@pytest.fixture(scope="module")
def pki() -> dict[str, tuple[bytes, bytes]]:
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        "d1": certs.issue(
            *ca, name="d1", role="site", attributes={certs.BLOCK_FIELD: "ProductionProcess"},
            now=NOW,
        ),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
    }


def _signer(pki: dict[str, tuple[bytes, bytes]], name: str) -> provenance.Signer:
    cert_pem, key_pem = pki[name]
    return provenance.Signer(
        node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(key_pem),
        certificate=cert_pem,
    )


def _published(pki: dict[str, tuple[bytes, bytes]], document_id: str) -> pb.Dissemination:
    """What the publisher sends to d1 for ``document_id`` (as publisher/client.py builds it)."""
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / f"{PUBLISHER}.toml", ONTOLOGY)
    sample = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(sample), mapping)
    keys = {
        c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=1, group_key=GROUP_KEY)
        for c in {n.concept for n in mapped}
    }
    signer = _signer(pki, PUBLISHER)
    encoded = encode(mapped, document_id=document_id, publisher=PUBLISHER, version=1,
                     issued_at_ms=1000, keys=keys, signer=signer.private_key)
    message = provenance.originate(
        signer,
        message_uri=provenance.message_uri(signer.node_uri, document_id, "v1"),
        recipient_uri=certs.node_uri("d1"),
        content=provenance.ContentFacts(
            document_id=document_id, publisher=PUBLISHER, manifest_root=encoded.manifest.root,
            leaf_count=encoded.manifest.leaf_count,
        ),
        timestamp_ms=1000,
    )
    return dissemination_to_pb(
        encoded.signed_manifest,
        [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
        provenance=message.to_nquads(), publisher_certificate=pki[PUBLISHER][0],
    )


def _relayed(pki: dict[str, tuple[bytes, bytes]], diss: pb.Dissemination) -> pb.Dissemination:
    """What site d1 queues for alice, a local subscriber granted everything."""
    table = RoutingTable()
    concepts = frozenset(f.concept for f in diss.fragments)
    table.local["alice"] = Registration(
        subscriber="alice", certificate=b"", grants={PUBLISHER: concepts}
    )
    planner = Planner(table=table, ontology=ONTOLOGY, signer=_signer(pki, "d1"),
                      now_ms=lambda: int(NOW.timestamp() * 1000),
                      chains=provenance.ChainVerifier(pki["ca"][0]))
    plan = planner.document(diss)
    (append,) = plan.appends
    delivered: pb.Dissemination = pb.Delivery.FromString(append.delivery()).dissemination
    return delivered


@pytest.mark.parametrize("document_id", AWKWARD)
def test_an_awkward_id_is_relayed_received_and_its_chain_verifies(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], document_id: str
) -> None:
    delivered = _relayed(pki, _published(pki, document_id))
    cert_pem, key_pem = pki["alice"]
    setup = SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="unused:0", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq",
    )
    session = Session(setup, clock=lambda: NOW)
    try:
        for concept in {f.concept for f in delivered.fragments}:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        assert session.on_dissemination(delivered, 1), "accepted and receipted"
    finally:
        session.close()
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "received.jsonl").open()]
    assert record["document"] == document_id  # the original text, not an escape
    views = tmp_path / "out" / "views"
    (view,) = [p for p in views.rglob("*") if p.is_file()]
    assert view == views / PUBLISHER / f"{ids.file_stem(document_id)}.v1.xml"
    assert b"xdn:view" in view.read_bytes()
    # The whole chain (publication, d1's relay, alice's receipt) verifies, below the escaped id.
    chain = provenance.Message.from_nquads(delivered.provenance)
    receipt = provenance.receipt(
        chain, _signer(pki, "alice"),
        message_uri=provenance.message_uri(certs.node_uri("alice"), document_id, "v1", "x"),
        timestamp_ms=3000,
    )
    public = {certs.node_uri(n): certs.public_key_of(pki[n][0]) for n in (PUBLISHER, "d1", "alice")}
    provenance.verify_message(receipt, public)
    chain_of = provenance.ChainVerifier(pki["ca"][0]).verify(receipt, at=NOW)
    assert [c.name for c in chain_of.signers] == [PUBLISHER, "d1", "alice"]
    assert f"/msg/{ids.segment(document_id)}/v1/subscriber-alice" in delivered.provenance.decode()


@pytest.mark.parametrize(
    ("publisher", "document_id"),
    [("../up", "x"), ("p", "../../x"), ("a/b", "c/d"), ("p", "..")],
)
def test_view_file_names_never_leave_the_views_folder(
    tmp_path: Path, publisher: str, document_id: str
) -> None:
    inbox = Inbox(tmp_path / "out")
    path = inbox.write_view(publisher=publisher, document_id=document_id, version=2,
                            view_xml=b"<v/>")
    views = (tmp_path / "out" / "views").resolve()
    assert path.resolve().parent.parent == views  # views/<one folder>/<one file>
    assert path.read_bytes() == b"<v/>"
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [path]
