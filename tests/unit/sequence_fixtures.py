"""Shared builders for the completeness tests: a PKI and documents 1-3 of a publisher's signed
sequence (the production sample under three ids, every concept in each)."""

from __future__ import annotations

from datetime import UTC, datetime

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


def make_pki() -> dict[str, tuple[bytes, bytes]]:
    """A CA, the publisher and subscriber alice."""
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
    }


def make_documents(pki: dict[str, tuple[bytes, bytes]]) -> list[pb.Dissemination]:
    """Documents 1, 2, 3 of the publisher's sequence (the same sample, three ids)."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / f"{PUBLISHER}.toml", ontology)
    sample = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(sample), mapping)
    concepts = {n.concept for n in mapped}
    cert_pem, key_pem = pki[PUBLISHER]
    key = crypto.load_private_key_pem(key_pem)
    signer = provenance.Signer(node_uri=certs.node_uri(PUBLISHER), private_key=key)
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
            recipient_uri=certs.node_uri("alice"),
            content=provenance.ContentFacts(
                document_id=f"order-{n}", publisher=PUBLISHER,
                manifest_root=encoded.manifest.root,
                fragments=tuple(
                    provenance.FragmentFact(
                        fragment_id=f.fragment_id, concept=f.concept,
                        ciphertext_sha256=crypto.sha256(f.cipher_value),
                    )
                    for f in encoded.fragments
                ),
            ),
            timestamp_ms=n,
        )
        out.append(
            dissemination_to_pb(
                encoded.signed_manifest,
                [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
                provenance=message.to_nquads(), publisher_certificate=cert_pem,
            )
        )
    return out
