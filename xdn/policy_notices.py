"""Policy-change notices: the publisher's signed word of what a new policy version changed for
one subscriber, made, read, verified and checked against the entitlement it travels with.

Theory of operation
-------------------
When a publisher's key service evaluates a new version of its signed policy for a member whose
entitlement (:class:`xdn.completeness.Entitlement`) it changes — concepts gained, concepts lost,
or everything lost — it signs a *policy-change notice* for that member
(:func:`sign_policy_notice`; the message is :func:`xdn.provenance.policy_notice`'s: one
``xdn:PolicyNotice`` envelope over an ``xdn:PolicyChange`` content graph). Members whose grants
did not change get none (:func:`policy_change` returns ``None``).

The notice travels with the entitlement it accompanies (``Entitlement.notice``, canonical
N-Quads), down the path sites route that entitlement on. Nobody takes it on a site's word:
:func:`read_policy_notice` bounds, parses and verifies it (Algorithm 2 under the certificate it
carries, checked against the CA and CRL; the signer holds a publisher certificate of the name
the content graph gives), and :func:`check_accompanies` insists that it is about exactly the
entitlement it came with — the same publisher (its certificate), subscriber certificate and
policy version, and what it says was gained granted by that entitlement, what was lost not.
Sites run both before they store or forward it; the subscriber runs both (for itself) before
it shows and logs it.

Its :attr:`PolicyNotice.notification_id` names it in a site's LDN inbox: one per subscriber
certificate, publisher and policy version, the same at every site on its path.

Pure: no I/O, the time of verification is given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from xdn import certs, provenance
from xdn.errors import PolicyNoticeError

__all__ = [
    "MAX_NOTICE_BYTES",
    "PolicyNotice",
    "check_accompanies",
    "policy_change",
    "read_policy_notice",
    "sign_policy_notice",
]

#: The largest policy-change notice a party parses from a peer: one carries one certificate
#: (~1 KB) and the concepts changed; 64 KB leaves room for a large ontology's worth of them.
MAX_NOTICE_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyNotice:
    """A verified policy-change notice and what it says.

    Attributes:
        message: the signed notice.
        change: what it says changed.
        publisher: the certificate that signed it (a publisher's, of ``change.publisher``).
    """

    message: provenance.Message
    change: provenance.PolicyChangeFacts
    publisher: certs.Credential

    @property
    def notification_id(self) -> str:
        """Its id in an inbox: ``policy-`` and 40 hex digits of SHA-256 over the subscriber's
        certificate fingerprint, the publisher and the policy version."""
        c = self.change
        digest = hashlib.sha256(f"{c.certificate}\n{c.publisher}\n{c.version}".encode())
        return "policy-" + digest.hexdigest()[:40]

    def to_nquads(self) -> bytes:
        """Canonical N-Quads of the notice (what travels, and what an inbox serves)."""
        return self.message.to_nquads()

    def summary(self) -> str:
        """One line for a person: ``policy v5 of production-dept: you gain X, lose Y``."""
        c = self.change
        parts = []
        if c.gained:
            parts.append("gain " + ", ".join(sorted(c.gained)))
        if c.everything:
            return (f"policy v{c.version} of {c.publisher}: you lose everything ("
                    + ", ".join(sorted(c.lost)) + ")")
        if c.lost:
            parts.append("lose " + ", ".join(sorted(c.lost)))
        return f"policy v{c.version} of {c.publisher}: you " + ", ".join(parts)


def policy_change(
    *,
    publisher: str,
    subscriber: str,
    certificate: str,
    previous_version: int,
    previous: Iterable[str],
    version: int,
    current: Iterable[str],
    at_ms: int,
    everything: bool = False,
) -> provenance.PolicyChangeFacts | None:
    """What policy ``version`` changed against ``previous_version`` for one subscriber
    certificate (``previous`` and ``current``: the concepts each grants it), or ``None`` if
    nothing changed or the version did not move forward.

    Args:
        subscriber: the subscriber's common name (its node URI is derived).
        certificate: its certificate's fingerprint.
        everything: ``version`` grants it nothing at all, not even conditionally (then
            ``current`` must be empty): it is no longer a member.
    """
    before, after = frozenset(previous), frozenset(current)
    if everything and after:
        raise ValueError("a subscriber that loses everything is granted nothing")
    if version <= previous_version or (before == after and not (everything and before)):
        return None
    return provenance.PolicyChangeFacts(
        publisher=publisher,
        subscriber=certs.node_uri(subscriber),
        certificate=certificate,
        previous_version=previous_version,
        version=version,
        gained=after - before,
        lost=before - after,
        changed_at_ms=at_ms,
        everything=everything,
    )


def sign_policy_notice(
    signer: provenance.Signer, change: provenance.PolicyChangeFacts, *, timestamp_ms: int
) -> provenance.Message:
    """The publisher's signed notice of ``change`` (its URI: one per version and certificate)."""
    uri = provenance.policy_notice_uri(signer.node_uri, change.version, change.certificate)
    return provenance.policy_notice(
        signer, message_uri=uri, change=change, timestamp_ms=timestamp_ms
    )


def read_policy_notice(
    data: bytes,
    chains: provenance.ChainVerifier,
    *,
    at: datetime,
    max_bytes: int = MAX_NOTICE_BYTES,
) -> PolicyNotice:
    """Parse and verify a policy-change notice.

    Raises:
        ProvenanceError: it is over ``max_bytes`` or not well-formed.
        SignatureError: a signature does not verify, or its signer is not a publisher of the
            name it gives, under the CA and CRL.
        PolicyNoticeError: it is another kind of message.
    """
    message = provenance.Message.from_nquads(data, max_bytes=max_bytes)
    change = message.policy_change
    if change is None:
        raise PolicyNoticeError(f"{message.uri} is not a policy-change notice")
    chain = chains.verify(message, at=at)
    assert chain.publisher is not None  # a policy notice's signer is checked by verify
    return PolicyNotice(message=message, change=change, publisher=chain.publisher)


def check_accompanies(
    notice: PolicyNotice,
    *,
    publisher: str,
    publisher_certificate: bytes,
    subscriber: str,
    certificate: str,
    policy_version: int,
    concepts: Iterable[str],
    conditional: Iterable[str] = (),
) -> None:
    """Check that ``notice`` is about exactly the entitlement it came with.

    Args:
        publisher: the entitlement's publisher.
        publisher_certificate: the certificate (PEM) that signed the entitlement.
        subscriber: the common name of the entitlement's subscriber.
        certificate: the fingerprint of the subscriber certificate it was evaluated for.
        policy_version: the policy version it was evaluated under.
        concepts: what it grants (whatever the sites observe).
        conditional: what it may grant (a notice that says everything is lost comes with an
            entitlement that grants nothing, neither certainly nor conditionally).

    Raises:
        PolicyNoticeError: naming the first thing that differs.
    """
    c = notice.change
    granted = frozenset(concepts)
    signer = certs.credential_from_pem(publisher_certificate).fingerprint
    checks = (
        (c.publisher == publisher, f"is by {c.publisher!r}, the entitlement by {publisher!r}"),
        (notice.publisher.fingerprint == signer,
         "is signed under another certificate than the entitlement"),
        (c.subscriber == certs.node_uri(subscriber),
         f"is for <{c.subscriber}>, the entitlement for <{certs.node_uri(subscriber)}>"),
        (c.certificate == certificate,
         f"is for certificate {c.certificate[:16]}…, the entitlement for {certificate[:16]}…"),
        (c.version == policy_version,
         f"is of policy v{c.version}, the entitlement of v{policy_version}"),
        (c.gained <= granted,
         f"says {sorted(c.gained - granted)} gained, which the entitlement does not grant"),
        (not c.lost & granted,
         f"says {sorted(c.lost & granted)} lost, which the entitlement grants"),
        (not c.everything or not (granted or frozenset(conditional)),
         "says everything is lost, but the entitlement grants something"),
    )
    for holds, detail in checks:
        if not holds:
            raise PolicyNoticeError(f"the policy-change notice {notice.message.uri} {detail}")
