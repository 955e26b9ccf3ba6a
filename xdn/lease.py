"""Membership leases: a subscriber's own signed word that it is (still) a member, and where.

Theory of operation. The publisher's key service decides who receives group keys, but it learns
membership from its root site, and a site's word is not enough: a dishonest site could keep a
departed or revoked subscriber in every group, or claim another site's subscriber. So each
subscriber signs a short statement with its certificate key, a :class:`Lease`:

* who: its member id (:mod:`xdn.identity`, the certificate, not a name);
* where: the site it is registered at and that site's block concept, so an uplink can check
  that the downlink reporting it is that site or one below it;
* what: the concepts it asked for (empty: everything its grants allow);
* until when: issued-at and expires-at, milliseconds since the epoch; the subscriber renews it
  before it expires (at a third of its period) while it stays subscribed;
* and a ``leave`` flag: a signed leave is a lease that has expired at once.

Every party checks a lease itself (:func:`verify`): the certificate is the CA's, a subscriber's,
unrevoked and valid; the signature is that certificate's; the member id is the certificate's;
the lease is issued (at most :data:`MAX_SKEW_MS` in the future), unexpired and not a leave; and,
where the caller says so, it names the expected site and member. A site can therefore withhold a
lease (drop a member) but never extend one: a departed subscriber stays a member for at most one
lease period, however dishonest the sites. :func:`open_lease` does the same checks but accepts a
lapsed lease or a leave, for parties that must remember the newest statement seen (a newer
leave beats an older lease a site might replay).

The signed bytes are deterministic (:mod:`xdn.binary`): a domain label, then every field in a
fixed order, text and byte strings length-prefixed (``u32``), integers big-endian, the concepts
sorted and unique; signing and checking go through :mod:`xdn.statements`.
On the wire a lease is :meth:`SignedLease.to_bytes`: a magic, the statement and the DER
signature, each length-prefixed. Decoding is strict (:class:`~xdn.errors.ProtocolError`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from xdn import certs, crypto, identity, statements
from xdn.binary import Reader, Writer, check_name, check_u64
from xdn.errors import LeaseError, LeaseLapsedError, ProtocolError, SignatureError

__all__ = [
    "MAX_PERIOD_MS",
    "MAX_SKEW_MS",
    "Lease",
    "SignedLease",
    "issue",
    "millis",
    "newest",
    "open_lease",
    "sign",
    "verify",
]

log = logging.getLogger(__name__)

MAX_PERIOD_MS = 7 * 24 * 3600 * 1000
"""The longest lease anyone accepts (a week): it bounds how long a site can keep a departed
subscriber in the groups."""

MAX_SKEW_MS = 60_000
"""How far in the future a lease's issue time may lie (clock skew between parties)."""

_STATEMENT_LABEL = b"xdn/lease/v1\x00"
_WIRE_MAGIC = b"XLS1"
_MAX_SIGNATURE = 128  # a DER ECDSA signature is at most 104 bytes (P-384; 72 on P-256)


