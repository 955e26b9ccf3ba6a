"""Subscribers' failure notices on the road to the publisher: read, verified and named.

Theory of operation
-------------------
A subscriber that refuses something (a document that does not verify, a bad key message, a
stale CRL, a gap its site cannot fill…) signs a failure notice
(:func:`xdn.provenance.failure_notice`: a one-hop message, an ``xdn:Refusal`` envelope over an
``xdn:FailureNotice`` content graph saying what was refused and why, never plaintext) and
hands it to its site, which passes it upstream with the receipts to the publisher's root site,
where the publisher fetches it: so the publisher learns who refused which version, and why.

Every party on the way trusts nobody's word for it: :func:`read_notice` bounds the input,
parses it, insists that it is a failure notice, runs Algorithm 2 under the certificate it
carries (:class:`xdn.provenance.ChainVerifier`: CA, CRL, the certificate naming the signer's
URI) and that the signer holds a *subscriber* certificate, and returns a :class:`Notice`.
Where the notice may come from (the subscriber itself, on its own stream or post; a downlink
site it is registered behind) is the callers' check (``disseminator.notices``).

A notice's :attr:`~Notice.id` is the SHA-256 of its canonical N-Quads (a retry is a
duplicate); its :attr:`~Notice.notification_id` names it in a site's LDN inbox: one per
subscriber certificate and refused thing (:attr:`Notice.subject`: the kind and what it names),
so the same refusal signed again adds no notification.

Pure: no I/O, the time of verification is given.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime

from xdn import certs, identity, provenance
from xdn.errors import NoticeError
from xdn.provenance._vocab import HAS_MESSAGE_TYPE, REFUSAL

__all__ = ["MAX_NOTICE_BYTES", "Notice", "is_notice", "read_notice"]

#: The largest failure notice a party reads (a notice is a few KB: its signer's certificate,
#: two signatures and a reason).
MAX_NOTICE_BYTES = 64 * 1024

_TYPE_PREDICATE = f"<{HAS_MESSAGE_TYPE.value}>".encode()
_REFUSAL_TYPE = f"<{REFUSAL.value}>".encode()


def is_notice(data: bytes) -> bool:
    """Whether ``data`` (N-Quads, as parties send them: one statement a line, tokens parted by
    one space) says it is a failure notice: a statement whose predicate is
    ``msg:hasMessageType`` and whose object is ``xdn:Refusal``. Says nothing of its validity
    (:func:`read_notice` decides that); a receipt chain never says it (its envelopes are
    publications, relays and a receipt; a literal cannot stand before a predicate), so it
    tells the two apart in a batch that carries both."""
    if _REFUSAL_TYPE not in data:  # (most receipts: no line to split)
        return False
    for line in data.splitlines():
        parts = line.split(b" ", 3)
        if len(parts) > 2 and parts[1] == _TYPE_PREDICATE and parts[2] == _REFUSAL_TYPE:
            return True
    return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Notice:
    """A verified failure notice and what it says.

    Attributes:
        id: SHA-256 (hex) of its canonical N-Quads.
        message: the notice itself.
        facts: what was refused, and why.
        signer: the subscriber certificate that signed it.
        signed_ms: when it was refused (its envelope's time).
    """

    id: str
    message: provenance.Message
    facts: provenance.RefusalFacts
    signer: certs.Credential
    signed_ms: int

    @property
    def member_id(self) -> str:
        """The refusing subscriber's member id (its certificate, see :mod:`xdn.identity`)."""
        return identity.member_id(self.signer.name, self.signer.fingerprint)

    @property
    def subject(self) -> str:
        """What was refused, as one string: the kind and every name and number it gives
        (not the reason, nor the time): two notices of the same refused thing share it."""
        f = self.facts
        return json.dumps([
            f.kind, f.publisher, f.document_id, f.version, f.key_message, f.concept, f.epoch,
            None if f.manifest_root is None else f.manifest_root.hex(), f.sequence,
        ])

    @property
    def notification_id(self) -> str:
        """The id of this notice's notification in a site's LDN inbox: one per subscriber
        certificate and refused thing, so the same refusal signed again adds none."""
        key = f"{self.signer.fingerprint} {self.subject}".encode()
        return "refusal-" + hashlib.sha256(key).hexdigest()[:40]

    def to_nquads(self) -> bytes:
        """The whole notice, canonical N-Quads (what travels and what :attr:`id` hashes)."""
        return self.message.to_nquads()


def read_notice(
    data: bytes, verifier: provenance.ChainVerifier, *, at: datetime, max_bytes: int
) -> Notice:
    """Parse and verify one subscriber's failure notice.

    Args:
        data: the notice as N-Quads.
        verifier: Algorithm 2 under the CA (and CRL) of the reading party.
        at: the time at which the signer's certificate must be valid.
        max_bytes: larger input is refused before it is parsed.

    Raises:
        NoticeError: too large, not a failure notice, or not signed by a subscriber.
        ProvenanceError: it is not a well-formed message.
        SignatureError: a signature or the signer's certificate does not hold.
    """
    if not isinstance(data, bytes):
        raise TypeError("a failure notice is N-Quads bytes")
    if len(data) > max_bytes:
        raise NoticeError(f"a notice of {len(data)} bytes is over the limit of {max_bytes}")
    message = provenance.Message.from_nquads(data)
    facts = message.refusal
    if facts is None:
        raise NoticeError(
            f"<{message.uri}> is not a failure notice: its outermost envelope is a "
            f"{message.envelopes()[-1].kind}"
        )
    chain = verifier.verify(message, at=at)
    signer = chain.signers[-1]
    if signer.role != "subscriber":
        raise NoticeError(
            f"<{message.uri}> is signed by {signer.name!r}, which holds a {signer.role} "
            "certificate: only subscribers' notices travel to publishers"
        )
    return Notice(
        id=hashlib.sha256(message.to_nquads()).hexdigest(),
        message=message,
        facts=facts,
        signer=signer,
        signed_ms=message.envelopes()[-1].timestamp_ms,
    )
