"""Export / import of an encoded document as W3C XML Encryption 1.1 (the archive form).

Layout (namespaces: ``xdn`` https://xdn.example.org/ns#, ``xenc``
http://www.w3.org/2001/04/xmlenc#, ``ds`` http://www.w3.org/2000/09/xmldsig#)::

    <xdn:encrypted-document format="2" document="…" publisher="…">
      <xenc:EncryptedData Id="xdn-fragment-POS" Type="http://www.w3.org/2001/04/xmlenc#Element">
        <xenc:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#aes256-gcm"/>
        <ds:KeyInfo><ds:KeyName>KEY NAME</ds:KeyName></ds:KeyInfo>
        <xenc:CipherData><xenc:CipherValue>base64(IV ‖ C ‖ T)</xenc:CipherValue></xenc:CipherData>
        <xenc:EncryptionProperties>
          <xenc:EncryptionProperty Target="#xdn-fragment-POS">
            <xdn:fragment concept="…" position="…" [parent="…"] epoch="…"/>
          </xenc:EncryptionProperty>
        </xenc:EncryptionProperties>
      </xenc:EncryptedData>
      … (one per fragment, in any order)
      <xdn:manifest document="…" publisher="…" version="…" issued-at-ms="…" leaf-count="…">
        <xdn:root>base64</xdn:root>
        <xdn:range concept="…" epoch="…" first="…" count="…"><xdn:hash>base64</xdn:hash>…
        </xdn:range>                                  (the range table, with each run's proof)
        <xdn:signature>base64 (DER ECDSA, SHA-256/384 by curve)</xdn:signature>
      </xdn:manifest>
    </xdn:encrypted-document>

The manifest comes last so that a streaming encoder can write each ``EncryptedData`` as soon as
its element closes and sign once at the end. The fragment header sits in ``EncryptionProperty``
because the XML Encryption schema allows no foreign attributes on ``EncryptedData`` but any
foreign content there. Decrypting a CipherValue with the per-document key named by its
``KeyName`` yields the fragment element, so standard tools (``xmlsec1 --decrypt``) open it.

Writing is byte templates (:func:`document_start`, :func:`encrypted_data`,
:func:`manifest_element`, :data:`DOCUMENT_END`), shared by :func:`to_encrypted_xml` and the
streaming encoder; reading is per element (:func:`read_fragment`, :func:`read_manifest`), shared
by :func:`from_encrypted_xml` and the streaming decoder. Readers check structure only (no keys:
decoding verifies) and raise :class:`~xdn.errors.ProtocolError` for a malformed export; the
parser raises :class:`~xdn.errors.HostileXmlError` for XML it refuses.
"""

from __future__ import annotations

import binascii
import re
from collections.abc import Mapping

from lxml import etree

from xdn.codec._encoding import DS_NS, XDN_NS, XENC11_NS, XENC_NS
from xdn.codec._fragments import EncodedDocument, Fragment
from xdn.codec._manifest import ConceptRange, Manifest, SignedManifest
from xdn.codec._plaintext import fragment_id
from xdn.codec._ranges import RangeProof
from xdn.errors import ProtocolError
from xdn.xmlsafe import Limits, parse_bytes

__all__ = [
    "DOCUMENT_END",
    "document_start",
    "encrypted_data",
    "from_encrypted_xml",
    "manifest_element",
    "read_fragment",
    "read_manifest",
    "read_root",
    "to_encrypted_xml",
]

ELEMENT_TYPE = f"{XENC_NS}Element"
AES256_GCM = f"{XENC11_NS}aes256-gcm"
FORMAT = "2"
_INT = re.compile(r"0|[1-9][0-9]{0,19}")

# -- writing ---------------------------------------------------------------------------------


def _q(value: str) -> str:
    """``value`` as a double-quoted attribute value (names hold no control characters)."""
    escaped = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return '"' + escaped.replace('"', "&quot;") + '"'


def _b64(data: bytes) -> bytes:
    return binascii.b2a_base64(data, newline=False)


def document_start(document_id: str, publisher: str) -> bytes:
    """XML declaration and the root start tag."""
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<xdn:encrypted-document xmlns:xdn="{XDN_NS}" '
        f'xmlns:xenc="{XENC_NS}" xmlns:ds="{DS_NS}" format="{FORMAT}" '
        f"document={_q(document_id)} publisher={_q(publisher)}>\n"
    ).encode()


DOCUMENT_END = b"</xdn:encrypted-document>\n"


