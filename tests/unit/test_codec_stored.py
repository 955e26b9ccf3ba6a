"""Decoding a delivery whose ciphertexts are kept elsewhere (xdn.codec.decode_stored, issue #15):
the canonical view it writes equals the in-memory decoder's ``View.to_bytes()``, and every
check refuses as the in-memory decoder refuses."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from lxml import etree

from deploy.docgen import generate
from tests.unit.test_codec_property import (
    CONCEPTS,
    DOC,
    KEYS,
    SIGNER,
    SUBSCRIBER_KEYS,
    _encode,
    scenarios,
)
from xdn import crypto
from xdn.codec import (
    ConceptKey,
    Delivery,
    _canonical_view,
    decode,
    decode_stored,
    encode,
    fragment_concepts,
    select,
)
from xdn.codec import _plaintext as plaintext
from xdn.codec._canonical_view import CanonicalWriter, _attributes, _name
from xdn.errors import DecryptError, HostileXmlError
from xdn.mapping import load_mapping, map_document
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.xmlsafe import parse_bytes, parse_file


class Held:
    """A ciphertext kept elsewhere (counts the bytes read, to show none is read whole)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.largest_read = 0

    def __len__(self) -> int:
        return len(self.data)

    def read(self, start: int, end: int) -> bytes:
        self.largest_read = max(self.largest_read, end - start)
        return self.data[start:end]


def without_ciphertexts(delivery: Delivery) -> Delivery:
    empty = tuple(dataclasses.replace(f, cipher_value=b"") for f in delivery.fragments)
    return dataclasses.replace(delivery, fragments=empty)


def stored(delivery: Delivery, tmp: Path, **kwargs: object) -> tuple[bytes, tuple[object, ...]]:
    lean = without_ciphertexts(delivery)
    out = io.BytesIO()
    held = decode_stored(
        lean, [Held(f.cipher_value) for f in delivery.fragments], out.write, workdir=tmp,
        publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS, **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip
    return out.getvalue(), held


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=scenarios())
def test_the_stored_decoder_writes_the_in_memory_views_canonical_bytes(
    scenario: tuple[etree._Element, dict[etree._Element, str], set[str]], tmp_path: Path
) -> None:
    root, concept_of, chosen = scenario
    delivery = select(_encode(root, concept_of), chosen)
    if not delivery.fragments:
        return
    view = decode(delivery, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS,
                  concepts=chosen)  # fmt: skip
    written, held = stored(delivery, tmp_path, concepts=chosen)
    assert written == view.to_bytes()
    assert {h.fragment_id: h.concept for h in held} == fragment_concepts(view)  # type: ignore[attr-defined]


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(scenario=scenarios())
def test_so_it_does_under_a_default_namespace(
    scenario: tuple[etree._Element, dict[etree._Element, str], set[str]], tmp_path: Path
) -> None:
    root, concept_of, chosen = scenario
    xml = etree.tostring(root)
    if not xml.startswith(b"<a"):
        return
    moved = etree.fromstring(xml.replace(b"<a", b'<a xmlns="urn:z"', 1))  # b stays in none
    by_index = {i: c for i, el in enumerate(root.iter()) if (c := concept_of.get(el))}
    mapped = {el: by_index[i] for i, el in enumerate(moved.iter()) if i in by_index}
    delivery = select(_encode(moved, mapped), chosen)
    if not delivery.fragments:
        return
    view = decode(delivery, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS,
                  concepts=chosen)  # fmt: skip
    assert stored(delivery, tmp_path, concepts=chosen)[0] == view.to_bytes()


def test_namespaces_defaults_comments_and_instructions_come_out_as_c14n_writes_them(
    tmp_path: Path,
) -> None:
    xml = (
        b'<r xmlns="urn:d" xmlns:p="urn:p" xmlns:q="urn:p2"><a p:k="1" b="2&amp;&#xD;"><!-- c -->'
        b'x<?pi data?>y<n xmlns="">t&lt;<p:m q:z=" \t\n"/></n></a><p:s><r2/></p:s></r>'
    )
    tree = parse_bytes(xml)
    out = io.BytesIO()
    writer = CanonicalWriter(out.write)

    def walk(el: etree._Element) -> None:
        if not isinstance(el.tag, str):
            if isinstance(el, etree._ProcessingInstruction):
                writer.pi(el.target, el.text)
            writer.text(el.tail)
            return
        writer.start(_name(el), _attributes(el))
        writer.text(el.text)
        for child in el:
            walk(child)
        writer.end()
        writer.text(el.tail)

    walk(tree.getroot())
    want = etree.tostring(tree.getroot(), method="c14n", exclusive=True, with_comments=False)
    assert out.getvalue() == want


