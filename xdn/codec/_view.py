"""Subscriber side: verify and decrypt a delivery, then rebuild the view it entitles.

Theory of operation
-------------------
:func:`decode` checks, in order: the publisher's signature on the manifest; for every
fragment, that its header names the manifest's document and publisher and the key name its
concept and epoch imply, that its proof is for the signed tree size, and that its leaf (header
‖ ciphertext hash) is included under the signed root; then it decrypts with AES-256-GCM. Any
failure of any of these — or a missing key, a duplicate, or references that do not fit the
signed structure — raises the one opaque :class:`~xdn.errors.DecryptError`; the reason is only
logged at debug level (never plaintext, never keys). Decrypted plaintext is parsed with
:mod:`xdn.xmlsafe`; hostile XML raises :class:`~xdn.errors.HostileXmlError`.

The view is ``<xdn:view xmlns:xdn="https://xdn.example.org/ns#" document=… publisher=…
version=…>`` holding, in position order, the received fragments whose parent was not received
(or who have none). Inside each, an ``xdn:ref`` to a received fragment is replaced by that
fragment's element; a ref to a fragment not received becomes the placeholder
``<xdn:withheld fragment="DOC#POS"/>``. The placeholder carries only the fragment id, which the
subscriber already read in its parent's plaintext: never the withheld fragment's concept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from lxml import etree

from xdn import crypto
from xdn.codec._encoding import XDN_NS
from xdn.codec._fragments import Delivery, Fragment, fragment_leaf
from xdn.codec._keys import document_key, key_name
from xdn.codec._manifest import Manifest
from xdn.codec._merkle import InclusionProof, leaf_hash, verify_inclusion
from xdn.codec._plaintext import REF_TAG, canonicalize
from xdn.errors import DecryptError, SignatureError
from xdn.xmlsafe import Limits, parse_bytes

__all__ = [
    "VIEW_TAG",
    "WITHHELD_TAG",
    "HeldFragment",
    "KeyLookup",
    "View",
    "decode",
    "fragment_concepts",
    "required_keys",
]

log = logging.getLogger(__name__)

VIEW_TAG = f"{{{XDN_NS}}}view"
WITHHELD_TAG = f"{{{XDN_NS}}}withheld"

KeyLookup = Mapping[tuple[str, str, int], bytes] | Callable[[str, str, int], bytes | None]
"""Group keys by (publisher, concept, epoch): a mapping, or a function returning None if absent."""

_POSITION = re.compile(r"0|[1-9][0-9]{0,19}")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldFragment:
    """A fragment present in a :class:`View` (for checks and demos)."""

    fragment_id: str
    concept: str
    position: int
    parent: int | None
    epoch: int


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class View:
    """The part of a document a subscriber is entitled to, rebuilt after verification.

    Compare views by :meth:`to_bytes`; ``root`` is a live lxml element.
    """

    document_id: str
    publisher: str
    version: int
    root: etree._Element
    fragments: tuple[HeldFragment, ...]

    def to_bytes(self) -> bytes:
        """The view as exclusive C14N 1.0 without comments (deterministic bytes)."""
        return canonicalize(self.root)


def fragment_concepts(view: View) -> dict[str, str]:
    """``fragment_id → concept`` of every fragment the view holds, in position order."""
    return {held.fragment_id: held.concept for held in view.fragments}


def required_keys(delivery: Delivery) -> frozenset[tuple[str, str, int]]:
    """The (publisher, concept, epoch) group keys :func:`decode` will need for ``delivery``."""
    return frozenset((f.publisher, f.concept, f.epoch) for f, _ in delivery.items)


@dataclass(slots=True)
class _Opened:
    fragment: Fragment
    root: etree._Element
    refs: list[etree._Element]


def _fail(reason: str, *args: object) -> DecryptError:
    log.debug("delivery rejected: " + reason, *args)
    return DecryptError()


def _check_item(fragment: Fragment, proof: InclusionProof, manifest: Manifest) -> None:
    fid = fragment.fragment_id
    if (fragment.document_id, fragment.publisher) != (manifest.document_id, manifest.publisher):
        raise _fail("fragment %s is not of the manifest's document", fid)
    expected = key_name(fragment.publisher, fragment.concept, fragment.epoch, fragment.document_id)
    if fragment.key_name != expected:
        raise _fail("fragment %s names the wrong key", fid)
    if fragment.position >= manifest.leaf_count:
        raise _fail("fragment %s lies outside the signed tree", fid)
    leaf = leaf_hash(fragment_leaf(fragment))
    if not verify_inclusion(leaf, proof, root=manifest.root, tree_size=manifest.leaf_count):
        raise _fail("fragment %s: inclusion proof does not verify", fid)


def _group_key(keys: KeyLookup, fragment: Fragment) -> bytes | None:
    wanted = (fragment.publisher, fragment.concept, fragment.epoch)
    if isinstance(keys, Mapping):
        return keys.get(wanted)
    try:
        return keys(*wanted)
    except LookupError:
        return None


def _open(fragment: Fragment, keys: KeyLookup, limits: Limits | None) -> _Opened:
    group_key = _group_key(keys, fragment)
    if group_key is None:
        raise _fail("no group key for fragment %s (epoch %d)", fragment.fragment_id, fragment.epoch)
    doc_key = document_key(
        group_key,
        publisher=fragment.publisher,
        concept=fragment.concept,
        epoch=fragment.epoch,
        document_id=fragment.document_id,
    )
    plaintext = crypto.aead_decrypt(doc_key, fragment.cipher_value)
    source = f"fragment {fragment.fragment_id}"
    tree = parse_bytes(plaintext, source=source, limits=limits or Limits())
    root = tree.getroot()
    if root.tag.startswith(f"{{{XDN_NS}}}"):
        raise _fail("fragment %s: plaintext is not a document element", fragment.fragment_id)
    return _Opened(fragment=fragment, root=root, refs=list(root.iter(REF_TAG)))


def _ref_position(ref: etree._Element, holder: Fragment, manifest: Manifest) -> int:
    target = ref.get("fragment") or ""
    prefix = f"{manifest.document_id}#"
    suffix = target[len(prefix) :] if target.startswith(prefix) else ""
    if not _POSITION.fullmatch(suffix) or not holder.position < int(suffix) < manifest.leaf_count:
        raise _fail("fragment %s holds a malformed reference", holder.fragment_id)
    return int(suffix)


def _substitute(ref: etree._Element, element: etree._Element) -> None:
    element.tail = ref.tail
    holder = ref.getparent()
    if holder is None:  # unreachable: a fragment's root is never a reference
        raise _fail("reference without a parent element")
    holder.replace(ref, element)


def _assemble(manifest: Manifest, opened: dict[int, _Opened]) -> etree._Element:
    placed: set[int] = set()
    for position in sorted(opened):
        holder = opened[position]
        for ref in holder.refs:
            target = _ref_position(ref, holder.fragment, manifest)
            child = opened.get(target)
            if child is None:
                withheld = etree.Element(WITHHELD_TAG, nsmap={"xdn": XDN_NS})
                withheld.set("fragment", ref.get("fragment") or "")
                _substitute(ref, withheld)
            elif child.fragment.parent != position or target in placed:
                raise _fail("fragment %s: reference contradicts the signed parent", target)
            else:
                _substitute(ref, child.root)
                placed.add(target)
    for position, item in opened.items():
        if item.fragment.parent in opened and position not in placed:
            raise _fail("fragment %d is not referenced by its parent", position)
    view = etree.Element(VIEW_TAG, nsmap={"xdn": XDN_NS})
    view.set("document", manifest.document_id)
    view.set("publisher", manifest.publisher)
    view.set("version", str(manifest.version))
    for position in sorted(opened):
        if position not in placed:
            view.append(opened[position].root)
    return view


def decode(
    delivery: Delivery,
    *,
    publisher_key: crypto.PublicKey,
    keys: KeyLookup,
    limits: Limits | None = None,
) -> View:
    """Verify and decrypt ``delivery`` and rebuild the subscriber's view of the document.

    Args:
        delivery: what the subscriber received (untrusted).
        publisher_key: the publisher's public key (looked up by the caller from a trusted
            source for ``delivery.signed_manifest.manifest.publisher``).
        keys: group keys by (publisher, concept, epoch); see :func:`required_keys`.
        limits: bounds for parsing decrypted plaintext (xmlsafe defaults otherwise).

    Returns:
        The verified :class:`View`.

    Raises:
        DecryptError: any signature, header, proof, key or decryption check failed (opaque).
        HostileXmlError: authentic plaintext is XML the hardened parser refuses.
    """
    if not isinstance(delivery, Delivery):
        raise TypeError("delivery must be a Delivery")
    manifest = delivery.signed_manifest.manifest
    try:
        delivery.signed_manifest.verify(publisher_key)
    except SignatureError:
        raise _fail("manifest signature of %s does not verify", manifest.document_id) from None
    for fragment, proof in delivery.items:
        _check_item(fragment, proof, manifest)
    opened: dict[int, _Opened] = {}
    for fragment, _ in delivery.items:
        if fragment.position in opened:
            raise _fail("fragment %s delivered twice", fragment.fragment_id)
        opened[fragment.position] = _open(fragment, keys, limits)
    root = _assemble(manifest, opened)
    held = tuple(
        HeldFragment(
            fragment_id=item.fragment.fragment_id,
            concept=item.fragment.concept,
            position=position,
            parent=item.fragment.parent,
            epoch=item.fragment.epoch,
        )
        for position, item in sorted(opened.items())
    )
    return View(
        document_id=manifest.document_id,
        publisher=manifest.publisher,
        version=manifest.version,
        root=root,
        fragments=held,
    )
