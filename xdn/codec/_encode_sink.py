"""Encoding a document file a fragment at a time, for a writer that keeps none of them.

Theory of operation
-------------------
A publisher must know which concepts a document holds *before* it encrypts anything: it starts
a new key epoch for each whose group changed, then encrypts under those keys. Streamed, that
takes two passes over the file, neither of which keeps the tree:

1. :func:`concepts_present` parses the document as a stream, matches each element's path as the
   streaming encoder does (:mod:`xdn.codec._patterns`, :func:`~xdn.codec._stream_encode.learn_path`)
   and clears each element as it ends: what it keeps is the set of concepts matched;
2. :func:`encode_to_sink` runs the streaming encoder (:mod:`xdn.codec._stream_encode`), handing
   each :class:`~xdn.codec.Fragment` to ``sink`` as it completes (in completion order, not
   leaf order), and returns the :class:`~xdn.codec._seal.Sealed` result: the signed manifest,
   the leaf order (``order[leaf]`` = index of the fragment in the order the sink got them) and
   each concept's range proof — what a wire form needs once the last fragment is out.

Both refuse a mapping whose XPaths are not all simple paths (UsageError): a caller parses the
document in memory then (:func:`xdn.mapping.map_document`, :func:`xdn.codec.encode`), with the
same result. Both check the document's size against ``limits`` first, as
:func:`xdn.xmlsafe.parse_file` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from lxml import etree

from xdn import crypto
from xdn.codec._encoding import check_u64
from xdn.codec._fragments import Fragment
from xdn.codec._keys import ConceptKey
from xdn.codec._manifest import Sequencing
from xdn.codec._patterns import PathMatcher
from xdn.codec._seal import Sealed
from xdn.codec._stream_encode import Job, encode_stream, learn_path, streamable
from xdn.codec._streams import opened
from xdn.errors import HostileXmlError, UsageError
from xdn.mapping import Mapping as ConceptMapping
from xdn.mapping import UnpublishedTally
from xdn.xmlsafe import DEFAULT_LIMITS, Limits, iterparse_file

__all__ = ["can_stream", "concepts_present", "encode_to_sink"]


def can_stream(mapping: ConceptMapping) -> bool:
    """Whether documents of ``mapping`` can be streamed (its XPaths are all simple paths)."""
    return _matcher_of(mapping) is not None


def _matcher_of(mapping: ConceptMapping) -> PathMatcher | None:
    if not isinstance(mapping, ConceptMapping):
        raise TypeError("mapping must be an xdn.mapping.Mapping")
    return streamable(mapping)


def _streaming_matcher(mapping: ConceptMapping) -> PathMatcher:
    matcher = _matcher_of(mapping)
    if matcher is None:
        raise UsageError(f"{mapping.source}: mapping XPaths are not all simple paths")
    return matcher


def _check_size(source: Path | IO[bytes], limits: Limits) -> None:
    if isinstance(source, Path) and source.stat().st_size > limits.max_document_bytes:
        raise HostileXmlError(f"{source}: document larger than {limits.max_document_bytes} bytes")


def concepts_present(
    source: Path | IO[bytes], *, mapping: ConceptMapping, limits: Limits = DEFAULT_LIMITS,
    unpublished: UnpublishedTally | None = None,
) -> frozenset[str]:
    """The concepts ``mapping`` maps some element of the document to (empty: none).

    With ``unpublished``, each element outside every mapped element is counted there too (what
    no view will hold), in the same pass.

    Raises:
        UsageError: the mapping cannot stream, or the document uses the xdn namespace.
        MappingError: an element is mapped to two concepts.
        HostileXmlError: the document is malformed or hostile.
    """
    matcher = _streaming_matcher(mapping)
    _check_size(source, limits)
    found: set[str] = set()
    states: dict[tuple[int, str], tuple[int, str | None]] = {}
    paths = [""]  # state → path string
    stack = [0]  # state of each open element (0: the document)
    inside = [False]  # whether each open element is in a mapped one (or is one)
    with opened(source) as raw:
        for event, element in iterparse_file(raw, limits=limits):
            if event == "start":
                known = states.get((stack[-1], element.tag))
                if known is None:
                    known = learn_path(matcher, states, paths, stack[-1], element)
                stack.append(known[0])
                if known[1] is not None:
                    found.add(known[1])
                    inside.append(True)
                else:
                    inside.append(inside[-1])
                    if unpublished is not None and not inside[-1]:
                        unpublished.element(element)
                continue
            stack.pop()
            inside.pop()
            _forget(element)
    return frozenset(found)


def _forget(element: etree._Element) -> None:
    """Drop an element that ended, and its earlier siblings (its tail, still growing, stays)."""
    element.clear(keep_tail=True)
    holder = element.getparent()
    if holder is not None:
        while element.getprevious() is not None:
            del holder[0]


def encode_to_sink(
    source: Path | IO[bytes],
    sink: Callable[[Fragment], object],
    *,
    mapping: ConceptMapping,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    concept_order: Sequence[str] = (),
    sequencing: Sequencing | None = None,
    limits: Limits = DEFAULT_LIMITS,
    iv_factory: Callable[[], bytes] | None = None,
) -> Sealed:
    """Encode a document as a stream, handing each fragment to ``sink`` as it completes.

    Arguments as for :func:`xdn.codec.encode_file`, and ``sequencing`` as for
    :func:`xdn.codec.encode`; the mapping must be streamable.

    Returns:
        The signed manifest, the leaf order (indexes into the fragments in the order ``sink``
        got them) and each concept's range proof.

    Raises:
        UsageError: the mapping cannot stream, a key is missing, no element is mapped, or the
            document uses the xdn namespace.
        MappingError: an element is mapped to two concepts.
        HostileXmlError: the document is malformed or hostile.
    """
    matcher = _streaming_matcher(mapping)
    check_u64("version", version)
    check_u64("issued_at_ms", issued_at_ms)
    _check_size(source, limits)
    job = Job(
        document_id=document_id,
        publisher=publisher,
        version=version,
        issued_at_ms=issued_at_ms,
        keys=keys,
        signer=signer,
        concept_order=concept_order,
        iv_factory=iv_factory,
        sequencing=sequencing,
    )
    with opened(source) as raw:
        sealed, _ = encode_stream(raw, matcher, limits, job, sink)
    return sealed
