"""Fragment codec: encode → select → decode, entitlement, tampering, misuse."""

from __future__ import annotations

import copy
import dataclasses
import logging
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
    Delivery,
    EncodedDocument,
    Fragment,
    InclusionProof,
    Manifest,
    MerkleTree,
    SignedManifest,
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
    sign_manifest,
)
from xdn.errors import DecryptError, HostileXmlError, UsageError
from xdn.xmlsafe import parse_bytes

PUBLISHER = "production-dept"
SIGNER = crypto.generate_private_key()
OTHER_SIGNER = crypto.generate_private_key()
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
    }
    kwargs.update(overrides)
    return encode(mapped_nodes(root), **kwargs)


def decode_with(delivery: Delivery, keys: Any = None) -> View:
    return decode(
        delivery,
        publisher_key=SIGNER.public_key(),
        keys=SUBSCRIBER_KEYS if keys is None else keys,
    )


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    return encode_doc()


# -- round trip and entitlement --------------------------------------------------------------


def test_fragment_labels(encoded: EncodedDocument) -> None:
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
    leaves = [fragment_leaf(f) for f in encoded.fragments]
    assert manifest.root == MerkleTree.from_entries(leaves).root


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


def test_subset_gets_exactly_its_fragments_and_placeholders(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, {"WorkOrder", "Step"}))
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
    text = view.to_bytes()
    for secret in (b"Production", b"Inspection", b"0.02", b"line=", b"start"):
        assert secret not in text
    assert b"ACME &amp; Sons" in text
    assert b'<wo:step xmlns:wo="urn:example:wo" n="1">mill <b>fast</b></wo:step>' in text


def test_child_without_parent_is_top_level_with_its_own_placeholders(
    encoded: EncodedDocument,
) -> None:
    view = decode_with(select(encoded, ["Production"]))
    (production,) = view.root
    assert production.get("line") == "3"
    assert production.tail is None
    kids = [el for el in production if isinstance(el.tag, str)]
    assert [el.tag for el in kids] == [WITHHELD_TAG, WITHHELD_TAG]
    assert kids[0].tail == " between\n    "
    assert b"a comment" not in view.to_bytes()


def test_plaintext_holds_references_not_children(encoded: EncodedDocument) -> None:
    fragment = encoded.fragments[1]
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
        return SUBSCRIBER_KEYS.get((publisher, concept, epoch))

    view = decode_with(delivery, lookup)
    assert list(fragment_concepts(view).values()) == ["Step", "Step"]
    assert set(asked) == {(PUBLISHER, "Step", 3)}


def test_empty_delivery_gives_an_empty_view(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, ["Unknown"]))
    assert len(view.root) == 0
    assert fragment_concepts(view) == {}


# -- tampering: every failure is the one opaque DecryptError ---------------------------------


def with_item(
    delivery: Delivery, index: int, fragment: Fragment, proof: InclusionProof
) -> Delivery:
    items = list(delivery.items)
    items[index] = (fragment, proof)
    return dataclasses.replace(delivery, items=tuple(items))


def assert_rejected(delivery: Delivery, keys: Any = None) -> None:
    with pytest.raises(DecryptError) as info:
        decode_with(delivery, keys)
    assert str(info.value) == "fragment could not be decrypted or verified"


@pytest.mark.parametrize("offset", [0, 11, 12, 20, -16, -1])
def test_flipped_ciphertext_byte(encoded: EncodedDocument, offset: int) -> None:
    delivery = select(encoded, CONCEPTS)
    fragment, proof = delivery.items[1]
    blob = bytearray(fragment.cipher_value)
    blob[offset] ^= 0x01
    tampered = dataclasses.replace(fragment, cipher_value=bytes(blob))
    assert_rejected(with_item(delivery, 1, tampered, proof))


def test_gcm_rejects_a_forged_ciphertext_even_when_the_manifest_is_resigned(
    encoded: EncodedDocument,
) -> None:
    # The publisher's own key re-signs a tree over the altered ciphertext: only GCM is left.
    fragments = list(encoded.fragments)
    blob = bytearray(fragments[2].cipher_value)
    blob[15] ^= 0x80
    fragments[2] = dataclasses.replace(fragments[2], cipher_value=bytes(blob))
    forged = resign(fragments, SIGNER)
    assert_rejected(select(forged, ["Step"]))


@pytest.mark.parametrize(
    "change",
    [
        {"concept": "Inspection", "key_name": "production-dept.Inspection.e3.doc-42"},
        {"epoch": 4, "key_name": "production-dept.Step.e4.doc-42"},
        {"position": 4, "fragment_id": "doc-42#4"},
        {"parent": 0},
        {"parent": None},
        {"key_name": "production-dept.Step.e3.doc-43"},
    ],
)
def test_altered_header(encoded: EncodedDocument, change: dict[str, Any]) -> None:
    keys = {**SUBSCRIBER_KEYS, (PUBLISHER, "Step", 4): GROUP_KEYS["Step"]}
    delivery = select(encoded, CONCEPTS)
    fragment, proof = delivery.items[2]
    assert_rejected(with_item(delivery, 2, dataclasses.replace(fragment, **change), proof), keys)


