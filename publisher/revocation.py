"""The CRL the publisher's key service checks before it seals a key to anyone a site lists.

Theory of operation. A dishonest root could list a revoked subscriber in ``GetMembership``;
the key service must not seal it a fresh key. :class:`CrlFile` reads the CA's CRL from a file
(re-read when the file changes), checks that the CA signed it, refuses one numbered below the
CRL it already holds (:func:`xdn.certs.check_crl_succession`: the CA's previous CRL would
un-revoke certificates), and applies the sites' freshness rule: past its nextUpdate the CRL is
stale and a warning says so; stale beyond the grace, the key service refuses to go on (a
:class:`~xdn.errors.UsageError`, before anything is sealed) until a fresh CRL is installed.
A member whose certificate the CRL revokes is not a member: it is rekeyed out.

The CRL in force is kept in the key service's state directory (``kept``), so the rule holds
across runs: an older CRL file put in place between two publications is refused too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from xdn import certs
from xdn.errors import CertificateError, UsageError

__all__ = ["DEFAULT_GRACE", "CrlFile"]

log = logging.getLogger(__name__)

DEFAULT_GRACE = timedelta(hours=1)


class CrlFile:
    """The CA's CRL at ``path``, in force for the key service."""

    def __init__(
        self,
        path: Path,
        ca_pem: bytes,
        *,
        grace: timedelta = DEFAULT_GRACE,
        warn: Callable[[str], None] = log.warning,
        kept: Path | None = None,
    ) -> None:
        self.path, self._ca_pem, self.grace, self._warn = path, ca_pem, grace, warn
        self._kept = kept
        self.crl: certs.Crl | None = None
        self._stamp: tuple[int, int] | None = None
        if kept is not None and kept.exists():
            try:
                self.crl = certs.read_crl(kept.read_bytes(), ca_pem)
            except (OSError, CertificateError) as exc:  # not ours any more: start afresh
                self._warn(f"{kept}: the CRL kept from an earlier run is ignored: {exc}")

    def revoked(self, at: datetime) -> frozenset[int]:
        """The serials revoked at ``at`` (the file is re-read when it changed).

        Raises:
            UsageError: the file cannot be read or is not the CA's and no CRL is held yet; or
                the CRL in force is stale beyond the grace.
        """
        self._reload(at)
        assert self.crl is not None  # _reload raises when there is none
        freshness = certs.crl_freshness(self.crl, at=at, grace=self.grace)
        if freshness is certs.CrlFreshness.EXPIRED:
            raise UsageError(
                f"{self.path}: the CRL is stale ({self.crl.describe()}, grace "
                f"{self.grace.total_seconds():g}s passed): the key service cannot tell whether "
                "a member was revoked; install a fresh CRL from the CA (xdn certs crl)"
            )
        if freshness is certs.CrlFreshness.STALE:
            self._warn(f"{self.path}: the CRL is stale ({self.crl.describe()}); install a "
                       "fresh one from the CA (xdn certs crl)")
        return self.crl.serials

    def _reload(self, at: datetime) -> None:
        try:
            stat = self.path.stat()
        except OSError as exc:
            self._refuse(str(exc.strerror))
            return
        stamp = (stat.st_mtime_ns, stat.st_size)
        if stamp == self._stamp and self.crl is not None:
            return
        self._stamp = stamp
        try:
            crl = certs.read_crl(self.path.read_bytes(), self._ca_pem)
            certs.check_crl_succession(crl, self.crl, at=at)
        except OSError as exc:
            self._refuse(str(exc.strerror))
        except CertificateError as exc:
            self._refuse(str(exc))
        else:
            if self.crl is None or crl.number > self.crl.number:
                self._keep(crl)
            self.crl = crl

    def _keep(self, crl: certs.Crl) -> None:
        """Remember ``crl`` for the next run (replaced atomically)."""
        if self._kept is None:
            return
        tmp = self._kept.with_name(self._kept.name + ".tmp")
        self._kept.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(crl.pem)
        os.replace(tmp, self._kept)

    def _refuse(self, reason: str) -> None:
        if self.crl is None:
            raise UsageError(f"{self.path}: cannot use the CRL: {reason}")
        self._warn(f"{self.path}: CRL refused, {self.crl.describe()} stays in force: {reason}")