def millis(at: datetime) -> int:
    """``at`` in milliseconds since the epoch (``at`` must be timezone-aware)."""
    if at.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return int(at.timestamp() * 1000)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """What a subscriber states about its own membership (see the module docstring).

    Attributes:
        member: the subscriber's member id (``name@fingerprint-prefix``).
        site: the name of the site it is registered at.
        block: that site's block concept.
        concepts: the concepts it asked for, sorted and unique; empty: all it is granted.
        issued_at: when it was signed, ms since the epoch.
        expires_at: when it lapses, ms since the epoch (``issued_at`` for a leave).
        leave: the subscriber has left: the lease is over at once.
    """

    member: str
    site: str
    block: str
    concepts: tuple[str, ...] = ()
    issued_at: int
    expires_at: int
    leave: bool = False

    def __post_init__(self) -> None:
        identity.split_member_id(check_name("member", self.member))
        check_name("site", self.site, empty=self.leave)  # a leave holds wherever it is registered
        check_name("block", self.block, empty=self.leave)
        if not isinstance(self.concepts, tuple):
            raise TypeError("concepts must be a tuple of str")
        for concept in self.concepts:
            check_name("concept", concept)
        if list(self.concepts) != sorted(set(self.concepts)):
            raise ValueError("concepts must be sorted and unique (use lease.issue)")
        check_u64("issued_at", self.issued_at)
        check_u64("expires_at", self.expires_at)
        if not isinstance(self.leave, bool):
            raise TypeError("leave must be a bool")
        if self.expires_at < self.issued_at:
            raise ValueError("a lease cannot expire before it is issued")
        if self.leave and self.expires_at != self.issued_at:
            raise ValueError("a leave expires when it is issued")
        if self.expires_at - self.issued_at > MAX_PERIOD_MS:
            raise ValueError(f"a lease lasts at most {MAX_PERIOD_MS} ms")

    @property
    def period_ms(self) -> int:
        """How long the lease lasts (0 for a leave)."""
        return self.expires_at - self.issued_at

    def active_at(self, at_ms: int) -> bool:
        """Whether the lease makes its subscriber a member at ``at_ms``."""
        return not self.leave and self.issued_at - MAX_SKEW_MS <= at_ms < self.expires_at

    def to_bytes(self) -> bytes:
        """The deterministic statement the subscriber signs."""
        out = Writer(_STATEMENT_LABEL).text(self.member).text(self.site).text(self.block)
        out.u32(len(self.concepts))
        for concept in self.concepts:
            out.text(concept)
        return out.u64(self.issued_at).u64(self.expires_at).u8(self.leave).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> Lease:
        """Invert :meth:`to_bytes`; every defect raises :class:`ProtocolError`."""
        reader = Reader(data, _STATEMENT_LABEL, what="lease")
        member, site, block = reader.text(), reader.text(), reader.text()
        concepts = tuple(reader.text() for _ in range(reader.count(4, u32=True)))
        issued_at, expires_at, leave = reader.u64(), reader.u64(), reader.u8()
        reader.done()
        if leave > 1:
            raise ProtocolError("lease: leave flag is not 0 or 1")
        try:
            return cls(
                member=member, site=site, block=block, concepts=concepts,
                issued_at=issued_at, expires_at=expires_at, leave=bool(leave),
            )
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"invalid lease: {exc}") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedLease:
    """A lease and its subscriber's ECDSA signature over :meth:`Lease.to_bytes`."""

    lease: Lease
    signature: bytes

    def __post_init__(self) -> None:
        statements.check_signed("lease", self.lease, Lease, self.signature, most=_MAX_SIGNATURE)

    def to_bytes(self) -> bytes:
        """The wire form: magic, statement, signature."""
        return Writer(_WIRE_MAGIC).blob(self.lease.to_bytes()).blob(self.signature).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> SignedLease:
        """Invert :meth:`to_bytes`; every defect raises :class:`ProtocolError`."""
        reader = Reader(data, _WIRE_MAGIC, what="signed lease")
        statement, signature = reader.blob(), reader.blob()
        reader.done()
        lease = Lease.from_bytes(statement)
        if not 0 < len(signature) <= _MAX_SIGNATURE:
            raise ProtocolError("lease: signature has an impossible length")
        return cls(lease=lease, signature=signature)


def issue(
    *,
    member: str,
    site: str,
    block: str,
    concepts: Iterable[str] = (),
    now_ms: int,
    period_ms: int,
    leave: bool = False,
) -> Lease:
    """A lease from ``now_ms`` for ``period_ms`` (a leave: ``leave=True``, period ignored)."""
    check_u64("period_ms", period_ms)
    if not leave and period_ms == 0:
        raise ValueError("a lease must last some time (period_ms > 0)")
    return Lease(
        member=member, site=site, block=block, concepts=tuple(sorted(set(concepts))),
        issued_at=now_ms, expires_at=now_ms if leave else now_ms + period_ms, leave=leave,
    )


