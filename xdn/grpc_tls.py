"""Mutual-TLS credentials for gRPC and the identity of the peer on a call.

Every xdn connection is mutual TLS under the network's CA. Servers require a client
certificate; the servicers then read the peer's certificate from the call's auth context and
check it (issuer, validity, role) with :func:`xdn.certs.verify_certificate`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

from xdn.errors import CertificateError

__all__ = [
    "CHANNEL_OPTIONS",
    "TlsFiles",
    "channel_credentials",
    "handshake_hint",
    "peer_certificate",
    "server_credentials",
]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024

CHANNEL_OPTIONS: Sequence[tuple[str, int]] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 10_000),
)
# (Not ``grpc.tsi.max_frame_size``: TLS records of 4 KiB on a server of 2,000 streams made
# clients fail with TSI_DATA_CORRUPTED under load, grpcio 1.85; see docs/network.md.)

# What gRPC's status details say when the TLS handshake failed over a certificate: ours checked
# the site's (first tuple), or the site refused ours with an alert (second).
_THEIRS_REFUSED = ("BAD_SIGNATURE", "CERTIFICATE_VERIFY_FAILED", "certificate verify failed")
_OURS_REFUSED = ("ALERT_BAD_CERTIFICATE", "ALERT_UNKNOWN_CA", "ALERT_DECRYPT_ERROR",
                 "ALERT_CERTIFICATE_UNKNOWN")


def handshake_hint(details: str) -> str | None:
    """What is likely wrong when a connection's TLS handshake failed over a certificate.

    Args:
        details: the details of the ``UNAVAILABLE`` status gRPC gave.

    Returns:
        A sentence for the user, or ``None`` if ``details`` tell no such failure (the site may
        simply be down: retry).
    """
    if "handshake" not in details.lower():
        return None
    if any(mark in details for mark in _THEIRS_REFUSED):
        return (
            "TLS handshake failed: the site's certificate is not signed by the CA in --certs "
            "(its ca.pem): is this the cluster's CA? (`xdn cluster up` makes its own, in "
            "WORKDIR/certs)"
        )
    if any(mark in details for mark in _OURS_REFUSED):
        return (
            "TLS handshake failed: the site refused our certificate (NAME.pem in --certs): "
            "is it issued by the site's CA?"
        )
    return None



@dataclass(frozen=True, slots=True, kw_only=True)
class TlsFiles:
    """PEM material of one party: its certificate and key, and the CA it trusts."""

    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes

    def __repr__(self) -> str:
        return "TlsFiles(<redacted>)"

    @classmethod
    def from_dir(cls, directory: Path, name: str) -> TlsFiles:
        """Read ``NAME.pem``, ``NAME.key`` and ``ca.pem`` from a certificate directory."""
        return cls(
            cert_pem=(directory / f"{name}.pem").read_bytes(),
            key_pem=(directory / f"{name}.key").read_bytes(),
            ca_pem=(directory / "ca.pem").read_bytes(),
        )


def server_credentials(tls: TlsFiles) -> grpc.ServerCredentials:
    """Server side: present our certificate, require one from the CA of every client."""
    return grpc.ssl_server_credentials(
        [(tls.key_pem, tls.cert_pem)], root_certificates=tls.ca_pem, require_client_auth=True
    )


def channel_credentials(tls: TlsFiles) -> grpc.ChannelCredentials:
    """Client side: trust only the CA; present our certificate."""
    return grpc.ssl_channel_credentials(
        root_certificates=tls.ca_pem, private_key=tls.key_pem, certificate_chain=tls.cert_pem
    )


def peer_certificate(auth_context: Mapping[str, Sequence[bytes]]) -> bytes:
    """The PEM certificate the peer presented on this call."""
    pems = auth_context.get("x509_pem_cert") or ()
    if not pems:
        raise CertificateError("the peer presented no client certificate")
    return bytes(pems[0])
