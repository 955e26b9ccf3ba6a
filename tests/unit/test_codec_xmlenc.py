"""XML Encryption 1.1 export of encoded documents: round trip, layout, malformed input."""

from __future__ import annotations

import base64
from dataclasses import dataclass

import pytest
from lxml import etree

from xdn import crypto
from xdn.codec import (
    ConceptKey,
    EncodedDocument,
    decode,
    encode,
    from_encrypted_xml,
    select,
    to_encrypted_xml,
)
from xdn.errors import HostileXmlError, PeerError, ProtocolError
from xdn.xmlsafe import parse_bytes

XENC = "http://www.w3.org/2001/04/xmlenc#"
DS = "http://www.w3.org/2000/09/xmldsig#"
XDN = "https://xdn.example.org/ns#"
NSMAP = {"xenc": XENC, "ds": DS, "xdn": XDN}
SIGNER = crypto.generate_private_key()
GROUP = {c: crypto.sha256(c.encode()) for c in ("Order", "Line")}
KEYS = {c: ConceptKey(publisher="pub", concept=c, epoch=2, group_key=k) for c, k in GROUP.items()}


@dataclass(frozen=True)
class Mapped:
    element: etree._Element
    concept: str


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    root = parse_bytes(b"<order n='1'><line>a</line><line>b<line>c</line></line></order>").getroot()
    nodes = [Mapped(root, "Order"), *(Mapped(el, "Line") for el in root.iter("line"))]
    return encode(
        nodes,
        document_id="doc-9",
        publisher="pub",
        version=4,
        issued_at_ms=123,
        keys=KEYS,
        signer=SIGNER,
        concept_order=("Order", "Line"),
    )


@pytest.fixture(scope="module")
def exported(encoded: EncodedDocument) -> bytes:
    return to_encrypted_xml(encoded)


def test_round_trip(encoded: EncodedDocument, exported: bytes) -> None:
    back = from_encrypted_xml(exported)
    assert back == encoded
    view = decode(
        select(back, ["Order", "Line"]),
        publisher_key=SIGNER.public_key(),
        keys={("pub", c, 2): k for c, k in GROUP.items()},
    )
    assert view.to_bytes().endswith(
        b'<order n="1"><line>a</line><line>b<line>c</line></line></order></xdn:view>'
    )


def test_layout_is_xml_encryption_1_1(encoded: EncodedDocument, exported: bytes) -> None:
    root = etree.fromstring(exported)
    assert root.tag == f"{{{XDN}}}encrypted-document"
    assert [root.get(a) for a in ("format", "document", "publisher")] == ["2", "doc-9", "pub"]
    datas = root.findall("xenc:EncryptedData", NSMAP)
    assert len(datas) == 4
    for fragment, data in zip(encoded.fragments, datas, strict=True):
        assert data.get("Type") == "http://www.w3.org/2001/04/xmlenc#Element"
        assert data.get("Id") == f"xdn-fragment-{fragment.position}"
        method = data.find("xenc:EncryptionMethod", NSMAP)
        assert method is not None
        assert method.get("Algorithm") == "http://www.w3.org/2009/xmlenc11#aes256-gcm"
        assert data.findtext("ds:KeyInfo/ds:KeyName", namespaces=NSMAP) == fragment.key_name
        value = data.findtext("xenc:CipherData/xenc:CipherValue", namespaces=NSMAP)
        assert base64.b64decode(value or "") == fragment.cipher_value
        header = data.find("xenc:EncryptionProperties/xenc:EncryptionProperty/xdn:fragment", NSMAP)
        assert header is not None
        assert header.get("concept") == fragment.concept
        assert header.get("position") == str(fragment.position)
        assert header.get("epoch") == "2"
        assert header.get("parent") == (None if fragment.parent is None else str(fragment.parent))
        # Standard tools decrypt the CipherValue with the per-document key to the element.
        key = KEYS[fragment.concept].for_document("doc-9")
        plain = crypto.aead_decrypt(key, base64.b64decode(value or ""))
        assert parse_bytes(plain).getroot().tag in {"order", "line"}
    assert encoded.fragments[3].parent == 2
    manifest = root[-1]
    assert manifest.tag == f"{{{XDN}}}manifest"  # last, so that a stream can sign at the end
    ranges = manifest.findall("xdn:range", NSMAP)
    assert [(r.get("concept"), r.get("first"), r.get("count")) for r in ranges] == [
        ("Order", "0", "1"),
        ("Line", "1", "3"),
    ]
    assert len(ranges[0].findall("xdn:hash", NSMAP)) == len(encoded.range_proofs["Order"].path)


