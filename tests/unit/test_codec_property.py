"""Property: for random trees and mappings, a subscriber gets exactly its concepts' content.

The expected view is built straight from the original tree (an oracle independent of the
codec's plaintexts and references), then compared canonically with what decode rebuilt from a
selection carrying one range proof per run of leaves (in a random concept order). A second
property runs the streaming encoder and decoder on random documents with simple-path mappings
and compares them with the in-memory ones.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import itertools
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lxml import etree

from xdn import crypto
from xdn.codec import (
    VIEW_TAG,
    WITHHELD_TAG,
    XDN_NS,
    ConceptKey,
    EncodedDocument,
    Fragment,
    canonicalize,
    decode,
    decode_file,
    encode,
    encode_file,
    fragment_concepts,
    from_encrypted_xml,
    select,
)
from xdn.errors import DecryptError
from xdn.mapping import map_document, parse_mapping
from xdn.ontology import Ontology
from xdn.xmlsafe import parse_bytes

SIGNER = crypto.generate_private_key()
CONCEPTS = ("A", "B", "C")
GROUP = {c: crypto.sha256(c.encode()) for c in CONCEPTS}
KEYS = {c: ConceptKey(publisher="pub", concept=c, epoch=1, group_key=GROUP[c]) for c in CONCEPTS}
SUBSCRIBER_KEYS = {("pub", c, 1): GROUP[c] for c in CONCEPTS}
DOC = "doc"


@dataclass(frozen=True)
class Mapped:
    element: etree._Element
    concept: str


@dataclass(frozen=True)
class Spec:
    tag: str
    attrs: dict[str, str]
    text: str | None
    tail: str | None
    children: tuple[Spec, ...]


TEXT = st.none() | st.text(alphabet="ab <&>\"'\té\n", max_size=4)
TAGS = st.sampled_from(["a", "b", "{urn:x}c", "{urn:y}d", "{urn:x}a"])
ATTRS = st.dictionaries(st.sampled_from(["k", "m", "{urn:x}n"]), st.text("xy &<", max_size=3))


def _spec(children: st.SearchStrategy[tuple[Spec, ...]]) -> st.SearchStrategy[Spec]:
    return st.builds(Spec, tag=TAGS, attrs=ATTRS, text=TEXT, tail=TEXT, children=children)


SPECS = st.recursive(
    _spec(st.just(())),
    lambda inner: _spec(st.lists(inner, max_size=3).map(tuple)),
    max_leaves=10,
)


def build(spec: Spec, parent: etree._Element | None = None) -> etree._Element:
    el = etree.Element(spec.tag) if parent is None else etree.SubElement(parent, spec.tag)
    for name, value in spec.attrs.items():
        el.set(name, value)
    el.text = spec.text
    if parent is not None:
        el.tail = spec.tail
    for child in spec.children:
        build(child, el)
    return el


def expected_view(
    root: etree._Element, concept_of: dict[etree._Element, str], chosen: set[str]
) -> bytes:
    mapped = [el for el in root.iter() if el in concept_of]
    position = {el: i for i, el in enumerate(mapped)}

    def nearest(el: etree._Element) -> etree._Element | None:
        return next((a for a in el.iterancestors() if a in position), None)

    def rebuilt(el: etree._Element) -> etree._Element:
        twin = copy.deepcopy(el)
        twin.tail = None
        twins = dict(zip(el.iter(), twin.iter(), strict=True))
        for inner in mapped:
            if inner is not el and nearest(inner) is el:
                if concept_of[inner] in chosen:
                    replacement = rebuilt(inner)
                else:
                    replacement = etree.Element(WITHHELD_TAG, nsmap={"xdn": XDN_NS})
                    replacement.set("fragment", f"{DOC}#{position[inner]}")
                old = twins[inner]
                replacement.tail = old.tail
                old.getparent().replace(old, replacement)
        return twin

    view = etree.Element(VIEW_TAG, nsmap={"xdn": XDN_NS})
    view.attrib.update({"document": DOC, "publisher": "pub", "version": "1"})
    for el in mapped:
        parent = nearest(el)
        if concept_of[el] in chosen and (parent is None or concept_of[parent] not in chosen):
            view.append(rebuilt(el))
    return canonicalize(view)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[etree._Element, dict[etree._Element, str], set[str]]:
    root = build(draw(SPECS))
    concept_of: dict[etree._Element, str] = {}
    for el in root.iter():
        concept = draw(st.sampled_from((None, *CONCEPTS)))
        if concept is not None:
            concept_of[el] = concept
    assume(concept_of)
    chosen = draw(st.sets(st.sampled_from(CONCEPTS)))
    return root, concept_of, chosen


def _encode(
    root: etree._Element, concept_of: dict[etree._Element, str], order: tuple[str, ...] = ()
) -> EncodedDocument:
    nodes = [Mapped(el, c) for el, c in concept_of.items()]
    return encode(
        nodes,
        document_id=DOC,
        publisher="pub",
        version=1,
        issued_at_ms=0,
        keys=KEYS,
        signer=SIGNER,
        concept_order=order,
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), order=st.permutations(CONCEPTS))
def test_decode_select_encode_gives_exactly_the_chosen_concepts(
    scenario: tuple[etree._Element, dict[etree._Element, str], set[str]],
    order: list[str],
) -> None:
    root, concept_of, chosen = scenario
    before = etree.tostring(root)
    encoded = _encode(root, concept_of, tuple(order))
    assert etree.tostring(root) == before
    delivery = select(encoded, chosen)
    present = [c for c in order if encoded.manifest.range_of(c)]
    ranks = sorted(present.index(c) for c in chosen if c in present)
    runs = 1 + sum(1 for a, b in itertools.pairwise(ranks) if b != a + 1)
    assert len(delivery.proofs) == (runs if ranks else 0)
    view = decode(
        delivery, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS, concepts=chosen
    )

    mapped = [el for el in root.iter() if el in concept_of]
    want = {f"{DOC}#{i}": concept_of[el] for i, el in enumerate(mapped) if concept_of[el] in chosen}
    assert fragment_concepts(view) == want
    assert view.to_bytes() == expected_view(root, concept_of, chosen)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(), data=st.data())
def test_any_flipped_ciphertext_bit_is_rejected(
    scenario: tuple[etree._Element, dict[etree._Element, str], set[str]], data: st.DataObject
) -> None:
    root, concept_of, _ = scenario
    delivery = select(_encode(root, concept_of), CONCEPTS)
    index = data.draw(st.integers(0, len(delivery.fragments) - 1), label="fragment")
    fragment = delivery.fragments[index]
    bit = data.draw(st.integers(0, 8 * len(fragment.cipher_value) - 1), label="bit")
    blob = bytearray(fragment.cipher_value)
    blob[bit // 8] ^= 1 << (bit % 8)
    fragments = list(delivery.fragments)
    fragments[index] = dataclasses.replace(fragment, cipher_value=bytes(blob))
    with pytest.raises(DecryptError):
        decode(
            dataclasses.replace(delivery, fragments=tuple(fragments)),
            publisher_key=SIGNER.public_key(),
            keys=SUBSCRIBER_KEYS,
        )


# -- streaming ---------------------------------------------------------------------------------

ONTOLOGY = Ontology.from_edges(iri="urn:o", concepts=CONCEPTS, edges=[("A", "B"), ("A", "C")])
CLARK = {"a": "a", "b": "b", "{urn:x}c": "x:c", "{urn:y}d": "y:d", "{urn:x}a": "x:a"}


@st.composite
def tag_mappings(draw: st.DrawFn) -> tuple[etree._Element, dict[str, str], set[str]]:
    """A random document with a default namespace somewhere, and a concept per tag."""
    root = build(draw(SPECS))
    by_tag = {t: c for t in CLARK if (c := draw(st.sampled_from((None, *CONCEPTS)))) is not None}
    assume(any(el.tag in by_tag for el in root.iter()))
    chosen = draw(st.sets(st.sampled_from(CONCEPTS)))
    return root, by_tag, chosen


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=tag_mappings(), default_ns=st.booleans())
def test_streaming_encode_and_decode_equal_the_in_memory_codec(
    scenario: tuple[etree._Element, dict[str, str], set[str]], default_ns: bool
) -> None:
    root, by_tag, chosen = scenario
    xml = etree.tostring(root)
    if default_ns:  # put the document in a default namespace, b stays in none
        xml = xml.replace(b"<a", b'<a xmlns="urn:z"', 1) if xml.startswith(b"<a") else xml
    rules: dict[str, list[str]] = {}
    for tag, concept in by_tag.items():
        rules.setdefault(concept, []).append(f"//{CLARK[tag]}")
    toml = '[namespaces]\nx = "urn:x"\ny = "urn:y"\n[concepts]\n' + "".join(
        f"{c} = {exprs!r}\n".replace("'", '"') for c, exprs in rules.items()
    )
    mapping = parse_mapping(toml.encode(), ONTOLOGY, source="random.toml", schema="random")
    tree = parse_bytes(xml)
    mapped = map_document(tree, mapping)
    assume(mapped)
    kwargs = {"document_id": DOC, "publisher": "pub", "version": 1, "issued_at_ms": 0,
              "keys": KEYS, "signer": SIGNER}  # fmt: skip
    in_memory = encode(mapped, **kwargs)  # type: ignore[arg-type]
    out = io.BytesIO()
    report = encode_file(io.BytesIO(xml), out, mapping=mapping, streaming=True, **kwargs)  # type: ignore[arg-type]
    assert report.streamed
    streamed = from_encrypted_xml(out.getvalue())
    assert streamed.manifest.ranges == in_memory.manifest.ranges

    def plain(fragment: Fragment) -> bytes:
        key = KEYS[fragment.concept].for_document(DOC)
        return crypto.aead_decrypt(key, fragment.cipher_value)

    assert [plain(f) for f in streamed.fragments] == [plain(f) for f in in_memory.fragments]
    keys = {("pub", c, 1): GROUP[c] for c in chosen}
    view = decode(select(streamed, chosen), publisher_key=SIGNER.public_key(), keys=keys)
    view_out = io.BytesIO()
    decode_file(io.BytesIO(out.getvalue()), view_out, publisher_key=SIGNER.public_key(), keys=keys)
    assert canonicalize(parse_bytes(view_out.getvalue()).getroot()) == view.to_bytes()
