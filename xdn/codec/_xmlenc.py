"""Export / import of an encoded document as W3C XML Encryption 1.1 (the archive form).

Layout (namespaces: ``xdn`` https://xdn.example.org/ns#, ``xenc``
http://www.w3.org/2001/04/xmlenc#, ``ds`` http://www.w3.org/2000/09/xmldsig#)::

    <xdn:encrypted-document format="1">
      <xdn:manifest document="…" publisher="…" version="…" issued-at-ms="…" leaf-count="…">
        <xdn:root>base64</xdn:root>
        <xdn:signature>base64 (DER ECDSA P-384 / SHA-384)</xdn:signature>
      </xdn:manifest>
      <xenc:EncryptedData Id="xdn-fragment-POS" Type="http://www.w3.org/2001/04/xmlenc#Element">
        <xenc:EncryptionMethod Algorithm="http://www.w3.org/2009/xmlenc11#aes256-gcm"/>
        <ds:KeyInfo><ds:KeyName>KEY NAME</ds:KeyName></ds:KeyInfo>
        <xenc:CipherData><xenc:CipherValue>base64(IV ‖ C ‖ T)</xenc:CipherValue></xenc:CipherData>
        <xenc:EncryptionProperties>
          <xenc:EncryptionProperty Target="#xdn-fragment-POS">
            <xdn:fragment concept="…" position="…" [parent="…"] epoch="…"/>
            <xdn:inclusion-proof leaf-index="…" tree-size="…"><xdn:hash>base64</xdn:hash>…
            </xdn:inclusion-proof>
          </xenc:EncryptionProperty>
        </xenc:EncryptionProperties>
      </xenc:EncryptedData>
      …
    </xdn:encrypted-document>

The fragment header and proof sit in ``EncryptionProperty`` because the XML Encryption schema
allows no foreign attributes on ``EncryptedData`` but any foreign content there. A fragment's
document and publisher are the manifest's. Decrypting a CipherValue with the per-document key
(see :func:`xdn.codec.key_name`) yields the fragment element, so standard tools can open it.
:func:`from_encrypted_xml` parses through :mod:`xdn.xmlsafe`, checks structure only (no keys:
:func:`xdn.codec.decode` verifies) and raises :class:`~xdn.errors.ProtocolError` for a
malformed export, :class:`~xdn.errors.HostileXmlError` for XML refused by the parser.
"""

from __future__ import annotations

import base64
import binascii
import re

from lxml import etree

from xdn.codec._encoding import DS_NS, XDN_NS, XENC11_NS, XENC_NS
from xdn.codec._fragments import EncodedDocument, Fragment
from xdn.codec._manifest import Manifest, SignedManifest
from xdn.codec._merkle import InclusionProof
from xdn.codec._plaintext import fragment_id
from xdn.errors import ProtocolError
from xdn.xmlsafe import Limits, parse_bytes

__all__ = ["from_encrypted_xml", "to_encrypted_xml"]

ELEMENT_TYPE = f"{XENC_NS}Element"
AES256_GCM = f"{XENC11_NS}aes256-gcm"
_FORMAT = "1"
_NSMAP = {"xdn": XDN_NS, "xenc": XENC_NS, "ds": DS_NS}
_INT = re.compile(r"0|[1-9][0-9]{0,19}")


def _x(name: str) -> str:
    return f"{{{XDN_NS}}}{name}"


def _e(name: str) -> str:
    return f"{{{XENC_NS}}}{name}"


def _ds(name: str) -> str:
    return f"{{{DS_NS}}}{name}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _sub(
    holder: etree._Element, tag: str, text: str | None = None, attrs: dict[str, str] | None = None
) -> etree._Element:
    child = etree.SubElement(holder, tag, attrs or {})
    child.text = text
    return child


def _manifest_element(parent: etree._Element, signed: SignedManifest) -> None:
    m = signed.manifest
    attrs = {
        "document": m.document_id,
        "publisher": m.publisher,
        "version": str(m.version),
        "issued-at-ms": str(m.issued_at_ms),
        "leaf-count": str(m.leaf_count),
    }
    el = _sub(parent, _x("manifest"), attrs=attrs)
    _sub(el, _x("root"), _b64(m.root))
    _sub(el, _x("signature"), _b64(signed.signature))


def _fragment_element(parent: etree._Element, f: Fragment, proof: InclusionProof) -> None:
    ident = f"xdn-fragment-{f.position}"
    data = _sub(parent, _e("EncryptedData"), attrs={"Id": ident, "Type": ELEMENT_TYPE})
    _sub(data, _e("EncryptionMethod"), attrs={"Algorithm": AES256_GCM})
    _sub(_sub(data, _ds("KeyInfo")), _ds("KeyName"), f.key_name)
    _sub(_sub(data, _e("CipherData")), _e("CipherValue"), _b64(f.cipher_value))
    props = _sub(data, _e("EncryptionProperties"))
    prop = _sub(props, _e("EncryptionProperty"), attrs={"Target": f"#{ident}"})
    header = {"concept": f.concept, "position": str(f.position), "epoch": str(f.epoch)}
    if f.parent is not None:
        header["parent"] = str(f.parent)
    _sub(prop, _x("fragment"), attrs=header)
    counts = {"leaf-index": str(proof.leaf_index), "tree-size": str(proof.tree_size)}
    el = _sub(prop, _x("inclusion-proof"), attrs=counts)
    for node in proof.path:
        _sub(el, _x("hash"), _b64(node))