def sign(lease: Lease, key: crypto.PrivateKey) -> SignedLease:
    """Sign ``lease`` with the subscriber's certificate key."""
    return SignedLease(lease=lease, signature=statements.sign(lease.to_bytes(), key))


@functools.lru_cache(maxsize=1024)
def _signature_holds(certificate_pem: bytes, statement: bytes, signature: bytes) -> bool:
    """Whether ``signature`` over ``statement`` is the certificate key's (cached: sites and the
    key service see the same lease with every membership reply until it is renewed)."""
    try:
        statements.verify_by_certificate(statement, signature, certificate_pem)
    except SignatureError:
        return False
    return True


def open_lease(
    data: bytes,
    *,
    certificate_pem: bytes,
    ca_pem: bytes,
    at: datetime,
    revoked: frozenset[int] = frozenset(),
    member: str | None = None,
) -> Lease:
    """An authentic lease from ``data``, even one that has lapsed or is a leave.

    Args:
        data: :meth:`SignedLease.to_bytes` output, from a peer.
        certificate_pem: the certificate that should have signed it (the subscriber's).
        ca_pem: the CA that must have issued that certificate.
        at: now; the certificate must be valid and the lease issued by then.
        revoked: serial numbers the CA has revoked.
        member: the member id the caller expects (e.g. a membership entry's); any if ``None``.

    Raises:
        ProtocolError: ``data`` is not a signed lease.
        CertificateError: the certificate is not a valid, unrevoked subscriber certificate.
        SignatureError: the certificate's key did not sign the lease.
        LeaseError: the lease is another member's, or issued in the future.
    """
    signed = SignedLease.from_bytes(data)
    credential = certs.verify_certificate(
        certificate_pem, ca_pem, at=at, role="subscriber", revoked=revoked
    )
    lease = signed.lease
    if lease.member != credential.member_id:
        raise LeaseError(
            f"lease names {lease.member!r}, its certificate is {credential.member_id!r}"
        )
    if member is not None and lease.member != member:
        raise LeaseError(f"lease of {lease.member!r} offered for {member!r}")
    if not _signature_holds(certificate_pem, lease.to_bytes(), signed.signature):
        log.debug("lease of %s: signature does not verify", lease.member)
        raise SignatureError("lease signature does not verify")
    if lease.issued_at > millis(at) + MAX_SKEW_MS:
        raise LeaseError(f"lease of {lease.member!r} is not valid yet (issued in the future)")
    return lease


def verify(
    data: bytes,
    *,
    certificate_pem: bytes,
    ca_pem: bytes,
    at: datetime,
    revoked: frozenset[int] = frozenset(),
    member: str | None = None,
    site: str | None = None,
) -> Lease:
    """A lease that makes its subscriber a member at ``at``: :func:`open_lease`, then in force.

    Args:
        site: the site the lease must name (a site checking its own subscribers); any if ``None``.

    Raises:
        LeaseLapsedError: the lease has expired or is a leave.
        LeaseError: it names another site (and everything :func:`open_lease` raises).
    """
    lease = open_lease(
        data, certificate_pem=certificate_pem, ca_pem=ca_pem, at=at, revoked=revoked,
        member=member,
    )
    if lease.leave:
        raise LeaseLapsedError(f"{lease.member!r} has left")
    if millis(at) >= lease.expires_at:
        raise LeaseLapsedError(f"lease of {lease.member!r} has expired")
    if site is not None and lease.site != site:
        raise LeaseError(f"lease of {lease.member!r} names site {lease.site!r}, not {site!r}")
    return lease


def newest(held: Lease | None, offered: Lease) -> Lease:
    """Which of two authentic statements of one member counts: the later issued one.

    A site may hold back a subscriber's newer statement and replay an older one (a lease from
    before its leave); whoever remembers the newest seen ignores the replay. At the same issue
    time a leave wins.

    Raises:
        ValueError: the two leases are of different members.
    """
    if held is None:
        return offered
    if held.member != offered.member:
        raise ValueError("leases of different members are not comparable")
    return max(held, offered, key=lambda x: (x.issued_at, x.leave, x.expires_at))
