"""The CRL a site holds in force: never rolled back, and never stale in silence.

Theory of operation. A site holds at most one CA-signed CRL (:class:`xdn.certs.Crl`) in force,
kept durably with its number (:meth:`disseminator.store.Store.save_crl`), so that neither a
reload nor a restart can put an older one back: :meth:`CrlInForce.offer` accepts a CRL numbered
at least as high as the one in force and refuses a lower one with
:class:`~xdn.errors.CrlRollbackError` (:func:`xdn.certs.check_crl_succession`).

A CRL goes stale at its ``nextUpdate``: the CA promised a newer one by then, so the site can no
longer tell whether a certificate was revoked since. What the site does
(:meth:`CrlInForce.freshness`, :meth:`CrlInForce.refusal`):

* stale: it raises the alarm at once (an error in the log on every housekeeping pass, the
  ``xdn_crl_stale`` gauge at 1) and goes on serving; the revocations of the stale CRL stay in
  force;
* stale for longer than the grace (``[site] crl_grace_seconds``, default one hour): it fails
  closed for anything *new* — a subscriber not registered here, a downlink site not linked
  here — with ``FAILED_PRECONDITION`` saying that the CRL is stale and the operator must
  install a fresh one; subscriptions and links already in place continue.

Pure: the caller passes the time and does the I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from xdn import certs

__all__ = ["DEFAULT_GRACE", "CrlInForce"]

DEFAULT_GRACE = timedelta(hours=1)


@dataclass(slots=True)
class CrlInForce:
    """The CRL a site enforces (``crl`` ``None``: it was configured with none)."""

    crl: certs.Crl | None = None
    grace: timedelta = DEFAULT_GRACE

    @property
    def revoked(self) -> frozenset[int]:
        """The serials revoked by the CRL in force."""
        return self.crl.serials if self.crl is not None else frozenset()

    def offer(self, candidate: certs.Crl, *, at: datetime) -> bool:
        """Put ``candidate`` in force unless it is older; return whether anything changed.

        Raises:
            CrlRollbackError: ``candidate`` is numbered below the CRL in force (which stays).
            CertificateError: ``candidate`` was issued in the future.
        """
        certs.check_crl_succession(candidate, self.crl, at=at)
        changed = self.crl is None or candidate.pem != self.crl.pem
        self.crl = candidate
        return changed

    def freshness(self, at: datetime) -> certs.CrlFreshness:
        """Fresh, stale, or stale beyond the grace (no CRL at all counts as fresh)."""
        if self.crl is None:
            return certs.CrlFreshness.FRESH
        return certs.crl_freshness(self.crl, at=at, grace=self.grace)

    def alarm(self, at: datetime) -> str | None:
        """What to tell the operator when the CRL in force is stale (``None``: it is not)."""
        freshness = self.freshness(at)
        if freshness is certs.CrlFreshness.FRESH or self.crl is None:
            return None
        closed = freshness is certs.CrlFreshness.EXPIRED
        return (
            f"the CRL in force is stale: {self.crl.describe()}; "
            + ("new registrations and links are refused" if closed else
               f"new registrations and links will be refused from "
               f"{(self.crl.next_update + self.grace).isoformat()}")
            + "; install a fresh CRL from the CA (xdn certs crl)"
        )

    def refusal(self, at: datetime) -> str | None:
        """Why something new is refused now (``None``: it is not): stale beyond the grace."""
        if self.freshness(at) is not certs.CrlFreshness.EXPIRED or self.crl is None:
            return None
        return (
            f"the site's CRL is stale (CRL number {self.crl.number}, next update was due "
            f"{self.crl.next_update.isoformat()}, grace {self.grace.total_seconds():g}s "
            "passed): it cannot tell whether a certificate was revoked, so it refuses new "
            "registrations and links until its operator installs a fresh CRL"
        )
