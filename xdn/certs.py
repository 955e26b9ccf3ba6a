"""X.509 credentials: a development CA, issuing certificates, and checking them.

Every party has an ECDSA key on the CA's curve (P-256 unless ``create_ca`` chose P-384) and a
certificate from the network's CA:

* role ``site`` — a disseminator daemon (TLS server and client; ``localhost`` SANs);
* role ``publisher`` — signs manifests and policies, runs the key service;
* role ``subscriber`` — the credential policies match on, and the HPKE key that group keys are
  sealed to;
* role ``auditor`` — reads any message a site serves over HTTPS (:mod:`disseminator.web`)
  and a site's status (``xdn site status``, :mod:`disseminator.admin`);
* role ``admin`` — an operator: reads a site's status and subscribers, nothing else.

The role travels in the subject's ``businessCategory``; the node's linked-data URI
(``https://NAME.xdn.example/``) in a URI SubjectAlternativeName. Policy conditions match on the
subject and issuer fields exposed by :class:`Credential`: every field keeps *all* its values
in certificate order (``OU=Interns, OU=Staff`` is ``{"OU": ("Interns", "Staff")}``), under its
canonical name (:mod:`xdn.names`: ``2.5.4.11`` and ``organizationalUnitName`` are ``OU``).

Revocation. The CA signs CRLs; :func:`read_crl` checks one and returns its facts
(:class:`Crl`: serials, CRL number, thisUpdate, nextUpdate). Whoever keeps a CRL in force
decides with pure functions: :func:`check_crl_succession` refuses a CRL numbered below the one
in force (a rollback to the CA's *previous* CRL would un-revoke certificates), and
:func:`crl_freshness` says whether the CRL in force is fresh, stale (past its nextUpdate: raise
the alarm) or stale beyond a grace period (fail closed for anything new).
"""

from __future__ import annotations

import enum
import functools
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from ipaddress import ip_address
from types import MappingProxyType

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.x509.oid import ExtendedKeyUsageOID

from xdn import crypto, identity, names
from xdn.errors import CertificateError, CrlRollbackError, UsageError

__all__ = [
    "BLOCK_FIELD",
    "CRL_CLOCK_SKEW",
    "ROLES",
    "Attributes",
    "Credential",
    "Crl",
    "CrlFreshness",
    "Fields",
    "check_crl_succession",
    "check_in_force",
    "create_ca",
    "create_crl",
    "credential_from_pem",
    "crl_freshness",
    "curve_of_certificate",
    "describe_fields",
    "issue",
    "load_crl",
    "node_uri",
    "public_key_of",
    "read_crl",
    "verify_certificate",
]

ROLES = frozenset({"site", "publisher", "subscriber", "auditor", "admin"})
BLOCK_FIELD = names.BLOCK_FIELD
_ROLE_FIELD = "businessCategory"

Fields = Mapping[str, tuple[str, ...]]
"""A distinguished name as fields: canonical field name → its values, in certificate order."""


def node_uri(name: str) -> str:
    """The linked-data URI of a party named ``name``."""
    return f"https://{name}.xdn.example/"


def _normalised(fields: Mapping[str, tuple[str, ...]], what: str) -> Fields:
    out: dict[str, tuple[str, ...]] = {}
    for key, values in fields.items():
        if not isinstance(values, tuple) or not all(isinstance(v, str) for v in values):
            raise TypeError(f"{what} field {key!r}: values must be a tuple of strings")
        try:
            name = names.canonical_field(key)
        except ValueError as exc:
            raise ValueError(f"{what}: {exc}") from None
        out[name] = out.get(name, ()) + values
    return MappingProxyType(out)


