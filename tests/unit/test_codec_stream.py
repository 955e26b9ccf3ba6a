"""Streaming encoder and decoder: as in memory, under any chunking, nothing unverified out."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from deploy import docgen
from xdn import crypto
from xdn.codec import (
    ConceptKey,
    EncodedDocument,
    canonicalize,
    concept_order,
    decode,
    decode_file,
    encode,
    encode_document,
    encode_file,
    from_encrypted_xml,
    key_name,
    select,
)
from xdn.codec._patterns import compile_paths
from xdn.errors import DecryptError, MappingError, ProtocolError, UsageError
from xdn.mapping import Mapping, load_mapping, map_document, parse_mapping
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT
from xdn.xmlsafe import parse_bytes

SIGNER = crypto.generate_private_key()
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
MAPPING = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ONTOLOGY)
SAMPLE = (REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml").read_bytes()
PUBLISHER = "production-dept"
GROUP = {c: crypto.sha256(c.encode()) for c in ONTOLOGY.concepts}
KEYS = {
    c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=1, group_key=k) for c, k in GROUP.items()
}
SUBSCRIBER_KEYS = {(PUBLISHER, c, 1): k for c, k in GROUP.items()}
ORDER = concept_order(ONTOLOGY)


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``step`` bytes per read."""

    def __init__(self, data: bytes, step: int) -> None:
        self._data = data
        self._at = 0
        self._step = step

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        piece = self._data[self._at : self._at + self._step]
        self._at += len(piece)
        return piece


def job(**change: Any) -> dict[str, Any]:
    return {
        "mapping": MAPPING,
        "document_id": "doc-1",
        "publisher": PUBLISHER,
        "version": 3,
        "issued_at_ms": 5,
        "keys": KEYS,
        "signer": SIGNER,
        "concept_order": ORDER,
        **change,
    }


def export(data: bytes = SAMPLE, source: Any = None, **change: Any) -> bytes:
    out = io.BytesIO()
    encode_file(io.BytesIO(data) if source is None else source, out, **job(**change))
    return out.getvalue()


def plaintexts(encoded: EncodedDocument) -> dict[int, tuple[str, int | None, bytes]]:
    return {
        f.position: (
            f.concept,
            f.parent,
            crypto.aead_decrypt(KEYS[f.concept].for_document(f.document_id), f.cipher_value),
        )
        for f in encoded.fragments
    }


def canonical_view(xml: bytes) -> bytes:
    return canonicalize(parse_bytes(xml).getroot())


@pytest.fixture(scope="module")
def generated() -> bytes:
    out = io.BytesIO()
    docgen.generate("production-dept", 60_000, out, seed=11)
    return out.getvalue()


@pytest.fixture(scope="module")
def reference(generated: bytes) -> EncodedDocument:
    """The in-memory encoder's result for the generated document."""
    tree = parse_bytes(generated)
    kwargs = job()
    del kwargs["mapping"]
    return encode(map_document(tree, MAPPING), **kwargs)


# -- encoding --------------------------------------------------------------------------------


@pytest.mark.parametrize("step", [1, 7, 4096, None])
def test_streamed_export_has_the_in_memory_plaintexts(
    generated: bytes, reference: EncodedDocument, step: int | None
) -> None:
    source = None if step is None else Trickle(generated, step)
    streamed = from_encrypted_xml(export(generated, source))
    assert streamed.manifest.ranges == reference.manifest.ranges
    assert [f.fragment_id for f in streamed.fragments] == [
        f.fragment_id for f in reference.fragments
    ]
    assert plaintexts(streamed) == plaintexts(reference)


def test_encode_document_streams_to_the_wire_form(
    generated: bytes, reference: EncodedDocument
) -> None:
    encoded = encode_document(io.BytesIO(generated), **job())
    assert encoded.manifest.ranges == reference.manifest.ranges
    assert plaintexts(encoded) == plaintexts(reference)
    in_memory = encode_document(io.BytesIO(generated), **job(streaming=False))
    assert plaintexts(in_memory) == plaintexts(reference)


def test_encode_file_reports_and_reads_paths(tmp_path: Path, generated: bytes) -> None:
    doc = tmp_path / "doc.xml"
    doc.write_bytes(generated)
    seen: list[int] = []
    out = io.BytesIO()
    report = encode_file(doc, out, progress=seen.append, **job())
    assert report.streamed
    assert seen and seen[-1] == len(generated) and seen == sorted(seen)
    assert report.largest_fragment > 0
    assert report.signed_manifest == from_encrypted_xml(out.getvalue()).signed_manifest


def predicate_mapping(ontology: Ontology = ONTOLOGY) -> Mapping:
    text = b"""
[namespaces]
pd = "urn:example:production-dept"
[concepts]
WorkOrder = ["/pd:WorkOrders/pd:Order[@priority]"]
ProductionStep = ["//pd:Manufacturing/pd:Step"]
"""
    return parse_mapping(text, ontology, source="predicate.toml", schema="pd")


