"""Shared builders for the completeness tests: a PKI and documents 1-3 of a publisher's signed
sequence (the production sample under three ids, every concept in each), as site d2 relays
them to subscriber alice."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from tests.unit.chain_fixtures import issue_site, relayed, signer_of, unwrapped
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, Sequencing, encode
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import dissemination_to_pb

NOW = datetime.now(UTC)
GROUP_KEY = b"\x22" * 32
PUBLISHER = "production-dept"
SITE = "d2"


def make_pki() -> dict[str, tuple[bytes, bytes]]:
    """A CA, the publisher, site d2 and subscriber alice."""
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        SITE: issue_site(ca, SITE, now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
    }


def make_documents(pki: dict[str, tuple[bytes, bytes]]) -> list[pb.Dissemination]:
    """Documents 1, 2, 3 of the publisher's sequence (the same sample, three ids), each as
    site d2 relays it whole to alice."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / f"{PUBLISHER}.toml", ontology)
    sample = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(sample), mapping)
    concepts = {n.concept for n in mapped}
    cert_pem, key_pem = pki[PUBLISHER]
    key = crypto.load_private_key_pem(key_pem)
    signer = provenance.Signer(
        node_uri=certs.node_uri(PUBLISHER), private_key=key, certificate=cert_pem
    )
    out = []
    for n in (1, 2, 3):
        encoded = encode(
            mapped, document_id=f"order-{n}", publisher=PUBLISHER, version=1, issued_at_ms=n,
            keys={
                c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=1, group_key=GROUP_KEY)
                for c in concepts
            },
            signer=key,
            sequencing=Sequencing(sequence=n, previous=dict.fromkeys(concepts, n - 1)),
        )
        message = provenance.originate(
            signer,
            message_uri=f"https://{PUBLISHER}.xdn.example/msg/order-{n}/v1",
            recipient_uri=certs.node_uri(SITE),
            content=provenance.ContentFacts(
                document_id=f"order-{n}", publisher=PUBLISHER,
                manifest_root=encoded.manifest.root,
                leaf_count=encoded.manifest.leaf_count,
            ),
            timestamp_ms=n,
        )
        published = dissemination_to_pb(
            encoded.signed_manifest,
            [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
            provenance=message.to_nquads(), publisher_certificate=cert_pem,
        )
        out.append(relayed(published, signer_of(SITE, pki[SITE]), recipient="alice"))
    return out


def restricted(
    pki: dict[str, tuple[bytes, bytes]], document: pb.Dissemination, fragment_ids: Iterable[str]
) -> pb.Dissemination:
    """``document`` (one of :func:`make_documents`) as site d2 relays only ``fragment_ids`` of
    it: the fragments restricted, d2's hop naming their leaves."""
    return relayed(
        unwrapped(document), signer_of(SITE, pki[SITE]), recipient="alice",
        fragment_ids=fragment_ids,
    )