def _single(fields: Fields, name: str) -> str:
    """The field's value when it has exactly one, else ``""``."""
    values = fields.get(name, ())
    return values[0] if len(set(values)) == 1 else ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Credential:
    """What policies and routing know about a certificate.

    Attributes:
        name: the subject's (first) common name.
        subject: subject name fields: canonical field name → every value, in order.
        issuer: issuer name fields, likewise.
        role: ``site``, ``publisher``, ``subscriber``, ``auditor`` or ``admin`` (from
            ``businessCategory``).
    """

    name: str
    subject: Fields
    issuer: Fields
    role: str
    serial: int
    not_before: datetime
    not_after: datetime
    fingerprint: str
    uri: str = field(default="")

    def __post_init__(self) -> None:
        if self.not_before.tzinfo is None or self.not_after.tzinfo is None:
            raise ValueError("credential validity must be timezone-aware")
        object.__setattr__(self, "subject", _normalised(self.subject, "subject"))
        object.__setattr__(self, "issuer", _normalised(self.issuer, "issuer"))

    @property
    def block(self) -> str:
        """The block a site certificate authorises its holder to serve.

        ``""`` when it names none, or several different ones (which authorises nothing).
        """
        return _single(self.subject, BLOCK_FIELD)

    @property
    def member_id(self) -> str:
        """Who holds this certificate, as queues and groups know it (see :mod:`xdn.identity`)."""
        return identity.member_id(self.name, self.fingerprint)

    def valid_at(self, at: datetime) -> bool:
        """Whether ``at`` lies inside the certificate's validity period."""
        return self.not_before <= at <= self.not_after


def describe_fields(fields: Fields) -> str:
    """``CN=alice, OU=Interns, OU=Staff``: every value of every field, in order."""
    return ", ".join(f"{key}={value}" for key, values in fields.items() for value in values)


Attributes = Mapping[str, str | Sequence[str]]
"""Subject fields to issue: field name (any spelling) → one value or several."""


def _name(fields: Attributes) -> x509.Name:
    attributes = []
    for key, given in fields.items():
        try:
            oid = names.field_oid(key)
        except ValueError:
            raise UsageError(
                f"unknown subject field {key!r}; use a name such as CN, O, OU, title, or a "
                "dotted OID"
            ) from None
        for value in [given] if isinstance(given, str) else given:
            attributes.append(x509.NameAttribute(oid, value))
    return x509.Name(attributes)


def _canonical(key: str) -> str:
    try:
        return names.canonical_field(key)
    except ValueError:
        return key  # reported by _name


def _fields(name: x509.Name) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for attribute in name:
        key = names.field_name(attribute.oid)
        out[key] = (*out.get(key, ()), str(attribute.value))
    return out


# What the x509 binding raises for malformed DER (it parses some fields lazily, when read;
# a name attribute of the wrong string type is a TypeError).
_MALFORMED = (
    ValueError,
    TypeError,
    x509.InvalidVersion,
    x509.DuplicateExtension,
    x509.UnsupportedGeneralNameType,
)


def _load(cert_pem: bytes) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(cert_pem)
    except _MALFORMED as exc:
        raise CertificateError(f"not a PEM X.509 certificate: {exc}") from None


def create_ca(
    name: str, *, now: datetime, days: int = 3650, curve: str = crypto.DEFAULT_CURVE
) -> tuple[bytes, bytes]:
    """Create a self-signed development CA on ``curve``; return ``(cert_pem, key_pem)``.

    Every key the CA issues is on the same curve.
    """
    key = crypto.generate_private_key(curve)
    subject = _name({"CN": name, "O": "xdn development CA"})
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, crypto.certificate_hash(key))
    )
    return cert.public_bytes(crypto.PEM), crypto.private_key_to_pem(key)


def issue(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    *,
    name: str,
    role: str,
    attributes: Attributes | None = None,
    hosts: Sequence[str] = (),
    now: datetime,
    days: int = 365,
) -> tuple[bytes, bytes]:
    """Issue a certificate for ``name`` in ``role``; return ``(cert_pem, key_pem)``.

    Args:
        attributes: extra subject fields (e.g. ``{"OU": "Cred1"}``, or several values:
            ``{"OU": ("Interns", "Staff")}``) that policies match on; a site certificate must
            carry :data:`BLOCK_FIELD`, the block it may serve.
        hosts: DNS names / IP addresses for TLS (sites: ``localhost``, ``127.0.0.1``).
    """
    if role not in ROLES:
        raise UsageError(f"unknown role {role!r}; use one of {sorted(ROLES)}")
    if (role == "site") != bool((attributes or {}).get(BLOCK_FIELD)):
        raise UsageError(
            f"{name}: a site certificate, and only a site certificate, names the block its "
            "holder may serve (xdn certs issue --role site --block CONCEPT)"
        )
    reserved = [k for k in attributes or {} if _canonical(k) in ("CN", _ROLE_FIELD)]
    if reserved:
        raise UsageError(f"{name}: the name and the role are not attributes ({reserved[0]!r})")
    ca_cert = _load(ca_cert_pem)
    ca_key = crypto.load_private_key_pem(ca_key_pem)
    key = crypto.generate_private_key(crypto.curve_of(ca_key))
    subject_fields: dict[str, str | Sequence[str]] = {
        "CN": name,
        _ROLE_FIELD: role,
        **(attributes or {}),
    }
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(node_uri(name))]
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH]
    if role == "site" or hosts:  # naming hosts: it serves TLS there (a site, the console)
        usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(subject_fields))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .sign(ca_key, crypto.certificate_hash(ca_key))
    )
    return cert.public_bytes(crypto.PEM), crypto.private_key_to_pem(key)