def test_mappings_that_cannot_stream_fall_back_to_memory() -> None:
    mapping = predicate_mapping()
    out = io.BytesIO()
    report = encode_file(io.BytesIO(SAMPLE), out, **job(mapping=mapping))
    assert not report.streamed
    assert {r.concept for r in report.signed_manifest.manifest.ranges} == {
        "WorkOrder",
        "ProductionStep",
    }
    with pytest.raises(UsageError, match="simple paths"):
        encode_file(io.BytesIO(SAMPLE), io.BytesIO(), **job(mapping=mapping, streaming=True))
    with pytest.raises(TypeError):
        encode_file(io.BytesIO(SAMPLE), io.BytesIO(), **job(mapping={"WorkOrder": "/x"}))


def test_streaming_refuses_what_the_in_memory_path_refuses() -> None:
    doubled = b"""
[namespaces]
pd = "urn:example:production-dept"
[concepts]
WorkOrder = ["/pd:WorkOrders/pd:Order"]
Production = ["//pd:Order"]
"""
    mapping = parse_mapping(doubled, ONTOLOGY, source="doubled.toml", schema="pd")
    with pytest.raises(MappingError, match="mapped to both WorkOrder and Production"):
        export(mapping=mapping)
    reserved = b'<pd:WorkOrders xmlns:pd="urn:example:production-dept"><x:ref ' \
               b'xmlns:x="https://xdn.example.org/ns#"/></pd:WorkOrders>'  # fmt: skip
    with pytest.raises(UsageError, match="reserved xdn namespace"):
        export(reserved)
    with pytest.raises(UsageError, match="nothing to encode"):
        export(b'<pd:WorkOrders xmlns:pd="urn:example:production-dept"/>')
    with pytest.raises(UsageError, match="no group key"):
        export(keys={c: k for c, k in KEYS.items() if c != "ProductionStep"})


@pytest.mark.parametrize(
    ("expression", "path", "matches"),
    [
        ("/a/b", "\x1fa\x1fb", True),
        ("/a/b", "\x1fx\x1fa\x1fb", False),
        ("//a/b", "\x1fx\x1fa\x1fb", True),
        ("//a/b", "\x1fa\x1fb", True),
        ("//b", "\x1fa\x1fc\x1fb", True),
        ("/a//b", "\x1fa\x1fc\x1fd\x1fb", True),
        ("/a/*", "\x1fa\x1f{urn:p}z", True),
        ("/a/p:*", "\x1fa\x1f{urn:p}z", True),
        ("/a/p:*", "\x1fa\x1fz", False),
        ("/a/p:z", "\x1fa\x1f{urn:p}z", True),
        ("/a/z", "\x1fa\x1f{urn:p}z", False),
    ],
)
def test_simple_paths_match_like_xpath(expression: str, path: str, matches: bool) -> None:
    matcher = compile_paths([("C", expression)], {"p": "urn:p"}, source="t")
    assert matcher is not None
    tag = path.rsplit("\x1f", 1)[-1]
    assert (matcher.concept(path, tag, 1) == "C") is matches


@pytest.mark.parametrize(
    "expression",
    ["a/b", "/a/b[1]", "/a/@b", "/a/b | /c", "/a/text()", "/a/../b", "/a/q:b", "/", "//a/"],
)
def test_other_xpaths_do_not_stream(expression: str) -> None:
    assert compile_paths([("C", expression)], {"p": "urn:p"}, source="t") is None


# -- decoding --------------------------------------------------------------------------------


def test_streamed_decode_equals_the_in_memory_view(generated: bytes) -> None:
    data = export(generated)
    out = io.BytesIO()
    report = decode_file(io.BytesIO(data), out, publisher_key=SIGNER.public_key(),
                         keys=SUBSCRIBER_KEYS)  # fmt: skip
    encoded = from_encrypted_xml(data)
    view = decode(select(encoded, ONTOLOGY.concepts), publisher_key=SIGNER.public_key(),
                  keys=SUBSCRIBER_KEYS)  # fmt: skip
    assert canonical_view(out.getvalue()) == view.to_bytes()
    assert report.fragments == view.fragments
    assert report.withheld == 0
    original = canonicalize(parse_bytes(generated).getroot())
    assert b"Nordwind" in out.getvalue() or b"Hansa" in out.getvalue() or original


def test_streamed_decode_with_some_keys_withholds_the_rest(tmp_path: Path) -> None:
    data = export()
    wanted = {"WorkOrder", "ProductionStep"}
    encoded = from_encrypted_xml(data)
    names = {key_name(PUBLISHER, c, 1, "doc-1"): KEYS[c].for_document("doc-1") for c in wanted}
    path = tmp_path / "export.xml"
    path.write_bytes(data)
    out = io.BytesIO()
    report = decode_file(path, out, publisher_key=SIGNER.public_key(), document_keys=names)
    view = decode(select(encoded, wanted), publisher_key=SIGNER.public_key(), document_keys=names)
    assert canonical_view(out.getvalue()) == view.to_bytes()
    assert {h.concept for h in report.fragments} == wanted
    assert report.withheld == encoded.manifest.leaf_count - len(report.fragments)
    assert b"xdn:withheld" in out.getvalue()