def encrypted_data(f: Fragment) -> bytes:
    """One fragment as an ``EncryptedData`` element (followed by a newline)."""
    ident = f"xdn-fragment-{f.position}"
    parent = "" if f.parent is None else f' parent="{f.parent}"'
    head = (
        f'<xenc:EncryptedData Id="{ident}" Type="{ELEMENT_TYPE}">'
        f'<xenc:EncryptionMethod Algorithm="{AES256_GCM}"/>'
        f"<ds:KeyInfo><ds:KeyName>{f.key_name}</ds:KeyName></ds:KeyInfo>"
        "<xenc:CipherData><xenc:CipherValue>"
    ).encode()
    tail = (
        "</xenc:CipherValue></xenc:CipherData><xenc:EncryptionProperties>"
        f'<xenc:EncryptionProperty Target="#{ident}"><xdn:fragment concept={_q(f.concept)} '
        f'position="{f.position}"{parent} epoch="{f.epoch}"/></xenc:EncryptionProperty>'
        "</xenc:EncryptionProperties></xenc:EncryptedData>\n"
    ).encode()
    return b"".join((head, _b64(f.cipher_value), tail))


def manifest_element(signed: SignedManifest, proofs: Mapping[str, RangeProof]) -> bytes:
    """The manifest, its range table and each concept's range proof."""
    m = signed.manifest
    parts = [
        f"<xdn:manifest document={_q(m.document_id)} publisher={_q(m.publisher)} "
        f'version="{m.version}" issued-at-ms="{m.issued_at_ms}" leaf-count="{m.leaf_count}"'
        + (f' sequence="{m.sequence}"' if m.sequence else "")
        + ">\n"
        f"<xdn:root>{_b64(m.root).decode()}</xdn:root>\n"
    ]
    for row in m.ranges:
        hashes = "".join(
            f"<xdn:hash>{_b64(h).decode()}</xdn:hash>" for h in proofs[row.concept].path
        )
        parts.append(
            f'<xdn:range concept={_q(row.concept)} epoch="{row.epoch}" first="{row.first}" '
            f'count="{row.count}"'
            + (f' previous="{row.previous}"' if row.previous else "")
            + f">{hashes}</xdn:range>\n"
        )
    parts.append(f"<xdn:signature>{_b64(signed.signature).decode()}</xdn:signature>\n")
    parts.append("</xdn:manifest>\n")
    return "".join(parts).encode()


def to_encrypted_xml(encoded: EncodedDocument) -> bytes:
    """Serialise ``encoded`` as an XML Encryption 1.1 archive document (UTF-8, with declaration)."""
    if not isinstance(encoded, EncodedDocument):
        raise TypeError("encoded must be an EncodedDocument")
    m = encoded.manifest
    return b"".join(
        (
            document_start(m.document_id, m.publisher),
            *(encrypted_data(f) for f in encoded.fragments),
            manifest_element(encoded.signed_manifest, encoded.range_proofs),
            DOCUMENT_END,
        )
    )


# -- reading ---------------------------------------------------------------------------------


def _x(name: str) -> str:
    return f"{{{XDN_NS}}}{name}"


def _e(name: str) -> str:
    return f"{{{XENC_NS}}}{name}"


def _ds(name: str) -> str:
    return f"{{{DS_NS}}}{name}"


def _bad(el: etree._Element, what: str) -> ProtocolError:
    return ProtocolError(f"encrypted XML, line {el.sourceline}: {what}")


def _child(el: etree._Element, tag: str) -> etree._Element:
    found = el.findall(tag)
    if len(found) != 1:
        raise _bad(el, f"expected exactly one {tag} in {el.tag}, found {len(found)}")
    return found[0]


def _attr(el: etree._Element, name: str) -> str:
    value = el.get(name)
    if not isinstance(value, str):
        raise _bad(el, f"missing attribute {name!r} on {el.tag}")
    return value


def _int(el: etree._Element, name: str) -> int:
    text = _attr(el, name)
    if not _INT.fullmatch(text) or int(text) >= 2**64:
        raise _bad(el, f"attribute {name!r} is not a non-negative integer: {text!r}")
    return int(text)


def _bytes(el: etree._Element) -> bytes:
    text = el.text or ""
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError):
        pass
    try:  # base64Binary allows whitespace between characters
        return binascii.a2b_base64("".join(text.split()), strict_mode=True)
    except (binascii.Error, ValueError):
        raise _bad(el, f"{el.tag} is not valid base64") from None


def read_root(el: etree._Element) -> tuple[str, str]:
    """Check the root element; return its (document id, publisher)."""
    if el.tag != _x("encrypted-document") or el.get("format") != FORMAT:
        raise _bad(el, f"not an xdn encrypted document (format {FORMAT})")
    return _attr(el, "document"), _attr(el, "publisher")


_ENCRYPTION_METHOD = _e("EncryptionMethod")
_KEY_INFO = _ds("KeyInfo")
_KEY_NAME = _ds("KeyName")
_CIPHER_DATA = _e("CipherData")
_CIPHER_VALUE = _e("CipherValue")
_PROPERTIES = _e("EncryptionProperties")
_PROPERTY = _e("EncryptionProperty")
_FRAGMENT = _x("fragment")
_EXPECTED = (_ENCRYPTION_METHOD, _KEY_INFO, _CIPHER_DATA, _PROPERTIES)