@functools.lru_cache(maxsize=65536)
def credential_from_pem(cert_pem: bytes) -> Credential:
    """Read a certificate's fields without checking who issued it.

    Cached by the bytes: the same certificates come with every document (~0.3 ms a read), and
    like :func:`_issuer_refusal` the cache holds a site's whole membership (~2 KB a member).
    """
    cert = _load(cert_pem)
    try:  # the binding parses names and extensions lazily: a malformed one fails when read
        subject, issuer = _fields(cert.subject), _fields(cert.issuer)
        try:
            sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
            uris = sans.get_values_for_type(x509.UniformResourceIdentifier)
        except x509.ExtensionNotFound:
            uris = []
    except _MALFORMED as exc:
        raise CertificateError(f"certificate has a malformed name or extension: {exc}") from None
    return Credential(
        name=subject.get("CN", ("",))[0],
        subject=subject,
        issuer=issuer,
        role=_single(subject, _ROLE_FIELD),
        serial=cert.serial_number,
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        fingerprint=hashlib.sha256(cert.public_bytes(crypto.DER)).hexdigest(),
        uri=uris[0] if uris else "",
    )


@functools.lru_cache(maxsize=65536)
def _issuer_refusal(cert_pem: bytes, ca_pem: bytes) -> str | None:
    """Why the CA did not issue ``cert_pem`` (``None``: it did).

    Depends on the bytes alone, so it is cached: the same certificates come with every
    publication, and each check costs an ECDSA verify (~0.1 ms on P-256, ~1 ms on P-384). The
    cache holds a site's whole membership: a key service checks every member in turn, and an
    LRU cache smaller than the sweep would miss on every one.
    """
    cert, ca = _load(cert_pem), _load(ca_pem)
    try:  # names are parsed lazily: a malformed one fails when compared or written
        who = f"certificate of {cert.subject.rfc4514_string()}"
        if cert.issuer != ca.subject:
            return f"{who} was not issued by the trusted CA"
    except _MALFORMED:
        return "certificate has a malformed subject or issuer name"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, crypto.InvalidSignature):
        return f"{who} has an invalid CA signature"
    return None


def check_in_force(
    credential: Credential, *, at: datetime, revoked: frozenset[int] = frozenset()
) -> None:
    """Check that a certificate the CA issued (checked already) is not revoked and is valid
    at ``at`` — for a caller that keeps the issuer check of a certificate it sees often.

    Raises:
        CertificateError: revoked, or not valid at ``at``.
    """
    if credential.serial in revoked:
        raise CertificateError(f"certificate of {credential.name!r} was revoked")
    if not credential.valid_at(at):
        raise CertificateError(
            f"certificate of {credential.name!r} is not valid at {at.isoformat()} "
            f"(valid {credential.not_before.isoformat()} to {credential.not_after.isoformat()})"
        )


def verify_certificate(
    cert_pem: bytes,
    ca_pem: bytes,
    *,
    at: datetime,
    role: str | None = None,
    revoked: frozenset[int] = frozenset(),
) -> Credential:
    """Check that ``cert_pem`` was issued by the CA, is valid at ``at`` and has ``role``.

    Args:
        revoked: serial numbers the CA has revoked (from :func:`load_crl`).

    Raises:
        CertificateError: naming what is wrong (issuer, signature, revocation, validity, role).
    """
    refusal = _issuer_refusal(cert_pem, ca_pem)
    if refusal is not None:
        raise CertificateError(refusal)
    credential = credential_from_pem(cert_pem)
    check_in_force(credential, at=at, revoked=revoked)
    if role is not None and credential.role != role:
        raise CertificateError(
            f"certificate of {credential.name!r} has role {credential.role!r}, expected {role!r}"
        )
    if credential.role == "site" and not credential.block:
        raise CertificateError(
            f"site certificate of {credential.name!r} names no block it may serve; reissue it "
            "with `xdn certs issue --role site --block CONCEPT`"
        )
    return credential


