"""Fragment codec: encode → select → decode, entitlement, leaf order and runs, misuse."""

from __future__ import annotations

import copy
import dataclasses
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pytest
from lxml import etree

from xdn import crypto
from xdn.codec import (
    REF_TAG,
    WITHHELD_TAG,
    XDN_NS,
    ConceptKey,
    ConceptRange,
    Delivery,
    EncodedDocument,
    Fragment,
    Manifest,
    MerkleTree,
    View,
    canonicalize,
    decode,
    document_key,
    encode,
    fragment_concepts,
    fragment_leaf,
    key_name,
    required_keys,
    select,
)
from xdn.codec._fragments import reference_leaf
from xdn.errors import DecryptError, UsageError
from xdn.xmlsafe import parse_bytes

PUBLISHER = "production-dept"
SIGNER = crypto.generate_private_key()
CONCEPTS = ("WorkOrder", "Production", "Step", "Inspection")
GROUP_KEYS = {c: crypto.sha256(f"group key of {c}".encode()) for c in CONCEPTS}
KEYS = {
    c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=3, group_key=GROUP_KEYS[c])
    for c in CONCEPTS
}
SUBSCRIBER_KEYS = {(PUBLISHER, c, 3): GROUP_KEYS[c] for c in CONCEPTS}

DOCUMENT = b"""<wo:order xmlns:wo="urn:example:wo" xmlns:q="urn:example:q" id="42">
  <wo:customer>ACME &amp; Sons</wo:customer>
  <wo:production line="3">start
    <wo:step n="1">mill <b>fast</b></wo:step> between
    <wo:step n="2">turn</wo:step>
    <!-- a comment -->
  </wo:production>
  <q:inspection result="pass"><q:gauge>0.02</q:gauge></q:inspection>
</wo:order>"""

NS = {"wo": "urn:example:wo", "q": "urn:example:q"}


@dataclass(frozen=True)
class Mapped:
    """Shaped like xdn.mapping.MappedNode."""

    element: etree._Element
    concept: str


def mapped_nodes(root: etree._Element) -> list[Mapped]:
    return [
        Mapped(root, "WorkOrder"),
        Mapped(root.find("wo:production", NS), "Production"),
        *(Mapped(step, "Step") for step in root.iterfind(".//wo:step", NS)),
        Mapped(root.find("q:inspection", NS), "Inspection"),
    ]


def encode_doc(
    document_id: str = "doc-42", data: bytes = DOCUMENT, **overrides: object
) -> EncodedDocument:
    root = parse_bytes(data).getroot()
    kwargs: dict[str, Any] = {
        "document_id": document_id,
        "publisher": PUBLISHER,
        "version": 7,
        "issued_at_ms": 1_700_000_000_000,
        "keys": KEYS,
        "signer": SIGNER,
        "concept_order": CONCEPTS,
    }
    kwargs.update(overrides)
    return encode(mapped_nodes(root), **kwargs)


def decode_with(delivery: Delivery, keys: Any = None, **options: Any) -> View:
    return decode(
        delivery,
        publisher_key=SIGNER.public_key(),
        keys=SUBSCRIBER_KEYS if keys is None else keys,
        **options,
    )


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    return encode_doc()


# -- leaf order, range table, runs -----------------------------------------------------------


def test_fragments_are_in_leaf_order_with_a_signed_range_table(encoded: EncodedDocument) -> None:
    got = [(f.fragment_id, f.concept, f.position, f.parent, f.epoch) for f in encoded.fragments]
    assert got == [
        ("doc-42#0", "WorkOrder", 0, None, 3),
        ("doc-42#1", "Production", 1, 0, 3),
        ("doc-42#2", "Step", 2, 1, 3),
        ("doc-42#3", "Step", 3, 1, 3),
        ("doc-42#4", "Inspection", 4, 0, 3),
    ]
    assert encoded.fragments[2].key_name == "production-dept.Step.e3.doc-42"
    manifest = encoded.manifest
    assert (manifest.document_id, manifest.publisher, manifest.version) == ("doc-42", PUBLISHER, 7)
    assert manifest.leaf_count == 5
    assert manifest.ranges == (
        ConceptRange(concept="WorkOrder", epoch=3, first=0, count=1),
        ConceptRange(concept="Production", epoch=3, first=1, count=1),
        ConceptRange(concept="Step", epoch=3, first=2, count=2),
        ConceptRange(concept="Inspection", epoch=3, first=4, count=1),
    )
    leaves = [fragment_leaf(f) for f in encoded.fragments]
    assert manifest.root == MerkleTree.from_entries(leaves).root
    assert {c: (p.start, p.end) for c, p in encoded.range_proofs.items()} == {
        "WorkOrder": (0, 1),
        "Production": (1, 2),
        "Step": (2, 4),
        "Inspection": (4, 5),
    }
    assert encoded.proofs["doc-42#3"] is encoded.range_proofs["Step"]


