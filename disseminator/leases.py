"""A site's checks of membership leases (see :mod:`xdn.lease` and ``docs/group-keys.md``).

Theory of operation. A site registers a subscriber on its certificate alone, as before, but
*reports* it as a member — to the publisher's key service in ``GetMembership``, to its uplink
in ``InterestUpdate`` — only while it holds the subscriber's own signed lease, unexpired
(:func:`holds`). A lapsed lease ends nothing else: the registration and its durable queue stay,
and a renewal brings the member back.

* A subscriber's own site accepts a lease for that subscriber's certificate naming this site
  and its block (:func:`check_local`).
* An uplink accepts a member from downlink D only with a valid lease that names D, or a site
  whose block lies inside D's block (:func:`check_relayed`), so a sibling cannot claim
  another site's subscriber and no site can keep one past her lease.
* Of two leases for one registration the newer counts (:func:`newer`): a renewal replaces the
  lease, a replay of an older one does not.
"""

from __future__ import annotations

from datetime import datetime

from disseminator.routing import Registration
from xdn import lease
from xdn.errors import LeaseError, ProtocolError

__all__ = ["check_local", "check_relayed", "holds", "newer"]


def check_local(
    data: bytes,
    *,
    member: str,
    certificate: bytes,
    site: str,
    block: str,
    ca_pem: bytes,
    revoked: frozenset[int],
    at: datetime,
) -> lease.Lease:
    """A lease a subscriber registered here sent for itself.

    Raises:
        PeerError: a subclass saying what is wrong (see :func:`xdn.lease.verify`), or
            :class:`LeaseError` when it names another block than this site's.
    """
    checked = lease.verify(
        data, certificate_pem=certificate, ca_pem=ca_pem, at=at, revoked=revoked,
        member=member, site=site,
    )
    if checked.block != block:
        raise LeaseError(f"lease of {member!r} names block {checked.block!r}, not {block!r}")
    return checked


def check_relayed(
    data: bytes,
    *,
    member: str,
    certificate: bytes,
    link: str,
    link_served: frozenset[str],
    ca_pem: bytes,
    revoked: frozenset[int],
    at: datetime,
) -> lease.Lease:
    """A lease downlink ``link`` (serving ``link_served``) relays for a member behind it.

    Raises:
        PeerError: the lease is missing, forged or lapsed, or names a site outside the link.
    """
    if not data:
        raise LeaseError(f"member {member!r} comes without a lease")
    checked = lease.verify(
        data, certificate_pem=certificate, ca_pem=ca_pem, at=at, revoked=revoked, member=member
    )
    if checked.site != link and checked.block not in link_served:
        raise LeaseError(
            f"lease of {member!r} names site {checked.site!r} (block {checked.block!r}), "
            f"which is neither downlink {link!r} nor below it"
        )
    return checked


def holds(registration: Registration, now_ms: int) -> bool:
    """Whether the registration's (already checked) lease makes it a member at ``now_ms``."""
    if not registration.lease:
        return False
    try:
        return lease.SignedLease.from_bytes(registration.lease).lease.active_at(now_ms)
    except ProtocolError:
        return False


def newer(held: bytes, offered: bytes) -> bytes:
    """Of two checked leases of one registration, the one that counts (empty: none)."""
    if not held or not offered:
        return offered or held
    kept = lease.newest(
        lease.SignedLease.from_bytes(held).lease, lease.SignedLease.from_bytes(offered).lease
    )
    return offered if kept == lease.SignedLease.from_bytes(offered).lease else held