def test_fragment_from_another_document(encoded: EncodedDocument) -> None:
    other = encode_doc("doc-43")
    delivery = select(encoded, CONCEPTS)
    foreign, foreign_proof = select(other, ["Step"]).items[0]
    assert_rejected(with_item(delivery, 2, foreign, foreign_proof))
    relabelled = dataclasses.replace(
        foreign,
        document_id="doc-42",
        fragment_id="doc-42#2",
        key_name=encoded.fragments[2].key_name,
    )
    assert_rejected(with_item(delivery, 2, relabelled, foreign_proof))
    # Even the whole, self-consistent other delivery under this manifest is refused.
    assert_rejected(
        dataclasses.replace(select(other, CONCEPTS), signed_manifest=encoded.signed_manifest)
    )


def test_forged_manifest_signature(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    forged = sign_manifest(encoded.manifest, OTHER_SIGNER)
    assert_rejected(dataclasses.replace(delivery, signed_manifest=forged))
    with pytest.raises(DecryptError):
        decode(delivery, publisher_key=OTHER_SIGNER.public_key(), keys=SUBSCRIBER_KEYS)


@pytest.mark.parametrize("field", ["version", "issued_at_ms", "document_id", "publisher"])
def test_altered_manifest_field(encoded: EncodedDocument, field: str) -> None:
    value: Any = {"version": 8, "issued_at_ms": 1, "document_id": "x", "publisher": "y"}[field]
    manifest = dataclasses.replace(encoded.manifest, **{field: value})
    signed = SignedManifest(manifest=manifest, signature=encoded.signed_manifest.signature)
    assert_rejected(dataclasses.replace(select(encoded, CONCEPTS), signed_manifest=signed))


def test_wrong_and_missing_keys(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    wrong = {**SUBSCRIBER_KEYS, (PUBLISHER, "Step", 3): GROUP_KEYS["Production"]}
    assert_rejected(delivery, wrong)
    missing = {k: v for k, v in SUBSCRIBER_KEYS.items() if k[1] != "Step"}
    assert_rejected(delivery, missing)
    assert_rejected(delivery, lambda *_: None)


def test_altered_or_swapped_proofs(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    (f1, p1), p2 = delivery.items[1], delivery.items[2][1]
    assert_rejected(with_item(delivery, 1, f1, p2))
    path = (bytes(32), *p1.path[1:])
    assert_rejected(with_item(delivery, 1, f1, dataclasses.replace(p1, path=path)))
    bigger = InclusionProof(leaf_index=p1.leaf_index, tree_size=6, path=p1.path)
    assert_rejected(with_item(delivery, 1, f1, bigger))


def test_duplicated_fragment(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    assert_rejected(dataclasses.replace(delivery, items=(*delivery.items, delivery.items[0])))


def test_failures_log_no_plaintext_or_keys(
    encoded: EncodedDocument, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    delivery = select(encoded, ["Step"])
    fragment, proof = delivery.items[0]
    bad = dataclasses.replace(fragment, cipher_value=fragment.cipher_value[:-1] + b"\x00")
    forged = resign([bad if f.position == 2 else f for f in encoded.fragments], SIGNER)
    for attempt in (with_item(delivery, 0, bad, proof), select(forged, ["Step"])):
        with pytest.raises(DecryptError):
            decode_with(attempt)
    assert caplog.records
    logged = caplog.text
    assert "mill" not in logged
    for secret in (GROUP_KEYS["Step"], KEYS["Step"].for_document("doc-42")):
        assert secret.hex() not in logged


# -- a publisher whose signed plaintext is inconsistent --------------------------------------


def resign(fragments: list[Fragment], signer: crypto.PrivateKey) -> EncodedDocument:
    tree = MerkleTree.from_entries([fragment_leaf(f) for f in fragments])
    first = fragments[0]
    manifest = Manifest(
        document_id=first.document_id,
        publisher=first.publisher,
        version=1,
        issued_at_ms=0,
        leaf_count=tree.size,
        root=tree.root,
    )
    return EncodedDocument(
        signed_manifest=sign_manifest(manifest, signer),
        fragments=tuple(fragments),
        proofs={f.fragment_id: tree.inclusion_proof(i) for i, f in enumerate(fragments)},
    )


def forge(plaintexts: list[tuple[int | None, bytes]]) -> EncodedDocument:
    fragments = []
    for position, (parent, plain) in enumerate(plaintexts):
        key = document_key(
            GROUP_KEYS["Step"], publisher=PUBLISHER, concept="Step", epoch=3, document_id="d"
        )
        fragments.append(
            Fragment(
                fragment_id=f"d#{position}",
                document_id="d",
                publisher=PUBLISHER,
                concept="Step",
                position=position,
                parent=parent,
                epoch=3,
                key_name=key_name(PUBLISHER, "Step", 3, "d"),
                cipher_value=crypto.aead_encrypt(key, plain),
            )
        )
    return resign(fragments, SIGNER)


REF = '<xdn:ref xmlns:xdn="https://xdn.example.org/ns#" fragment="{}"/>'


@pytest.mark.parametrize(
    "plaintexts",
    [
        [(None, b"<a/>"), (0, b"<b/>")],  # the parent does not reference its child
        [(None, f"<a>{REF.format('d#1')}{REF.format('d#1')}</a>".encode()), (0, b"<b/>")],
        [(None, f"<a>{REF.format('d#1')}</a>".encode()), (None, b"<b/>")],  # parent mismatch
        [(None, f"<a>{REF.format('e#1')}</a>".encode()), (0, b"<b/>")],
        [(None, f"<a>{REF.format('d#01')}</a>".encode()), (0, b"<b/>")],
        [(None, f"<a>{REF.format('d#0')}</a>".encode())],
        [(None, f"<a>{REF.format('d#5')}</a>".encode())],
        [(None, REF.format("d#1").encode()), (0, b"<b/>")],
    ],
)
def test_inconsistent_signed_structure_is_rejected(
    plaintexts: list[tuple[int | None, bytes]],
) -> None:
    assert_rejected(select(forge(plaintexts), ["Step"]))


def test_signed_but_mislabelled_headers_are_rejected() -> None:
    # Leaves the publisher signed, but whose header contradicts the manifest or the key name.
    good = forge([(None, b"<a/>")]).fragments[0]
    changes: tuple[dict[str, Any], ...] = (
        {"key_name": key_name(PUBLISHER, "Step", 4, "d")},
        {"document_id": "e", "fragment_id": "e#0", "key_name": key_name(PUBLISHER, "Step", 3, "e")},
        {"publisher": "p2", "key_name": key_name("p2", "Step", 3, "d")},
    )
    for change in changes:
        fragment = dataclasses.replace(good, **change)
        key = document_key(
            GROUP_KEYS["Step"],
            publisher=fragment.publisher,
            concept="Step",
            epoch=3,
            document_id=fragment.document_id,
        )  # encrypted under the key its header names, so only the header checks can object
        fragment = dataclasses.replace(fragment, cipher_value=crypto.aead_encrypt(key, b"<a/>"))
        tree = MerkleTree.from_entries([fragment_leaf(fragment)])
        manifest = Manifest(
            document_id="d", publisher=PUBLISHER, version=1, issued_at_ms=0, leaf_count=1,
            root=tree.root,
        )  # fmt: skip
        delivery = Delivery(
            signed_manifest=sign_manifest(manifest, SIGNER),
            items=((fragment, tree.inclusion_proof(0)),),
        )
        keys = {**SUBSCRIBER_KEYS, ("p2", "Step", 3): GROUP_KEYS["Step"]}
        assert_rejected(delivery, keys)


def test_consistent_forged_structure_is_accepted() -> None:
    # Control for the test above: the same machinery with a consistent structure decodes.
    encoded = forge([(None, f"<a>x{REF.format('d#1')}y</a>".encode()), (0, b"<b/>")])
    view = decode_with(select(encoded, ["Step"]))
    assert view.to_bytes().endswith(b"<a>x<b></b>y</a></xdn:view>")


def test_hostile_signed_plaintext_is_a_typed_error() -> None:
    encoded = forge([(None, b'<!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>')])
    with pytest.raises(HostileXmlError):
        decode_with(select(encoded, ["Step"]))


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
    hostile = parse_bytes(b'<a><xdn:ref xmlns:xdn="https://xdn.example.org/ns#"/></a>')
    with pytest.raises(UsageError, match="reserved xdn namespace"):
        run([Mapped(hostile.getroot(), "Step")])


def test_select_rejects_a_single_string(encoded: EncodedDocument) -> None:
    with pytest.raises(TypeError):
        select(encoded, "Step")


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
    with pytest.raises(ValueError):
        Manifest(document_id="d", publisher="p", version=1, issued_at_ms=0, leaf_count=0,
                 root=bytes(32))  # fmt: skip


def test_encoded_document_is_read_only(encoded: EncodedDocument) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        encoded.fragments = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        encoded.proofs["x"] = encoded.proofs["doc-42#0"]  # type: ignore[index]
    assert isinstance(encoded.proofs, Mapping)
    copied = copy.copy(encoded)
    assert copied == encoded


# -- key names, key derivation and signed bytes ----------------------------------------------


def test_key_name_is_filename_safe_and_injective() -> None:
    assert key_name("production-dept", "WorkOrder", 3, "doc-42") == (
        "production-dept.WorkOrder.e3.doc-42"
    )
    iri = key_name("p", "http://xdn.example.org/ontology/production#WorkOrder", 0, "../etc")
    assert "/" not in iri and ".." not in iri and "\x00" not in iri
    assert key_name("a.b", "c", 1, "d") != key_name("a", "b.c", 1, "d")
    for bad in ("", "nul\x00", "new\nline"):
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
    def m(document_id: str, publisher: str) -> Manifest:
        return Manifest(
            document_id=document_id,
            publisher=publisher,
            version=1,
            issued_at_ms=2,
            leaf_count=3,
            root=bytes(32),
        )

    assert m("ab", "c").signed_bytes() != m("a", "bc").signed_bytes()
    assert b"xdn/manifest/v1" in m("a", "b").signed_bytes()
