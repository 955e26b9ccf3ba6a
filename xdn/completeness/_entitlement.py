"""A subscriber's entitlement, signed by the publisher: what its policy grants whatever sites see.

A site tells a subscriber its grants (``Subscribed``, ``GrantsChanged``) and routes by them; a
dishonest site that drops a concept *and* leaves it out of the grants it reports went unnoticed.
So the publisher's key service — which already evaluates its own signed policy for every member
its site lists before sealing keys — signs, for each member, an :class:`Entitlement`:

* ``concepts``: what the policy grants the member's certificate *whatever the sites observe*:
  every concept granted with nothing disseminated and nothing received, minus the concepts any
  stateful rule governs (:func:`stateful_concepts`);
* ``conditional``: what it may grant besides, depending on state only the sites see (``after``
  rules: what was disseminated; ``max_instances``: what the member received). The upper bound
  is computed as the key service computes who holds a group key.

Evaluating the policy at the subscriber would need the ontology and the policy engine there; the
statement is smaller, and it is the publisher's own evaluation, the one that decides who holds
keys. It is bound to the member's certificate (its fingerprint) and to the policy version, valid
until the certificate (or the policy) expires, and routed to its member like an enrolment. A
subscriber flags a site that reports fewer grants than its entitlement's ``concepts``, and a
document whose range table holds an entitled concept that did not arrive. A site that withholds
the entitlement itself leaves the subscriber unable to vouch, which it says; the publisher's
checkpoint names the current policy version, so a stale entitlement shows too.

:meth:`Entitlement.signed_bytes` is framed (:mod:`xdn.codec._encoding`) under the label
``xdn/entitlement/v1``, concept lists in name order.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from xdn import crypto, statements
from xdn.binary import check_name, check_u64
from xdn.certs import Credential
from xdn.codec._encoding import frame, u64
from xdn.ontology import Ontology
from xdn.policy import Policy, auth_list

__all__ = [
    "Entitlement",
    "SignedEntitlement",
    "entitlement_of",
    "sign_entitlement",
    "stateful_concepts",
]

_LABEL = b"xdn/entitlement/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Entitlement:
    """What a publisher's policy grants one subscriber certificate.

    Attributes:
        publisher: the publisher's identifier.
        subscriber: the member's id (its certificate: see :mod:`xdn.identity`).
        certificate: the fingerprint of the member's certificate it was evaluated for.
        policy_version: the version of the publisher's signed policy evaluated.
        issued_at_ms: evaluation time, milliseconds since the Unix epoch (passed in).
        valid_until_ms: when the evaluation stops holding (certificate or policy expiry).
        concepts: granted whatever the sites observe.
        conditional: may be granted besides, depending on what only sites observe.
    """

    publisher: str
    subscriber: str
    certificate: str
    policy_version: int
    issued_at_ms: int
    valid_until_ms: int
    concepts: frozenset[str]
    conditional: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("subscriber", self.subscriber)
        check_name("certificate", self.certificate)
        for name in ("policy_version", "issued_at_ms", "valid_until_ms"):
            check_u64(name, getattr(self, name))
        for name in ("concepts", "conditional"):
            value = frozenset(getattr(self, name))
            for concept in value:
                check_name("concept", concept)
            object.__setattr__(self, name, value)
        if self.concepts & self.conditional:
            raise ValueError("a concept cannot be both granted and conditional")

    def valid_at(self, now_ms: int) -> bool:
        """Whether the evaluation still holds at ``now_ms``."""
        return self.issued_at_ms <= now_ms + 60_000 and now_ms <= self.valid_until_ms

    def signed_bytes(self) -> bytes:
        """The unambiguous, domain-separated encoding the publisher signs."""
        return frame(
            _LABEL,
            self.publisher,
            self.subscriber,
            self.certificate,
            u64(self.policy_version),
            u64(self.issued_at_ms),
            u64(self.valid_until_ms),
            frame(*sorted(self.concepts)),
            frame(*sorted(self.conditional)),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedEntitlement:
    """An entitlement with the publisher's DER-encoded ECDSA signature (``xdn.crypto.sign``)."""

    entitlement: Entitlement
    signature: bytes

    def __post_init__(self) -> None:
        statements.check_signed("entitlement", self.entitlement, Entitlement, self.signature)

    def verify(self, publisher_key: crypto.PublicKey) -> None:
        """Check the signature; raise :class:`~xdn.errors.SignatureError` if it fails."""
        statements.verify(self.entitlement, self.signature, publisher_key)


def sign_entitlement(entitlement: Entitlement, signer: crypto.PrivateKey) -> SignedEntitlement:
    """Sign ``entitlement`` with the publisher's private key."""
    return SignedEntitlement(
        entitlement=entitlement, signature=statements.sign(entitlement, signer)
    )


def stateful_concepts(policy: Policy, ontology: Ontology) -> frozenset[str]:
    """The concepts whose grant may depend on what only sites observe.

    Those a rule with ``after`` or ``max_instances`` covers (its block when it inherits), and,
    to a fixpoint, those of any rule whose ``requires`` names one of them.
    """

    def covered(concept: str, inherit: bool) -> Iterable[str]:
        return ontology.block(concept) if inherit else (concept,)

    governed = {
        c
        for rule in policy.rules
        if rule.after or rule.max_instances
        for c in covered(rule.concept, rule.inherit)
    }
    changed = True
    while changed:
        changed = False
        for rule in policy.rules:
            if set(rule.requires) & governed:
                more = set(covered(rule.concept, rule.inherit)) - governed
                if more:
                    governed |= more
                    changed = True
    return frozenset(governed)


def entitlement_of(
    credential: Credential,
    policy: Policy,
    ontology: Ontology,
    *,
    at: datetime,
    stateful: frozenset[str] | None = None,
) -> Entitlement:
    """The publisher's evaluation of its ``policy`` for ``credential`` at ``at`` (unsigned).

    ``stateful``: :func:`stateful_concepts` of the policy, when the caller keeps it.
    """
    governed = stateful_concepts(policy, ontology) if stateful is None else stateful
    preconditions = {(a.publisher, a.concept) for rule in policy.rules for a in rule.after}
    most = auth_list(
        credential, policy, ontology, at=at, disseminated=preconditions, explain=False
    ).concepts
    least = auth_list(credential, policy, ontology, at=at, explain=False).concepts
    certain = frozenset(least) - governed
    until = credential.not_after
    if policy.valid_until is not None:
        until = min(until, policy.valid_until)
    return Entitlement(
        publisher=policy.publisher,
        subscriber=credential.member_id,
        certificate=credential.fingerprint,
        policy_version=policy.version,
        issued_at_ms=int(at.timestamp() * 1000),
        valid_until_ms=max(0, int(until.timestamp() * 1000)),
        concepts=certain,
        conditional=(frozenset(most) | frozenset(least)) - certain,
    )
