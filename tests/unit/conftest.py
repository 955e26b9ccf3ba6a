"""Shared unit fixtures: a test PKI and one signed, encrypted sample document."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.unit.chain_fixtures import issue_site, relayed, signer_of
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, encode
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import dissemination_to_pb

NOW = datetime.now(UTC)
PUBLISHER = "production-dept"
SITE = "d1"
GROUP_KEY = b"\x22" * 32


@pytest.fixture(scope="module")
def pki() -> dict[str, tuple[bytes, bytes]]:
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        SITE: issue_site(ca, SITE, now=NOW),
        "carol": certs.issue(*ca, name="carol", role="subscriber", now=NOW),
    }


@pytest.fixture(scope="module")
def published(pki: dict[str, tuple[bytes, bytes]]) -> tuple[pb.Dissemination, dict[str, bytes]]:
    """A signed document issued at t=1000 ms as the publisher sends it to site d1, and its
    per-document keys by key name."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
    sample = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
    mapped = map_document(xmlsafe.parse_file(sample), mapping)
    keys = {
        c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=1, group_key=GROUP_KEY)
        for c in {n.concept for n in mapped}
    }
    cert_pem, key_pem = pki[PUBLISHER]
    signer = crypto.load_private_key_pem(key_pem)
    encoded = encode(mapped, document_id="order-1", publisher=PUBLISHER, version=1,
                     issued_at_ms=1000, keys=keys, signer=signer)
    message = provenance.originate(
        provenance.Signer(
            node_uri=certs.node_uri(PUBLISHER), private_key=signer, certificate=cert_pem
        ),
        message_uri=f"{certs.node_uri(PUBLISHER)}msg/order-1/v1",
        recipient_uri=certs.node_uri(SITE),
        content=provenance.ContentFacts(
            document_id="order-1", publisher=PUBLISHER, manifest_root=encoded.manifest.root,
            leaf_count=encoded.manifest.leaf_count,
        ),
        timestamp_ms=1000,
    )
    diss = dissemination_to_pb(
        encoded.signed_manifest,
        [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
        provenance=message.to_nquads(), publisher_certificate=cert_pem,
    )
    return diss, {k.name_for("order-1"): k.for_document("order-1") for k in keys.values()}


@pytest.fixture(scope="module")
def document(
    pki: dict[str, tuple[bytes, bytes]], published: tuple[pb.Dissemination, dict[str, bytes]]
) -> tuple[pb.Dissemination, dict[str, bytes]]:
    """The same document as site d1 relays it, whole, to subscriber carol, and its keys."""
    diss, keys = published
    return relayed(diss, signer_of(SITE, pki[SITE]), recipient="carol"), keys