def create_crl(
    ca_cert_pem: bytes,
    ca_key_pem: bytes,
    revoked: Iterable[tuple[int, datetime]],
    *,
    now: datetime,
    next_update: datetime,
    number: int | None = None,
) -> bytes:
    """Sign a PEM X.509 CRL listing ``revoked`` ``(serial, revocation time)`` pairs.

    Args:
        now: the CRL's ``thisUpdate``.
        next_update: when the CRL goes stale (holders then raise the alarm).
        number: its CRL number; each CRL the CA signs must carry a higher one than the last
            (holders refuse a lower one). Default: ``now`` in seconds since the epoch, which
            increases as long as the CA signs at most one CRL a second with a sane clock.
    """
    if now.tzinfo is None or next_update.tzinfo is None:
        raise UsageError("CRL times must be timezone-aware")
    if next_update <= now:
        raise UsageError("a CRL's next update must come after its issue time")
    number = int(now.timestamp()) if number is None else number
    if isinstance(number, bool) or not isinstance(number, int) or not 0 <= number < 2**159:
        raise UsageError("a CRL number must be a whole number in [0, 2**159)")
    ca_cert = _load(ca_cert_pem)
    ca_key = crypto.load_private_key_pem(ca_key_pem)
    builder = (
        x509.CertificateRevocationListBuilder()
        .issuer_name(ca_cert.subject)
        .last_update(now)
        .next_update(next_update)
        .add_extension(x509.CRLNumber(number), critical=False)
    )
    for serial, when in revoked:
        builder = builder.add_revoked_certificate(
            x509.RevokedCertificateBuilder().serial_number(serial).revocation_date(when).build()
        )
    return builder.sign(ca_key, crypto.certificate_hash(ca_key)).public_bytes(crypto.PEM)


