"""Shared builders for provenance chains in unit tests: a site's hop, as the site signs it.

A site forwards a dissemination's fragments of the concepts a destination was granted and signs
one hop naming exactly the manifest leaves it forwards (:func:`xdn.wireconv.leaf_ranges`).
Tests that play a site (honest or dropping a concept) build that hop here, so the chain a
subscriber checks is the chain a real site would send.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from xdn import certs, crypto, provenance
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import leaf_ranges, restrict_dissemination

#: The block every test site certificate names (the production ontology's top concept).
BLOCK = "ProductionProcess"


def issue_site(ca: tuple[bytes, bytes], name: str, *, now: datetime) -> tuple[bytes, bytes]:
    """A site certificate (cert PEM, key PEM) issued by ``ca``."""
    return certs.issue(*ca, name=name, role="site", attributes={certs.BLOCK_FIELD: BLOCK}, now=now)


def signer_of(name: str, credential: tuple[bytes, bytes]) -> provenance.Signer:
    """The provenance signer of node ``name``, carrying its certificate."""
    cert_pem, key_pem = credential
    return provenance.Signer(
        node_uri=certs.node_uri(name),
        private_key=crypto.load_private_key_pem(key_pem),
        certificate=cert_pem,
    )


def relayed(
    diss: pb.Dissemination,
    site: provenance.Signer,
    *,
    recipient: str,
    fragment_ids: Iterable[str] | None = None,
    timestamp_ms: int = 2_000,
) -> pb.Dissemination:
    """What ``site`` sends ``recipient``: ``diss`` (whose chain is addressed to the site),
    restricted to ``fragment_ids`` (default: all), with the site's hop naming their leaves."""
    if fragment_ids is not None:
        diss = restrict_dissemination(diss, fragment_ids)
    message = provenance.Message.from_nquads(diss.provenance)
    manifest = diss.manifest
    hop = provenance.relay(
        message,
        site,
        message_uri=provenance.message_uri(
            site.node_uri, manifest.document_id, f"v{manifest.version}", f"to-{recipient}"
        ),
        recipient_uri=certs.node_uri(recipient),
        leaves=leaf_ranges(diss.fragments),
        timestamp_ms=timestamp_ms,
    )
    out = pb.Dissemination()
    out.CopyFrom(diss)
    out.provenance = hop.to_nquads()
    return out


def unwrapped(diss: pb.Dissemination) -> pb.Dissemination:
    """``diss`` as the sender of its outermost hop received it: that hop's graphs removed
    (a hop adds graphs named below its own message URI only)."""
    message = provenance.Message.from_nquads(diss.provenance)
    inner = frozenset(
        q for q in message.quads if q.g is None or not q.g.value.startswith(message.uri + "#")
    )
    out = pb.Dissemination()
    out.CopyFrom(diss)
    out.provenance = provenance.Message(quads=inner).to_nquads()
    return out
