"""Streaming encoder: an XML document → its encrypted fragments, in memory bounded by them.

Theory of operation
-------------------
:func:`encode_stream` (behind :func:`xdn.codec.encode_file` and
:func:`xdn.codec.encode_document`) reads the document with :func:`xdn.xmlsafe.iterparse_file` and
hands each fragment on (to the export writer, or to a list) as soon as it is complete:

* on each element's *start*, its path string decides whether it is mapped
  (:mod:`xdn.codec._patterns`); a mapped element gets the next position (document order) and
  its parent is the nearest mapped ancestor;
* on a mapped element's *end*, its subtree is complete and every mapped descendant in it has
  already been replaced by its reference: it is serialised (exclusive C14N, exactly as
  :func:`xdn.codec._plaintext.canonical_fragments` does in memory), encrypted, handed on as a
  :class:`~xdn.codec.Fragment`, and remembered only as a :class:`~xdn.codec._seal.LeafRecord`;
* it is then replaced in the tree by its ``xdn:ref`` (when it has a mapped ancestor) or cleared
  (when it has none), and elements outside every fragment are cleared as they end, so the live
  tree holds the open path plus the largest unfinished fragment;
* at the end, :func:`~xdn.codec._seal.seal` orders the leaves, builds the range table and the
  tree, signs once, and the manifest closes the export.

Replacing an element by its reference is deferred to the next parser event. lxml's parser runs
ahead of the events it reports, and may still be appending the element's tail text to the text
node after it; by the next event that tail is complete and can move. Elements before the current
one (already complete) are deleted; nothing the parser may still extend is touched.

Memory: the open path, the largest fragment's tree and plaintext, one ciphertext, and 40-odd
bytes of :class:`~xdn.codec._seal.LeafRecord` per fragment (the one part that grows with the
document: 10⁴ fragments take under a megabyte).

The rule: a mapping streams when all its XPaths are simple paths (see
:mod:`xdn.codec._patterns`); otherwise the document is parsed in memory, mapped with
:func:`xdn.mapping.map_document` and encoded by :func:`xdn.codec.encode`, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from lxml import etree

from xdn import crypto
from xdn.codec._encode import FragmentEncryptor, leaf_record
from xdn.codec._encoding import XDN_NS
from xdn.codec._fragments import Fragment
from xdn.codec._keys import ConceptKey
from xdn.codec._manifest import Sequencing
from xdn.codec._patterns import SEP, PathMatcher, compile_paths
from xdn.codec._plaintext import REF_TAG, canonicalize, fragment_id
from xdn.codec._seal import LeafRecord, Sealed, seal
from xdn.errors import HostileXmlError, UsageError
from xdn.mapping import Mapping as ConceptMapping
from xdn.xmlsafe import Limits, iterparse_file

__all__ = ["Job", "encode_stream", "learn_path", "streamable"]

_XDN_PREFIX = f"{{{XDN_NS}}}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """The arguments every encoder takes (see :func:`xdn.codec.encode`)."""

    document_id: str
    publisher: str
    version: int
    issued_at_ms: int
    keys: Mapping[str, ConceptKey]
    signer: crypto.PrivateKey
    concept_order: Sequence[str]
    iv_factory: Callable[[], bytes] | None
    sequencing: Sequencing | None = None


def streamable(mapping: ConceptMapping) -> PathMatcher | None:
    """A path matcher for ``mapping`` if it can be streamed (see the module docstring)."""
    return compile_paths(
        ((r.concept, r.expression) for r in mapping.rules),
        mapping.namespaces,
        source=mapping.source,
    )


class _Encoder:
    """The event loop state of one streaming encoding."""

    def __init__(
        self,
        matcher: PathMatcher,
        encryptor: FragmentEncryptor,
        sink: Callable[[Fragment], object],
        document_id: str,
        max_text: int,
    ) -> None:
        self.max_text = max_text
        self.matcher = matcher
        self.encryptor = encryptor
        self.sink = sink
        self.document_id = document_id
        self.records: list[LeafRecord] = []
        self.largest = 0
        self._pending: tuple[etree._Element, int] | None = None
        self._next = 0

    def _flush(self) -> None:
        """Replace the last finished nested fragment by its reference (see the docstring)."""
        if self._pending is None:
            return
        element, position = self._pending
        self._pending = None
        holder = element.getparent()
        if holder is not None:
            attributes = {"fragment": fragment_id(self.document_id, position)}
            ref = holder.makeelement(REF_TAG, attributes, nsmap={"xdn": XDN_NS})
            tail = element.tail
            holder.replace(element, ref)
            ref.tail = tail

    def run(self, events: Iterable[tuple[str, etree._Element]]) -> None:
        """Consume the parser's events (the hot loop: locals, no per-event method calls).

        Element paths are interned: state ``(parent state, tag)`` → (state, concept), so each
        distinct path is matched once and an event costs a tuple and a dictionary lookup.
        """
        states: dict[tuple[int, str], tuple[int, str | None]] = {}
        paths = [""]  # state → path string
        stack = [0]  # state of each open element (0: the document)
        owner: list[int | None] = [None]  # nearest mapped position at each depth
        mine: list[int | None] = []  # position of each open element, if mapped
        concepts: list[str] = []  # concept of each open mapped element
        max_text = self.max_text
        for event, element in events:
            if self._pending is not None:
                self._flush()
            # xmlsafe checks each element's text; a tail may still be growing when its element
            # ends, so tails are checked once complete: at the next sibling or the parent's end.
            before = (
                element.getprevious() if event == "start" else element[-1] if len(element) else None
            )
            if before is not None and before.tail is not None and len(before.tail) > max_text:
                raise HostileXmlError(
                    f"line {before.sourceline}: text node larger than {max_text} bytes"
                )
            if event == "start":
                tag = element.tag
                known = states.get((stack[-1], tag))
                if known is None:
                    known = learn_path(self.matcher, states, paths, stack[-1], element)
                state, concept = known
                stack.append(state)
                if concept is None:
                    mine.append(None)
                    owner.append(owner[-1])
                else:
                    mine.append(self._next)
                    owner.append(self._next)
                    concepts.append(concept)
                    self._next += 1
                continue
            stack.pop()
            owner.pop()
            position = mine.pop()
            enclosing = owner[-1]
            if position is not None:
                self._fragment(element, position, concepts.pop(), enclosing)
                if enclosing is not None:
                    self._pending = (element, position)
                    continue
            if enclosing is None:
                element.clear(keep_tail=True)
                holder = element.getparent()
                if holder is not None:
                    while element.getprevious() is not None:
                        del holder[0]

    def _fragment(
        self, element: etree._Element, position: int, concept: str, parent: int | None
    ) -> None:
        plain = canonicalize(element)
        self.largest = max(self.largest, len(plain))
        fragment = self.encryptor.encrypt(
            concept=concept, position=position, parent=parent, plain=plain
        )
        self.sink(fragment)
        self.records.append(leaf_record(fragment))


def learn_path(
    matcher: PathMatcher,
    states: dict[tuple[int, str], tuple[int, str | None]],
    paths: list[str],
    parent: int,
    element: etree._Element,
) -> tuple[int, str | None]:
    """Match a path seen for the first time: ``(parent state, tag)`` → (its state, concept).

    Raises:
        UsageError: the element is in the reserved xdn namespace.
        MappingError: two concepts map it.
    """
    tag = element.tag
    if tag.startswith(_XDN_PREFIX):
        raise UsageError(f"document uses the reserved xdn namespace: {tag}")
    path = paths[parent] + SEP + tag
    known = (len(paths), matcher.concept(path, tag, element.sourceline))
    paths.append(path)
    states[(parent, tag)] = known
    return known


def encode_stream(
    raw: IO[bytes],
    matcher: PathMatcher,
    limits: Limits,
    job: Job,
    sink: Callable[[Fragment], object],
) -> tuple[Sealed, int]:
    """Run the streaming encoder over ``raw``; hand each fragment to ``sink``; seal.

    Returns:
        The sealed manifest and proofs, and the size of the largest fragment plaintext.
    """
    encryptor = FragmentEncryptor(
        job.keys, publisher=job.publisher, document_id=job.document_id, iv_factory=job.iv_factory
    )
    state = _Encoder(matcher, encryptor, sink, job.document_id, limits.max_text_bytes)
    state.run(iterparse_file(raw, limits=limits))
    sealed = seal(
        state.records,
        document_id=job.document_id,
        publisher=job.publisher,
        version=job.version,
        issued_at_ms=job.issued_at_ms,
        signer=job.signer,
        concept_order=job.concept_order,
        sequencing=job.sequencing,
    )
    return sealed, state.largest
