"""Who may use the console: the holder of a one-time token, or of an admin certificate.

Two gates, one per way the console is served:

* :class:`TokenGate` (plain HTTP, loopback only): a random token is printed when the console
  starts; opening ``/login?token=…`` spends it and sets a random session cookie (``HttpOnly``,
  ``SameSite=Strict``). Another local user, who can reach the port but did not see the token,
  gets nothing. The token works once: a second browser needs a restart.
* :class:`ClientCertGate` (HTTPS with mutual TLS): the TLS layer already demands a certificate
  of the network CA; the gate also requires the ``admin`` role, validity now and no revocation.

Both refuse a ``POST`` that a browser says came from another site (``Sec-Fetch-Site`` or
``Origin``), so a page elsewhere cannot drive the console with the user's cookie or
certificate.
"""

from __future__ import annotations

import hmac
import secrets
import ssl
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Protocol

from aiohttp import web

from xdn import certs
from xdn.errors import CertificateError

__all__ = ["COOKIE", "ClientCertGate", "Gate", "TokenGate", "mutual_tls", "same_origin"]

COOKIE = "xdn_console"


class Gate(Protocol):
    """Decides whether a request comes from an administrator; ``None`` means yes."""

    def refusal(self, request: web.Request) -> str | None: ...


class TokenGate:
    """One-time token → session cookie.

    Args:
        token: the token to print (default: 32 random bytes, URL-safe).
    """

    def __init__(self, token: str | None = None) -> None:
        self.token: str | None = token or secrets.token_urlsafe(32)
        self._sessions: set[str] = set()

    def login(self, offered: str) -> str | None:
        """Spend the token: a new session id when ``offered`` is it, else ``None``."""
        if self.token is None or not hmac.compare_digest(offered.encode(), self.token.encode()):
            return None
        self.token = None
        session = secrets.token_urlsafe(32)
        self._sessions.add(session)
        return session

    def refusal(self, request: web.Request) -> str | None:
        session = request.cookies.get(COOKIE, "")
        if any(hmac.compare_digest(session.encode(), s.encode()) for s in self._sessions):
            return None
        return (
            "not signed in: open the address with the token that `xdn console` printed "
            "when it started (it works once)"
        )


class ClientCertGate:
    """An ``admin`` certificate of the network CA, in force now.

    Args:
        ca_pem: the network CA.
        clock: now.
        revoked: serials the CA revoked.
    """

    def __init__(
        self, ca_pem: bytes, *, clock: Callable[[], datetime], revoked: frozenset[int] = frozenset()
    ) -> None:
        self._ca_pem = ca_pem
        self._clock = clock
        self._revoked = revoked

    def refusal(self, request: web.Request) -> str | None:
        tls = request.transport.get_extra_info("ssl_object") if request.transport else None
        der = tls.getpeercert(binary_form=True) if isinstance(tls, ssl.SSLObject) else None
        if not der:
            return "no client certificate: the console needs an admin certificate"
        try:
            certs.verify_certificate(
                ssl.DER_cert_to_PEM_cert(der).encode(),
                self._ca_pem,
                at=self._clock(),
                role="admin",
                revoked=self._revoked,
            )
        except CertificateError as exc:
            return f"certificate refused: {exc}"
        return None


def same_origin(request: web.Request) -> bool:
    """Whether a browser would call this request same-origin (non-browser clients send
    neither header and pass: they hold no ambient credential a page could borrow)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("Origin")
    return origin is None or origin == f"{request.scheme}://{request.host}"


def mutual_tls(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """The HTTPS server side: present ``cert``, demand a client certificate issued by ``ca``."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(ca))
    context.load_cert_chain(cert, key)
    context.verify_mode = ssl.CERT_REQUIRED
    return context
