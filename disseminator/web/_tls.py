"""Mutual TLS for the HTTPS endpoint: the site's certificate, the network's CA, the CRL.

The server presents the site's certificate (the one its gRPC port presents) and requires a
client certificate the CA issued (:func:`server_context`): a client without one fails the
handshake. Revocation and validity are checked on every request, against the CRL the site
enforces *now* (:func:`check_peer`: the daemon's live set, reloaded with the CRL file, never
rolled back), rather than in the TLS context, which would hold a copy of the CRL file as it
was at start-up.
"""

from __future__ import annotations

import ssl
from datetime import datetime
from pathlib import Path

from xdn import certs
from xdn.errors import CertificateError

__all__ = ["check_peer", "client_context", "server_context"]


def server_context(*, cert: Path, key: Path, ca_pem: bytes) -> ssl.SSLContext:
    """TLS 1.2+ server context presenting ``cert`` and requiring a client certificate of the CA."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert), str(key))
    context.load_verify_locations(cadata=ca_pem.decode("ascii"))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(*, cert: Path, key: Path, ca_pem: bytes) -> ssl.SSLContext:
    """TLS client context for a party of the network: trust the CA only, present ``cert``."""
    context = ssl.create_default_context(cadata=ca_pem.decode("ascii"))
    context.load_cert_chain(str(cert), str(key))
    return context


def check_peer(
    ssl_object: ssl.SSLObject | ssl.SSLSocket | None, *, at: datetime, revoked: frozenset[int]
) -> certs.Credential:
    """The credential of the client on a connection, once it is in force at ``at``.

    Raises:
        CertificateError: no client certificate, revoked, or outside its validity.
    """
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        raise CertificateError("the client presented no certificate")
    credential = certs.credential_from_pem(ssl.DER_cert_to_PEM_cert(der).encode("ascii"))
    certs.check_in_force(credential, at=at, revoked=revoked)
    return credential
