"""The public API of xdn.codec is declared once, in its __all__, and pinned here."""

from __future__ import annotations

import xdn.codec

PUBLIC = {
    "REF_TAG",
    "VIEW_TAG",
    "WITHHELD_TAG",
    "XDN_NS",
    "ConceptKey",
    "ConceptRange",
    "DecodeReport",
    "Delivery",
    "DocumentKeyLookup",
    "EncodeReport",
    "EncodedDocument",
    "Fragment",
    "HeldFragment",
    "InclusionProof",
    "KeyLookup",
    "Manifest",
    "MappedNodeLike",
    "MerkleTree",
    "RangeProof",
    "Sealed",
    "Sequencing",
    "SignedManifest",
    "View",
    "can_stream",
    "canonicalize",
    "concept_order",
    "concepts_present",
    "decode",
    "decode_file",
    "document_key",
    "empty_root",
    "encode",
    "encode_document",
    "encode_file",
    "encode_to_sink",
    "fragment_concepts",
    "fragment_id",
    "decode_stored",
    "StoredCiphertext",
    "fragment_leaf",
    "from_encrypted_xml",
    "key_name",
    "leaf_hash",
    "root_from_inclusion",
    "merge_range_proofs",
    "node_hash",
    "range_proof",
    "required_keys",
    "select",
    "sign_manifest",
    "to_encrypted_xml",
    "verify_delivery",
    "verify_inclusion",
    "verify_range",
}


def test_all_is_pinned_and_importable() -> None:
    assert set(xdn.codec.__all__) == PUBLIC
    assert len(xdn.codec.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(xdn.codec, name) is not None


def test_no_other_public_names_leak() -> None:
    leaked = {
        name
        for name in vars(xdn.codec)
        if not name.startswith("_") and name not in PUBLIC and name != "annotations"
    }
    assert leaked == set()