def test_a_flipped_ciphertext_byte_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    root = etree.fromstring(b"<a><b>" + b"x" * (3 << 20) + b"</b><c>y</c></a>")  # b: 3 MiB
    concept_of = {root: "A", root[0]: "B", root[1]: "C"}
    delivery = select(_encode(root, concept_of), CONCEPTS)
    for index in range(len(delivery.fragments)):
        fragments = list(delivery.fragments)
        blob = bytearray(fragments[index].cipher_value)
        blob[len(blob) // 2] ^= 1
        fragments[index] = dataclasses.replace(fragments[index], cipher_value=bytes(blob))
        with pytest.raises(DecryptError):
            stored(dataclasses.replace(delivery, fragments=tuple(fragments)), tmp_path)
    assert list(tmp_path.iterdir()) == []  # the plaintexts are gone


def test_a_ciphertext_too_short_for_its_iv_and_tag_is_refused(tmp_path: Path) -> None:
    root = etree.fromstring(b"<a>x</a>")
    delivery = select(_encode(root, {root: "A"}), CONCEPTS)
    out = io.BytesIO()
    lean = without_ciphertexts(delivery)
    with pytest.raises(DecryptError):
        decode_stored(lean, [Held(b"short")], out.write, workdir=tmp_path,
                      publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS)  # fmt: skip
    assert out.getvalue() == b""


def test_a_missing_key_is_refused_before_anything_is_decrypted(tmp_path: Path) -> None:
    root = etree.fromstring(b"<a><b>x</b></a>")
    delivery = select(_encode(root, {root: "A", root[0]: "B"}), CONCEPTS)
    held = [Held(f.cipher_value) for f in delivery.fragments]
    lean = without_ciphertexts(delivery)
    keys = {k: v for k, v in SUBSCRIBER_KEYS.items() if k[1] != "B"}
    with pytest.raises(DecryptError):
        decode_stored(lean, held, io.BytesIO().write, workdir=tmp_path,
                      publisher_key=SIGNER.public_key(), keys=keys, concepts=CONCEPTS)  # fmt: skip


def test_ciphertexts_are_read_a_bounded_span_at_a_time(tmp_path: Path) -> None:
    root = etree.fromstring(b"<a>" + b"z" * (3 << 20) + b"</a>")
    delivery = select(_encode(root, {root: "A"}), CONCEPTS)
    lean = without_ciphertexts(delivery)
    held = [Held(f.cipher_value) for f in delivery.fragments]
    out = io.BytesIO()
    decode_stored(lean, held, out.write, workdir=tmp_path,
                  publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS)  # fmt: skip
    view = decode(delivery, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS)
    assert out.getvalue() == view.to_bytes()
    assert held[0].largest_read <= 1 << 20


def test_an_attribute_namespace_with_two_prefixes_is_refused_as_hostile() -> None:
    el = etree.fromstring(b'<r xmlns:a="urn:x" xmlns:b="urn:x" a:k="1"/>')
    with pytest.raises(HostileXmlError):
        _attributes(el)


@pytest.fixture(params=["whole", "node by node"])
def subtrees(request: pytest.FixtureRequest) -> Iterator[str]:
    """Small subtrees canonicalised by lxml whole (as by default), or every one written node
    by node (as those above the size are). (Its own patch: a test may undo its monkeypatch.)"""
    with pytest.MonkeyPatch.context() as patch:
        if request.param != "whole":
            patch.setattr(_canonical_view, "WHOLE_BYTES", 0)
        yield str(request.param)


def test_a_generated_production_document_gives_the_same_view_both_ways(
    tmp_path: Path, subtrees: str
) -> None:
    """docgen's documents (what the memory measurements publish), some concepts withheld."""
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    mapping = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ontology)
    source = tmp_path / "doc.xml"
    with source.open("wb") as out:
        generate("production-dept", 2_000_000, out, seed=3)
    mapped = map_document(parse_file(source), mapping)
    group = {c: bytes([n]) * 32 for n, c in enumerate(sorted({m.concept for m in mapped}))}
    keys = {
        c: ConceptKey(publisher="pub", concept=c, epoch=1, group_key=k) for c, k in group.items()
    }
    encoded = encode(mapped, document_id="big", publisher="pub", version=1, issued_at_ms=0,
                     keys=keys, signer=SIGNER)  # fmt: skip
    chosen = set(sorted(group)[::2])  # every other concept: some fragments withheld
    delivery = select(encoded, chosen)
    held = {("pub", c, 1): k for c, k in group.items()}
    view = decode(delivery, publisher_key=SIGNER.public_key(), keys=held, concepts=chosen)
    lean = without_ciphertexts(delivery)
    out = io.BytesIO()
    decode_stored(lean, [Held(f.cipher_value) for f in delivery.fragments], out.write,
                  workdir=tmp_path, publisher_key=SIGNER.public_key(), keys=held,
                  concepts=chosen)  # fmt: skip
    assert out.getvalue() == view.to_bytes()
    assert b"withheld" in out.getvalue()


def _unusual(element: etree._Element) -> bytes:
    """A plaintext as another publisher might write it: not canonical (empty elements
    self-closed, attributes in single quotes), a comment before it, one and a processing
    instruction inside."""
    twin = etree.fromstring(etree.tostring(element, with_tail=False))
    twin.insert(0, etree.Comment("note"))
    twin.append(etree.ProcessingInstruction("keep", "this"))
    body = etree.tostring(twin).replace(b'="', b"='").replace(b'" ', b"' ")
    body = body.replace(b'">', b"'>").replace(b'"/>', b"'/>")
    return b"<!--before-->" + body


def test_plaintexts_that_are_not_canonical_give_the_same_view_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, subtrees: str
) -> None:
    """The in-memory decoder re-canonicalises such plaintexts (comments dropped, processing
    instructions kept); the stored one writes the same bytes."""
    monkeypatch.setattr(plaintext, "canonicalize", _unusual)
    root = etree.fromstring(
        b'<a xmlns="urn:z" k="1"><b m="2"><c/>t</b>u<d xmlns=""><e/></d></a>'
    )
    concept_of = {root: "A", root[0]: "B", root[1]: "C", root[1][0]: "B"}
    delivery = select(_encode(root, concept_of), {"A", "B"})
    assert b"<!--before-->" in crypto_plain(delivery)
    monkeypatch.undo()
    view = decode(delivery, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS,
                  concepts={"A", "B"})  # fmt: skip
    written, _ = stored(delivery, tmp_path, concepts={"A", "B"})
    assert written == view.to_bytes()
    assert b"<?keep this?>" in written and b"note" not in written


def crypto_plain(delivery: Delivery) -> bytes:
    f = delivery.fragments[0]
    return crypto.aead_decrypt(KEYS[f.concept].for_document(DOC), f.cipher_value)