def test_concept_order_decides_the_leaf_order() -> None:
    reordered = encode_doc(concept_order=("Step", "Inspection"))
    assert [f.fragment_id for f in reordered.fragments] == [
        "doc-42#2",
        "doc-42#3",
        "doc-42#4",
        "doc-42#1",  # unlisted concepts follow, by name: Production < WorkOrder
        "doc-42#0",
    ]
    assert [r.concept for r in reordered.manifest.ranges] == [
        "Step",
        "Inspection",
        "Production",
        "WorkOrder",
    ]
    view = decode_with(select(reordered, CONCEPTS))
    assert view.to_bytes() == decode_with(select(encode_doc(), CONCEPTS)).to_bytes()


def test_fast_leaf_encoding_equals_the_framed_definition(encoded: EncodedDocument) -> None:
    for fragment in encoded.fragments:
        assert fragment_leaf(fragment) == reference_leaf(fragment)


def test_select_sends_one_proof_per_contiguous_run(encoded: EncodedDocument) -> None:
    adjacent = select(encoded, ["Production", "WorkOrder", "Step"])
    assert [(p.start, p.end) for p in adjacent.proofs] == [(0, 4)]
    assert [f.position for f in adjacent.fragments] == [0, 1, 2, 3]
    apart = select(encoded, ["WorkOrder", "Step"])
    assert [(p.start, p.end) for p in apart.proofs] == [(0, 1), (2, 4)]
    assert len(adjacent.proofs[0].path) == 1  # only the Inspection leaf lies outside the run
    view = decode_with(adjacent, concepts=["WorkOrder", "Production", "Step"])
    assert list(fragment_concepts(view).values()) == ["WorkOrder", "Production", "Step", "Step"]


def test_per_concept_or_merged_proofs_both_verify(encoded: EncodedDocument) -> None:
    merged = select(encoded, ["WorkOrder", "Production"])
    per_concept = dataclasses.replace(
        merged, proofs=(encoded.range_proofs["WorkOrder"], encoded.range_proofs["Production"])
    )
    wanted = ["WorkOrder", "Production"]
    assert decode_with(per_concept, concepts=wanted).xml == decode_with(merged, concepts=wanted).xml


def test_delivery_order_does_not_matter(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    fragments = list(delivery.fragments)
    random.Random(4).shuffle(fragments)
    shuffled = dataclasses.replace(delivery, fragments=tuple(fragments))
    assert decode_with(shuffled).xml == decode_with(delivery).xml


# -- round trip and entitlement --------------------------------------------------------------


def test_full_delivery_rebuilds_the_whole_document(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, CONCEPTS))
    assert fragment_concepts(view) == {
        "doc-42#0": "WorkOrder",
        "doc-42#1": "Production",
        "doc-42#2": "Step",
        "doc-42#3": "Step",
        "doc-42#4": "Inspection",
    }
    original = canonicalize(parse_bytes(DOCUMENT).getroot())
    assert view.root.get("document") == "doc-42"
    assert view.root.get("version") == "7"
    (only,) = view.root
    assert canonicalize(only) == original
    assert view.to_bytes() == (
        b'<xdn:view xmlns:xdn="https://xdn.example.org/ns#" document="doc-42" '
        b'publisher="production-dept" version="7">' + original + b"</xdn:view>"
    )
    assert canonicalize(parse_bytes(view.xml).getroot()) == view.to_bytes()


def test_subset_gets_exactly_its_fragments_and_placeholders(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, {"WorkOrder", "Step"}), concepts={"WorkOrder", "Step"})
    assert fragment_concepts(view) == {
        "doc-42#0": "WorkOrder",
        "doc-42#2": "Step",
        "doc-42#3": "Step",
    }
    top = list(view.root)
    assert [etree.QName(el).localname for el in top] == ["order", "step", "step"]
    withheld = top[0].findall(f"{{{XDN_NS}}}withheld")
    assert [w.get("fragment") for w in withheld] == ["doc-42#1", "doc-42#4"]
    assert all(dict(w.attrib) == {"fragment": w.get("fragment")} and len(w) == 0 for w in withheld)
    for text in (view.to_bytes(), view.xml):
        for secret in (b"Production", b"Inspection", b"0.02", b"line=", b"start"):
            assert secret not in text
    assert b"ACME &amp; Sons" in view.to_bytes()
    assert b'<wo:step xmlns:wo="urn:example:wo" n="1">mill <b>fast</b></wo:step>' in view.xml


