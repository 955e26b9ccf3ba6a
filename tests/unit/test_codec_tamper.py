"""Tampering with a delivery: every case is refused with the one opaque DecryptError.

Each attack of the issue has its own test: altered ciphertext, altered header, a fragment moved
to another position, a fragment dropped inside the subscriber's ranges, a fragment from another
document, an old version replayed, a forged publisher. Then the proofs, the manifest, keys, and
publishers whose own signed plaintext is inconsistent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from lxml import etree

from xdn import crypto
from xdn.codec import (
    ConceptKey,
    ConceptRange,
    Delivery,
    EncodedDocument,
    Fragment,
    Manifest,
    MerkleTree,
    RangeProof,
    SignedManifest,
    View,
    decode,
    document_key,
    encode,
    fragment_leaf,
    key_name,
    range_proof,
    select,
    sign_manifest,
)
from xdn.errors import DecryptError, HostileXmlError
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
  <wo:production line="3">start
    <wo:step n="1">mill</wo:step> <wo:step n="2">turn</wo:step> <wo:step n="3">grind</wo:step>
  </wo:production>
  <q:inspection result="pass"><q:gauge>0.02</q:gauge></q:inspection>
</wo:order>"""


@dataclass(frozen=True)
class Mapped:
    element: etree._Element
    concept: str


def encode_doc(document_id: str = "doc-42", version: int = 7) -> EncodedDocument:
    root = parse_bytes(DOCUMENT).getroot()
    ns = {"wo": "urn:example:wo", "q": "urn:example:q"}
    nodes = [
        Mapped(root, "WorkOrder"),
        Mapped(root.find("wo:production", ns), "Production"),
        *(Mapped(step, "Step") for step in root.iterfind(".//wo:step", ns)),
        Mapped(root.find("q:inspection", ns), "Inspection"),
    ]
    return encode(
        nodes,
        document_id=document_id,
        publisher=PUBLISHER,
        version=version,
        issued_at_ms=1_700_000_000_000,
        keys=KEYS,
        signer=SIGNER,
        concept_order=CONCEPTS,
    )


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    return encode_doc()


def decode_with(delivery: Delivery, keys: Any = None, **options: Any) -> View:
    return decode(
        delivery,
        publisher_key=SIGNER.public_key(),
        keys=SUBSCRIBER_KEYS if keys is None else keys,
        **options,
    )


def assert_rejected(delivery: Delivery, keys: Any = None, **options: Any) -> None:
    with pytest.raises(DecryptError) as info:
        decode_with(delivery, keys, **options)
    assert str(info.value) == "fragment could not be decrypted or verified"


def replace_fragment(delivery: Delivery, index: int, fragment: Fragment) -> Delivery:
    fragments = list(delivery.fragments)
    fragments[index] = fragment
    return dataclasses.replace(delivery, fragments=tuple(fragments))


def steps(delivery: Delivery) -> list[int]:
    return [i for i, f in enumerate(delivery.fragments) if f.concept == "Step"]


def test_untampered_control(encoded: EncodedDocument) -> None:
    view = decode_with(select(encoded, CONCEPTS), seen={(PUBLISHER, "doc-42"): 6})
    assert len(view.fragments) == 6


# -- the attacks of the issue, one test each -------------------------------------------------


@pytest.mark.parametrize("offset", [0, 11, 12, 20, -16, -1])
def test_altered_ciphertext(encoded: EncodedDocument, offset: int) -> None:
    delivery = select(encoded, CONCEPTS)
    index = steps(delivery)[1]
    fragment = delivery.fragments[index]
    blob = bytearray(fragment.cipher_value)
    blob[offset] ^= 0x01
    tampered = dataclasses.replace(fragment, cipher_value=bytes(blob))
    assert_rejected(replace_fragment(delivery, index, tampered))


@pytest.mark.parametrize(
    "change",
    [
        {"concept": "Inspection", "key_name": "production-dept.Inspection.e3.doc-42"},
        {"epoch": 4, "key_name": "production-dept.Step.e4.doc-42"},
        {"parent": 0},
        {"parent": None},
        {"key_name": "production-dept.Step.e3.doc-43"},
    ],
)
def test_altered_header(encoded: EncodedDocument, change: dict[str, Any]) -> None:
    keys = {**SUBSCRIBER_KEYS, (PUBLISHER, "Step", 4): GROUP_KEYS["Step"]}
    delivery = select(encoded, CONCEPTS)
    index = steps(delivery)[0]
    tampered = dataclasses.replace(delivery.fragments[index], **change)
    assert_rejected(replace_fragment(delivery, index, tampered), keys)


