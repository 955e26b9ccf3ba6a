"""Delivery receipts: a subscriber's signed receipt chain, read, verified and summarised.

Theory of operation
-------------------
A subscriber that accepts a document extends the provenance chain it received with a final
``receipt`` envelope (:func:`xdn.provenance.receipt`, the paper's RECEIVED stage) and sends the
whole chain back to its site in its acknowledgement. From there the chain travels upstream,
site by site, to the publisher's root site, where the publisher fetches it. Every party on the
way trusts nobody's word for it: :func:`read_receipt` bounds the input, parses it, insists that
its outermost envelope is a receipt, runs Algorithm 2 under the certificates the chain carries
(:class:`xdn.provenance.ChainVerifier`: CA, CRL, the role each hop needs, the certificate
naming the signer's URI) and returns a :class:`Receipt`: who published the document, who
relayed it and who received it, by certificate, with their times.

What each party checks on top of that is about *where* it sits on the path, and is done by
the callers (``disseminator.receipts`` for sites, ``publisher.receipts`` for the publisher)
with the helpers here: :meth:`Receipt.passes_through` (a hop signed by one certificate right
after a hop signed by another) and the per-hop :class:`PathHop` values.

A receipt's :attr:`~Receipt.id` is the SHA-256 of its canonical N-Quads, so the same chain
has the same id wherever it is, and a party that sees it twice (a retry) can tell. Its
:attr:`~Receipt.notification_id` names it in a site's LDN inbox: one per subscriber
certificate and document version, whatever its time.

Pure: no I/O, the time of verification is given.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise

from xdn import certs, identity, provenance
from xdn.errors import ReceiptError

__all__ = ["PathHop", "Receipt", "read_receipt"]

_VERSION = re.compile(r"v([1-9][0-9]{0,18})")


@dataclass(frozen=True, slots=True, kw_only=True)
class PathHop:
    """One envelope of a verified receipt chain, with the certificate that signed it.

    Attributes:
        kind: ``publication``, ``relay`` or ``receipt``.
        node: the signer's node URI (the envelope's sender).
        recipient: where the envelope sends the message (``None`` for the receipt).
        name: the signer certificate's common name.
        fingerprint: the signer certificate's SHA-256 fingerprint (hex).
        timestamp_ms: when the hop was sent (received, for the receipt).
    """

    kind: str
    node: str
    recipient: str | None
    name: str
    fingerprint: str
    timestamp_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    """A verified receipt chain and what it says.

    Attributes:
        id: SHA-256 (hex) of the chain's canonical N-Quads.
        message: the chain itself.
        document_id: the document received.
        version: its version, read from the publication's message URI (``<pub>msg/<doc>/vN``,
            signed by the publisher); ``None`` if the URI does not have that form.
        publisher: the certificate that signed the content graph and the publication.
        subscriber: the certificate that signed the receipt.
        fragments: how many manifest leaves (fragments) the subscriber received.
        hops: every envelope, publication first, receipt last.
    """

    id: str
    message: provenance.Message
    document_id: str
    version: int | None
    publisher: certs.Credential
    subscriber: certs.Credential
    fragments: int
    hops: tuple[PathHop, ...]

    @property
    def received_ms(self) -> int:
        """When the subscriber signed its receipt (ms since the epoch)."""
        return self.hops[-1].timestamp_ms

    @property
    def sites(self) -> tuple[str, ...]:
        """The sites on the path, from the root down (their certificates' names)."""
        return tuple(hop.name for hop in self.hops if hop.kind == "relay")

    @property
    def member_id(self) -> str:
        """The receiving subscriber's member id (its certificate, see :mod:`xdn.identity`)."""
        return identity.member_id(self.subscriber.name, self.subscriber.fingerprint)

    @property
    def notification_id(self) -> str:
        """The id of this receipt's notification in a site's LDN inbox: one per subscriber
        certificate and document version (the receipt's message URI names both the
        subscriber's node and the version), so a second receipt of a version adds none."""
        key = f"{self.subscriber.fingerprint} {self.message.uri}".encode()
        return "receipt-" + hashlib.sha256(key).hexdigest()[:40]

    def passes_through(self, before: str, after: str) -> bool:
        """Whether a relay signed by certificate ``after`` directly wraps one signed by
        ``before`` (both SHA-256 fingerprints): the chain went from one to the other."""
        return any(
            outer.kind == "relay" and outer.fingerprint == after and inner.fingerprint == before
            for inner, outer in pairwise(self.hops)
        )

    def to_nquads(self) -> bytes:
        """The whole chain, canonical N-Quads (what travels and what :attr:`id` hashes)."""
        return self.message.to_nquads()

    def latest_graphs(self) -> bytes:
        """The receipt envelope and its signature graph: what a site appends to its log."""
        return self.message.latest_graphs_nquads()


def read_receipt(
    data: bytes,
    verifier: provenance.ChainVerifier,
    *,
    at: datetime,
    max_bytes: int,
) -> Receipt:
    """Parse and verify one receipt chain.

    Args:
        data: the chain as N-Quads.
        verifier: Algorithm 2 under the CA (and CRL) of the reading party.
        at: the time at which the certificates must be valid.
        max_bytes: larger input is refused before it is parsed.

    Raises:
        ReceiptError: too large, a failure notice, or its outermost envelope is not a receipt.
        ProvenanceError: it is not a well-formed provenance chain.
        SignatureError: a signature or a signer's certificate does not hold.
    """
    if not isinstance(data, bytes):
        raise TypeError("a receipt is N-Quads bytes")
    if len(data) > max_bytes:
        raise ReceiptError(f"a receipt of {len(data)} bytes is over the limit of {max_bytes}")
    message = provenance.Message.from_nquads(data)
    envelopes = message.envelopes()
    if message.refusal is not None or envelopes[-1].kind != "receipt":
        raise ReceiptError(
            f"<{message.uri}> is not a receipt: its outermost envelope is a "
            f"{'failure notice' if message.refusal is not None else envelopes[-1].kind}"
        )
    chain = verifier.verify(message, at=at)
    if chain.publisher is None:  # a receipt has content: ChainVerifier names its publisher
        raise ReceiptError(f"<{message.uri}> names no publisher")
    hops = tuple(
        PathHop(
            kind=env.kind, node=env.sender, recipient=env.recipient, name=signer.name,
            fingerprint=signer.fingerprint, timestamp_ms=env.timestamp_ms,
        )
        for env, signer in zip(envelopes, chain.signers, strict=True)
    )
    return Receipt(
        id=hashlib.sha256(message.to_nquads()).hexdigest(),
        message=message,
        document_id=message.document_id,
        version=_version(envelopes[0], message.document_id),
        publisher=chain.publisher,
        subscriber=chain.signers[-1],
        fragments=message.leaves().count,
        hops=hops,
    )


def _version(publication: provenance.EnvelopeInfo, document_id: str) -> int | None:
    """The version a publisher's message URI names (``<pub>msg/<doc>/vN``), if it does."""
    prefix = provenance.message_uri(publication.sender, document_id, "v1")[: -len("v1")]
    if not publication.message.startswith(prefix):
        return None
    match = _VERSION.fullmatch(publication.message[len(prefix):])
    return None if match is None else int(match.group(1))
