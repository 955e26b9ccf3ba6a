"""Fragment codec: mapped XML → signed, encrypted fragments → a subscriber's verified view.

Publisher side: :func:`encode` (mapped nodes + concept group keys + signing key →
:class:`EncodedDocument`). Disseminator side: :func:`select` (→ :class:`Delivery` for a set of
concepts). Subscriber side: :func:`decode` (→ :class:`View`, or the opaque
:class:`~xdn.errors.DecryptError`). Archive form: :func:`to_encrypted_xml` /
:func:`from_encrypted_xml` (W3C XML Encryption 1.1). See ``ARCHITECTURE.md``, "Fragment codec".
"""

from __future__ import annotations

from xdn.codec._encoding import XDN_NS
from xdn.codec._fragments import Delivery, EncodedDocument, Fragment, encode, fragment_leaf, select
from xdn.codec._keys import ConceptKey, document_key, key_name
from xdn.codec._manifest import Manifest, SignedManifest, sign_manifest
from xdn.codec._merkle import (
    InclusionProof,
    MerkleTree,
    empty_root,
    leaf_hash,
    node_hash,
    verify_inclusion,
)
from xdn.codec._plaintext import REF_TAG, MappedNodeLike, canonicalize, fragment_id
from xdn.codec._view import (
    VIEW_TAG,
    WITHHELD_TAG,
    HeldFragment,
    KeyLookup,
    View,
    decode,
    fragment_concepts,
    required_keys,
)
from xdn.codec._xmlenc import from_encrypted_xml, to_encrypted_xml

__all__ = [
    "REF_TAG",
    "VIEW_TAG",
    "WITHHELD_TAG",
    "XDN_NS",
    "ConceptKey",
    "Delivery",
    "EncodedDocument",
    "Fragment",
    "HeldFragment",
    "InclusionProof",
    "KeyLookup",
    "Manifest",
    "MappedNodeLike",
    "MerkleTree",
    "SignedManifest",
    "View",
    "canonicalize",
    "decode",
    "document_key",
    "empty_root",
    "encode",
    "fragment_concepts",
    "fragment_id",
    "fragment_leaf",
    "from_encrypted_xml",
    "key_name",
    "leaf_hash",
    "node_hash",
    "required_keys",
    "select",
    "sign_manifest",
    "to_encrypted_xml",
    "verify_inclusion",
]
