"""Encoding a document file or stream: streamed when the mapping allows, in memory otherwise.

:func:`encode_file` writes the XML Encryption export (:mod:`xdn.codec._xmlenc`) as the streaming
encoder (:mod:`xdn.codec._stream_encode`) produces fragments; :func:`encode_document` keeps them
in memory as the wire form. A mapping whose XPaths are not all simple paths (see
:mod:`xdn.codec._patterns`) is evaluated in memory instead, with the same result.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from xdn import crypto
from xdn.codec._encode import encode
from xdn.codec._encoding import check_u64
from xdn.codec._fragments import EncodedDocument, Fragment
from xdn.codec._keys import ConceptKey
from xdn.codec._manifest import SignedManifest
from xdn.codec._patterns import PathMatcher
from xdn.codec._stream_encode import Job, encode_stream, streamable
from xdn.codec._streams import opened
from xdn.codec._xmlenc import (
    DOCUMENT_END,
    document_start,
    encrypted_data,
    manifest_element,
    to_encrypted_xml,
)
from xdn.errors import UsageError
from xdn.mapping import Mapping as ConceptMapping
from xdn.mapping import map_document
from xdn.xmlsafe import Limits, parse_bytes

__all__ = ["EncodeReport", "encode_document", "encode_file"]

_OVERHEAD = 12 + 16  # GCM IV and tag bytes in a cipher value


@dataclass(frozen=True, slots=True, kw_only=True)
class EncodeReport:
    """What :func:`encode_file` did.

    Attributes:
        signed_manifest: the signed manifest written at the end of the export.
        streamed: whether the document was streamed (``False``: parsed in memory).
        largest_fragment: size in bytes of the largest fragment plaintext.
    """

    signed_manifest: SignedManifest
    streamed: bool
    largest_fragment: int


def _in_memory(
    raw: IO[bytes], mapping: ConceptMapping, limits: Limits, job: Job
) -> EncodedDocument:
    tree = parse_bytes(raw.read(), source=getattr(raw, "name", "<stream>"), limits=limits)
    return encode(
        map_document(tree, mapping),
        document_id=job.document_id,
        publisher=job.publisher,
        version=job.version,
        issued_at_ms=job.issued_at_ms,
        keys=job.keys,
        signer=job.signer,
        concept_order=job.concept_order,
        iv_factory=job.iv_factory,
    )


def _matcher(mapping: ConceptMapping, streaming: bool | None) -> PathMatcher | None:
    if not isinstance(mapping, ConceptMapping):
        raise TypeError("mapping must be an xdn.mapping.Mapping")
    matcher = streamable(mapping) if streaming is not False else None
    if streaming and matcher is None:
        raise UsageError(f"{mapping.source}: mapping XPaths are not all simple paths")
    return matcher


def encode_document(
    source: Path | IO[bytes],
    *,
    mapping: ConceptMapping,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    concept_order: Sequence[str] = (),
    limits: Limits | None = None,
    streaming: bool | None = None,
    progress: Callable[[int], None] | None = None,
    iv_factory: Callable[[], bytes] | None = None,
) -> EncodedDocument:
    """Encode an XML document (file or binary stream) into an :class:`EncodedDocument`.

    The document is parsed as a stream (never held as a tree) when the mapping allows it; the
    fragments are kept in memory, as the wire form needs them. Arguments and errors as for
    :func:`encode_file`.
    """
    job = _job(document_id, publisher, version, issued_at_ms, keys, signer, concept_order,
               iv_factory)  # fmt: skip
    matcher = _matcher(mapping, streaming)
    fragments: list[Fragment] = []
    with opened(source, progress) as raw:
        if matcher is None:
            return _in_memory(raw, mapping, limits or Limits(), job)
        sealed, _ = encode_stream(raw, matcher, limits or Limits(), job, fragments.append)
    return EncodedDocument(
        signed_manifest=sealed.signed_manifest,
        fragments=tuple(fragments[i] for i in sealed.order),
        range_proofs=sealed.proofs,
    )


def _job(
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    concept_order: Sequence[str],
    iv_factory: Callable[[], bytes] | None,
) -> Job:
    check_u64("version", version)
    check_u64("issued_at_ms", issued_at_ms)
    return Job(
        document_id=document_id,
        publisher=publisher,
        version=version,
        issued_at_ms=issued_at_ms,
        keys=keys,
        signer=signer,
        concept_order=concept_order,
        iv_factory=iv_factory,
    )


def encode_file(
    source: Path | IO[bytes],
    out: IO[bytes],
    *,
    mapping: ConceptMapping,
    document_id: str,
    publisher: str,
    version: int,
    issued_at_ms: int,
    keys: Mapping[str, ConceptKey],
    signer: crypto.PrivateKey,
    concept_order: Sequence[str] = (),
    limits: Limits | None = None,
    streaming: bool | None = None,
    progress: Callable[[int], None] | None = None,
    iv_factory: Callable[[], bytes] | None = None,
) -> EncodeReport:
    """Encode an XML document (file or binary stream) into its encrypted export ``out``.

    Args:
        source: the document.
        out: where the export is written, incrementally.
        mapping: the concept mapping of the document's schema.
        document_id: identifier of the document.
        publisher: identifier of the publisher (must match every key's publisher).
        version: document version.
        issued_at_ms: issue time in milliseconds since the Unix epoch (passed in).
        keys: concept → current :class:`ConceptKey` for every concept the mapping may produce.
        signer: the publisher's signing key.
        concept_order: concepts in leaf order (see :func:`xdn.codec.concept_order`).
        limits: bounds on the input document (xmlsafe defaults otherwise).
        streaming: ``None`` streams when the mapping allows it (see the module docstring),
            ``True`` insists (UsageError otherwise), ``False`` parses in memory.
        progress: called with the number of input bytes read so far.
        iv_factory: returns a fresh 12-byte GCM IV per fragment (tests only; random otherwise).

    Returns:
        What was written.

    Raises:
        HostileXmlError: the document is malformed or hostile (DTD, entities, too deep…).
        UsageError, MappingError: a missing key, the xdn namespace in the document, an element
            mapped twice, no mapped element at all, or ``streaming=True`` for a mapping that
            cannot stream.
    """
    job = _job(document_id, publisher, version, issued_at_ms, keys, signer, concept_order,
               iv_factory)  # fmt: skip
    matcher = _matcher(mapping, streaming)
    with opened(source, progress) as raw:
        if matcher is None:
            encoded = _in_memory(raw, mapping, limits or Limits(), job)
            out.write(to_encrypted_xml(encoded))
            largest = max(len(f.cipher_value) for f in encoded.fragments) - _OVERHEAD
            return EncodeReport(
                signed_manifest=encoded.signed_manifest, streamed=False, largest_fragment=largest
            )
        out.write(document_start(document_id, publisher))
        sealed, largest = encode_stream(
            raw, matcher, limits or Limits(), job, lambda f: out.write(encrypted_data(f))
        )
    out.write(manifest_element(sealed.signed_manifest, sealed.proofs))
    out.write(DOCUMENT_END)
    return EncodeReport(
        signed_manifest=sealed.signed_manifest, streamed=True, largest_fragment=largest
    )