def to_encrypted_xml(encoded: EncodedDocument) -> bytes:
    """Serialise ``encoded`` as an XML Encryption 1.1 archive document (UTF-8, with declaration)."""
    if not isinstance(encoded, EncodedDocument):
        raise TypeError("encoded must be an EncodedDocument")
    root = etree.Element(_x("encrypted-document"), {"format": _FORMAT}, nsmap=_NSMAP)
    _manifest_element(root, encoded.signed_manifest)
    for f in encoded.fragments:
        _fragment_element(root, f, encoded.proofs[f.fragment_id])
    data: bytes = etree.tostring(root, xml_declaration=True, encoding="UTF-8", pretty_print=True)
    return data


# -- reading ---------------------------------------------------------------------------------


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
    text = "".join((el.text or "").split())
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(el, f"{el.tag} is not valid base64") from None


def _read_manifest(el: etree._Element) -> SignedManifest:
    manifest = Manifest(
        document_id=_attr(el, "document"),
        publisher=_attr(el, "publisher"),
        version=_int(el, "version"),
        issued_at_ms=_int(el, "issued-at-ms"),
        leaf_count=_int(el, "leaf-count"),
        root=_bytes(_child(el, _x("root"))),
    )
    return SignedManifest(manifest=manifest, signature=_bytes(_child(el, _x("signature"))))


def _read_fragment(el: etree._Element, m: Manifest) -> tuple[Fragment, InclusionProof]:
    if el.get("Type") != ELEMENT_TYPE:
        raise _bad(el, f"EncryptedData Type must be {ELEMENT_TYPE}")
    if _attr(_child(el, _e("EncryptionMethod")), "Algorithm") != AES256_GCM:
        raise _bad(el, f"EncryptionMethod must be {AES256_GCM}")
    name = (_child(_child(el, _ds("KeyInfo")), _ds("KeyName")).text or "").strip()
    cipher = _bytes(_child(_child(el, _e("CipherData")), _e("CipherValue")))
    prop = _child(_child(el, _e("EncryptionProperties")), _e("EncryptionProperty"))
    header = _child(prop, _x("fragment"))
    position = _int(header, "position")
    parent = _int(header, "parent") if header.get("parent") is not None else None
    fragment = Fragment(
        fragment_id=fragment_id(m.document_id, position),
        document_id=m.document_id,
        publisher=m.publisher,
        concept=_attr(header, "concept"),
        position=position,
        parent=parent,
        epoch=_int(header, "epoch"),
        key_name=name,
        cipher_value=cipher,
    )
    proof_el = _child(prop, _x("inclusion-proof"))
    proof = InclusionProof(
        leaf_index=_int(proof_el, "leaf-index"),
        tree_size=_int(proof_el, "tree-size"),
        path=tuple(_bytes(h) for h in proof_el.findall(_x("hash"))),
    )
    return fragment, proof


def _read(root: etree._Element) -> EncodedDocument:
    if root.tag != _x("encrypted-document") or root.get("format") != _FORMAT:
        raise _bad(root, f"not an xdn encrypted document (format {_FORMAT})")
    signed = _read_manifest(_child(root, _x("manifest")))
    items = []
    for el in root.iterchildren(etree.Element):
        if el.tag == _e("EncryptedData"):
            try:
                items.append(_read_fragment(el, signed.manifest))
            except (TypeError, ValueError) as exc:
                raise _bad(el, f"invalid fragment: {exc}") from None
        elif el.tag != _x("manifest"):
            raise _bad(el, f"unexpected element {el.tag}")
    return EncodedDocument(
        signed_manifest=signed,
        fragments=tuple(f for f, _ in items),
        proofs={f.fragment_id: p for f, p in items},
    )


def from_encrypted_xml(data: bytes, *, limits: Limits | None = None) -> EncodedDocument:
    """Parse an archive written by :func:`to_encrypted_xml` (structure only, nothing verified).

    Raises:
        HostileXmlError: the XML is malformed or refused by the hardened parser.
        ProtocolError: the XML is not a well-formed xdn encrypted document.
    """
    if not isinstance(data, bytes):
        raise TypeError("data must be bytes")
    tree = parse_bytes(data, source="encrypted document", limits=limits or Limits())
    root = tree.getroot()
    try:
        return _read(root)
    except (TypeError, ValueError) as exc:
        raise _bad(root, f"inconsistent document: {exc}") from None
