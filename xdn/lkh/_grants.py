"""Document-key grants: how a new member reads retained recent documents (state at subscribe).

Backward secrecy (see :mod:`xdn.lkh`) keeps a joiner out of every epoch before its join. A
publisher that retains its last few documents in the network makes one deliberate, narrow
exception: it hands the joiner the *per-document* keys (:func:`xdn.codec.document_key`) of
exactly those retained documents for the concept it joined, never a group key. Every other
document of an earlier epoch stays closed to it.

A :class:`DocumentKeyGrant` carries the keys sealed with HPKE to the member's certificate key;
the HPKE ``info`` binds publisher, concept and member, and the opened payload must repeat them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from xdn import crypto
from xdn.errors import DecryptError, ProtocolError
from xdn.lkh._bytes import Reader, Writer, check_name, label

__all__ = ["DocumentKeyGrant", "open_document_keys", "seal_document_keys"]

_GRANT_MAGIC = b"XLG1"
_KEYS_MAGIC = b"XLK1"


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentKeyGrant:
    """Per-document keys (by XML Encryption ``KeyName``) sealed to one member."""

    publisher: str
    concept: str
    member: str
    sealed: bytes = field(repr=False)

    def __post_init__(self) -> None:
        check_name("publisher", self.publisher)
        check_name("concept", self.concept)
        check_name("member", self.member)
        if not isinstance(self.sealed, bytes):
            raise TypeError("sealed must be bytes")

    def to_bytes(self) -> bytes:
        """Wire encoding."""
        out = Writer(_GRANT_MAGIC).text(self.publisher).text(self.concept).text(self.member)
        return out.blob(self.sealed).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> DocumentKeyGrant:
        """Decode :meth:`to_bytes`; raise :class:`ProtocolError` if malformed."""
        inp = Reader(data, _GRANT_MAGIC)
        try:
            publisher, concept, member, sealed = inp.text(), inp.text(), inp.text(), inp.blob()
            inp.done()
            return cls(publisher=publisher, concept=concept, member=member, sealed=sealed)
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed document-key grant: {exc}") from None


def _info(publisher: str, concept: str, member: str) -> bytes:
    return label(b"xdn/lkh/document-keys/v1", publisher, concept, member)


def seal_document_keys(
    *,
    publisher: str,
    concept: str,
    member: str,
    keys: Mapping[str, bytes],
    public_key: crypto.PublicKey,
) -> DocumentKeyGrant:
    """Seal ``keys`` (key name → 32-byte document key) to ``member``'s certificate key."""
    out = Writer(_KEYS_MAGIC).text(publisher).text(concept).text(member).u64(len(keys))
    for name in sorted(keys):
        if len(keys[name]) != crypto.KEY_BYTES:
            raise ValueError(f"document key {name} must be {crypto.KEY_BYTES} bytes")
        out.text(check_name("key name", name)).blob(keys[name])
    sealed = crypto.hpke_seal(public_key, out.getvalue(), info=_info(publisher, concept, member))
    return DocumentKeyGrant(publisher=publisher, concept=concept, member=member, sealed=sealed)


def open_document_keys(grant: DocumentKeyGrant, private_key: crypto.PrivateKey) -> dict[str, bytes]:
    """Open a grant addressed to us; raise :class:`DecryptError` if it does not open."""
    header = (grant.publisher, grant.concept, grant.member)
    plain = crypto.hpke_open(private_key, grant.sealed, info=_info(*header))
    inp = Reader(plain, _KEYS_MAGIC)
    try:
        if (inp.text(), inp.text(), inp.text()) != header:
            raise DecryptError()
        keys = {}
        for _ in range(inp.count(8)):
            name, key = inp.text(), inp.blob()
            if len(key) != crypto.KEY_BYTES:
                raise DecryptError()
            keys[name] = key
        inp.done()
    except ProtocolError:
        raise DecryptError() from None
    return keys
