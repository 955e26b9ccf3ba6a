"""One exception hierarchy for xdn, split by who is at fault.

* :class:`UsageError` — the caller (operator, administrator, our own code) asked for something
  invalid: a missing file, a bad config value, an unknown concept in a policy they wrote.
* :class:`PeerError` — something that arrived from outside (a document, a protobuf message, a
  certificate, a log line) is malformed, hostile or fails verification.

Third-party exceptions (lxml, grpc, cryptography, owlready2) are translated into these at the
module that calls the library; the gRPC servicers map them to status codes.
"""

from __future__ import annotations

__all__ = [
    "CertificateError",
    "ConfigError",
    "CrlRollbackError",
    "DecryptError",
    "ForeignNoticeError",
    "HostileXmlError",
    "LeaseError",
    "LeaseLapsedError",
    "LinkedDataError",
    "MappingError",
    "NoticeError",
    "OntologyError",
    "PeerError",
    "PolicyError",
    "PolicyNoticeError",
    "ProtocolError",
    "ProvenanceError",
    "ReceiptError",
    "SignatureError",
    "StorageFull",
    "UsageError",
    "XdnError",
]


class XdnError(Exception):
    """Base of every error xdn raises on purpose."""


class UsageError(XdnError):
    """The caller asked for something invalid (bad argument, file, configuration)."""


class ConfigError(UsageError):
    """A configuration file or value is missing or invalid."""


class OntologyError(UsageError):
    """An ontology file cannot be loaded or is inconsistent."""


class MappingError(UsageError):
    """A concept → XPath mapping is invalid."""


class PolicyError(UsageError):
    """A policy document is malformed, unsigned or inconsistent."""


class PeerError(XdnError):
    """Input from outside (a document, a message, a certificate) is bad."""


class HostileXmlError(PeerError):
    """XML input was refused: DTDs, entities, excessive depth or size, or malformed markup."""


class ProtocolError(PeerError):
    """A wire message is malformed or arrived in a state where it is not allowed."""


class CertificateError(PeerError):
    """A certificate is malformed, not issued by the trusted CA, expired or of the wrong role."""


class CrlRollbackError(CertificateError):
    """A CRL is older (a lower CRL number) than the one in force: revocation cannot roll back."""


class SignatureError(PeerError):
    """A signature does not verify."""


class LeaseError(PeerError):
    """A membership lease is another member's, names another site, or is not valid yet."""


class LeaseLapsedError(LeaseError):
    """A membership lease has expired, or is a signed leave: its subscriber is no member."""


class ProvenanceError(PeerError):
    """A provenance envelope dataset is malformed or not well-formed."""


class LinkedDataError(PeerError):
    """A linked-data request (a notification posted to an inbox, an Accept header) cannot be
    served: :mod:`xdn.linked_data` says which kind (unsupported media type, too large, not
    RDF, not acceptable); the HTTPS edge maps the kind to a status code."""


class ReceiptError(ProvenanceError):
    """A delivery receipt is well-formed and signed, but not one this party may accept: not a
    receipt, another subscriber's, or about a hop that did not come through here."""


class PolicyNoticeError(ProvenanceError):
    """A policy-change notice is well-formed and signed, but not one this party may accept: not
    a policy notice, not the publisher's, for another subscriber, or inconsistent with the
    entitlement it came with."""


class DecryptError(PeerError):
    """A fragment could not be decrypted or verified.

    Deliberately opaque: every failure of decryption, hash, proof or signature checks on a
    fragment surfaces as this one error with one message, so that a sender learns nothing from
    which check failed. Details go to the debug log only.
    """

    def __init__(self) -> None:
        super().__init__("fragment could not be decrypted or verified")


class NoticeError(ProvenanceError):
    """A failure notice is well-formed and signed, but not one this party may accept: not a
    notice, another party's, not a subscriber's, stale, or about a hop that did not come
    through here."""


class ForeignNoticeError(NoticeError):
    """A failure notice signed under another certificate than the one of the party that hands
    it over: a party passes on its own notices only (a downlink site passes on its members')."""


class StorageFull(XdnError):
    """A site's state directory has no room for new work (free space below the site's floor,
    or a write failed with ``SQLITE_FULL`` / ``ENOSPC``). Nobody's fault and not final: the
    caller retries once space is freed (``RESOURCE_EXHAUSTED`` at the gRPC surface)."""

    def __init__(self, message: str, *, directory: object, free_bytes: int | None) -> None:
        super().__init__(message)
        self.directory = directory
        self.free_bytes = free_bytes