def test_keys_held_decide_the_default_expectation(encoded: EncodedDocument) -> None:
    only_steps = {(PUBLISHER, "Step", 3): GROUP_KEYS["Step"]}
    view = decode_with(select(encoded, ["Step"]), only_steps)
    assert list(fragment_concepts(view)) == ["doc-42#2", "doc-42#3"]
    with pytest.raises(DecryptError):  # holds every key, so expects every concept
        decode_with(select(encoded, ["Step"]))


def test_child_without_parent_is_top_level_with_its_own_placeholders(
    encoded: EncodedDocument,
) -> None:
    view = decode_with(select(encoded, ["Production"]), concepts=["Production"])
    (production,) = view.root
    assert production.get("line") == "3"
    assert production.tail is None
    kids = [el for el in production if isinstance(el.tag, str)]
    assert [el.tag for el in kids] == [WITHHELD_TAG, WITHHELD_TAG]
    assert kids[0].tail == " between\n    "
    assert b"a comment" not in view.to_bytes()


def test_plaintext_holds_references_not_children(encoded: EncodedDocument) -> None:
    (fragment,) = [f for f in encoded.fragments if f.concept == "Production"]
    key = KEYS["Production"].for_document("doc-42")
    plain = crypto.aead_decrypt(key, fragment.cipher_value)
    root = parse_bytes(plain).getroot()
    refs = [r.get("fragment") for r in root.iter(REF_TAG)]
    assert refs == ["doc-42#2", "doc-42#3"]
    assert b"mill" not in plain and b"turn" not in plain
    assert plain.startswith(b'<wo:production xmlns:wo="urn:example:wo" line="3">')


def test_encode_leaves_the_callers_tree_untouched() -> None:
    root = parse_bytes(DOCUMENT).getroot()
    before = etree.tostring(root)
    encode(
        list(reversed(mapped_nodes(root))),
        document_id="d",
        publisher=PUBLISHER,
        version=1,
        issued_at_ms=0,
        keys=KEYS,
        signer=SIGNER,
    )
    assert etree.tostring(root) == before


def test_mapped_order_does_not_matter() -> None:
    root = parse_bytes(DOCUMENT).getroot()
    ivs = iter(bytes([i]) * 12 for i in range(100))
    shuffled = encode(
        list(reversed(mapped_nodes(root))),
        document_id="doc-42",
        publisher=PUBLISHER,
        version=7,
        issued_at_ms=1,
        keys=KEYS,
        signer=SIGNER,
        concept_order=CONCEPTS,
        iv_factory=lambda: next(ivs),
    )
    ivs2 = iter(bytes([i]) * 12 for i in range(100))
    ordered = encode_doc(issued_at_ms=1, iv_factory=lambda: next(ivs2))
    assert shuffled.fragments == ordered.fragments
    assert shuffled.manifest == ordered.manifest


def test_callable_key_lookup_and_required_keys(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    assert required_keys(delivery) == {(PUBLISHER, "Step", 3)}
    asked: list[tuple[str, str, int]] = []

    def lookup(publisher: str, concept: str, epoch: int) -> bytes | None:
        asked.append((publisher, concept, epoch))
        return GROUP_KEYS["Step"] if concept == "Step" else None

    view = decode_with(delivery, lookup)
    assert list(fragment_concepts(view).values()) == ["Step", "Step"]
    assert (PUBLISHER, "Step", 3) in asked


def test_per_document_keys_by_key_name(encoded: EncodedDocument) -> None:
    names = {
        key_name(PUBLISHER, c, 3, "doc-42"): KEYS[c].for_document("doc-42")
        for c in ("WorkOrder", "Step")
    }
    view = decode(
        select(encoded, ["WorkOrder", "Step"]),
        publisher_key=SIGNER.public_key(),
        document_keys=names,
    )
    assert set(fragment_concepts(view).values()) == {"WorkOrder", "Step"}
    with pytest.raises(TypeError):
        decode(select(encoded, ["Step"]), publisher_key=SIGNER.public_key())
    # Both: a held document key comes first (here the only right key for Step: its group key
    # is wrong), group keys open the rest (WorkOrder has no document key here).
    step_only = {n: k for n, k in names.items() if ".Step." in n}
    wrong_step = {**SUBSCRIBER_KEYS, (PUBLISHER, "Step", 3): crypto.sha256(b"not the key")}
    both = decode(
        select(encoded, ["WorkOrder", "Step"]),
        publisher_key=SIGNER.public_key(),
        keys=wrong_step,
        document_keys=step_only,
        concepts=["WorkOrder", "Step"],
    )
    assert fragment_concepts(both) == fragment_concepts(view)
    with pytest.raises(DecryptError):  # and without the document key the wrong one is used
        decode(
            select(encoded, ["WorkOrder", "Step"]),
            publisher_key=SIGNER.public_key(),
            keys=wrong_step,
            document_keys={},
            concepts=["WorkOrder", "Step"],
        )
    short = {name: key[:31] for name, key in names.items()}
    with pytest.raises(UsageError, match="32 bytes"):
        decode(select(encoded, ["Step"]), publisher_key=SIGNER.public_key(), document_keys=short)


def test_empty_delivery_gives_an_empty_view(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, ["Unknown"]), concepts=[])
    assert len(view.root) == 0
    assert fragment_concepts(view) == {}