CRL_CLOCK_SKEW = timedelta(minutes=5)
"""How far a CRL's ``thisUpdate`` may lie in the future (clocks disagree a little)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Crl:
    """The facts of a CRL the CA signed (see :func:`read_crl`).

    Attributes:
        serials: the revoked certificate serial numbers.
        number: the CRL number (CRLNumber extension): higher is newer.
        this_update: when the CA issued it.
        next_update: when it goes stale (the CA promised a newer one by then).
        pem: the CRL itself, to store or pass on.
    """

    serials: frozenset[int]
    number: int
    this_update: datetime
    next_update: datetime
    pem: bytes = field(default=b"", repr=False)

    def __post_init__(self) -> None:
        if self.this_update.tzinfo is None or self.next_update.tzinfo is None:
            raise ValueError("CRL times must be timezone-aware")
        if isinstance(self.number, bool) or not isinstance(self.number, int) or self.number < 0:
            raise ValueError("a CRL number must be a non-negative int")

    def describe(self) -> str:
        """``CRL number 7 (issued …, next update due …)``."""
        return (
            f"CRL number {self.number} (issued {self.this_update.isoformat()}, next update due "
            f"{self.next_update.isoformat()})"
        )


class CrlFreshness(enum.Enum):
    """Where a CRL in force stands at some instant (:func:`crl_freshness`)."""

    FRESH = "fresh"  # before its nextUpdate
    STALE = "stale"  # past its nextUpdate, within the grace: raise the alarm
    EXPIRED = "expired"  # past its nextUpdate by more than the grace: fail closed for new work


def crl_freshness(crl: Crl, *, at: datetime, grace: timedelta) -> CrlFreshness:
    """Whether ``crl`` is fresh at ``at``, stale, or stale for longer than ``grace``."""
    if at <= crl.next_update:
        return CrlFreshness.FRESH
    return CrlFreshness.STALE if at <= crl.next_update + grace else CrlFreshness.EXPIRED


def check_crl_succession(new: Crl, current: Crl | None, *, at: datetime) -> None:
    """Decide whether ``new`` may replace the CRL in force (``None``: there is none).

    A CRL numbered lower than the one in force is refused: the CA's previous CRL would
    un-revoke what the newer one revoked. An equal or higher number is accepted, also when
    ``new`` is already stale (it is still the newest the holder knows; :func:`crl_freshness`
    raises the alarm).

    Raises:
        CrlRollbackError: ``new`` is older than the CRL in force (naming both numbers).
        CertificateError: ``new`` was issued in the future.
    """
    if at < new.this_update - CRL_CLOCK_SKEW:
        raise CertificateError(
            f"CRL number {new.number} is not valid yet at {at.isoformat()} "
            f"(issued {new.this_update.isoformat()})"
        )
    if current is not None and new.number < current.number:
        raise CrlRollbackError(
            f"CRL number {new.number} is older than CRL number {current.number}, which is in "
            "force: refusing to roll revocation back; install a CRL numbered "
            f"{current.number} or higher"
        )


def read_crl(crl_pem: bytes, ca_pem: bytes) -> Crl:
    """Check that the CA signed ``crl_pem`` and return its facts (no time checks).

    Raises:
        CertificateError: the CRL is malformed, not signed by the CA, or lacks a CRL number
            or a next update.
    """
    ca = _load(ca_pem)
    try:  # the binding parses lazily: read every field we use inside the try
        crl = x509.load_pem_x509_crl(crl_pem)
        issuer, issued, stale = crl.issuer, crl.last_update_utc, crl.next_update_utc
        serials = frozenset(entry.serial_number for entry in crl)
        try:
            number: int | None = crl.extensions.get_extension_for_class(
                x509.CRLNumber
            ).value.crl_number
        except x509.ExtensionNotFound:
            number = None
    except _MALFORMED as exc:
        raise CertificateError(f"not a PEM X.509 CRL: {exc}") from None
    if issuer != ca.subject:
        raise CertificateError("CRL was not issued by the trusted CA")
    try:
        valid = crl.is_signature_valid(public_key_of(ca_pem))
    except (UsageError, ValueError, TypeError):
        valid = False
    if not valid:
        raise CertificateError("CRL has an invalid CA signature")
    if number is None:
        raise CertificateError("CRL carries no CRL number, so it cannot be ordered")
    if stale is None:
        raise CertificateError("CRL names no next update, so it never goes stale")
    return Crl(
        serials=serials, number=number, this_update=issued, next_update=stale, pem=crl_pem
    )


def load_crl(crl_pem: bytes, ca_pem: bytes, *, at: datetime) -> frozenset[int]:
    """The serial numbers a CRL revokes, once it is shown to be the CA's and current at ``at``.

    For a one-off check; a long-running holder keeps the :class:`Crl` of :func:`read_crl` and
    decides with :func:`check_crl_succession` and :func:`crl_freshness`.

    Raises:
        CertificateError: the CRL is malformed, not signed by the CA, or outside its validity
            window (not yet issued, or stale after its next update).
    """
    crl = read_crl(crl_pem, ca_pem)
    if at < crl.this_update - CRL_CLOCK_SKEW:
        raise CertificateError(
            f"CRL is not valid yet at {at.isoformat()} (issued {crl.this_update})"
        )
    if at > crl.next_update:
        raise CertificateError(
            f"CRL is stale at {at.isoformat()} (next update was due {crl.next_update})"
        )
    return crl.serials


def curve_of_certificate(cert_pem: bytes) -> str:
    """The curve of a certificate's key (``P-256`` or ``P-384``)."""
    return crypto.curve_of(public_key_of(cert_pem))


def public_key_of(cert_pem: bytes) -> crypto.PublicKey:
    """The ECDSA public key (P-256 or P-384) of a certificate.

    Raises:
        CertificateError: the certificate or its key cannot be read.
    """
    try:  # the binding reads the key lazily: a malformed one fails here, not at load
        key = _load(cert_pem).public_key()
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise CertificateError(f"certificate holds an unreadable public key: {exc}") from None
    return crypto.load_public_key_pem(
        key.public_bytes(crypto.PEM, crypto.SPKI)
    )
