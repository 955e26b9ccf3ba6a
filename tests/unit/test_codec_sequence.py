"""The publisher's signed sequence in the manifest: number and per-concept back pointers.

Both are in the signed bytes: altering, adding or stripping either is refused like any other
tampering; an unsequenced manifest signs exactly what it signed before (v2).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.unit import test_codec_tamper as t
from tests.unit.test_codec_tamper import (
    CONCEPTS,
    PUBLISHER,
    SIGNER,
    assert_rejected,
    decode_with,
    encode_doc,
)
from xdn.codec import (
    Delivery,
    EncodedDocument,
    Manifest,
    Sequencing,
    SignedManifest,
    encode,
    from_encrypted_xml,
    select,
    to_encrypted_xml,
)
from xdn.codec._encoding import frame, u64
from xdn.wireconv import delivery_from_pb, dissemination_to_pb, manifest_from_pb
from xdn.xmlsafe import parse_bytes

SEQUENCING = Sequencing(sequence=12, previous={"Step": 9, "WorkOrder": 11})


@pytest.fixture(scope="module")
def sequenced() -> EncodedDocument:
    """The document of the tamper tests, encoded as document 12 of the publisher's sequence."""
    plain = encode_doc()
    root = parse_bytes(t.DOCUMENT).getroot()
    ns = {"wo": "urn:example:wo", "q": "urn:example:q"}
    nodes = [
        t.Mapped(root, "WorkOrder"),
        t.Mapped(root.find("wo:production", ns), "Production"),
        *(t.Mapped(step, "Step") for step in root.iterfind(".//wo:step", ns)),
        t.Mapped(root.find("q:inspection", ns), "Inspection"),
    ]
    return encode(
        nodes,
        document_id=plain.manifest.document_id,
        publisher=PUBLISHER,
        version=plain.manifest.version,
        issued_at_ms=plain.manifest.issued_at_ms,
        keys=t.KEYS,
        signer=SIGNER,
        concept_order=CONCEPTS,
        sequencing=SEQUENCING,
    )


def _with(delivery: Delivery, **changes: Any) -> Delivery:
    """The delivery with its manifest changed (the signature kept)."""
    signed = delivery.signed_manifest
    manifest = dataclasses.replace(signed.manifest, **changes)
    return dataclasses.replace(
        delivery, signed_manifest=SignedManifest(manifest=manifest, signature=signed.signature)
    )


def test_the_sequence_and_back_pointers_are_signed(sequenced: EncodedDocument) -> None:
    m = sequenced.manifest
    assert m.sequence == 12
    assert {r.concept: r.previous for r in m.ranges} == {
        "WorkOrder": 11, "Production": 0, "Step": 9, "Inspection": 0,
    }
    assert m.signed_bytes().startswith(frame(b"xdn/manifest/v3")[:19])
    view = decode_with(select(sequenced, CONCEPTS))
    assert len(view.fragments) == 6


def test_an_unsequenced_manifest_signs_the_v2_bytes() -> None:
    m = encode_doc().manifest
    assert m.sequence == 0
    table = frame(*(frame(r.concept, u64(r.epoch), u64(r.first), u64(r.count)) for r in m.ranges))
    assert m.signed_bytes() == frame(
        b"xdn/manifest/v2", m.document_id, m.publisher, u64(m.version), u64(m.issued_at_ms),
        u64(m.leaf_count), m.root, table,
    )


def test_altered_sequence_is_refused(sequenced: EncodedDocument) -> None:
    delivery = select(sequenced, CONCEPTS)
    assert_rejected(_with(delivery, sequence=13))
    # Stripped (0) while back pointers remain: not even a well-formed manifest.
    with pytest.raises(ValueError, match="earlier document"):
        _with(delivery, sequence=0)
    # Stripped with every back pointer: an unsequenced manifest the publisher never signed.
    m = delivery.signed_manifest.manifest
    rows = tuple(dataclasses.replace(r, previous=0) for r in m.ranges)
    assert_rejected(_with(delivery, sequence=0, ranges=rows))


def test_altered_back_pointer_is_refused(sequenced: EncodedDocument) -> None:
    delivery = select(sequenced, CONCEPTS)
    m = delivery.signed_manifest.manifest
    for index in range(len(m.ranges)):
        ranges = list(m.ranges)
        altered = ranges[index].previous - 1 if ranges[index].previous else 1
        ranges[index] = dataclasses.replace(ranges[index], previous=altered)
        assert_rejected(_with(delivery, ranges=tuple(ranges)))


def test_a_sequence_added_to_an_unsequenced_manifest_is_refused() -> None:
    delivery = select(encode_doc(), CONCEPTS)
    assert_rejected(_with(delivery, sequence=5))


def test_wire_and_export_forms_keep_the_sequence(sequenced: EncodedDocument) -> None:
    message = dissemination_to_pb(
        sequenced.signed_manifest,
        [(f, sequenced.proofs[f.fragment_id]) for f in sequenced.fragments],
        provenance=b"",
        publisher_certificate=b"",
    )
    assert message.manifest.sequence == 12
    assert delivery_from_pb(message).signed_manifest == sequenced.signed_manifest
    assert manifest_from_pb(message.manifest) == sequenced.signed_manifest
    exported = to_encrypted_xml(sequenced)
    assert b'sequence="12"' in exported and b'previous="9"' in exported
    back = from_encrypted_xml(exported)
    assert back.signed_manifest == sequenced.signed_manifest
    assert b"sequence=" not in to_encrypted_xml(encode_doc())


def test_sequencing_is_checked_early() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Sequencing(sequence=0)
    with pytest.raises(ValueError, match="not before this one"):
        Sequencing(sequence=3, previous={"Step": 3})
    m = encode_doc().manifest
    row = dataclasses.replace(m.ranges[0], previous=1)
    with pytest.raises(ValueError, match="earlier document"):
        dataclasses.replace(m, ranges=(row, *m.ranges[1:]))  # unsequenced
    with pytest.raises(ValueError, match="earlier document"):
        dataclasses.replace(m, sequence=1, ranges=(row, *m.ranges[1:]))
    assert isinstance(dataclasses.replace(m, sequence=2, ranges=(row, *m.ranges[1:])), Manifest)