def test_view_parses_lazily_and_compares_canonically(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, CONCEPTS))
    assert view.root is view.root
    again = decode_with(select(encode_doc(), CONCEPTS))
    assert again.to_bytes() == view.to_bytes()


# -- misuse ----------------------------------------------------------------------------------


def test_encode_misuse() -> None:
    root = parse_bytes(DOCUMENT).getroot()
    nodes = mapped_nodes(root)
    base: dict[str, Any] = {
        "document_id": "d",
        "publisher": PUBLISHER,
        "version": 1,
        "issued_at_ms": 0,
        "keys": KEYS,
        "signer": SIGNER,
    }

    def run(mapped: Any, **change: Any) -> None:
        encode(mapped, **{**base, **change})

    with pytest.raises(UsageError, match="no group key"):
        run(nodes, keys={c: k for c, k in KEYS.items() if c != "Step"})
    foreign = ConceptKey(publisher="other", concept="Step", epoch=1, group_key=bytes(32))
    with pytest.raises(UsageError):
        run(nodes, keys={**KEYS, "Step": foreign})
    with pytest.raises(UsageError, match="nothing to encode"):
        run([])
    with pytest.raises(UsageError, match="same document"):
        run([*nodes, Mapped(parse_bytes(b"<x/>").getroot(), "Step")])
    with pytest.raises(UsageError, match="more than once"):
        run([*nodes, Mapped(root, "Step")])
    with pytest.raises(UsageError, match="element"):
        run([Mapped(root.find("wo:production", NS)[-1], "Step")])
    with pytest.raises(ValueError):
        run(nodes, document_id="")
    with pytest.raises(TypeError):
        run(nodes, version="1")
    with pytest.raises(ValueError):
        run(nodes, version=-1)
    with pytest.raises(TypeError):
        run(nodes, concept_order="Step")
    with pytest.raises(ValueError, match="twice"):
        run(nodes, concept_order=("Step", "Step"))
    hostile = parse_bytes(b'<a><xdn:ref xmlns:xdn="https://xdn.example.org/ns#"/></a>')
    with pytest.raises(UsageError, match="reserved xdn namespace"):
        run([Mapped(hostile.getroot(), "Step")])


def test_select_and_decode_misuse(encoded: EncodedDocument) -> None:
    with pytest.raises(TypeError):
        select(encoded, "Step")
    with pytest.raises(TypeError):
        decode_with(select(encoded, ["Step"]), concepts="Step")
    with pytest.raises(TypeError):
        decode_with(select(encoded, ["Step"]), seen=[("p", "d")])
    with pytest.raises(TypeError):
        decode(encoded, publisher_key=SIGNER.public_key(), keys=SUBSCRIBER_KEYS)  # type: ignore[arg-type]


