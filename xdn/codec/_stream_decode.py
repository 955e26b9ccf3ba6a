"""Streaming decoder: an encrypted export → the verified view, in bounded memory.

Theory of operation
-------------------
:func:`decode_file` reads the export (:mod:`xdn.codec._xmlenc`) with
:func:`xdn.xmlsafe.iterparse_file`. For each ``EncryptedData`` as it closes it checks the header
(:func:`xdn.codec._verify.claim_of`) and keeps only the claim (leaf hash and a few integers). If
the caller holds the fragment's key, it decrypts (GCM), parses the plaintext with the hardened
parser and spools the bytes to a temporary file with their :class:`~xdn.codec._assemble.Template`;
fragments without a key are withheld. The element is then cleared.

The manifest comes last. Only then is everything checked (:mod:`xdn.codec._verify`: signature,
freshness, range table, range proofs over every fragment in the file, completeness of the
concepts the caller holds keys for or names), and only if all of it holds is the view written to
``out``, spliced from the spool (:func:`~xdn.codec._assemble.write_view`). So nothing unverified
ever reaches ``out``; a failure raises the opaque :class:`~xdn.errors.DecryptError`, and
authentic but hostile plaintext raises :class:`~xdn.errors.HostileXmlError` after verification,
in the same order as the in-memory :func:`xdn.codec.decode`.

Memory: one ``EncryptedData`` element and one plaintext tree at a time, the fragments on the
splice stack while writing, and up to about a kilobyte of bookkeeping per fragment (its claim,
template and spool offset). Disk: the opened plaintexts.
Output: the view's bytes. They are not canonical (a child fragment keeps namespace declarations
its parent already makes); their exclusive C14N equals the in-memory view's ``to_bytes()``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

from lxml import etree

from xdn import crypto
from xdn.codec._assemble import (
    VIEW_END,
    Template,
    plan_view,
    view_start,
    write_view,
)
from xdn.codec._encoding import XDN_NS, XENC_NS
from xdn.codec._fragments import Fragment, fragment_leaf_hash
from xdn.codec._manifest import SignedManifest
from xdn.codec._opening import open_plaintext
from xdn.codec._ranges import RangeProof
from xdn.codec._streams import opened
from xdn.codec._verify import (
    Claim,
    DocumentKeyLookup,
    KeyLookup,
    KeySource,
    check_fresh,
    check_signature,
    claim_of,
    expected_concepts,
    fail,
    verify_claims,
)
from xdn.codec._view import HeldFragment
from xdn.codec._xmlenc import read_fragment, read_manifest, read_root
from xdn.errors import HostileXmlError, ProtocolError
from xdn.xmlsafe import Limits, iterparse_file

__all__ = ["DecodeReport", "decode_file"]

_ENCRYPTED_DATA = f"{{{XENC_NS}}}EncryptedData"
_MANIFEST = f"{{{XDN_NS}}}manifest"


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodeReport:
    """What :func:`decode_file` verified and wrote.

    Attributes:
        signed_manifest: the verified manifest.
        fragments: the fragments opened into the view, in position order.
        withheld: how many fragments of the export the caller had no key for.
    """

    signed_manifest: SignedManifest
    fragments: tuple[HeldFragment, ...]
    withheld: int


@dataclass(slots=True)
class _State:
    """Everything kept while reading the export (all small but the spool)."""

    spool: IO[bytes]
    limits: Limits
    keys: KeySource | None = None
    document: tuple[str, str] = ("", "")
    claims: list[Claim] = field(default_factory=list)
    templates: dict[int, Template] = field(default_factory=dict)
    offsets: dict[int, int] = field(default_factory=dict)
    held: list[HeldFragment] = field(default_factory=list)
    hostile: HostileXmlError | None = None
    manifest: tuple[SignedManifest, dict[str, RangeProof]] | None = None

    def body(self, position: int) -> bytes:
        self.spool.seek(self.offsets[position])
        return self.spool.read(self.templates[position].size)


def _fragment(state: _State, keys: KeySource, f: Fragment) -> None:
    state.claims.append(
        claim_of(
            document_id=f.document_id,
            publisher=f.publisher,
            concept=f.concept,
            position=f.position,
            parent=f.parent,
            epoch=f.epoch,
            key=f.key_name,
            leaf=fragment_leaf_hash(f),
            expected=state.document,
            expected_key=keys.name(f.concept, f.epoch),
        )
    )
    doc_key = keys.doc_key(f.concept, f.epoch)
    if doc_key is None or f.position in state.templates:
        return  # withheld; a duplicate is refused by verify_claims
    plain = crypto.aead_decrypt(doc_key, f.cipher_value)
    try:
        template, body = open_plaintext(
            plain,
            position=f.position,
            parent=f.parent,
            document_id=f.document_id,
            limits=state.limits,
        )
    except HostileXmlError as exc:
        state.hostile = state.hostile or exc
        return
    state.spool.seek(0, 2)
    state.offsets[f.position] = state.spool.tell()
    state.spool.write(body)
    state.templates[f.position] = template
    state.held.append(
        HeldFragment(
            fragment_id=f.fragment_id,
            concept=f.concept,
            position=f.position,
            parent=f.parent,
            epoch=f.epoch,
        )
    )


def _check_tail(element: etree._Element | None, limits: Limits) -> None:
    """Refuse a huge tail (xmlsafe checks tails only as far as they are parsed at the event)."""
    tail = None if element is None else element.tail
    if element is not None and tail is not None and len(tail) > limits.max_text_bytes:
        raise HostileXmlError(
            f"encrypted XML, line {element.sourceline}: text node larger than "
            f"{limits.max_text_bytes} bytes"
        )


def _read(
    events: Iterable[tuple[str, etree._Element]],
    state: _State,
    make_keys: Callable[[str, str], KeySource],
) -> None:
    depth = 0
    for event, element in events:
        if event == "start":
            depth += 1
            if depth == 1:
                state.document = read_root(element)
                state.keys = make_keys(*state.document)
            elif depth == 2:
                _check_tail(element.getprevious(), state.limits)
            continue
        depth -= 1
        if depth == 0 and len(element):
            _check_tail(element[-1], state.limits)
        if depth != 1:
            continue
        if element.tag == _ENCRYPTED_DATA and state.keys is not None:
            document_id, publisher = state.document
            fragment = read_fragment(element, document_id=document_id, publisher=publisher)
            _fragment(state, state.keys, fragment)
        elif element.tag == _MANIFEST and state.manifest is None:
            state.manifest = read_manifest(element)
        else:
            raise ProtocolError(
                f"encrypted XML, line {element.sourceline}: unexpected {element.tag}"
            )
        element.clear(keep_tail=True)
        holder = element.getparent()
        if holder is not None:
            while element.getprevious() is not None:
                del holder[0]


def decode_file(
    source: Path | IO[bytes],
    out: IO[bytes],
    *,
    publisher_key: crypto.PublicKey,
    keys: KeyLookup | None = None,
    document_keys: DocumentKeyLookup | None = None,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    limits: Limits | None = None,
    progress: Callable[[int], None] | None = None,
) -> DecodeReport:
    """Verify an encrypted export and write the view its keys entitle to ``out``.

    Args:
        source: the export (file or binary stream).
        out: where the view is written, only once everything has verified.
        publisher_key: the publisher's public key (from a trusted source).
        keys: group keys by (publisher, concept, epoch).
        document_keys: instead of ``keys``, per-document keys by key name.
        concepts: the concepts whose every fragment must be present (default: those the caller
            holds keys for).
        seen: the last version accepted per (publisher, document id).
        limits: bounds for the export and for each plaintext (xmlsafe defaults otherwise; raise
            ``max_text_bytes`` for fragments over 48 MB, whose base64 exceeds the default).
        progress: called with the number of export bytes read so far.

    Raises:
        DecryptError: any check failed (opaque); nothing was written.
        HostileXmlError: the export, or authentic plaintext, is XML the parser refuses.
        ProtocolError: the export is not a well-formed xdn encrypted document.
    """
    limits = limits or Limits()
    if (keys is None) == (document_keys is None):
        raise TypeError("give exactly one of keys= (group keys) and document_keys=")

    def make_keys(document_id: str, publisher: str) -> KeySource:
        return KeySource(
            publisher=publisher, document_id=document_id, keys=keys, document_keys=document_keys
        )

    with tempfile.TemporaryFile() as spool, opened(source, progress) as raw:
        state = _State(spool=spool, limits=limits)
        _read(iterparse_file(raw, limits=limits), state, make_keys)
        if state.manifest is None or state.keys is None:
            raise ProtocolError("encrypted XML: no manifest")
        signed, proofs = state.manifest
        m = signed.manifest
        expected = expected_concepts(m, concepts, state.keys)
        if (m.document_id, m.publisher) != state.document:
            raise fail("the export's fragments are not of its manifest's document")
        check_signature(signed, publisher_key)
        check_fresh(m, seen)
        present = {c.concept for c in state.claims}
        verify_claims(
            m, state.claims, [p for c, p in proofs.items() if c in present], expected=expected
        )
        if state.hostile is not None:
            raise state.hostile
        tops = plan_view(state.templates, leaf_count=m.leaf_count, max_depth=limits.max_depth)
        out.write(view_start(m.document_id, m.publisher, m.version))
        write_view(
            cast(Callable[[bytes | memoryview], object], out.write),
            document_id=m.document_id,
            tops=tops,
            templates=state.templates,
            body=state.body,
        )
        out.write(VIEW_END)
    return DecodeReport(
        signed_manifest=signed,
        fragments=tuple(sorted(state.held, key=lambda h: h.position)),
        withheld=len(state.claims) - len(state.held),
    )
