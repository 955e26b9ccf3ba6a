"""Site records: who serves which block, where, until when — signed by the site itself.

A :class:`SiteRecord` says "site S, reachable at ADDRESS (its HTTPS linked-data endpoint at
WEB, if it serves one), serves the maximum conceptual block of concept BLOCK from ISSUED until
EXPIRES". The site signs it with its own key (ECDSA,
hash by curve) and ships its certificate along, so any node storing or returning the record can
check it without trusting whoever handed it over:

1. the certificate was issued by the network CA, is valid now, is not revoked (the CRL the
   site holds in force), and has role ``site``;
2. the certificate's CN is the record's ``site``, and the block it authorises (set by the CA,
   :data:`xdn.certs.BLOCK_FIELD`) is the record's ``block``;
3. the signature verifies under the certificate's key over :func:`record_payload`.

A malicious node can therefore hide records but cannot forge or alter one, and a site cannot
announce a block the CA did not authorise it to serve. A record whose
``expires_at_ms`` equals its ``issued_at_ms`` is a *withdrawal* (tombstone): the site's polite
"I am leaving", which replaces its earlier record wherever it is stored.

The signed payload is a domain tag followed by length-prefixed fields (docs/dht.md), so no
two different records share a payload. A record without WEB is signed as before WEB existed
(tag ``v1``), so records of sites that predate it still verify; one with WEB under tag ``v2``,
WEB last.

The same checks serve whoever else must trust a record it did not fetch from the DHT itself:
a command-line client that asks *any* site's endpoint for another site's record
(``GET /nodes/NAME``, :meth:`SiteRecord.to_json` / :meth:`SiteRecord.from_json`) verifies it
with :class:`CaRecordVerifier` and the CA alone.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

from disseminator.dht._errors import (
    DhtUsageError,
    InvalidRecordError,
    RecordAuthenticationError,
)
from disseminator.dht._ids import NodeId, check_address, node_id_of_certificate
from xdn import certs, crypto
from xdn.errors import CertificateError, SignatureError, UsageError

__all__ = [
    "MAX_CERTIFICATE_BYTES",
    "MAX_TTL_MS",
    "CaRecordVerifier",
    "RecordVerifier",
    "SiteCredentials",
    "SiteRecord",
    "encode_fields",
    "ms_to_datetime",
    "nothing_revoked",
    "record_payload",
    "sign_site_record",
]

MAX_TTL_MS = 24 * 3600 * 1000
MAX_CERTIFICATE_BYTES = 8192
MAX_SIGNATURE_BYTES = 256
MAX_NAME_CHARS = 256
CLOCK_SKEW_MS = 60_000
_RECORD_TAG = b"xdn-dht-site-record/v1\n"
_RECORD_TAG_WEB = b"xdn-dht-site-record/v2\n"
_JSON_FIELDS = ("site", "address", "web", "block", "issued_at_ms", "expires_at_ms",
                "certificate_pem", "signature")


def nothing_revoked() -> frozenset[int]:
    """The revoked serials of a node that holds no CRL: none."""
    return frozenset()


def ms_to_datetime(ms: int) -> datetime:
    """Unix milliseconds → aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def encode_fields(tag: bytes, *fields: bytes | str | int) -> bytes:
    """Unambiguous encoding: ``tag`` then each field length-prefixed (ints as 8 bytes)."""
    out = bytearray(tag)
    for value in fields:
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if isinstance(raw, int):
            raw = struct.pack(">Q", raw)
        out += struct.pack(">I", len(raw)) + raw
    return bytes(out)


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if not value or len(value) > MAX_NAME_CHARS or not value.isprintable():
        raise ValueError(f"{what} must be 1..{MAX_NAME_CHARS} printable characters")


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteRecord:
    """A site's signed announcement that it serves the block of ``block`` at ``address``."""

    site: str
    address: str
    block: str
    issued_at_ms: int
    expires_at_ms: int
    certificate_pem: bytes = field(repr=False)
    signature: bytes = field(repr=False)
    web: str = ""  # host:port of the site's HTTPS endpoint ("": it serves none)

    def __post_init__(self) -> None:
        _check_name(self.site, "site")
        _check_name(self.block, "block")
        check_address(self.address)
        if self.web:
            check_address(self.web)
        elif not isinstance(self.web, str):
            raise TypeError(f"web must be a str, got {type(self.web).__name__}")
        for name in ("issued_at_ms", "expires_at_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**63:
                raise ValueError(f"{name} must be a non-negative int")
        if self.expires_at_ms < self.issued_at_ms:
            raise ValueError("a record cannot expire before it was issued")
        if self.expires_at_ms - self.issued_at_ms > MAX_TTL_MS:
            raise ValueError(f"a record may live at most {MAX_TTL_MS // 3_600_000} h")
        if not isinstance(self.certificate_pem, bytes) or not isinstance(self.signature, bytes):
            raise TypeError("certificate_pem and signature must be bytes")
        if not 0 < len(self.certificate_pem) <= MAX_CERTIFICATE_BYTES:
            raise ValueError(f"certificate must be 1..{MAX_CERTIFICATE_BYTES} bytes")
        if not 0 < len(self.signature) <= MAX_SIGNATURE_BYTES:
            raise ValueError(f"signature must be 1..{MAX_SIGNATURE_BYTES} bytes")

    @property
    def withdrawn(self) -> bool:
        """Whether this is a withdrawal (the site left)."""
        return self.expires_at_ms == self.issued_at_ms

    def live_at(self, now_ms: int) -> bool:
        """Whether the record announces a site at ``now_ms`` (a withdrawal never does)."""
        if self.withdrawn:
            return False
        return self.issued_at_ms - CLOCK_SKEW_MS <= now_ms < self.expires_at_ms

    def payload(self) -> bytes:
        """The bytes the site signed for this record."""
        return record_payload(
            site=self.site, address=self.address, block=self.block,
            issued_at_ms=self.issued_at_ms, expires_at_ms=self.expires_at_ms, web=self.web,
        )

    def to_json(self) -> dict[str, str | int]:
        """The record as a JSON object (what ``GET /nodes/NAME`` answers): every field, the
        certificate as its PEM text, the signature in base64."""
        return {
            "site": self.site, "address": self.address, "web": self.web, "block": self.block,
            "issued_at_ms": self.issued_at_ms, "expires_at_ms": self.expires_at_ms,
            "certificate_pem": self.certificate_pem.decode("ascii"),
            "signature": base64.b64encode(self.signature).decode("ascii"),
        }

    @classmethod
    def from_json(cls, data: object) -> SiteRecord:
        """Read :meth:`to_json`'s object back (not verified: see :class:`CaRecordVerifier`).

        Raises:
            InvalidRecordError: not such an object, or a field is missing or malformed.
        """
        if not isinstance(data, dict) or set(data) != set(_JSON_FIELDS):
            raise InvalidRecordError(
                f"a site record is a JSON object with exactly the fields {list(_JSON_FIELDS)}"
            )
        try:
            return cls(
                site=data["site"], address=data["address"], web=data["web"],
                block=data["block"], issued_at_ms=data["issued_at_ms"],
                expires_at_ms=data["expires_at_ms"],
                certificate_pem=str(data["certificate_pem"]).encode("ascii"),
                signature=base64.b64decode(str(data["signature"]), validate=True),
            )
        except (TypeError, ValueError, UnicodeEncodeError) as exc:  # binascii.Error too
            raise InvalidRecordError(f"malformed site record: {exc}") from None


def record_payload(
    *, site: str, address: str, block: str, issued_at_ms: int, expires_at_ms: int, web: str = ""
) -> bytes:
    """The bytes a site signs for a record (``v1`` without ``web``, as before it existed)."""
    if not web:
        return encode_fields(_RECORD_TAG, site, address, block, issued_at_ms, expires_at_ms)
    return encode_fields(_RECORD_TAG_WEB, site, address, block, issued_at_ms, expires_at_ms, web)


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteCredentials:
    """A site's certificate and private key: what it signs records and ping proofs with."""

    certificate_pem: bytes = field(repr=False)
    private_key: crypto.PrivateKey = field(repr=False)
    name: str = field(init=False)
    node_id: NodeId = field(init=False)

    def __post_init__(self) -> None:
        credential = certs.credential_from_pem(self.certificate_pem)
        ours = crypto.public_key_to_pem(self.private_key.public_key())
        if ours != crypto.public_key_to_pem(certs.public_key_of(self.certificate_pem)):
            raise DhtUsageError(
                f"the private key does not match the certificate of {credential.name!r}"
            )
        object.__setattr__(self, "name", credential.name)
        object.__setattr__(self, "node_id", node_id_of_certificate(self.certificate_pem))

    @classmethod
    def from_pem(cls, cert_pem: bytes, key_pem: bytes) -> SiteCredentials:
        """Load from PEM bytes (e.g. :class:`xdn.grpc_tls.TlsFiles` ``cert_pem``/``key_pem``)."""
        return cls(certificate_pem=cert_pem, private_key=crypto.load_private_key_pem(key_pem))

    def sign(self, payload: bytes) -> bytes:
        """ECDSA (SHA-256 on P-256, SHA-384 on P-384) signature of ``payload``."""
        return crypto.sign(self.private_key, payload)


def sign_site_record(
    credentials: SiteCredentials, *, address: str, block: str, issued_at_ms: int, ttl_ms: int,
    web: str = "",
) -> SiteRecord:
    """Make and sign a record (``ttl_ms == 0``: a withdrawal; ``web``: the HTTPS endpoint)."""
    expires = issued_at_ms + ttl_ms
    payload = record_payload(
        site=credentials.name,
        address=address,
        block=block,
        issued_at_ms=issued_at_ms,
        expires_at_ms=expires,
        web=web,
    )
    return SiteRecord(
        site=credentials.name,
        address=address,
        block=block,
        issued_at_ms=issued_at_ms,
        expires_at_ms=expires,
        certificate_pem=credentials.certificate_pem,
        signature=credentials.sign(payload),
        web=web,
    )


class RecordVerifier(Protocol):
    """Checks that a record was made by the site it names and is current."""

    def verify(self, record: SiteRecord, *, now_ms: int, allow_withdrawal: bool = False) -> None:
        """Raise :class:`InvalidRecordError` / :class:`RecordAuthenticationError` if bad."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CaRecordVerifier:
    """Verifies records against the network CA (the production :class:`RecordVerifier`).

    ``revoked`` returns the serials revoked by the CRL in force now (asked at every check).
    """

    ca_pem: bytes = field(repr=False)
    revoked: Callable[[], frozenset[int]] = field(default=nothing_revoked, repr=False)

    def verify(self, record: SiteRecord, *, now_ms: int, allow_withdrawal: bool = False) -> None:
        """Check freshness, then certificate, name and signature (see the module docstring).

        Raises:
            InvalidRecordError: expired, issued in the future, or a withdrawal where a live
                record is required.
            RecordAuthenticationError: the certificate, its CN or the signature is wrong.
        """
        if record.issued_at_ms > now_ms + CLOCK_SKEW_MS:
            raise InvalidRecordError(f"record of site {record.site!r} is issued in the future")
        if record.withdrawn:
            if not allow_withdrawal:
                raise InvalidRecordError(f"record of site {record.site!r} is a withdrawal")
            if now_ms - record.issued_at_ms > MAX_TTL_MS:
                raise InvalidRecordError(f"withdrawal of site {record.site!r} is too old")
        elif record.expires_at_ms <= now_ms:
            raise InvalidRecordError(f"record of site {record.site!r} has expired")
        try:
            credential = certs.verify_certificate(
                record.certificate_pem, self.ca_pem, at=ms_to_datetime(now_ms), role="site",
                revoked=self.revoked(),
            )
        except CertificateError as exc:
            raise RecordAuthenticationError(f"record of site {record.site!r}: {exc}") from None
        if credential.name != record.site:
            raise RecordAuthenticationError(
                f"record names site {record.site!r} but carries the certificate of "
                f"{credential.name!r}"
            )
        try:
            crypto.verify(
                certs.public_key_of(record.certificate_pem), record.signature, record.payload()
            )
        except (SignatureError, UsageError):
            raise RecordAuthenticationError(
                f"record of site {record.site!r} has a signature that does not verify"
            ) from None
        if credential.block != record.block:
            raise RecordAuthenticationError(
                f"record of site {record.site!r} announces block {record.block!r}, but its "
                f"certificate authorises only {credential.block!r}"
            )
