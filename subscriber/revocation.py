"""Which publishers a subscriber still trusts: the CA's CRL in force and how fresh it is.

Theory of operation. A subscriber checks every document's publisher certificate itself — CA,
role, validity, name, and revocation — and never takes a site's word for any of it. Its site
relays the CA-signed CRL it has in force (in ``Subscribed`` and, whenever the site reloads its
CRL, as a ``RevocationList`` delivery); the operator may also give a local CRL file. Every CRL
offered, whatever its source, goes through :func:`read_crl` (the CA's signature, a CRL number
and a next-update time are required) and :func:`choose`:

* a CRL with a *lower* CRL number than the one in force is refused (:class:`CrlRollbackError`):
  a site cannot roll revocation back by relaying an older CRL;
* a higher number replaces the one in force (kept durably with its number, see
  :class:`subscriber.store.Keyring`); an equal number changes nothing.

So a dishonest site can withhold a newer CRL, but not forge one nor undo one. Withholding is
bounded by freshness: a CRL past its nextUpdate by more than a stated grace
(:data:`DEFAULT_GRACE`, ``xdn subscribe --crl-grace``) no longer tells whether a publisher was
revoked since, and :func:`stale_reason` says so. The subscriber then *holds* new documents
(signed and checked, but not opened, see :mod:`subscriber.session`) until a fresh CRL arrives,
rather than refusing documents that may well be genuine; they count against the held cap.

A publisher whose certificate the CRL in force revokes is refused (:class:`RevokedError`),
whatever the freshness. A subscriber that has never seen a CRL (its sites run without one and
no ``--crl`` was given) has nothing to check revocation against and says so once.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from xdn import certs
from xdn.certs import Crl
from xdn.errors import CertificateError, CrlRollbackError, ProtocolError

__all__ = [
    "DEFAULT_GRACE",
    "Crl",
    "CrlRollbackError",
    "RevokedError",
    "check_publisher",
    "choose",
    "read_crl",
    "stale_reason",
]

DEFAULT_GRACE = timedelta(hours=1)
"""How long past its nextUpdate a CRL still counts as telling who is revoked."""


class RevokedError(CertificateError):
    """A document's publisher certificate is revoked by the CRL in force."""


def read_crl(pem: bytes, ca_pem: bytes, *, at: datetime) -> Crl:
    """Read a CRL once it is shown to be the CA's (:func:`xdn.certs.read_crl`).

    A stale CRL is read (it still revokes what it lists; :func:`stale_reason` judges freshness),
    a CRL not issued yet at ``at`` is not.

    Raises:
        CertificateError: malformed, not signed by the CA, not valid yet, or without a CRL
            number or a next update.
    """
    crl = certs.read_crl(pem, ca_pem)
    certs.check_crl_succession(crl, None, at=at)  # only its issue time matters here
    return crl


def choose(current: Crl | None, offered: Crl, *, at: datetime) -> Crl:
    """The CRL to keep in force when ``offered`` arrives (see the module docstring).

    Raises:
        CrlRollbackError: ``offered`` has a lower CRL number than ``current``.
    """
    certs.check_crl_succession(offered, current, at=at)
    return offered if current is None or offered.number > current.number else current


def stale_reason(crl: Crl | None, *, at: datetime, grace: timedelta) -> str | None:
    """Why ``crl`` cannot tell at ``at`` whether a publisher was revoked (None: it can)."""
    if crl is None or at <= crl.next_update + grace:
        return None
    return (
        f"the CRL in force (number {crl.number}) was due to be replaced at "
        f"{crl.next_update.isoformat()} and is past its {grace} grace: whether a publisher was "
        "revoked since cannot be told until a fresh CRL arrives"
    )


def check_publisher(
    cert_pem: bytes, name: str, *, ca_pem: bytes, at: datetime, crl: Crl | None
) -> certs.Credential:
    """Check a document's publisher certificate: CA, role, validity, revocation, name.

    Raises:
        RevokedError: the CRL in force revokes it.
        CertificateError: not the CA's, not a publisher's, or not valid at ``at``.
        ProtocolError: the certificate is not that of the publisher ``name`` the manifest names.
    """
    publisher = certs.verify_certificate(cert_pem, ca_pem, at=at, role="publisher")
    if crl is not None and publisher.serial in crl.serials:
        raise RevokedError(
            f"publisher certificate of {publisher.name!r} (serial {publisher.serial:x}) is "
            f"revoked by the CRL in force (number {crl.number})"
        )
    if publisher.name != name:
        raise ProtocolError(
            f"manifest names publisher {name!r} but is signed by {publisher.name!r}"
        )
    return publisher
