"""The publisher-signed manifest that binds a document's fragments together.

XML Encryption's AES-GCM carries no associated data, so nothing in a ciphertext says which
document, publisher, concept or position it belongs to. The manifest does: it commits, under
the publisher's ECDSA P-384 / SHA-384 signature, to the root of a Merkle tree whose leaves are
the fragments' headers and ciphertext hashes (see :func:`xdn.codec._fragments.fragment_leaf`).

:meth:`Manifest.signed_bytes` is the exact byte string signed: a framed sequence (each field
length-prefixed, see :mod:`xdn.codec._encoding`) starting with the label ``xdn/manifest/v1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdn import crypto
from xdn.codec._encoding import check_u64, frame, u64
from xdn.codec._keys import check_name
from xdn.codec._merkle import HASH_BYTES

__all__ = ["Manifest", "SignedManifest", "sign_manifest"]

_LABEL = b"xdn/manifest/v1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Manifest:
    """What the publisher vouches for about one version of one document.

    Attributes:
        document_id: the document's identifier.
        publisher: the publisher's identifier.
        version: the document version (monotonic per document, chosen by the publisher).
        issued_at_ms: issue time, milliseconds since the Unix epoch (passed in, never read).
        leaf_count: number of fragments (Merkle leaves), at least one.
        root: the Merkle tree root over the fragment leaves.
    """

    document_id: str
    publisher: str
    version: int
    issued_at_ms: int
    leaf_count: int
    root: bytes

    def __post_init__(self) -> None:
        check_name("document_id", self.document_id)
        check_name("publisher", self.publisher)
        check_u64("version", self.version)
        check_u64("issued_at_ms", self.issued_at_ms)
        check_u64("leaf_count", self.leaf_count)
        if self.leaf_count < 1:
            raise ValueError("a manifest covers at least one fragment")
        if not isinstance(self.root, bytes) or len(self.root) != HASH_BYTES:
            raise ValueError(f"root must be {HASH_BYTES} bytes")

    def signed_bytes(self) -> bytes:
        """The unambiguous, domain-separated encoding the publisher signs."""
        return frame(
            _LABEL,
            self.document_id,
            self.publisher,
            u64(self.version),
            u64(self.issued_at_ms),
            u64(self.leaf_count),
            self.root,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class SignedManifest:
    """A manifest with the publisher's DER-encoded ECDSA P-384 / SHA-384 signature."""

    manifest: Manifest
    signature: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.manifest, Manifest):
            raise TypeError("manifest must be a Manifest")
        if not isinstance(self.signature, bytes) or not self.signature:
            raise ValueError("signature must be non-empty bytes")

    def verify(self, publisher_key: crypto.PublicKey) -> None:
        """Check the signature; raise :class:`~xdn.errors.SignatureError` if it fails."""
        crypto.verify(publisher_key, self.signature, self.manifest.signed_bytes())


def sign_manifest(manifest: Manifest, signer: crypto.PrivateKey) -> SignedManifest:
    """Sign ``manifest`` with the publisher's private key."""
    return SignedManifest(manifest=manifest, signature=crypto.sign(signer, manifest.signed_bytes()))