def test_value_objects_validate() -> None:
    good: dict[str, Any] = {
        "fragment_id": "d#2",
        "document_id": "d",
        "publisher": "p",
        "concept": "c",
        "position": 2,
        "parent": 1,
        "epoch": 0,
        "key_name": "p.c.e0.d",
        "cipher_value": b"",
    }
    Fragment(**good)
    bad_changes: tuple[dict[str, Any], ...] = (
        {"fragment_id": "d#3"},
        {"parent": 2},
        {"position": -1},
    )
    for bad in bad_changes:
        with pytest.raises(ValueError):
            Fragment(**{**good, **bad})
    with pytest.raises(ValueError):
        ConceptKey(publisher="p", concept="c", epoch=0, group_key=b"short")
    shown = repr(KEYS["Step"])
    assert GROUP_KEYS["Step"].hex() not in shown and repr(GROUP_KEYS["Step"]) not in shown
    row = ConceptRange(concept="c", epoch=1, first=0, count=2)
    manifest: dict[str, Any] = {
        "document_id": "d",
        "publisher": "p",
        "version": 1,
        "issued_at_ms": 0,
        "leaf_count": 2,
        "root": bytes(32),
        "ranges": (row,),
    }
    assert Manifest(**manifest).range_of("c") == row
    bad_manifests: tuple[dict[str, Any], ...] = (
        {"leaf_count": 0, "ranges": ()},
        {"leaf_count": 3},  # the table must cover every leaf
        {"ranges": (dataclasses.replace(row, first=1, count=1),)},  # … from leaf 0
        {"ranges": (dataclasses.replace(row, count=1), dataclasses.replace(row, first=1, count=1))},
        {"root": bytes(31)},
    )
    for bad in bad_manifests:
        with pytest.raises(ValueError):
            Manifest(**{**manifest, **bad})
    with pytest.raises(TypeError):
        Manifest(**{**manifest, "ranges": [row]})
    with pytest.raises(ValueError):
        ConceptRange(concept="c", epoch=1, first=0, count=0)


def test_encoded_document_is_read_only_and_validated(encoded: EncodedDocument) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        encoded.fragments = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        encoded.proofs["x"] = encoded.proofs["doc-42#0"]  # type: ignore[index]
    assert isinstance(encoded.proofs, Mapping)
    assert copy.copy(encoded) == encoded
    fragments = list(encoded.fragments)
    fragments[2], fragments[3] = fragments[3], fragments[2]
    with pytest.raises(ValueError, match="position order"):
        dataclasses.replace(encoded, fragments=tuple(fragments))
    with pytest.raises(ValueError, match="one range proof per concept"):
        dataclasses.replace(encoded, range_proofs={})
    proofs = {**encoded.range_proofs, "Step": encoded.range_proofs["WorkOrder"]}
    with pytest.raises(ValueError, match="must prove its run"):
        dataclasses.replace(encoded, range_proofs=proofs)


# -- key names, key derivation and signed bytes ----------------------------------------------


def test_key_name_is_filename_safe_and_injective() -> None:
    assert key_name("production-dept", "WorkOrder", 3, "doc-42") == (
        "production-dept.WorkOrder.e3.doc-42"
    )
    iri = key_name("p", "http://xdn.example.org/ontology/production#WorkOrder", 0, "../etc")
    assert "/" not in iri and ".." not in iri and "\x00" not in iri
    assert key_name("a.b", "c", 1, "d") != key_name("a", "b.c", 1, "d")
    for bad in ("", "nul\x00", "new\nline", "del\x7f"):
        with pytest.raises(ValueError):
            key_name(bad, "c", 1, "d")


def test_document_keys_are_separated() -> None:
    def derive(**change: Any) -> bytes:
        args: dict[str, Any] = {
            "publisher": "p",
            "concept": "c",
            "epoch": 1,
            "document_id": "d",
        }
        args.update(change)
        return document_key(bytes(32), **args)

    keys = {
        derive(),
        derive(document_id="e"),
        derive(concept="c2"),
        derive(epoch=2),
        derive(publisher="p2"),
        derive(publisher="p", concept="|c"),
    }
    assert len(keys) == 6 and all(len(k) == 32 for k in keys)


def test_manifest_signed_bytes_are_unambiguous() -> None:
    def m(document_id: str, publisher: str, concept: str = "c", epoch: int = 1) -> Manifest:
        return Manifest(
            document_id=document_id,
            publisher=publisher,
            version=1,
            issued_at_ms=2,
            leaf_count=3,
            root=bytes(32),
            ranges=(ConceptRange(concept=concept, epoch=epoch, first=0, count=3),),
        )

    assert m("ab", "c").signed_bytes() != m("a", "bc").signed_bytes()
    assert m("a", "b").signed_bytes() != m("a", "b", concept="d").signed_bytes()
    assert m("a", "b").signed_bytes() != m("a", "b", epoch=2).signed_bytes()
    assert b"xdn/manifest/v2" in m("a", "b").signed_bytes()


def test_incremental_leaf_hash_equals_the_hash_of_the_leaf(encoded: EncodedDocument) -> None:
    from xdn.codec import leaf_hash
    from xdn.codec._fragments import fragment_leaf_hash

    for fragment in encoded.fragments:
        assert fragment_leaf_hash(fragment) == leaf_hash(reference_leaf(fragment))
