"""Value objects the network code hands to the provenance builders."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from xdn.binary import check_name
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
        private_key: the node's ECDSA key (the one its certificate certifies).
        certificate: the node's certificate (PEM). Given, every signature graph carries it
            (``xdn:signerCertificate``), so that a verifier needs only the message and the CA
            (:class:`~xdn.provenance.ChainVerifier`); every network party gives it.
    """

    node_uri: str
    private_key: PrivateKey
    certificate: bytes | None = None

    def __post_init__(self) -> None:
        check_node_uri(self.node_uri)
        if not isinstance(self.private_key, PrivateKey):
            raise TypeError("private_key must be an ECDSA private key from xdn.crypto")
        if self.certificate is not None and not isinstance(self.certificate, bytes):
            raise TypeError("certificate must be PEM bytes or None")

    def __repr__(self) -> str:  # never print key material
        return f"Signer(node_uri={self.node_uri!r})"


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentFacts:
    """The content graph of a publication: which document, by whom, under which manifest.

    The fragments themselves are the manifest's leaves: the root binds every fragment's
    headers and ciphertext digest, and envelopes name the leaves they carry as ranges
    (:class:`~xdn.provenance.LeafRanges`), so no per-fragment table travels with the chain.

    The publisher lays the leaves out concept by concept; ``concepts`` repeats its signed
    range table (one run per concept, a few triples whatever the number of fragments), so
    that an auditor can tell which concepts a hop's leaf ranges are.

    Attributes:
        document_id: the document's identifier (part of every message URI of its chain).
        publisher: the publisher's name or URI.
        manifest_root: root of the publisher-signed Merkle manifest.
        leaf_count: how many leaves (fragments) the manifest has.
        version: the document's version (``None``: not said).
        concepts: ``(concept, first, end)`` per concept, in leaf order, the half-open runs
            partitioning ``[0, leaf_count)`` (empty: not said).
    """

    document_id: str
    publisher: str
    manifest_root: bytes
    leaf_count: int
    version: int | None = None
    concepts: tuple[tuple[str, int, int], ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.document_id, str) or not self.document_id:
            raise ValueError("document_id must be a non-empty str")
        if not isinstance(self.publisher, str) or not self.publisher:
            raise ValueError("publisher must be a non-empty str")
        if not isinstance(self.manifest_root, bytes) or not self.manifest_root:
            raise ValueError("manifest_root must be non-empty bytes")
        if isinstance(self.leaf_count, bool) or not isinstance(self.leaf_count, int):
            raise TypeError("leaf_count must be an int")
        if not 1 <= self.leaf_count < 2**63:
            raise ValueError("content needs at least one leaf (fragment)")
        _check_count("version", self.version)
        _check_concept_runs(self.concepts, self.leaf_count)


def _check_concept_runs(runs: tuple[tuple[str, int, int], ...], leaf_count: int) -> None:
    """``runs`` is empty, or ``(concept, first, end)`` runs partitioning ``[0, leaf_count)``
    in order, each concept once."""
    if not isinstance(runs, tuple):
        raise TypeError("concepts must be a tuple of (concept, first, end)")
    if not runs:
        return
    expected, seen = 0, set()
    for run in runs:
        if not (isinstance(run, tuple) and len(run) == 3):
            raise TypeError("concepts must be a tuple of (concept, first, end)")
        concept, first, end = run
        if not isinstance(concept, str) or concept in seen:
            raise ValueError("each concept run needs a distinct concept")
        check_name("concept", concept)
        if any(isinstance(x, bool) or not isinstance(x, int) for x in (first, end)):
            raise TypeError("concept runs are int leaf indexes")
        if first != expected or end <= first:
            raise ValueError("concept runs must partition the leaves, in leaf order")
        seen.add(concept)
        expected = end
    if expected != leaf_count:
        raise ValueError("concept runs must cover every leaf")


def concept_runs_text(runs: tuple[tuple[str, int, int], ...]) -> str:
    """The ``xdn:conceptLeaves`` literal of ``runs``: a line ``first-end concept`` per run
    (a concept name holds no control character, so a line break separates them)."""
    return "\n".join(f"{first}-{end} {concept}" for concept, first, end in runs)


#: What a failure notice may say was refused (the kinds of ``refused.jsonl``): a document
#: refused when opened (``document``), one refused before it could be held because it does not
#: verify (``unverified``), a revoked publisher's (``revoked``), a held one dropped past the
#: cap (``overflow``), a CRL (``crl``), a key message (``key``), a gap in a publisher's signed
#: sequence (``gap``), a publisher's signed checkpoint or entitlement statement
#: (``checkpoint``, ``entitlement``: they name the publisher, no document), a document whose
#: provenance chain does not verify (``provenance``).
REFUSAL_KINDS: Final = frozenset(
    {
        "document",
        "unverified",
        "revoked",
        "overflow",
        "crl",
        "key",
        "gap",
        "checkpoint",
        "entitlement",
        "provenance",
    }
)
#: The key messages a ``key`` refusal may name.
KEY_MESSAGE_KINDS: Final = frozenset({"rekey", "enrolment", "document-keys"})


def _check_text(name: str, value: str | None) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{name} must be None or a non-empty str")


