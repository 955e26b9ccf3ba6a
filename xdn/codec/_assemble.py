"""Reassembly: decrypted fragment plaintexts → the entitled view, by splicing bytes.

Theory of operation
-------------------
Each decrypted plaintext is opened once (:mod:`xdn.codec._opening`): parsed with the hardened
parser to check it and to find its references (``xdn:ref`` elements, which must be empty), it
becomes a :class:`Template`: the bytes to splice plus the byte span of every reference. The view
is then written by copying bytes: each received child fragment's bytes go where its reference
was, each withheld one becomes the placeholder
``<xdn:withheld xmlns:xdn="https://xdn.example.org/ns#" fragment="DOC#POS"/>``, which carries
only the fragment id the subscriber already read in its parent's plaintext. Nothing is parsed
twice and nothing is held as a tree, so the streaming decoder can keep plaintexts on disk.

Finding spans: the publisher's plaintexts are exclusive C14N, where a reference is literally
``<xdn:ref xmlns:xdn="…" fragment="ID"></xdn:ref>``. If the plaintext has no comment, CDATA
section, DTD or processing instruction (no ``<!``, no ``<?``), every ``<`` starts a tag, so the
literal matches are exactly the reference elements; they are used if they agree with the parsed
references one for one. Otherwise (a plaintext not in canonical form) the parsed references are
replaced by marker elements named with a random nonce, the tree is re-canonicalised and split at
the markers.

Namespaces: a child's bytes are self-contained for prefixes, but an unprefixed element without a
default-namespace declaration would inherit the default namespace of the place it is spliced
into; when that place has one and the child's outermost start tag declares none, ``xmlns=""`` is
added to that start tag, so the child means in the view what it meant alone.

The view is ``<xdn:view xmlns:xdn="https://xdn.example.org/ns#" document=… publisher=…
version=…>`` holding, in position order, the received fragments whose parent was not received.
Reference checks (each target after its holder and inside the signed tree, a received child
referenced exactly once and by its signed parent) raise the opaque
:class:`~xdn.errors.DecryptError`; fragments nested deeper than ``max_depth`` elements raise
:class:`~xdn.errors.HostileXmlError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from xdn.codec._encoding import XDN_NS
from xdn.codec._verify import fail
from xdn.errors import HostileXmlError

__all__ = ["VIEW_END", "Ref", "Template", "plan_view", "view_start", "write_view"]

_ATTRIBUTE = re.compile(rb"""\s+([^\s=/>]+)\s*=\s*(?:"[^"]*"|'[^']*')""")


@dataclass(frozen=True, slots=True)
class Ref:
    """A reference in a plaintext: its byte span, its target and its namespace context."""

    start: int
    end: int
    target: int
    in_default_namespace: bool  # a default namespace is in scope where the reference sits
    depth: int  # elements from the fragment's root down to the reference's parent


@dataclass(frozen=True, slots=True)
class Template:
    """An opened fragment, ready to splice: everything but its bytes."""

    position: int
    parent: int | None
    size: int
    apex_end: int  # where ``xmlns=""`` goes in the outermost start tag
    refs: tuple[Ref, ...]


def _declares_default(body: bytes | memoryview, apex_end: int) -> bool:
    """Whether the outermost start tag of ``body`` has an ``xmlns`` attribute."""
    position = apex_end
    while match := _ATTRIBUTE.match(body, position):
        if match.group(1) == b"xmlns":
            return True
        position = match.end()
    return False


def plan_view(templates: Mapping[int, Template], *, leaf_count: int, max_depth: int) -> list[int]:
    """Check the references between received fragments; return the top-level positions.

    Raises:
        DecryptError: a reference contradicts the signed structure.
        HostileXmlError: fragments nest deeper than ``max_depth`` elements.
    """
    placed: set[int] = set()
    apex_depth: dict[int, int] = {}
    for position in sorted(templates):
        holder = templates[position]
        depth = apex_depth.setdefault(position, 1)
        for ref in holder.refs:
            if ref.target >= leaf_count:
                raise fail("fragment %d refers outside the signed tree", position)
            child = templates.get(ref.target)
            if child is None:
                continue
            if child.parent != position or ref.target in placed:
                raise fail("fragment %d: reference contradicts the signed parent", ref.target)
            placed.add(ref.target)
            apex_depth[ref.target] = depth + ref.depth
            if depth + ref.depth > max_depth:
                raise HostileXmlError(f"fragments nest deeper than {max_depth} elements")
    for position, item in templates.items():
        if item.parent in templates and position not in placed:
            raise fail("fragment %d is not referenced by its parent", position)
    return [p for p in sorted(templates) if p not in placed]


def _withheld(document_id: str, position: int) -> bytes:
    fid = quoteattr(f"{document_id}#{position}", {'"': "&quot;"})
    return f'<xdn:withheld xmlns:xdn="{XDN_NS}" fragment={fid}></xdn:withheld>'.encode()


def view_start(document_id: str, publisher: str, version: int) -> bytes:
    """The view's start tag."""
    doc = quoteattr(document_id, {'"': "&quot;"})
    pub = quoteattr(publisher, {'"': "&quot;"})
    start = f'<xdn:view xmlns:xdn="{XDN_NS}" document={doc} publisher={pub} version="{version}">'
    return start.encode()


VIEW_END = b"</xdn:view>"


def write_view(
    write: Callable[[bytes | memoryview], object],
    *,
    document_id: str,
    tops: list[int],
    templates: Mapping[int, Template],
    body: Callable[[int], bytes],
) -> None:
    """Write the fragments ``tops`` (and everything received under them) by splicing bytes."""
    frames: list[tuple[Template, memoryview, list[int]]] = []  # template, bytes, [ref, cursor]

    def enter(template: Template, in_default: bool) -> None:
        data = memoryview(body(template.position))
        cursor = 0
        if in_default and not _declares_default(data, template.apex_end):
            write(data[: template.apex_end])
            write(b' xmlns=""')
            cursor = template.apex_end
        frames.append((template, data, [0, cursor]))

    for top in tops:
        enter(templates[top], False)
        while frames:
            template, data, state = frames[-1]
            index, cursor = state
            if index == len(template.refs):
                write(data[cursor:])
                frames.pop()
                continue
            ref = template.refs[index]
            write(data[cursor : ref.start])
            state[0], state[1] = index + 1, ref.end
            child = templates.get(ref.target)
            if child is None:
                write(_withheld(document_id, ref.target))
            else:
                enter(child, ref.in_default_namespace)
