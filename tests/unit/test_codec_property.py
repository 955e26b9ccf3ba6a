"""Property: for random trees and mappings, a subscriber gets exactly its concepts' content.

The expected view is built straight from the original tree (an oracle independent of the
codec's plaintexts and references), then compared canonically with what decode rebuilt.
"""

from __future__ import annotations

import copy
import dataclasses
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
    canonicalize,
    decode,
    encode,
    fragment_concepts,
    select,
)
from xdn.errors import DecryptError

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
TAGS = st.sampled_from(["a", "b", "{urn:x}c", "{urn:y}d"])
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


def _encode(root: etree._Element, concept_of: dict[etree._Element, str]) -> EncodedDocument:
    nodes = [Mapped(el, c) for el, c in concept_of.items()]
    return encode(
        nodes,
        document_id=DOC,
        publisher="pub",
        version=1,
        issued_at_ms=0,
        keys=KEYS,
        signer=SIGNER,
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios())
def test_decode_select_encode_gives_exactly_the_chosen_concepts(
    scenario: tuple[etree._Element, dict[etree._Element, str], set[str]],
) -> None:
    root, concept_of, chosen = scenario
    before = etree.tostring(root)
    encoded = _encode(root, concept_of)
    assert etree.tostring(root) == before
    view = decode(select(encoded, chosen), publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS)

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
    index = data.draw(st.integers(0, len(delivery.items) - 1), label="fragment")
    fragment, proof = delivery.items[index]
    bit = data.draw(st.integers(0, 8 * len(fragment.cipher_value) - 1), label="bit")
    blob = bytearray(fragment.cipher_value)
    blob[bit // 8] ^= 1 << (bit % 8)
    items = list(delivery.items)
    items[index] = (dataclasses.replace(fragment, cipher_value=bytes(blob)), proof)
    with pytest.raises(DecryptError):
        decode(
            dataclasses.replace(delivery, items=tuple(items)),
            publisher_key=SIGNER.public_key(),
            keys=SUBSCRIBER_KEYS,
        )