def _only(el: etree._Element, tag: str) -> etree._Element:
    """The single child of ``el``, which must be a ``tag`` (comments and PIs are refused)."""
    if len(el) != 1 or el[0].tag != tag:
        raise _bad(el, f"expected exactly one {tag} in {el.tag}")
    return el[0]


def read_fragment(el: etree._Element, *, document_id: str, publisher: str) -> Fragment:
    """Read one ``EncryptedData`` element of the export of ``document_id``.

    Its children must be exactly ``EncryptionMethod``, ``KeyInfo``, ``CipherData``,
    ``EncryptionProperties`` in that order (the order of the XML Encryption schema).
    """
    if el.get("Type") != ELEMENT_TYPE:
        raise _bad(el, f"EncryptedData Type must be {ELEMENT_TYPE}")
    children = list(el)
    if tuple(c.tag for c in children) != _EXPECTED:
        raise _bad(el, f"EncryptedData must hold exactly {', '.join(_EXPECTED)}")
    method, info, data, properties = children
    if method.get("Algorithm") != AES256_GCM or len(method):
        raise _bad(el, f"EncryptionMethod must be {AES256_GCM}")
    name = (_only(info, _KEY_NAME).text or "").strip()
    cipher = _bytes(_only(data, _CIPHER_VALUE))
    header = _only(_only(properties, _PROPERTY), _FRAGMENT)
    position = _int(header, "position")
    parent = _int(header, "parent") if header.get("parent") is not None else None
    try:
        return Fragment(
            fragment_id=fragment_id(document_id, position),
            document_id=document_id,
            publisher=publisher,
            concept=_attr(header, "concept"),
            position=position,
            parent=parent,
            epoch=_int(header, "epoch"),
            key_name=name,
            cipher_value=cipher,
        )
    except (TypeError, ValueError) as exc:
        raise _bad(el, f"invalid fragment: {exc}") from None


def read_manifest(el: etree._Element) -> tuple[SignedManifest, dict[str, RangeProof]]:
    """Read the ``xdn:manifest`` element: the signed manifest and each concept's range proof."""
    try:
        leaf_count = _int(el, "leaf-count")
        rows = [
            (
                ConceptRange(
                    concept=_attr(r, "concept"),
                    epoch=_int(r, "epoch"),
                    first=_int(r, "first"),
                    count=_int(r, "count"),
                    previous=_int(r, "previous") if r.get("previous") is not None else 0,
                ),
                tuple(_bytes(h) for h in r.findall(_x("hash"))),
            )
            for r in el.findall(_x("range"))
        ]
        manifest = Manifest(
            document_id=_attr(el, "document"),
            publisher=_attr(el, "publisher"),
            version=_int(el, "version"),
            issued_at_ms=_int(el, "issued-at-ms"),
            leaf_count=leaf_count,
            root=_bytes(_child(el, _x("root"))),
            ranges=tuple(row for row, _ in rows),
            sequence=_int(el, "sequence") if el.get("sequence") is not None else 0,
        )
        proofs = {
            row.concept: RangeProof(start=row.first, end=row.end, tree_size=leaf_count, path=path)
            for row, path in rows
        }
        signed = SignedManifest(manifest=manifest, signature=_bytes(_child(el, _x("signature"))))
    except (TypeError, ValueError) as exc:
        raise _bad(el, f"inconsistent manifest: {exc}") from None
    return signed, proofs


def from_encrypted_xml(data: bytes, *, limits: Limits | None = None) -> EncodedDocument:
    """Parse a whole archive written by :func:`to_encrypted_xml` (structure only, unverified).

    Raises:
        HostileXmlError: the XML is malformed or refused by the hardened parser.
        ProtocolError: the XML is not a well-formed xdn encrypted document.
    """
    if not isinstance(data, bytes):
        raise TypeError("data must be bytes")
    root = parse_bytes(data, source="encrypted document", limits=limits or Limits()).getroot()
    document_id, publisher = read_root(root)
    fragments: list[Fragment] = []
    manifests: list[tuple[SignedManifest, dict[str, RangeProof]]] = []
    for el in root.iterchildren(etree.Element):
        if el.tag == _e("EncryptedData"):
            fragments.append(read_fragment(el, document_id=document_id, publisher=publisher))
        elif el.tag == _x("manifest"):
            manifests.append(read_manifest(el))
        else:
            raise _bad(el, f"unexpected element {el.tag}")
    if len(manifests) != 1:
        raise _bad(root, f"expected exactly one manifest, found {len(manifests)}")
    signed, proofs = manifests[0]
    m = signed.manifest
    try:
        first = {row.concept: row.first for row in m.ranges}
        ordered = sorted(fragments, key=lambda f: (first[f.concept], f.position))
        return EncodedDocument(
            signed_manifest=signed, fragments=tuple(ordered), range_proofs=proofs
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _bad(root, f"inconsistent document: {exc}") from None