def _check_count(name: str, value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be None or an int")
    if not 0 <= value < 2**63:
        raise ValueError(f"{name} is out of range")


@dataclass(frozen=True, slots=True, kw_only=True)
class RefusalFacts:
    """The content graph of a failure notice: what one party refused, and why.

    Only what the refusing party was told (and may repeat without harm) is recorded: names,
    numbers, a claimed manifest root, the reason text; never plaintext or key material.

    Attributes:
        kind: one of :data:`REFUSAL_KINDS`.
        reason: why, as the refusing party showed it to its operator.
        publisher: the publisher the refused thing names, when known (not for ``crl``).
        document_id / version / manifest_root: the refused document, its version and its
            claimed manifest root, when known (not for ``key`` or ``crl``; a version or root
            needs a document id).
        key_message / concept / epoch: for a ``key`` refusal (and only for one), the key
            message's kind (:data:`KEY_MESSAGE_KINDS`), its group's concept and its epoch.
        sequence: for a ``gap`` (and only for one), the missing document's number in the
            publisher's signed sequence (the gap names the publisher, not the document, which
            the subscriber never saw).
        received_from: the node URI of the hop the refused thing came from, when known.
    """

    kind: str
    reason: str
    publisher: str | None = None
    document_id: str | None = None
    version: int | None = None
    manifest_root: bytes | None = None
    key_message: str | None = None
    concept: str | None = None
    epoch: int | None = None
    received_from: str | None = None
    sequence: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in REFUSAL_KINDS:
            raise ValueError(f"refusal kind must be one of {sorted(REFUSAL_KINDS)}")
        if not isinstance(self.reason, str) or not self.reason:
            raise ValueError("a refusal needs a non-empty reason")
        for name in ("publisher", "document_id", "key_message", "concept"):
            _check_text(name, getattr(self, name))
        _check_count("version", self.version)
        _check_count("epoch", self.epoch)
        _check_count("sequence", self.sequence)
        if self.manifest_root is not None and (
            not isinstance(self.manifest_root, bytes) or not self.manifest_root
        ):
            raise ValueError("manifest_root must be None or non-empty bytes")
        if self.received_from is not None:
            check_node_uri(self.received_from)
        self._check_what()

    def _check_what(self) -> None:
        document = (self.document_id, self.version, self.manifest_root)
        if self.document_id is None and document != (None, None, None):
            raise ValueError("a version or manifest root needs the document id")
        if (self.kind == "key") != (self.key_message is not None):
            raise ValueError("a key refusal, and only one, names its key message")
        if self.kind == "key":
            if self.key_message not in KEY_MESSAGE_KINDS:
                raise ValueError(f"key_message must be one of {sorted(KEY_MESSAGE_KINDS)}")
            if self.document_id is not None:
                raise ValueError("a key refusal names a group, not a document")
        elif (self.concept, self.epoch) != (None, None):
            raise ValueError("only a key refusal names a concept and epoch")
        if self.kind == "crl" and (self.publisher, self.document_id) != (None, None):
            raise ValueError("a CRL refusal names no publisher or document")
        if self.sequence is not None and (self.kind != "gap" or self.publisher is None):
            raise ValueError("only a gap names a sequence number, and with its publisher")


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyChangeFacts:
    """The content graph of a policy-change notice: what a publisher's new policy version
    changed in what it grants one subscriber certificate.

    Attributes:
        publisher: the publisher's name (its certificate's common name).
        subscriber: the subscriber's node URI.
        certificate: the SHA-256 fingerprint (hex) of the subscriber's certificate.
        previous_version / version: the policy versions compared (the new one is newer).
        gained / lost: concepts the entitlement of ``version`` grants and that of
            ``previous_version`` did not, and back (at least one concept changed).
        changed_at_ms: when the publisher evaluated ``version`` for the subscriber.
        everything: ``version`` grants the subscriber nothing at all (``lost`` is all the
            previous version granted it, and nothing is gained): it is no longer a member.
    """

    publisher: str
    subscriber: str
    certificate: str
    previous_version: int
    version: int
    gained: frozenset[str]
    lost: frozenset[str]
    changed_at_ms: int
    everything: bool = False

    def __post_init__(self) -> None:
        for name in ("publisher", "certificate"):
            _check_text(name, getattr(self, name))
            if getattr(self, name) is None:
                raise ValueError(f"{name} must be a non-empty str")
        check_node_uri(self.subscriber)
        for name in ("previous_version", "version", "changed_at_ms"):
            value = getattr(self, name)
            _check_count(name, value)
            if value is None:
                raise TypeError(f"{name} must be an int")
        if self.version <= self.previous_version:
            raise ValueError("a policy change goes to a newer version")
        for name in ("gained", "lost"):
            value = getattr(self, name)
            if not isinstance(value, frozenset) or not all(
                isinstance(c, str) and c for c in value
            ):
                raise TypeError(f"{name} must be a frozenset of concept names")
        if self.gained & self.lost:
            raise ValueError("a concept cannot be both gained and lost")
        if not self.gained and not self.lost:
            raise ValueError("a policy change notice needs a concept gained or lost")
        if not isinstance(self.everything, bool):
            raise TypeError("everything must be a bool")
        if self.everything and self.gained:
            raise ValueError("a subscriber that loses everything gains nothing")
