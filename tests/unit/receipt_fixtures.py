"""Delivery receipt chains with real certificates, for the receipt tests."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from itertools import pairwise

from xdn import certs, crypto, provenance
from xdn.grpc_tls import TlsFiles

NOW = datetime.now(UTC)
T0 = int(NOW.timestamp() * 1000) - 1000  # the publication: a second before NOW
PUBLISHER = "production-dept"
DOC = "order 7"
BLOCKS = {"d1": "ProductionProcess", "d2": "WorkOrder", "d3": "ResourceDetails"}


@dataclasses.dataclass(frozen=True)
class Pki:
    ca: bytes
    parties: dict[str, tuple[bytes, bytes]]  # name → (cert, key)

    def signer(self, name: str, *, cert_of: str | None = None) -> provenance.Signer:
        cert, key = self.parties[name]
        return provenance.Signer(
            node_uri=certs.node_uri(certs.credential_from_pem(cert).name),
            private_key=crypto.load_private_key_pem(key),
            certificate=self.parties[cert_of or name][0],
        )

    def tls(self, name: str) -> TlsFiles:
        cert, key = self.parties[name]
        return TlsFiles(cert_pem=cert, key_pem=key, ca_pem=self.ca)


def make_pki() -> Pki:
    """One CA; a publisher, the sites d1 to d3, subscribers alice, carol and alice's namesake
    (``alice-2``: another certificate with alice's name), an auditor (eve)."""
    ca = certs.create_ca("test-ca", now=NOW)
    parties = {
        PUBLISHER: certs.issue(*ca, name=PUBLISHER, role="publisher", now=NOW),
        "qa-company": certs.issue(*ca, name="qa-company", role="publisher", now=NOW),
        "alice": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
        "carol": certs.issue(*ca, name="carol", role="subscriber", now=NOW),
        # a namesake: another certificate with alice's name (so alice's node URI)
        "alice-2": certs.issue(*ca, name="alice", role="subscriber", now=NOW),
        "eve": certs.issue(*ca, name="eve", role="auditor", now=NOW),
    }
    for site, block in BLOCKS.items():
        parties[site] = certs.issue(
            *ca, name=site, role="site", attributes={certs.BLOCK_FIELD: block}, now=NOW
        )
    return Pki(ca=ca[0], parties=parties)


def published(
    pki: Pki, *, version: int = 1, publisher: str = PUBLISHER
) -> provenance.Message:
    node = certs.node_uri(publisher)
    return provenance.originate(
        pki.signer(publisher),
        message_uri=provenance.message_uri(node, DOC, f"v{version}"),
        recipient_uri=certs.node_uri("d1"),
        content=provenance.ContentFacts(
            document_id=DOC, publisher=publisher, manifest_root=b"\x01" * 32, leaf_count=40,
        ),
        timestamp_ms=T0,
    )


def relay(pki: Pki, message: provenance.Message, site: str, to: str) -> provenance.Message:
    return provenance.relay(
        message, pki.signer(site),
        message_uri=provenance.message_uri(certs.node_uri(site), DOC, "v1", f"to-{to}"),
        recipient_uri=certs.node_uri(to), leaves=provenance.LeafRanges(((0, 10),)),
        timestamp_ms=T0 + 100,
    )


def receipted(pki: Pki, message: provenance.Message, who: str) -> provenance.Message:
    signer = pki.signer(who)
    return provenance.receipt(
        message, signer,
        message_uri=provenance.message_uri(signer.node_uri, DOC, "v1", "received"),
        timestamp_ms=T0 + 200,
    )


def chain(
    pki: Pki, *sites: str, to: str = "alice", signer: str | None = None,
    publisher: str = PUBLISHER, version: int = 1,
) -> bytes:
    """The receipt chain publisher → sites… → ``to``, receipted by ``signer`` (default ``to``)."""
    message = published(pki, publisher=publisher, version=version)
    path = [*sites, to]
    for site, nxt in pairwise(path):
        message = relay(pki, message, site, nxt)
    return receipted(pki, message, signer or to).to_nquads()