def _mutate(exported: bytes, xpath: str, change: str, value: str | None = None) -> bytes:
    root = etree.fromstring(exported)
    (target,) = root.xpath(xpath, namespaces=NSMAP)
    if change == "remove":
        target.getparent().remove(target)
    elif change == "text":
        target.text = value
    else:
        if value is None:
            del target.attrib[change]
        else:
            target.set(change, value)
    return bytes(etree.tostring(root))


FIRST = "/xdn:encrypted-document/xenc:EncryptedData[1]"
HEADER = f"{FIRST}/xenc:EncryptionProperties/xenc:EncryptionProperty/xdn:fragment"
MANIFEST = "/xdn:encrypted-document/xdn:manifest"


@pytest.mark.parametrize(
    ("xpath", "change", "value", "message"),
    [
        ("/xdn:encrypted-document", "format", "1", "not an xdn encrypted document"),
        ("/xdn:encrypted-document", "document", None, "missing attribute"),
        (MANIFEST, "remove", None, "exactly one manifest"),
        (MANIFEST, "version", "-1", "non-negative integer"),
        (MANIFEST, "leaf-count", "5", "inconsistent manifest"),
        (f"{MANIFEST}/xdn:root", "text", "!!", "base64"),
        (f"{MANIFEST}/xdn:root", "text", "AAAA", "inconsistent manifest"),
        (f"{MANIFEST}/xdn:range[2]", "first", "2", "inconsistent manifest"),
        (f"{MANIFEST}/xdn:range[1]/xdn:hash[1]", "text", "AAAA", "inconsistent manifest"),
        (MANIFEST, "document", "doc-10", "inconsistent document"),
        (FIRST, "Type", "http://www.w3.org/2001/04/xmlenc#Content", "Type"),
        (f"{FIRST}/xenc:EncryptionMethod", "Algorithm", f"{XENC}aes256-cbc", "aes256-gcm"),
        (f"{FIRST}/xenc:CipherData/xenc:CipherValue", "text", "not base64", "base64"),
        (f"{FIRST}/ds:KeyInfo", "remove", None, "exactly"),
        (HEADER, "position", "01", "integer"),
        (HEADER, "position", "2", "inconsistent"),
        (HEADER, "concept", None, "concept"),
        (HEADER, "concept", "", "invalid fragment"),
        (HEADER, "concept", "Other", "inconsistent document"),
        (HEADER, "parent", "0", "invalid fragment"),
    ],
)  # fmt: skip
def test_malformed_exports_are_peer_errors(
    exported: bytes, xpath: str, change: str, value: str | None, message: str
) -> None:
    with pytest.raises(ProtocolError, match=message) as info:
        from_encrypted_xml(_mutate(exported, xpath, change, value))
    assert "encrypted XML, line" in str(info.value)


def test_unexpected_element_and_hostile_xml(exported: bytes) -> None:
    extra = exported.replace(b"</xdn:encrypted-document>", b"<x/></xdn:encrypted-document>")
    with pytest.raises(ProtocolError, match="unexpected element"):
        from_encrypted_xml(extra)
    commented = exported.replace(b"<ds:KeyInfo>", b"<ds:KeyInfo><!-- x -->", 1)
    with pytest.raises(ProtocolError, match="exactly"):
        from_encrypted_xml(commented)
    with pytest.raises(HostileXmlError):
        from_encrypted_xml(b'<!DOCTYPE a [<!ENTITY e "x">]><a>&e;</a>')
    with pytest.raises(PeerError):
        from_encrypted_xml(exported[:-40])
    with pytest.raises(TypeError):
        from_encrypted_xml(exported.decode())  # type: ignore[arg-type]
