"""Opening decrypted plaintexts: check each with the hardened parser and locate its references.

Theory of operation
-------------------
Each plaintext must be one well-formed element, accepted by :mod:`xdn.xmlsafe` (hostile XML
raises :class:`~xdn.errors.HostileXmlError`), not itself a reference, with empty references
whose targets name later fragments of the document. The result is a
:class:`~xdn.codec._assemble.Template`: the bytes to splice and the byte span of every reference
(see :mod:`xdn.codec._assemble` for how spans are found and used).

Parsing many small plaintexts one parser call each costs more in per-call overhead than in
parsing. :func:`open_plaintexts` therefore parses runs of small plaintexts (up to
:data:`BATCH_BYTES` together) in one call, as ``<xdn-batch>P1<?xdn-split-NONCE?>P2…</xdn-batch>``
with a random nonce. The batch is used only if its children are exactly element, separator,
element, … with no text, comment or other node between them, so every plaintext was exactly one
element on its own; the wrapper declares no namespace and adds one level of depth, allowed for.
Anything else (a plaintext with an XML declaration, a leading comment, two elements, refused
markup…) falls back to parsing each plaintext alone, which gives the precise result or error.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence

from lxml import etree

from xdn.codec._assemble import Ref, Template
from xdn.codec._encoding import XDN_NS
from xdn.codec._plaintext import REF_TAG, canonicalize
from xdn.codec._verify import fail
from xdn.errors import HostileXmlError
from xdn.xmlsafe import Limits, parse_bytes

__all__ = ["BATCH_BYTES", "open_plaintext", "open_plaintexts"]

BATCH_BYTES = 1 << 20
_REF_OPEN = b'<xdn:ref xmlns:xdn="' + XDN_NS.encode() + b'" fragment="'
_REF_CLOSE = b'"></xdn:ref>'
_DECLARATION = re.compile(rb"<[!?]")  # comment, CDATA, DTD or processing instruction
_APEX = re.compile(rb"<[^\s/>]+")
_POSITION = re.compile(r"0|[1-9][0-9]{0,19}")


def _target(ref: etree._Element, document_id: str, holder: int) -> int:
    target = ref.get("fragment") or ""
    prefix = f"{document_id}#"
    suffix = target[len(prefix) :] if target.startswith(prefix) else ""
    if not _POSITION.fullmatch(suffix) or not holder < int(suffix):
        raise fail("fragment %d holds a malformed reference", holder)
    return int(suffix)


def _literal_spans(plain: bytes, refs: list[etree._Element]) -> list[tuple[int, int]] | None:
    if not plain.startswith(b"<") or not plain.endswith(b">") or _DECLARATION.search(plain):
        return None
    targets = [(r.get("fragment") or "").encode() for r in refs]
    spans: list[tuple[int, int]] = []
    start = plain.find(_REF_OPEN)
    while start >= 0:
        value = start + len(_REF_OPEN)
        value_end = plain.find(b'"', value)
        if (
            len(spans) == len(targets)
            or not plain.startswith(_REF_CLOSE, value_end)
            or plain[value:value_end] != targets[len(spans)]
        ):
            return None
        end = value_end + len(_REF_CLOSE)
        spans.append((start, end))
        start = plain.find(_REF_OPEN, end)
    return spans if len(spans) == len(targets) else None


def _no_refs(plain: bytes) -> list[tuple[int, int]] | None:
    """:func:`_literal_spans` of a plaintext whose parse found no reference (most of them)."""
    if not plain.startswith(b"<") or not plain.endswith(b">") or _DECLARATION.search(plain):
        return None
    return None if _REF_OPEN in plain else []


def _marked_spans(
    root: etree._Element, refs: list[etree._Element]
) -> tuple[bytes, list[tuple[int, int]]]:
    namespace = f"urn:xdn:splice:{secrets.token_hex(16)}"
    for ref in refs:
        marker = etree.Element(f"{{{namespace}}}m", nsmap={"m": namespace})
        marker.tail = ref.tail
        holder = ref.getparent()
        if holder is None:
            raise fail("a reference is the whole fragment")
        holder.replace(ref, marker)
    body = canonicalize(root)
    mark = f'<m:m xmlns:m="{namespace}"></m:m>'.encode()
    spans = [m.span() for m in re.finditer(re.escape(mark), body)]
    if len(spans) != len(refs):
        raise fail("references could not be located in a fragment")
    return body, spans


def open_plaintext(
    plain: bytes,
    *,
    position: int,
    parent: int | None,
    document_id: str,
    limits: Limits,
    root: etree._Element | None = None,
) -> tuple[Template, bytes]:
    """Check a decrypted plaintext and locate its references.

    Args:
        plain: the plaintext.
        position: the fragment's position.
        parent: its parent's position, if any.
        document_id: the document (references must name it).
        limits: bounds for the hardened parser.
        root: the plaintext already parsed (by :func:`open_plaintexts`), if it was.

    Returns:
        The template and the bytes to splice (the plaintext, or its canonical form).

    Raises:
        HostileXmlError: the plaintext is XML the hardened parser refuses.
        DecryptError: it is not a fragment (a reference at its root, a non-empty reference, a
            malformed reference target).
    """
    if root is None:
        source = f"fragment {document_id}#{position}"
        root = parse_bytes(plain, source=source, limits=limits).getroot()
    if not isinstance(root.tag, str) or root.tag.startswith(f"{{{XDN_NS}}}"):
        raise fail("fragment %d: plaintext is not a document element", position)
    # (a reference's local name is in its start tag literally: most plaintexts hold none)
    refs = list(root.iter(REF_TAG)) if b"ref" in plain else []
    for ref in refs:
        if len(ref) or ref.text:
            raise fail("fragment %d holds a non-empty reference", position)
    targets = [_target(ref, document_id, position) for ref in refs]
    contexts = [(None in ref.nsmap, len(list(ref.iterancestors()))) for ref in refs]
    spans = _literal_spans(plain, refs) if refs else _no_refs(plain)
    body = plain
    if spans is None:
        body, spans = _marked_spans(root, refs)
    apex = _APEX.match(body)
    if apex is None:  # unreachable: both forms start with the root's start tag
        raise fail("fragment %d: no start tag", position)
    template = Template(
        position=position,
        parent=parent,
        size=len(body),
        apex_end=apex.end(),
        refs=tuple(
            Ref(start, end, target, in_default, depth)
            for (start, end), target, (in_default, depth) in zip(
                spans, targets, contexts, strict=True
            )
        ),
    )
    return template, body


def _batch_roots(plains: Sequence[bytes], limits: Limits) -> list[etree._Element] | None:
    """Parse plaintexts in one call; their roots, or ``None`` if that is not exactly right."""
    target = f"xdn-split-{secrets.token_hex(8)}"
    joined = b"<xdn-batch>" + f"<?{target}?>".encode().join(plains) + b"</xdn-batch>"
    batch_limits = Limits(
        max_depth=limits.max_depth + 1,
        max_text_bytes=limits.max_text_bytes,
        max_document_bytes=len(joined) + 1,
    )
    try:
        root = parse_bytes(joined, source="fragments", limits=batch_limits).getroot()
    except HostileXmlError:
        return None
    children = list(root)
    if root.text is not None or len(children) != 2 * len(plains) - 1:
        return None
    for index, child in enumerate(children):
        if child.tail is not None:
            return None
        if index % 2:
            if not isinstance(child, etree._ProcessingInstruction) or child.target != target:
                return None
        elif not isinstance(child.tag, str):
            return None
    return children[::2]


def open_plaintexts(
    items: Sequence[tuple[int, int | None, bytes]], *, document_id: str, limits: Limits
) -> dict[int, tuple[Template, bytes]]:
    """:func:`open_plaintext` for many ``(position, parent, plaintext)``, small ones batched."""
    opened: dict[int, tuple[Template, bytes]] = {}
    batch: list[tuple[int, int | None, bytes]] = []
    size = 0

    def flush() -> None:
        roots = _batch_roots([plain for _, _, plain in batch], limits) if len(batch) > 1 else None
        for index, (position, parent, plain) in enumerate(batch):
            opened[position] = open_plaintext(
                plain, position=position, parent=parent, document_id=document_id,
                limits=limits, root=None if roots is None else roots[index],
            )  # fmt: skip
        batch.clear()

    for item in items:
        if size + len(item[2]) > BATCH_BYTES and batch:
            flush()
            size = 0
        batch.append(item)
        size += len(item[2])
    flush()
    return opened
