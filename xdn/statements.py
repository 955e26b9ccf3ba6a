"""Signed statements: one way to sign a labelled statement and to check its signature.

Theory of operation. Parties vouch for small statements: the publisher for its manifests,
checkpoints, entitlements and key messages, a subscriber for its membership lease. Each
statement type owns its deterministic encoding, its *signed bytes*, which starts with a domain
label naming the type and version (:mod:`xdn.binary`, :func:`xdn.codec._encoding.frame`), so a
signature over one kind of statement never passes for another. This module is the one place
those bytes are signed and checked: ECDSA (hash by curve) through :mod:`xdn.crypto`, DER
signatures, every failure a :class:`~xdn.errors.SignatureError` without detail.

A statement is anything with a ``signed_bytes()`` method (:class:`Statement`), or the signed
bytes themselves when the encoding is a function rather than a method. Who must have signed
(which certificate, of which CA, for which name) is the caller's policy and stays with it.
"""

from __future__ import annotations

from typing import Protocol

from xdn import certs, crypto
from xdn.errors import SignatureError, UsageError

__all__ = ["Signable", "Statement", "check_signed", "sign", "verify", "verify_by_certificate"]


class Statement(Protocol):
    """A value with a deterministic, domain-separated encoding to sign."""

    def signed_bytes(self) -> bytes:
        """The exact bytes a signature covers."""
        ...


Signable = Statement | bytes
"""A statement, or the bytes it signs."""


def _data(statement: Signable) -> bytes:
    return statement if isinstance(statement, bytes) else statement.signed_bytes()


def sign(statement: Signable, key: crypto.PrivateKey) -> bytes:
    """The DER-encoded ECDSA signature of ``statement`` by ``key``."""
    return crypto.sign(key, _data(statement))


def verify(statement: Signable, signature: bytes, key: crypto.PublicKey) -> None:
    """Check that ``key`` signed ``statement``.

    Raises:
        SignatureError: it did not (or ``signature`` is malformed).
    """
    crypto.verify(key, signature, _data(statement))


def verify_by_certificate(statement: Signable, signature: bytes, certificate_pem: bytes) -> None:
    """Check that the key of ``certificate_pem`` signed ``statement``.

    The certificate itself is not checked here: the caller verifies it first
    (:func:`xdn.certs.verify_certificate`) and decides whose it must be.

    Raises:
        SignatureError: the signature does not verify, or the certificate holds no usable key.
    """
    try:
        key = certs.public_key_of(certificate_pem)
    except UsageError:
        raise SignatureError("signature does not verify") from None
    verify(statement, signature, key)


def check_signed(
    name: str, statement: object, kind: type, signature: object, *, most: int | None = None
) -> None:
    """Constructor checks of a signed statement: ``statement`` is a ``kind``, the signature
    non-empty bytes (of at most ``most`` bytes, if given).

    Raises:
        TypeError: ``statement`` is not a ``kind``.
        ValueError: the signature is not bytes, is empty or too long.
    """
    if not isinstance(statement, kind):
        article = "an" if kind.__name__[:1].upper() in "AEIOU" else "a"
        raise TypeError(f"{name} must be {article} {kind.__name__}")
    if (
        not isinstance(signature, bytes)
        or not signature
        or (most is not None and len(signature) > most)
    ):
        limit = "" if most is None else f" of at most {most}"
        raise ValueError(f"signature must be non-empty bytes{limit} (a DER ECDSA signature)")
