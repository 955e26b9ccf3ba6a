"""Certificate fingerprints of a site's local subscribers, read once per registration.

Theory of operation. Routing a document records what each local subscriber it reaches
received, by the subscriber's *certificate* fingerprint (``max_instances`` budgets outlive a
registration, see :class:`~disseminator.store.History`), so every routed document needs the
fingerprint of every local subscriber it reaches: thousands of them. :class:`Fingerprints`
keeps each local subscriber's fingerprint beside the certificate it was read from. It is taken
from the credential the site reads anyway when the subscriber registers (:meth:`remember`), or
read on first use (:meth:`of`), and reused for every document after that. It does not lean on
:func:`xdn.certs.credential_from_pem`'s own cache: that one is shared by every certificate the
site reads and bounded, and a certificate it has dropped costs ~0.1 ms to read again, which
is ~1 s a document at 10,000 subscribers; an entry here costs as little as a hit there.

The entry is the registration's: it goes when the subscriber leaves (:meth:`forget`), and a
subscriber registered again with another certificate gets that certificate's fingerprint, since
an entry counts only for the very certificate bytes it was read from.
"""

from __future__ import annotations

from xdn import certs

__all__ = ["Fingerprints"]


class Fingerprints:
    """Subscriber name → fingerprint of the certificate it is registered with."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[bytes, str]] = {}

    def remember(self, subscriber: str, certificate: bytes, fingerprint: str) -> None:
        """Keep the fingerprint of a certificate just read for ``subscriber``'s registration."""
        self._known[subscriber] = (certificate, fingerprint)

    def of(self, subscriber: str, certificate: bytes) -> str:
        """The fingerprint of ``certificate``, registered for ``subscriber``.

        Read from the certificate only when ``subscriber`` has no entry for these bytes.

        Raises:
            CertificateError: the certificate has to be read and is not a PEM certificate.
        """
        known = self._known.get(subscriber)
        if known is not None and known[0] == certificate:
            return known[1]
        fingerprint = certs.credential_from_pem(certificate).fingerprint
        self._known[subscriber] = (certificate, fingerprint)
        return fingerprint

    def forget(self, subscriber: str) -> None:
        """Drop ``subscriber``'s entry: its registration left the site's local table."""
        self._known.pop(subscriber, None)

    def __len__(self) -> int:
        return len(self._known)

    def __contains__(self, subscriber: object) -> bool:
        return subscriber in self._known