def flip_cipher_value(data: bytes, occurrence: int = 3) -> bytes:
    marker = b"<xenc:CipherValue>"
    at = -1
    for _ in range(occurrence):
        at = data.index(marker, at + 1)
    at += len(marker) + 20
    swapped = b"A" if data[at : at + 1] != b"A" else b"B"
    return data[:at] + swapped + data[at + 1 :]


def open_export(data: bytes, **options: Any) -> bytes:
    out = io.BytesIO()
    kwargs: dict[str, Any] = {"publisher_key": SIGNER.public_key(), "keys": SUBSCRIBER_KEYS}
    kwargs.update(options)
    try:
        decode_file(io.BytesIO(data), out, **kwargs)
    finally:
        if out.getvalue():
            raise AssertionError("something was written before verification")
    return out.getvalue()


def drop_second_fragment(data: bytes) -> bytes:
    start = data.index(b"<xenc:EncryptedData", data.index(b"<xenc:EncryptedData") + 1)
    end = data.index(b"</xenc:EncryptedData>\n", start) + len(b"</xenc:EncryptedData>\n")
    return data[:start] + data[end:]


TAMPERINGS: dict[str, Callable[[bytes], bytes]] = {
    "ciphertext": flip_cipher_value,
    "header": lambda d: d.replace(b'position="2"', b'position="99"', 1),
    "dropped": drop_second_fragment,
    "manifest": lambda d: d.replace(b'version="3"', b'version="4"'),
    "document": lambda d: d.replace(b'document="doc-1" pub', b'document="doc-2" pub', 1),
}


@pytest.mark.parametrize("tampering", sorted(TAMPERINGS))
def test_tampered_exports_are_refused_before_any_output(tampering: str) -> None:
    data = export()
    with pytest.raises(DecryptError):
        open_export(TAMPERINGS[tampering](data))


def test_replayed_or_foreign_exports_are_refused() -> None:
    data = export()
    with pytest.raises(DecryptError):
        open_export(data, seen={(PUBLISHER, "doc-1"): 3})
    with pytest.raises(DecryptError):
        open_export(data, publisher_key=crypto.generate_private_key().public_key())
    with pytest.raises(DecryptError):  # holds no key, yet expects every concept complete
        open_export(
            TAMPERINGS["dropped"](data),
            keys=None,
            document_keys={},
            concepts=ONTOLOGY.concepts,
        )


def test_malformed_exports_are_protocol_errors() -> None:
    data = export()
    with pytest.raises(ProtocolError, match="no manifest"):
        open_export(data[: data.index(b"<xdn:manifest")] + b"</xdn:encrypted-document>")
    with pytest.raises(ProtocolError, match="unexpected"):
        open_export(data.replace(b"<xdn:manifest", b"<x/><xdn:manifest"))
    with pytest.raises(ProtocolError, match="not an xdn encrypted document"):
        open_export(data.replace(b'format="2"', b'format="1"'))


def test_streamed_decode_misuse() -> None:
    with pytest.raises(TypeError):
        decode_file(io.BytesIO(export()), io.BytesIO(), publisher_key=SIGNER.public_key())


def test_views_of_nested_default_namespaces_survive_splicing(tmp_path: Path) -> None:
    document = (
        b'<r xmlns="urn:d"><o><s xmlns=""><t>in s</t></s>tail</o>'
        b'<o><s xmlns="urn:e"><t/></s></o></r>'
    )
    ontology = Ontology.from_edges(iri="urn:o", concepts=["O", "S"], edges=[("O", "S")])
    mapping = parse_mapping(
        b'[namespaces]\nd = "urn:d"\ne = "urn:e"\n[concepts]\nO = ["/d:r/d:o"]\n'
        b'S = ["//d:o/s", "//d:o/e:s"]\n',
        ontology,
        source="ns.toml",
        schema="ns",
    )
    keys = {c: ConceptKey(publisher="p", concept=c, epoch=1, group_key=bytes(32)) for c in "OS"}
    out = io.BytesIO()
    encode_file(io.BytesIO(document), out, mapping=mapping, document_id="d", publisher="p",
                version=1, issued_at_ms=0, keys=keys, signer=SIGNER)  # fmt: skip
    view_out = io.BytesIO()
    decode_file(io.BytesIO(out.getvalue()), view_out, publisher_key=SIGNER.public_key(),
                keys={("p", c, 1): bytes(32) for c in "OS"})  # fmt: skip
    view = parse_bytes(view_out.getvalue()).getroot()
    tags = [etree.QName(el).text for el in view.iter() if isinstance(el.tag, str)]
    assert tags[1:] == ["{urn:d}o", "s", "t", "{urn:d}o", "{urn:e}s", "{urn:e}t"]
