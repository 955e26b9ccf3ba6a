"""Concept group keys, per-document fragment keys and their XML Encryption ``KeyName``.

A publisher holds one group key per (publisher, concept, epoch). Fragments are never encrypted
under the group key itself: each document gets its own key per concept,
``HKDF-SHA-384(group_key, info=b"xdn/doc-key/v1|" ‖ frame(publisher, concept, u64(epoch),
document_id))`` (see :func:`xdn.codec._encoding.frame`: length-prefixed, so no two tuples share
an ``info``). A per-document key can therefore be handed to a tool (``xmlsec1 --aeskey``) or an
auditor without opening any other document.

:func:`key_name` names that key, ``PUBLISHER.CONCEPT.eEPOCH.DOCUMENT``. Each component is
percent-encoded (RFC 3986 unreserved characters kept, ``.`` encoded as ``%2E``), so the name is
injective, contains no ``/``, NUL or ``..`` and is safe as a file name even when the concept is
an ontology IRI such as ``http://xdn.example.org/ontology/production#WorkOrder``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import quote

from xdn import crypto
from xdn.binary import check_name, check_u64
from xdn.codec._encoding import frame, u64

__all__ = ["ConceptKey", "check_name", "document_key", "key_name"]

_DOC_KEY_LABEL = b"xdn/doc-key/v1|"
_MIN_GROUP_KEY = 16


def _component(value: str) -> str:
    return quote(value, safe="").replace(".", "%2E")


def key_name(publisher: str, concept: str, epoch: int, document_id: str) -> str:
    """The filename-safe XML Encryption ``KeyName`` of a per-document concept key.

    >>> key_name("production-dept", "WorkOrder", 3, "doc-42")
    'production-dept.WorkOrder.e3.doc-42'
    """
    check_name("publisher", publisher)
    check_name("concept", concept)
    check_u64("epoch", epoch)
    check_name("document_id", document_id)
    parts = (_component(publisher), _component(concept), f"e{epoch}", _component(document_id))
    return ".".join(parts)


def document_key(
    group_key: bytes, *, publisher: str, concept: str, epoch: int, document_id: str
) -> bytes:
    """Derive the 32-byte AES-256-GCM key of one concept's fragments in one document."""
    if not isinstance(group_key, bytes):
        raise TypeError("group_key must be bytes")
    info = _DOC_KEY_LABEL + frame(
        check_name("publisher", publisher),
        check_name("concept", concept),
        u64(check_u64("epoch", epoch)),
        check_name("document_id", document_id),
    )
    return crypto.derive_key(group_key, info=info)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConceptKey:
    """A publisher's group key for one concept in one key epoch.

    Attributes:
        publisher: the publisher that owns the group.
        concept: the concept (ontology IRI or name) the group is for.
        epoch: the key epoch (bumped on every rekey).
        group_key: the secret group key (at least 16 bytes; never shown in ``repr``).
    """

    publisher: str
    concept: str
    epoch: int
    group_key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_u64("epoch", self.epoch)
        if not isinstance(self.group_key, bytes):
            raise TypeError("group_key must be bytes")
        if len(self.group_key) < _MIN_GROUP_KEY:
            raise ValueError(f"group_key must be at least {_MIN_GROUP_KEY} bytes")

    def for_document(self, document_id: str) -> bytes:
        """This concept's per-document key for ``document_id``."""
        return document_key(
            self.group_key,
            publisher=self.publisher,
            concept=self.concept,
            epoch=self.epoch,
            document_id=document_id,
        )

    def name_for(self, document_id: str) -> str:
        """The :func:`key_name` of :meth:`for_document`."""
        return key_name(self.publisher, self.concept, self.epoch, document_id)
