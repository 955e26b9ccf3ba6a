"""Shared builders for the completeness tests: a PKI and documents 1-3 of a publisher's signed
sequence (the production sample under three ids, every concept in each), as site d2 relays
them to subscriber alice, her session, and the publisher's signed checkpoints.

A test module takes the module-scoped fixtures by binding them to their names::

    pki = sequence_fixtures.pki
    documents = sequence_fixtures.documents
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from subscriber.session import Session, SubscriberSetup
from tests.unit.chain_fixtures import issue_site, relayed, signer_of, unwrapped
from xdn import certs, crypto, provenance, xmlsafe
from xdn.codec import ConceptKey, Sequencing, encode
from xdn.completeness import Checkpoint, sign_checkpoint
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import checkpoint_to_pb, dissemination_to_pb

NOW = datetime.now(UTC)
GROUP_KEY = b"\x22" * 32
PUBLISHER = "production-dept"
SITE = "d2"

Pki = dict[str, tuple[bytes, bytes]]  # party name → (certificate PEM, key PEM)


def make_pki() -> Pki:
    """A CA, the publisher, site d2 and subscriber alice."""
    ca = certs.create_ca("test-ca", now=NOW)
    return {
        "ca": ca,
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        SITE: issue_site(ca, SITE, now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
    }


def make_documents(pki: Pki) -> list[pb.Dissemination]:
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
    pki: Pki, document: pb.Dissemination, fragment_ids: Iterable[str]
) -> pb.Dissemination:
    """``document`` (one of :func:`make_documents`) as site d2 relays only ``fragment_ids`` of
    it: the fragments restricted, d2's hop naming their leaves."""
    return relayed(
        unwrapped(document), signer_of(SITE, pki[SITE]), recipient="alice",
        fragment_ids=fragment_ids,
    )


@pytest.fixture(scope="module")
def pki() -> Pki:
    """:func:`make_pki`, made once a test module."""
    return make_pki()


@pytest.fixture(scope="module")
def documents(pki: Pki) -> list[pb.Dissemination]:
    """:func:`make_documents` of the module's :func:`pki`."""
    return make_documents(pki)


def concepts_of(message: pb.Dissemination) -> list[str]:
    """The concepts of ``message``'s fragments, sorted."""
    return sorted({r.concept for r in message.manifest.ranges})


def signed_checkpoint(pki: Pki, latest: dict[str, int], *, at: datetime = NOW) -> pb.Checkpoint:
    """The publisher's signed checkpoint: ``latest`` sequence number per concept, as of ``at``."""
    cert_pem, key_pem = pki[PUBLISHER]
    checkpoint = Checkpoint(
        publisher=PUBLISHER, issued_at_ms=int(at.timestamp() * 1000),
        sequence=max(latest.values(), default=0), latest=latest,
    )
    signed = sign_checkpoint(checkpoint, crypto.load_private_key_pem(key_pem))
    return checkpoint_to_pb(signed, publisher_certificate=cert_pem)


def alice_session(
    tmp_path: Path,
    pki: Pki,
    concepts: list[str],
    *,
    clock: Callable[[], datetime] = lambda: NOW,
    with_keys: bool = True,
    **options: Any,
) -> Session:
    """Subscriber alice's session, her files under ``tmp_path``, resumed at site d2 with
    ``concepts`` of the publisher granted.

    Args:
        tmp_path: where her output, state and provenance log go.
        pki: from :func:`make_pki`.
        concepts: what the site says it grants her.
        clock: the session's clock.
        with_keys: whether she holds each of ``concepts``' group key (epoch 1) already.
        **options: further :class:`SubscriberSetup` fields (``retention``, ...).
    """
    cert_pem, key_pem = pki["alice"]
    setup = SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="d2:1", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq", **options,
    )
    session = Session(setup, clock=clock)
    session.grants_at_resume(
        pb.Subscribed(grants=[pb.Grant(publisher=PUBLISHER, concepts=concepts)])
    )
    if with_keys:
        for concept in concepts:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
    return session
