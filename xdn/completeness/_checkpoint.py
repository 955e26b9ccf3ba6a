"""The publisher's signed checkpoint: the newest sequence number of each of its concepts.

Back pointers in manifests (:mod:`xdn.codec._manifest`) show a subscriber a document withheld
*before* one it received; nothing in a received document can show the *newest* documents were
withheld. The checkpoint does: the publisher's key service signs, with the key that signs its
manifests, a small statement — publisher, time, newest sequence number issued, for every
concept it ever published the newest document holding it, and its policy version — and sends
it with every ``Publish`` and key synchronisation. Sites relay it to every subscriber granted
any of the publisher's concepts (a ``Checkpoint`` delivery). A subscriber granted C that holds
a checkpoint naming document n as C's newest, and never got n, has a gap; one whose newest
checkpoint is older than a stated bound cannot vouch that nothing newer was withheld
(:meth:`Checkpoint.age_ms`).

What it reveals: to every subscriber of the publisher, the names of the concepts the publisher
has published and how recently each occurred — not which documents, nor anything of their
content. A site can withhold or replay checkpoints, never forge or alter one; a replayed old
checkpoint only makes the subscriber's newest checkpoint older.

:meth:`Checkpoint.signed_bytes` is a framed sequence (:mod:`xdn.codec._encoding`) starting with
the label ``xdn/checkpoint/v1``, concepts in name order.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass

from xdn import crypto, statements
from xdn.binary import check_name, check_u64
from xdn.codec._encoding import frame, u64

__all__ = ["Checkpoint", "SignedCheckpoint", "sign_checkpoint"]

_LABEL = b"xdn/checkpoint/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """What a publisher vouches for about its sequence at one time.

    Attributes:
        publisher: the publisher's identifier.
        issued_at_ms: when it was signed, milliseconds since the Unix epoch (passed in).
        sequence: the newest sequence number issued (0: none yet).
        latest: concept → sequence number of the newest document holding it, for every
            concept ever published; each is between 1 and ``sequence``.
        policy_version: the version of the publisher's signed policy in force (0: unknown), so
            that a subscriber holding an entitlement for an older one knows it is stale.
    """

    publisher: str
    issued_at_ms: int
    sequence: int
    latest: Mapping[str, int]
    policy_version: int = 0

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_u64("issued_at_ms", self.issued_at_ms)
        check_u64("sequence", self.sequence)
        check_u64("policy_version", self.policy_version)
        if not isinstance(self.latest, Mapping):
            raise TypeError("latest must be a mapping of concept to sequence number")
        for concept, newest in self.latest.items():
            check_name("concept", concept)
            check_u64("latest", newest)
            if not 1 <= newest <= self.sequence:
                raise ValueError(f"newest document of {concept!r} is outside the sequence")
        ordered = dict(sorted(self.latest.items()))
        object.__setattr__(self, "latest", types.MappingProxyType(ordered))

    def age_ms(self, now_ms: int) -> int:
        """How old the checkpoint is at ``now_ms`` (0 if it claims to come from the future)."""
        return max(0, now_ms - self.issued_at_ms)

    def signed_bytes(self) -> bytes:
        """The unambiguous, domain-separated encoding the publisher signs."""
        table = frame(*(frame(c, u64(n)) for c, n in self.latest.items()))
        return frame(
            _LABEL,
            self.publisher,
            u64(self.issued_at_ms),
            u64(self.sequence),
            table,
            u64(self.policy_version),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedCheckpoint:
    """A checkpoint with the publisher's DER-encoded ECDSA signature (``xdn.crypto.sign``)."""

    checkpoint: Checkpoint
    signature: bytes

    def __post_init__(self) -> None:
        statements.check_signed("checkpoint", self.checkpoint, Checkpoint, self.signature)

    def verify(self, publisher_key: crypto.PublicKey) -> None:
        """Check the signature; raise :class:`~xdn.errors.SignatureError` if it fails."""
        statements.verify(self.checkpoint, self.signature, publisher_key)


def sign_checkpoint(checkpoint: Checkpoint, signer: crypto.PrivateKey) -> SignedCheckpoint:
    """Sign ``checkpoint`` with the publisher's private key."""
    return SignedCheckpoint(
        checkpoint=checkpoint, signature=statements.sign(checkpoint, signer)
    )
