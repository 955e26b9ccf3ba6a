"""Fragment codec: mapped XML → signed, encrypted fragments → a subscriber's verified view.

Publisher side: :func:`encode` (mapped nodes in memory → :class:`EncodedDocument`) and
:func:`encode_file` (an XML file, streamed → its XML Encryption export), :func:`encode_to_sink`
(an XML file, streamed, each fragment handed on → :class:`Sealed`) after
:func:`concepts_present` (which concepts it holds, before any key is chosen). Disseminator side:
:func:`select` (→ :class:`Delivery`: some concepts' fragments, one range proof per run of
leaves). Subscriber side: :func:`decode` (→ :class:`View`), :func:`verify_delivery` (every check
that needs no key, for a delivery kept until its keys arrive) and :func:`decode_file` (an export,
streamed → the view's bytes), :func:`decode_stored` (ciphertexts kept elsewhere → the canonical
view), or the opaque :class:`~xdn.errors.DecryptError`. Archive form:
:func:`to_encrypted_xml` / :func:`from_encrypted_xml` (W3C XML Encryption 1.1).

Design in brief (details in each module's docstring; see also ``ARCHITECTURE.md``, "Fragment
codec"): leaves are sorted by concept in a depth-first order of the concept DAG
(:func:`concept_order`), then by position, so a subscriber's fragments form few contiguous runs;
the signed manifest carries a range table (concept → epoch, first leaf, count) against which a
subscriber checks that it received *all* fragments of its concepts, with one range proof
(:class:`RangeProof`) per run instead of one inclusion proof per fragment.
"""

from __future__ import annotations

from xdn.codec._encode import encode, select
from xdn.codec._encode_file import EncodeReport, encode_document, encode_file
from xdn.codec._encode_sink import can_stream, concepts_present, encode_to_sink
from xdn.codec._encoding import XDN_NS
from xdn.codec._fragments import Delivery, EncodedDocument, Fragment, fragment_leaf
from xdn.codec._keys import ConceptKey, document_key, key_name
from xdn.codec._manifest import (
    ConceptRange,
    Manifest,
    Sequencing,
    SignedManifest,
    sign_manifest,
)
from xdn.codec._merkle import (
    InclusionProof,
    MerkleTree,
    empty_root,
    leaf_hash,
    node_hash,
    root_from_inclusion,
    verify_inclusion,
)
from xdn.codec._order import concept_order
from xdn.codec._plaintext import REF_TAG, MappedNodeLike, canonicalize, fragment_id
from xdn.codec._ranges import RangeProof, merge_range_proofs, range_proof, verify_range
from xdn.codec._seal import Sealed
from xdn.codec._stored_decode import StoredCiphertext, decode_stored
from xdn.codec._stream_decode import DecodeReport, decode_file
from xdn.codec._verify import DocumentKeyLookup, KeyLookup
from xdn.codec._view import (
    VIEW_TAG,
    WITHHELD_TAG,
    HeldFragment,
    View,
    decode,
    fragment_concepts,
    required_keys,
    verify_delivery,
)
from xdn.codec._xmlenc import from_encrypted_xml, to_encrypted_xml

__all__ = [
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
    "StoredCiphertext",
    "View",
    "can_stream",
    "canonicalize",
    "concept_order",
    "concepts_present",
    "decode",
    "decode_file",
    "decode_stored",
    "document_key",
    "empty_root",
    "encode",
    "encode_document",
    "encode_file",
    "encode_to_sink",
    "fragment_concepts",
    "fragment_id",
    "fragment_leaf",
    "from_encrypted_xml",
    "key_name",
    "leaf_hash",
    "merge_range_proofs",
    "node_hash",
    "range_proof",
    "required_keys",
    "root_from_inclusion",
    "select",
    "sign_manifest",
    "to_encrypted_xml",
    "verify_delivery",
    "verify_inclusion",
    "verify_range",
]
