"""Authenticated key messages: the publisher's key service signs every one, members verify.

Theory of operation. Rekeys are broadcast and enrolments and document-key grants are sealed to
one member, but all of them pass through disseminators that may be dishonest. AES key wrap and
HPKE base mode authenticate nothing about the *sender*: anyone may seal a path to a member's
public key, and a flipped byte in a rekey is indistinguishable from "you were removed". So the
key service signs each message with the publisher's certificate key (ECDSA,
the key that signs the publisher's manifests), and a member checks, before it touches any
state, that

1. the certificate carried with the message was issued by the CA, is valid now, has the role
   ``publisher`` and names the publisher the message names (:func:`xdn.certs.verify_certificate`);
2. the signature verifies over :func:`signed_bytes`: the label ``xdn/lkh/key-message/v1``, the
   kind (``rekey``, ``enrolment`` — joins and path refreshes alike — or ``document-keys``),
   publisher, concept, epoch (0 for a grant, which has none), member (empty for a broadcast)
   and the message's whole canonical encoding, each length-prefixed.

A signature therefore cannot be moved to another kind, group, epoch or member, and a message
signed by one publisher cannot pass as another's. Replays of a genuine message are not stopped
here: they are ordinary repeats, and :class:`~xdn.lkh.MemberKeys` ignores epochs it already has.

:class:`Signed` is a message with its signature and certificate (PEM); ``to_bytes`` is the form
the key service's outbox keeps, so that what it resends after a restart is still signed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Generic, TypeVar

from xdn import certs, crypto, statements
from xdn.errors import CertificateError, ProtocolError, SignatureError, UsageError
from xdn.lkh._bytes import Reader, Writer
from xdn.lkh._grants import DocumentKeyGrant
from xdn.lkh._messages import Enrolment, RekeyMessage

__all__ = ["KeySigner", "Signed", "signed_bytes", "verify_key_message"]

M = TypeVar("M", RekeyMessage, Enrolment, DocumentKeyGrant)

_LABEL = b"xdn/lkh/key-message/v1"
_SIGNED_MAGIC = b"XLS1"
_KINDS: dict[type, str] = {
    RekeyMessage: "rekey",
    Enrolment: "enrolment",
    DocumentKeyGrant: "document-keys",
}


def _kind(message: object) -> str:
    kind = _KINDS.get(type(message))
    if kind is None:
        raise TypeError(f"not a key message: {type(message).__name__}")
    return kind


def _epoch_and_member(message: RekeyMessage | Enrolment | DocumentKeyGrant) -> tuple[int, str]:
    if isinstance(message, RekeyMessage):
        return message.epoch, ""
    if isinstance(message, Enrolment):
        return message.epoch, message.member
    return 0, message.member


def signed_bytes(message: RekeyMessage | Enrolment | DocumentKeyGrant) -> bytes:
    """The exact, domain-separated byte string the key service signs for ``message``."""
    kind = _kind(message)
    epoch, member = _epoch_and_member(message)
    out = Writer(_LABEL).text(kind).text(message.publisher).text(message.concept).u64(epoch)
    return out.text(member).blob(message.to_bytes()).getvalue()


def describe(message: RekeyMessage | Enrolment | DocumentKeyGrant) -> str:
    """A short name for a key message in errors and logs (never any key material)."""
    epoch, member = _epoch_and_member(message)
    where = f"{_kind(message)} of {message.publisher}/{message.concept}"
    return where + (f" epoch {epoch}" if epoch else "") + (f" for {member}" if member else "")


@dataclass(frozen=True, slots=True, kw_only=True)
class Signed(Generic[M]):
    """A key message with the publisher's signature and certificate (PEM). Not yet verified."""

    message: M
    signature: bytes = field(repr=False)
    certificate: bytes = field(repr=False)

    def __post_init__(self) -> None:
        _kind(self.message)
        for name in ("signature", "certificate"):
            value = getattr(self, name)
            if not isinstance(value, bytes):
                raise TypeError(f"{name} must be bytes")
            if not value:
                raise ValueError(f"{name} must not be empty")

    @property
    def publisher(self) -> str:
        return self.message.publisher

    @property
    def concept(self) -> str:
        return self.message.concept

    def describe(self) -> str:
        """A short name for the message (kind, group, epoch, member)."""
        return describe(self.message)

    def to_bytes(self) -> bytes:
        """Encoding for the key service's outbox: kind, signature, certificate, message."""
        out = Writer(_SIGNED_MAGIC).text(_kind(self.message)).blob(self.signature)
        return out.blob(self.certificate).blob(self.message.to_bytes()).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, kind: type[M]) -> Signed[M]:
        """Decode :meth:`to_bytes` of a message of type ``kind``.

        Raises:
            ProtocolError: malformed, or a message of another kind.
        """
        inp = Reader(data, _SIGNED_MAGIC)
        name, signature, certificate, inner = inp.text(), inp.blob(), inp.blob(), inp.blob()
        inp.done()
        if name != _KINDS.get(kind):
            raise ProtocolError(f"signed {name!r} where a {_KINDS.get(kind)!r} was expected")
        try:
            return cls(
                message=kind.from_bytes(inner), signature=signature, certificate=certificate
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed signed key message: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeySigner:
    """The key service's signing credential: the publisher's certificate and private key.

    Raises:
        UsageError: the certificate is unreadable, not a publisher's, names another publisher,
            or does not hold the private key's public key.
    """

    publisher: str
    private_key: crypto.PrivateKey = field(repr=False)
    certificate: bytes = field(repr=False)

    def __post_init__(self) -> None:
        try:
            credential = certs.credential_from_pem(self.certificate)
            public = certs.public_key_of(self.certificate)
        except (CertificateError, UsageError) as exc:
            raise UsageError(f"key service certificate: {exc}") from None
        if credential.role != "publisher" or credential.name != self.publisher:
            raise UsageError(
                f"key service of {self.publisher!r} needs its publisher certificate, not the "
                f"{credential.role!r} certificate of {credential.name!r}"
            )
        if crypto.public_key_to_pem(public) != crypto.public_key_to_pem(
            self.private_key.public_key()
        ):
            raise UsageError("the key service's private key does not match its certificate")

    def sign(self, message: M) -> Signed[M]:
        """Sign one of this publisher's key messages.

        Raises:
            UsageError: the message names another publisher.
        """
        if message.publisher != self.publisher:
            raise UsageError(f"{describe(message)} is not {self.publisher!r}'s to sign")
        signature = statements.sign(signed_bytes(message), self.private_key)
        return Signed(message=message, signature=signature, certificate=self.certificate)


def verify_key_message(signed: Signed[M], *, ca_pem: bytes, at: datetime) -> M:
    """Return the message if its publisher signed it; check nothing else.

    Args:
        signed: the message as it arrived.
        ca_pem: the CA every party trusts.
        at: the time the certificate must be valid at.

    Raises:
        CertificateError: the certificate is not a valid publisher certificate of the CA.
        SignatureError: it names another publisher than the message, or the signature does not
            verify over this message.
    """
    what = signed.describe()
    credential = certs.verify_certificate(signed.certificate, ca_pem, at=at, role="publisher")
    if credential.name != signed.publisher:
        raise SignatureError(f"{what} is signed by {credential.name!r}, not by its publisher")
    try:
        statements.verify_by_certificate(
            signed_bytes(signed.message), signed.signature, signed.certificate
        )
    except SignatureError:
        raise SignatureError(f"{what}: the publisher's signature does not verify") from None
    return signed.message
