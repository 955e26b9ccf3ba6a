"""Identifiers of the DHT: 256-bit node ids and keys, the XOR metric, and contacts.

Node ids and keys live in one 256-bit space. A node's id is the SHA-256 of its certificate's
DER encoding, so a node cannot pick where it sits in the space (it would need a CA-signed
certificate hashing there), and every peer can recompute it from the TLS handshake. The key
of a concept is the SHA-256 of its concept id (UTF-8), so any party that knows the concept id
can find its records.

Distance is Kademlia's XOR metric: ``d(a, b) = a XOR b`` read as an unsigned integer.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from xdn import certs

__all__ = [
    "ID_BITS",
    "ID_BYTES",
    "Contact",
    "NodeId",
    "check_address",
    "key_for_concept",
    "key_for_site",
    "node_id_of_certificate",
    "record_keys",
]

ID_BITS = 256
ID_BYTES = ID_BITS // 8
MAX_ADDRESS_CHARS = 261  # a 255-character DNS name, ':' and a 5-digit port


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeId:
    """A point of the 256-bit id space (a node id or a key)."""

    value: int

    def __post_init__(self) -> None:
        if not isinstance(self.value, int) or isinstance(self.value, bool):
            raise TypeError(f"node id must be an int, got {type(self.value).__name__}")
        if not 0 <= self.value < 1 << ID_BITS:
            raise ValueError("node id must lie in [0, 2**256)")

    @classmethod
    def from_bytes(cls, data: bytes) -> NodeId:
        """Read a 32-byte big-endian id; :class:`ValueError` for any other length."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"node id bytes must be bytes, got {type(data).__name__}")
        if len(data) != ID_BYTES:
            raise ValueError(f"node id must be {ID_BYTES} bytes, got {len(data)}")
        return cls(value=int.from_bytes(data, "big"))

    @classmethod
    def from_digest_of(cls, data: bytes) -> NodeId:
        """The id at SHA-256 of ``data``."""
        return cls(value=int.from_bytes(hashlib.sha256(data).digest(), "big"))

    def to_bytes(self) -> bytes:
        """The 32-byte big-endian encoding."""
        return self.value.to_bytes(ID_BYTES, "big")

    def distance(self, other: NodeId) -> int:
        """XOR distance to ``other``."""
        return self.value ^ other.value

    def hex(self) -> str:
        """The 64-digit hexadecimal form."""
        return f"{self.value:064x}"

    def __str__(self) -> str:
        return self.hex()[:12]


def check_address(address: str) -> str:
    """Validate a ``host:port`` address (``[v6]:port`` too); return it unchanged.

    Raises:
        TypeError: ``address`` is not a string.
        ValueError: it is not ``host:port`` with a port in 1..65535.
    """
    if not isinstance(address, str):
        raise TypeError(f"address must be a str, got {type(address).__name__}")
    if not address or len(address) > MAX_ADDRESS_CHARS:
        raise ValueError(f"address must be 1..{MAX_ADDRESS_CHARS} characters")
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"address must be HOST:PORT, got {address!r}")
    if any(ch.isspace() or ch in "/@?#" for ch in host):
        raise ValueError(f"address has an invalid host: {address!r}")
    return address


@dataclass(frozen=True, slots=True, kw_only=True)
class Contact:
    """A DHT node: its id and the ``host:port`` its gRPC server listens on."""

    node_id: NodeId
    address: str

    def __post_init__(self) -> None:
        if not isinstance(self.node_id, NodeId):
            raise TypeError("node_id must be a NodeId")
        check_address(self.address)

    def __str__(self) -> str:
        return f"{self.node_id}@{self.address}"


def key_for_concept(concept: str) -> NodeId:
    """The DHT key of a concept: SHA-256 of its concept id in UTF-8."""
    if not isinstance(concept, str):
        raise TypeError(f"concept must be a str, got {type(concept).__name__}")
    if not concept:
        raise ValueError("concept id must not be empty")
    return NodeId.from_digest_of(concept.encode("utf-8"))


_SITE_KEY_TAG = b"xdn-dht-site/v1\n"


def key_for_site(name: str) -> NodeId:
    """The DHT key of a site's name: SHA-256 of ``"xdn-dht-site/v1\\n"`` and the name in UTF-8.

    A site's record is stored under this key as well as under its block's, so a site can be
    found by who it is (a node URI names a site, not what it serves). The tag keeps these keys
    apart from concepts' (a concept id holds no newline).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError("site name must not be empty")
    return NodeId.from_digest_of(_SITE_KEY_TAG + name.encode("utf-8"))


def record_keys(site: str, block: str) -> tuple[NodeId, NodeId]:
    """The keys a site's record is stored under: its block's, then its name's."""
    return key_for_concept(block), key_for_site(site)


def node_id_of_certificate(cert_pem: bytes) -> NodeId:
    """The node id of the holder of ``cert_pem``: SHA-256 of the certificate's DER.

    Raises:
        CertificateError: ``cert_pem`` is not a PEM certificate.
    """
    return NodeId(value=int(certs.credential_from_pem(cert_pem).fingerprint, 16))
