"""Value objects the network code hands to the provenance builders."""

from __future__ import annotations

from dataclasses import dataclass

from xdn.crypto import PrivateKey
from xdn.rdf import IRI


def check_node_uri(uri: str) -> None:
    """A node URI is an absolute IRI ending in ``/``: message URIs are minted below it."""
    if not isinstance(uri, str):
        raise TypeError("node URI must be a str")
    IRI(uri)
    if not uri.endswith("/") or "#" in uri:
        raise ValueError(f"node URI {uri!r} must end with '/' and have no fragment")


@dataclass(frozen=True, slots=True, kw_only=True)
class Signer:
    """A node that signs envelopes: its linked-data URI and its private key.

    Attributes:
        node_uri: e.g. ``"https://d1.xdn.example/"``; the signature graphs name it as
            ``sig:hasVerificationCertificate`` and verifiers look its public key up by it.
        private_key: the node's ECDSA P-384 key (the one its certificate certifies).
    """

    node_uri: str
    private_key: PrivateKey

    def __post_init__(self) -> None:
        check_node_uri(self.node_uri)
        if not isinstance(self.private_key, PrivateKey):
            raise TypeError("private_key must be an ECDSA private key from xdn.crypto")

    def __repr__(self) -> str:  # never print key material
        return f"Signer(node_uri={self.node_uri!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class FragmentFact:
    """What provenance records of one encrypted fragment (never its plaintext).

    Attributes:
        fragment_id: the fragment's identifier within its document.
        concept: the ontology concept labelling it (an IRI, stored as a literal otherwise).
        ciphertext_sha256: SHA-256 of the fragment's ciphertext.
    """

    fragment_id: str
    concept: str
    ciphertext_sha256: bytes

    def __post_init__(self) -> None:
        if not isinstance(self.fragment_id, str) or not self.fragment_id:
            raise ValueError("fragment_id must be a non-empty str")
        if not isinstance(self.concept, str) or not self.concept:
            raise ValueError("concept must be a non-empty str")
        if not isinstance(self.ciphertext_sha256, bytes) or len(self.ciphertext_sha256) != 32:
            raise ValueError("ciphertext_sha256 must be 32 bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentFacts:
    """The content graph of a publication: one document's fragments for one link.

    Attributes:
        document_id: the document's identifier (part of every message URI of its chain).
        publisher: the publisher's name or URI.
        manifest_root: root of the publisher-signed Merkle manifest.
        fragments: the fragments, unique by id.
    """

    document_id: str
    publisher: str
    manifest_root: bytes
    fragments: tuple[FragmentFact, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.document_id, str) or not self.document_id:
            raise ValueError("document_id must be a non-empty str")
        if not isinstance(self.publisher, str) or not self.publisher:
            raise ValueError("publisher must be a non-empty str")
        if not isinstance(self.manifest_root, bytes) or not self.manifest_root:
            raise ValueError("manifest_root must be non-empty bytes")
        if not isinstance(self.fragments, tuple) or not all(
            isinstance(f, FragmentFact) for f in self.fragments
        ):
            raise TypeError("fragments must be a tuple of FragmentFact")
        if not self.fragments:
            raise ValueError("content needs at least one fragment")
        ids = [f.fragment_id for f in self.fragments]
        if len(set(ids)) != len(ids):
            raise ValueError("fragment ids must be unique")