def test_fragment_moved_to_another_position(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    first, second = (delivery.fragments[i] for i in steps(delivery)[:2])
    swapped = [
        dataclasses.replace(first, position=second.position, fragment_id=second.fragment_id),
        dataclasses.replace(second, position=first.position, fragment_id=first.fragment_id),
    ]
    fragments = [f for f in delivery.fragments if f not in (first, second)] + swapped
    assert_rejected(dataclasses.replace(delivery, fragments=tuple(fragments)))


def test_fragment_moved_to_an_unused_position(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    index = steps(delivery)[2]
    moved = dataclasses.replace(delivery.fragments[index], position=9, fragment_id="doc-42#9")
    assert_rejected(replace_fragment(delivery, index, moved))


def test_fragment_dropped_inside_the_subscribers_ranges(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Production", "Step"])
    middle = steps(delivery)[1]
    fragments = delivery.fragments[:middle] + delivery.fragments[middle + 1 :]
    assert_rejected(dataclasses.replace(delivery, fragments=fragments))


def test_whole_concept_dropped_with_its_proof(encoded: EncodedDocument) -> None:
    # The disseminator withholds every Step and the run's proof: the signed range table
    # still says the document has three Steps, and the subscriber is entitled to them.
    delivery = select(encoded, ["Production"])
    assert_rejected(delivery, concepts=["Production", "Step"])
    assert decode_with(delivery, concepts=["Production"]).fragments


def test_fragment_from_another_document(encoded: EncodedDocument) -> None:
    other = encode_doc("doc-43")
    delivery = select(encoded, CONCEPTS)
    index = steps(delivery)[0]
    foreign = select(other, ["Step"]).fragments[0]
    assert_rejected(replace_fragment(delivery, index, foreign))
    relabelled = dataclasses.replace(
        foreign,
        document_id="doc-42",
        fragment_id=delivery.fragments[index].fragment_id,
        key_name=delivery.fragments[index].key_name,
    )
    assert_rejected(replace_fragment(delivery, index, relabelled))
    # Even the whole, self-consistent other delivery under this manifest is refused.
    assert_rejected(
        dataclasses.replace(select(other, CONCEPTS), signed_manifest=encoded.signed_manifest)
    )


def test_old_version_replayed(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)  # version 7
    for last in (7, 8):
        assert_rejected(delivery, seen={(PUBLISHER, "doc-42"): last})
    assert decode_with(delivery, seen={(PUBLISHER, "doc-42"): 6}).version == 7
    assert decode_with(delivery, seen={(PUBLISHER, "other-doc"): 9}).version == 7
    newer = select(encode_doc(version=8), CONCEPTS)
    assert decode_with(newer, seen={(PUBLISHER, "doc-42"): 7}).version == 8


def test_forged_publisher(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    forged = sign_manifest(encoded.manifest, OTHER_SIGNER)
    assert_rejected(dataclasses.replace(delivery, signed_manifest=forged))
    with pytest.raises(DecryptError):
        decode(delivery, publisher_key=OTHER_SIGNER.public_key(), keys=SUBSCRIBER_KEYS)


# -- proofs, manifest, keys ------------------------------------------------------------------


def test_altered_or_misplaced_proofs(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Production", "Step"])
    (proof,) = delivery.proofs
    bad_path = dataclasses.replace(proof, path=(bytes(32), *proof.path[1:]))
    shifted = RangeProof(start=proof.start + 1, end=proof.end + 1, tree_size=6, path=proof.path)
    bigger_tree = dataclasses.replace(proof, tree_size=7)
    longer = dataclasses.replace(proof, path=(*proof.path, bytes(32)))
    shorter = dataclasses.replace(proof, path=proof.path[:-1])
    for proofs in (
        (bad_path,),
        (shifted,),
        (bigger_tree,),
        (longer,),
        (shorter,),
        (),  # no proof at all
        (proof, proof),  # overlapping
        (encoded.range_proofs["Production"],),  # covers only part of the delivery
        (proof, encoded.range_proofs["Inspection"]),  # covers leaves not delivered
    ):
        assert_rejected(dataclasses.replace(delivery, proofs=proofs))


@pytest.mark.parametrize("field", ["version", "issued_at_ms", "document_id", "publisher"])
def test_altered_manifest_field(encoded: EncodedDocument, field: str) -> None:
    value: Any = {"version": 8, "issued_at_ms": 1, "document_id": "x", "publisher": "y"}[field]
    manifest = dataclasses.replace(encoded.manifest, **{field: value})
    signed = SignedManifest(manifest=manifest, signature=encoded.signed_manifest.signature)
    assert_rejected(dataclasses.replace(select(encoded, CONCEPTS), signed_manifest=signed))


def test_altered_range_table(encoded: EncodedDocument) -> None:
    rows = list(encoded.manifest.ranges)
    rows[1], rows[2] = (
        dataclasses.replace(rows[1], count=2),
        dataclasses.replace(rows[2], first=3, count=2),
    )  # Production claims a Step: the Step run would be two long
    manifest = dataclasses.replace(encoded.manifest, ranges=tuple(rows))
    signed = SignedManifest(manifest=manifest, signature=encoded.signed_manifest.signature)
    assert_rejected(dataclasses.replace(select(encoded, CONCEPTS), signed_manifest=signed))


def test_duplicated_fragment(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    doubled = dataclasses.replace(delivery, fragments=(*delivery.fragments, delivery.fragments[0]))
    assert_rejected(doubled, concepts=["Step"])


def test_wrong_and_missing_keys(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    wrong = {(PUBLISHER, "Step", 3): GROUP_KEYS["Production"]}
    assert_rejected(delivery, wrong)
    assert_rejected(delivery, {}, concepts=["Step"])
    assert_rejected(delivery, lambda *_: None, concepts=["Step"])


def test_failures_log_no_plaintext_or_keys(
    encoded: EncodedDocument, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    delivery = select(encoded, ["Step"])
    bad = dataclasses.replace(
        delivery.fragments[0], cipher_value=_last_bit_flipped(delivery.fragments[0].cipher_value)
    )
    forged = resign([bad if f.fragment_id == bad.fragment_id else f for f in encoded.fragments])
    keys = {(PUBLISHER, "Step", 3): GROUP_KEYS["Step"]}
    for attempt in (replace_fragment(delivery, 0, bad), select(forged, ["Step"])):
        with pytest.raises(DecryptError):
            decode_with(attempt, keys)
    assert caplog.records
    logged = caplog.text
    assert "mill" not in logged
    for secret in (GROUP_KEYS["Step"], KEYS["Step"].for_document("doc-42")):
        assert secret.hex() not in logged


# -- a publisher whose signed plaintext is inconsistent --------------------------------------


def resign(fragments: Sequence[Fragment], signer: crypto.PrivateKey = SIGNER) -> EncodedDocument:
    """Sign a tree over any fragments (leaf order: concept as in CONCEPTS, then position)."""
    rank = {c: i for i, c in enumerate(CONCEPTS)}
    ordered = sorted(fragments, key=lambda f: (rank[f.concept], f.position))
    rows: list[ConceptRange] = []
    for index, f in enumerate(ordered):
        if rows and rows[-1].concept == f.concept:
            rows[-1] = dataclasses.replace(rows[-1], count=rows[-1].count + 1)
        else:
            rows.append(ConceptRange(concept=f.concept, epoch=f.epoch, first=index, count=1))
    tree = MerkleTree.from_entries([fragment_leaf(f) for f in ordered])
    first = ordered[0]
    manifest = Manifest(
        document_id=first.document_id,
        publisher=first.publisher,
        version=1,
        issued_at_ms=0,
        leaf_count=tree.size,
        root=tree.root,
        ranges=tuple(rows),
    )
    return EncodedDocument(
        signed_manifest=sign_manifest(manifest, signer),
        fragments=tuple(ordered),
        range_proofs={r.concept: range_proof(tree, r.first, r.end) for r in rows},
    )


def test_gcm_rejects_a_forged_ciphertext_even_when_the_manifest_is_resigned(
    encoded: EncodedDocument,
) -> None:
    # The publisher's own key re-signs a tree over the altered ciphertext: only GCM is left.
    fragments = list(encoded.fragments)
    index = next(i for i, f in enumerate(fragments) if f.concept == "Step")
    blob = bytearray(fragments[index].cipher_value)
    blob[15] ^= 0x80
    fragments[index] = dataclasses.replace(fragments[index], cipher_value=bytes(blob))
    assert_rejected(select(resign(fragments), ["Step"]), concepts=["Step"])


def forge(plaintexts: list[tuple[int | None, bytes]]) -> EncodedDocument:
    key = document_key(
        GROUP_KEYS["Step"], publisher=PUBLISHER, concept="Step", epoch=3, document_id="d"
    )
    fragments = [
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
        for position, (parent, plain) in enumerate(plaintexts)
    ]
    return resign(fragments)


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
        [(None, f"<a>{REF.format('d#1')[:-2]}>x</xdn:ref></a>".encode()), (0, b"<b/>")],
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
            root=tree.root, ranges=(ConceptRange(concept="Step", epoch=3, first=0, count=1),),
        )  # fmt: skip
        delivery = Delivery(
            signed_manifest=sign_manifest(manifest, SIGNER),
            fragments=(fragment,),
            proofs=(range_proof(tree, 0, 1),),
        )
        keys = {**SUBSCRIBER_KEYS, ("p2", "Step", 3): GROUP_KEYS["Step"]}
        assert_rejected(delivery, keys)


def test_consistent_forged_structure_is_accepted() -> None:
    # Control for the tests above: the same machinery with a consistent structure decodes.
    encoded = forge([(None, f"<a>x{REF.format('d#1')}y</a>".encode()), (0, b"<b/>")])
    view = decode_with(select(encoded, ["Step"]))
    assert view.to_bytes().endswith(b"<a>x<b></b>y</a></xdn:view>")


def test_non_canonical_plaintext_is_spliced_by_markers() -> None:
    # A comment and a prefix the publisher chose differently: not C14N, still well placed.
    parent = b'<a><!-- c --><r:ref xmlns:r="https://xdn.example.org/ns#" fragment="d#1"/>y</a>'
    encoded = forge([(None, parent), (0, b"<b>in</b>")])
    view = decode_with(select(encoded, ["Step"]))
    assert view.to_bytes().endswith(b"<a><b>in</b>y</a></xdn:view>")


def test_default_namespace_of_the_parent_does_not_capture_the_child() -> None:
    encoded = forge([(None, f'<a xmlns="urn:a">{REF.format("d#1")}</a>'.encode()), (0, b"<b/>")])
    view = decode_with(select(encoded, ["Step"]))
    (a,) = view.root
    assert [child.tag for child in a] == ["b"]  # not {urn:a}b


def test_hostile_signed_plaintext_is_a_typed_error() -> None:
    encoded = forge([(None, b'<!DOCTYPE a [<!ENTITY x "y">]><a>&x;</a>')])
    with pytest.raises(HostileXmlError):
        decode_with(select(encoded, ["Step"]))


def test_plaintexts_that_a_batch_would_misread_are_parsed_alone() -> None:
    # Small plaintexts are parsed together; these must not be, and still decode correctly.
    encoded = forge(
        [
            (None, f"<a>{REF.format('d#1')}{REF.format('d#2')}</a>".encode()),
            (0, b'<?xml version="1.0"?><b/>'),
            (0, b"<!-- lead --><c/>"),
        ]
    )
    view = decode_with(select(encoded, ["Step"]))
    assert view.to_bytes().endswith(b"<a><b></b><c></c></a></xdn:view>")


@pytest.mark.parametrize(
    "plaintext",
    [
        b"<b/><c/>",  # two elements: would look like two fragments of a batch
        b"<b>",  # unbalanced: would swallow the next plaintext of a batch
        b'<!DOCTYPE b [<!ENTITY x "y">]><b>&x;</b>',
    ],
)
def test_hostile_plaintext_among_others_is_a_typed_error(plaintext: bytes) -> None:
    encoded = forge([(None, b"<a/>"), (None, plaintext), (None, b"<d/>")])
    with pytest.raises(HostileXmlError):
        decode_with(select(encoded, ["Step"]))


def test_a_proof_claiming_a_huge_run_is_refused_at_once(encoded: EncodedDocument) -> None:
    delivery = select(encoded, ["Step"])
    huge = RangeProof(start=0, end=2**62, tree_size=2**62, path=())
    assert_rejected(dataclasses.replace(delivery, proofs=(huge,)), concepts=["Step"])
    wide = RangeProof(start=0, end=6, tree_size=6, path=())
    assert_rejected(dataclasses.replace(delivery, proofs=(wide,)), concepts=["Step"])


def _last_bit_flipped(data: bytes) -> bytes:
    """``data`` altered for sure (setting the last byte to 0 alters nothing 1 time in 256)."""
    return data[:-1] + bytes([data[-1] ^ 1])
