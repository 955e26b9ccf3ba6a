"""A view larger than memory, written straight in canonical form from plaintexts kept on disk
(issue #15).

Theory of operation
-------------------
The in-memory decoder splices the view's bytes (:mod:`xdn.codec._assemble`) and the subscriber
stores their exclusive C14N (:meth:`~xdn.codec.View.to_bytes`), which parses the whole view.
For a view larger than memory, the decrypted plaintexts lie in one file (each a span of it) and
the canonical view is written in two streamed passes over each plaintext:

1. :func:`plan_spans` parses each plaintext with the hardened parser, an element at a time,
   clearing what it has read: it checks that the plaintext is one element outside the xdn
   namespace, finds its references (each empty, each naming a later fragment of the document)
   and builds the :class:`~xdn.codec._assemble.Template` :func:`~xdn.codec._assemble.plan_view`
   checks against the signed structure, as the in-memory decoder does;
2. :func:`write_canonical_view` walks the tree the spliced bytes parse to — the view element,
   each top-level fragment, and at each reference the referenced fragment (parsed from its own
   span) or the withheld placeholder — and writes every node as exclusive XML C14N 1.0 without
   comments writes it (:class:`CanonicalWriter`).

Most fragments are far smaller than memory, and a Python step per node costs ten times what
lxml's parser and canonicaliser do. So a plaintext of at most :data:`WHOLE_BYTES` is parsed in
one call in step 1 (the same hardened checks), and a top-level fragment whose subtree (it and
every received fragment under it) holds at most :data:`WHOLE_BYTES` is written in step 2 by
building that subtree as one lxml tree — each reference replaced by the referenced fragment's
root or the placeholder, as the spliced bytes would parse — under a view element, and
canonicalising it in one call (the view's own tags cut off). A subtree that splices a fragment
where a default namespace is in force goes node by node (lxml does not declare ``xmlns=""`` on a
moved element in no namespace), as does one above the size.

The result equals ``View.to_bytes()`` of the same delivery (tested on the codec's documents).
One difference in what is accepted: an attribute whose namespace two prefixes in scope bind
(which prefix it was written with is not visible through lxml) is refused as hostile.

Memory: one subtree of at most :data:`WHOLE_BYTES` of plaintext as an lxml tree and its canonical
bytes; beyond that, the nodes on the walk's path (each cleared as it ends, with at most one
finished sibling kept for its tail), one text node at most ``limits.max_text_bytes``, the
writer's namespace stack, and a few integers per reference.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, cast

from lxml import etree

from xdn.codec._assemble import Ref, Template
from xdn.codec._encoding import XDN_NS
from xdn.codec._opening import _target
from xdn.codec._plaintext import REF_TAG, canonicalize
from xdn.codec._verify import fail
from xdn.errors import HostileXmlError
from xdn.xmlsafe import Limits, iterparse_file, parse_bytes

__all__ = [
    "WHOLE_BYTES",
    "CanonicalWriter",
    "PlaintextSpan",
    "plan_spans",
    "write_canonical_view",
]

WHOLE_BYTES = 8 << 20
"""Plaintexts, and top-level subtrees, of at most this many bytes are handled by lxml whole."""
XML_NS = "http://www.w3.org/XML/1998/namespace"
_READ_BYTES = 1 << 20
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#xD;"})
_ATTRIBUTE_ESCAPES = str.maketrans(
    {"&": "&amp;", "<": "&lt;", '"': "&quot;", "\t": "&#x9;", "\n": "&#xA;", "\r": "&#xD;"}
)

Name = tuple[str, str, str]
"""(prefix, namespace URI, local name); ``""`` for no prefix, no namespace."""


class CanonicalWriter:
    """Writes elements, text and processing instructions as exclusive XML C14N 1.0 (without
    comments) writes them.

    A namespace is declared on an element that visibly uses it (its own prefix, or an
    attribute's) unless the nearest ancestor that uses that prefix already has it with the same
    value; an element in no namespace declares ``xmlns=""`` only where a default namespace
    is in force above it. Declarations come sorted by prefix, attributes by (namespace, name).
    """

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self._write = write
        self._scopes: list[dict[str, str]] = []  # per open element: prefix → URI it uses
        self._names: list[str] = []

    def _in_force(self, prefix: str) -> str | None:
        for scope in reversed(self._scopes):
            if prefix in scope:
                return scope[prefix]
        return "" if prefix == "" else None  # (no default namespace is the empty one)

    def start(self, name: Name, attributes: Sequence[tuple[Name, str]]) -> None:
        """An element's start tag; ``attributes`` are (name, value) pairs."""
        prefix, uri, _ = name
        used = {prefix: uri}
        for (a_prefix, a_uri, _), _ in attributes:
            if a_uri and a_uri != XML_NS:
                used[a_prefix] = a_uri
        declared = [(p, u) for p, u in sorted(used.items()) if self._in_force(p) != u]
        self._scopes.append(used)
        qname = _qname(name)
        self._names.append(qname)
        out = ["<", qname]
        for p, u in declared:
            out.append(f' xmlns{":" if p else ""}{p}="{u.translate(_ATTRIBUTE_ESCAPES)}"')
        for a_name, value in sorted(attributes, key=lambda a: (a[0][1], a[0][2])):
            out.append(f' {_qname(a_name)}="{value.translate(_ATTRIBUTE_ESCAPES)}"')
        out.append(">")
        self._write("".join(out).encode())

    def end(self) -> None:
        """The innermost open element's end tag."""
        self._scopes.pop()
        self._write(f"</{self._names.pop()}>".encode())

    def text(self, text: str | None) -> None:
        if text:
            self._write(text.translate(_TEXT_ESCAPES).encode())

    def pi(self, target: str, data: str | None) -> None:
        self._write(f"<?{target}{' ' + data if data else ''}?>".encode())


def _qname(name: Name) -> str:
    prefix, _, local = name
    return f"{prefix}:{local}" if prefix else local


def _name(element: etree._Element) -> Name:
    qname = etree.QName(element)
    return element.prefix or "", qname.namespace or "", qname.localname


def _attributes(element: etree._Element) -> list[tuple[Name, str]]:
    found: list[tuple[Name, str]] = []
    for key, value in element.attrib.items():
        if not key.startswith("{"):
            found.append((("", "", key), value))
            continue
        uri, local = key[1:].split("}", 1)
        if uri == XML_NS:
            prefixes = ["xml"]
        else:
            prefixes = [p for p, u in element.nsmap.items() if p and u == uri]
        if len(prefixes) != 1:
            raise HostileXmlError(
                f"line {element.sourceline}: attribute {local} of a namespace bound to "
                f"{len(prefixes)} prefixes: not written in canonical form here"
            )
        found.append(((prefixes[0], uri, local), value))
    return found


@dataclass(frozen=True, slots=True)
class PlaintextSpan:
    """A decrypted plaintext: bytes ``[start, end)`` of the file open as ``fd``."""

    fd: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    def reader(self) -> IO[bytes]:
        """A new reader of the span, for the parser (a MiB at a time at most)."""
        return cast(IO[bytes], _SpanReader(self))

    def read(self) -> bytes:
        """The whole span."""
        parts, at = [], self.start
        while at < self.end:
            data = os.pread(self.fd, self.end - at, at)
            if not data:
                raise OSError(f"plaintext file ends {self.end - at} bytes early")
            parts.append(data)
            at += len(data)
        return b"".join(parts)


class _SpanReader:
    def __init__(self, span: PlaintextSpan) -> None:
        self._span = span
        self._at = span.start
        self.name = "plaintext"

    def read(self, size: int = -1) -> bytes:
        size = _READ_BYTES if size < 0 else min(size, _READ_BYTES)
        data = os.pread(self._span.fd, min(size, self._span.end - self._at), self._at)
        self._at += len(data)
        return data


def _drop_before(node: etree._Element) -> None:
    """Free the siblings before ``node`` (whose tails are written)."""
    holder = node.getparent()
    if holder is not None:
        while node.getprevious() is not None:
            del holder[0]


def _events(
    span: PlaintextSpan, limits: Limits, what: str
) -> Iterator[tuple[str, etree._Element]]:
    if span.size > limits.max_document_bytes:
        raise HostileXmlError(f"{what}: larger than {limits.max_document_bytes} bytes")
    events = ("start", "end", "comment", "pi")
    return iterparse_file(span.reader(), events=events, limits=limits)


def _parsed(span: PlaintextSpan, limits: Limits, what: str) -> etree._Element:
    return parse_bytes(span.read(), source=what, limits=limits).getroot()


def _refs_of(root: etree._Element, document_id: str, position: int) -> tuple[Ref, ...]:
    """What :func:`plan_spans` finds streaming, from a plaintext parsed whole."""
    if str(root.tag).startswith(f"{{{XDN_NS}}}"):
        raise fail("fragment %d: plaintext is not a document element", position)
    refs = []
    for node in root.iter(REF_TAG):
        if len(node) or node.text:
            raise fail("fragment %d holds a non-empty reference", position)
        target = _target(node, document_id, position)
        depth = sum(1 for _ in node.iterancestors())
        refs.append(Ref(0, 0, target, None in node.nsmap, depth))
    return tuple(refs)


def plan_spans(
    spans: Mapping[int, tuple[int | None, PlaintextSpan]], *, document_id: str, limits: Limits
) -> dict[int, Template]:
    """The template of each plaintext (``position → (parent, span)``), as
    :func:`~xdn.codec._opening.open_plaintext` checks and makes it (without byte spans).

    Raises:
        HostileXmlError: a plaintext is XML the hardened parser refuses.
        DecryptError: it is not a fragment (an xdn element at its root, a non-empty reference,
            a malformed reference target).
    """
    templates: dict[int, Template] = {}
    for position, (parent, span) in spans.items():
        if span.size <= WHOLE_BYTES:
            root = _parsed(span, limits, f"fragment {document_id}#{position}")
            templates[position] = Template(
                position=position,
                parent=parent,
                size=span.size,
                apex_end=0,
                refs=_refs_of(root, document_id, position),
            )
            continue
        refs: list[Ref] = []
        depth = 0
        for event, node in _events(span, limits, f"fragment {document_id}#{position}"):
            if event == "start":
                depth += 1
                if depth == 1 and str(node.tag).startswith(f"{{{XDN_NS}}}"):
                    raise fail("fragment %d: plaintext is not a document element", position)
                continue
            if event != "end":
                continue
            depth -= 1
            if node.tag == REF_TAG:
                if len(node) or node.text:
                    raise fail("fragment %d holds a non-empty reference", position)
                target = _target(node, document_id, position)
                refs.append(Ref(0, 0, target, None in node.nsmap, depth))  # depth: its ancestors
            if depth:
                node.clear(keep_tail=True)
                _drop_before(node)
        templates[position] = Template(
            position=position, parent=parent, size=span.size, apex_end=0, refs=tuple(refs)
        )
    return templates


def _whole_subtree(
    top: int, templates: Mapping[int, Template], spans: Mapping[int, tuple[int | None, object]]
) -> bool:
    """Whether the subtree of ``top`` is small enough for lxml and splices nothing where a
    default namespace is in force."""
    size, stack = 0, [top]
    while stack:
        position = stack.pop()
        size += templates[position].size
        if size > WHOLE_BYTES:
            return False
        for ref in templates[position].refs:
            if ref.target in spans:
                if ref.in_default_namespace:
                    return False
                stack.append(ref.target)
    return True


def _subtree(
    position: int,
    document_id: str,
    spans: Mapping[int, tuple[int | None, PlaintextSpan]],
    limits: Limits,
) -> etree._Element:
    """The fragment at ``position`` with every reference replaced, as one lxml tree."""
    root = _parsed(spans[position][1], limits, f"fragment {document_id}#{position}")
    for ref in list(root.iter(REF_TAG)):
        target = int((ref.get("fragment") or "").rsplit("#", 1)[1])
        if target in spans:
            child = _subtree(target, document_id, spans, limits)
        else:
            child = etree.Element(f"{{{XDN_NS}}}withheld", nsmap={"xdn": XDN_NS})
            child.set("fragment", f"{document_id}#{target}")
        child.tail = ref.tail
        holder = ref.getparent()
        assert holder is not None  # (a reference is never a fragment's root: planned)
        holder.replace(ref, child)
    return root


def write_canonical_view(
    write: Callable[[bytes], object],
    *,
    start: tuple[str, str, int],
    tops: Sequence[int],
    spans: Mapping[int, tuple[int | None, PlaintextSpan]],
    limits: Limits,
    templates: Mapping[int, Template] | None = None,
) -> None:
    """Write the canonical view of document ``start`` = (document id, publisher, version):
    the fragments ``tops`` (planned by :func:`~xdn.codec._assemble.plan_view`) and every
    fragment of ``spans`` under them, withheld ones as placeholders. With ``templates`` (the
    plan), a small subtree is canonicalised by lxml whole (see the module).

    Raises:
        HostileXmlError: a plaintext is XML the hardened parser refuses (what was written is
            then to be thrown away).
    """
    document_id, publisher, version = start
    writer = CanonicalWriter(write)
    view_attributes = [
        (("", "", "document"), document_id),
        (("", "", "publisher"), publisher),
        (("", "", "version"), str(version)),
    ]
    writer.start(("xdn", XDN_NS, "view"), view_attributes)

    def fragment(position: int) -> None:
        depth = 0
        what = f"fragment {document_id}#{position}"
        for event, node in _events(spans[position][1], limits, what):
            if event == "start":
                depth += 1
                if depth > 1:
                    writer.text(_text_before(node))
                if node.tag != REF_TAG:
                    writer.start(_name(node), _attributes(node))
            elif event == "end":
                depth -= 1
                if node.tag == REF_TAG:
                    target = int((node.get("fragment") or "").rsplit("#", 1)[1])
                    if target in spans:
                        fragment(target)
                    else:
                        writer.start(
                            ("xdn", XDN_NS, "withheld"),
                            [(("", "", "fragment"), f"{document_id}#{target}")],
                        )
                        writer.end()
                else:
                    writer.text(node[-1].tail if len(node) else node.text)
                    writer.end()
                if depth:
                    node.clear(keep_tail=True)
                    _drop_before(node)
            elif depth:  # a comment or a processing instruction inside the fragment
                writer.text(_text_before(node))
                if event == "pi":
                    writer.pi(node.target, node.text)
                _drop_before(node)

    view = etree.Element(f"{{{XDN_NS}}}view", nsmap={"xdn": XDN_NS})
    for (_, _, local), value in view_attributes:
        view.set(local, value)
    head = len(canonicalize(view)) - len(_VIEW_END)
    for top in tops:
        if templates is None or not _whole_subtree(top, templates, spans):
            fragment(top)
            continue
        view.append(_subtree(top, document_id, spans, limits))
        write(canonicalize(view)[head : -len(_VIEW_END)])
        del view[0]
    writer.end()


_VIEW_END = b"</xdn:view>"


def _text_before(node: etree._Element) -> str | None:
    previous = node.getprevious()
    if previous is not None:
        return cast(str | None, previous.tail)
    holder = node.getparent()
    return None if holder is None else cast(str | None, holder.text)
