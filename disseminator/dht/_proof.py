"""Ping proofs: how a caller learns, cryptographically, which node answers at an address.

On the server side of a call, mutual TLS gives the caller's certificate and so its node id.
The gRPC client API gives the caller no such view of the server's certificate, so a Ping
carries a fresh random nonce and the answer is a :class:`PingProof`: the answering node's
certificate, the address it advertises, and its signature over both and the nonce. The
caller checks the certificate against the CA (role ``site``) and the signature, and takes
the node id from the certificate. Contacts enter a routing table only after such a check (or,
in the in-memory fake, the network's own knowledge), so a node cannot plant a false
id → address pair in someone else's table. Because the signed address is the one the node
advertises itself, relaying another node's proof only ever teaches the truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from disseminator.dht._errors import DhtProtocolError, RecordAuthenticationError
from disseminator.dht._ids import Contact, check_address, node_id_of_certificate
from disseminator.dht._records import MAX_CERTIFICATE_BYTES, SiteCredentials, encode_fields
from xdn import certs, crypto
from xdn.errors import CertificateError, SignatureError, UsageError

__all__ = [
    "MAX_NONCE_BYTES",
    "MIN_NONCE_BYTES",
    "PingProof",
    "check_nonce",
    "make_ping_proof",
    "verify_ping_proof",
]

MIN_NONCE_BYTES = 16
MAX_NONCE_BYTES = 64
_PING_TAG = b"xdn-dht-ping/v1\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class PingProof:
    """A node's signed answer to a ping: who it is and where it listens."""

    address: str
    certificate_pem: bytes = field(repr=False)
    signature: bytes = field(repr=False)

    def __post_init__(self) -> None:
        check_address(self.address)
        if not isinstance(self.certificate_pem, bytes) or not isinstance(self.signature, bytes):
            raise TypeError("certificate_pem and signature must be bytes")
        if not 0 < len(self.certificate_pem) <= MAX_CERTIFICATE_BYTES:
            raise ValueError(f"certificate must be 1..{MAX_CERTIFICATE_BYTES} bytes")
        if not 0 < len(self.signature) <= 256:
            raise ValueError("signature must be 1..256 bytes")


def check_nonce(nonce: bytes) -> bytes:
    """Refuse nonces too short to be fresh or too long to be reasonable."""
    if not MIN_NONCE_BYTES <= len(nonce) <= MAX_NONCE_BYTES:
        raise DhtProtocolError(
            f"ping nonce must be {MIN_NONCE_BYTES}..{MAX_NONCE_BYTES} bytes, got {len(nonce)}"
        )
    return nonce


def _payload(nonce: bytes, address: str) -> bytes:
    return encode_fields(_PING_TAG, nonce, address)


def make_ping_proof(credentials: SiteCredentials, *, nonce: bytes, address: str) -> PingProof:
    """Answer a ping with ``nonce`` as the node at ``address``."""
    check_nonce(nonce)
    return PingProof(
        address=address,
        certificate_pem=credentials.certificate_pem,
        signature=credentials.sign(_payload(nonce, address)),
    )


def verify_ping_proof(
    proof: PingProof,
    *,
    nonce: bytes,
    ca_pem: bytes,
    at: datetime,
    revoked: frozenset[int] = frozenset(),
) -> Contact:
    """Check a proof against the nonce we sent; return the proven contact.

    Raises:
        RecordAuthenticationError: certificate not from the CA / not a site / expired /
            among the ``revoked`` serials, or bad signature.
    """
    try:
        certs.verify_certificate(
            proof.certificate_pem, ca_pem, at=at, role="site", revoked=revoked
        )
        key = certs.public_key_of(proof.certificate_pem)
        crypto.verify(key, proof.signature, _payload(nonce, proof.address))
    except (CertificateError, SignatureError, UsageError) as exc:
        raise RecordAuthenticationError(f"ping answer from {proof.address}: {exc}") from None
    return Contact(node_id=node_id_of_certificate(proof.certificate_pem), address=proof.address)
