"""A document being published is encoded into a file of the state directory, not memory
(issue #15).

Theory of operation
-------------------
* :func:`read_document` looks at the document before any key is chosen, for the concepts it
  holds. A mapping whose XPaths are simple paths streams it (:func:`xdn.codec.concepts_present`)
  and keeps nothing of it (:class:`StreamedDocument`); any other mapping parses and maps it in
  memory, as publishing always did (:class:`ParsedDocument`).
* ``encode`` encrypts and seals it under the keys chosen. Streamed, each fragment's record goes
  to a records file as it is encrypted (:class:`xdn.wire_write.DisseminationWriter`); parsed,
  it is encoded in memory (:func:`xdn.codec.encode`).
* ``frame``, once the provenance message is signed (it names the manifest's root), gives the
  serialized ``Dissemination`` as a :class:`Body`: streamed, read a span at a time in leaf
  order from the records file itself (:class:`xdn.wire_write.SplicedDissemination`; no second
  copy is written); parsed, serialized in memory (:class:`MemoryBody`). Both are the same
  bytes for the same document, keys, IVs and signatures.
* The sender cuts a body into parts (:func:`xdn.parts.cut` reads it a part at a time) and
  deletes it once the site acknowledged or refused it.

Files live in ``<state dir>/outgoing`` (:class:`Staging`), which a publisher clears at start-up
(what a crash left). A file that cannot be written (a full disk) is a UsageError naming it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Protocol

from xdn import crypto, xmlsafe
from xdn.codec import (
    ConceptKey,
    EncodedDocument,
    Sealed,
    Sequencing,
    SignedManifest,
    can_stream,
    concepts_present,
    encode,
    encode_to_sink,
)
from xdn.errors import UsageError
from xdn.mapping import MappedNode, Unpublished, UnpublishedTally, map_document, unpublished
from xdn.mapping import Mapping as ConceptMapping
from xdn.span_files import ScratchFolder
from xdn.wire_write import DisseminationWriter, SplicedDissemination
from xdn.wireconv import dissemination_to_pb

__all__ = [
    "Body",
    "Document",
    "Encoded",
    "MemoryBody",
    "ParsedDocument",
    "Staging",
    "StreamedDocument",
    "read_document",
]

log = logging.getLogger(__name__)


class Staging(ScratchFolder):
    """The folder a publisher encodes documents into (created if need be)."""

    what = "encoded documents"

    @contextmanager
    def writing(self, path: Path) -> Iterator[None]:
        """Turn a failure to write ``path`` into a UsageError (deleting what was written); a
        failure to read another file (the document) stays what it is."""
        try:
            yield
        except OSError as exc:
            path.unlink(missing_ok=True)
            if exc.filename is not None and Path(exc.filename) != path:
                raise
            raise UsageError(
                f"cannot write the encoded document to {path}: {exc.strerror or exc}"
            ) from None
        except BaseException:
            path.unlink(missing_ok=True)
            raise


class Body(Protocol):
    """A serialized ``Dissemination``, read a span at a time (a
    :class:`xdn.parts.ReadableChunk`)."""

    def __len__(self) -> int: ...

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``."""
        ...

    def delete(self) -> None:
        """Let go of the bytes (again: nothing happens)."""
        ...


class MemoryBody:
    """A :class:`Body` in memory."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def read(self, start: int, end: int) -> bytes:
        return self._data[start:end]

    def delete(self) -> None:
        self._data = b""


class Encoded(Protocol):
    """A document encrypted and sealed, its wire form not written yet."""

    @property
    def signed_manifest(self) -> SignedManifest: ...

    @property
    def fragments(self) -> int: ...

    def frame(self, *, provenance: bytes, publisher_certificate: bytes) -> Body:
        """The serialized ``Dissemination`` (this encoding's files are let go)."""
        ...

    def discard(self) -> None:
        """Let go of what was encoded, unframed (again: nothing happens)."""
        ...


class Document(Protocol):
    """A document read far enough to know the concepts it holds."""

    @property
    def concepts(self) -> frozenset[str]: ...

    @property
    def unpublished(self) -> Unpublished:
        """What of the document is outside every mapped element (in no view)."""
        ...

    def encode(
        self,
        *,
        document_id: str,
        publisher: str,
        version: int,
        issued_at_ms: int,
        keys: Mapping[str, ConceptKey],
        signer: crypto.PrivateKey,
        concept_order: Sequence[str],
        sequencing: Sequencing,
        iv_factory: Callable[[], bytes] | None = None,
    ) -> Encoded:
        """Encrypt and seal under ``keys`` (one per concept held)."""
        ...


def read_document(
    path: Path, mapping: ConceptMapping, staging: Staging, *, streaming: bool | None = None
) -> Document:
    """``path`` read for the concepts it holds: streamed when ``mapping`` allows (``streaming``
    ``None``), else (or ``False``) parsed and mapped in memory.

    Raises:
        HostileXmlError, MappingError, UsageError: as parsing and mapping the document would.
    """
    if streaming is not False and can_stream(mapping):
        return StreamedDocument(path, mapping, staging)
    tree = xmlsafe.parse_file(path)
    mapped = map_document(tree, mapping)
    return ParsedDocument(mapped, unpublished(tree, mapped, mapping))


class ParsedDocument:
    """A document parsed and mapped in memory (a mapping that cannot stream)."""

    def __init__(self, mapped: list[MappedNode], left: Unpublished | None = None) -> None:
        self._mapped = mapped
        self.concepts = frozenset(node.concept for node in mapped)
        self.unpublished = left or Unpublished()

    def encode(
        self,
        *,
        document_id: str,
        publisher: str,
        version: int,
        issued_at_ms: int,
        keys: Mapping[str, ConceptKey],
        signer: crypto.PrivateKey,
        concept_order: Sequence[str],
        sequencing: Sequencing,
        iv_factory: Callable[[], bytes] | None = None,
    ) -> Encoded:
        encoded = encode(
            self._mapped, document_id=document_id, publisher=publisher, version=version,
            issued_at_ms=issued_at_ms, keys=keys, signer=signer, concept_order=concept_order,
            sequencing=sequencing, iv_factory=iv_factory,
        )
        self._mapped = []  # (the tree goes once encoded)
        return _InMemory(encoded)


class _InMemory:
    def __init__(self, encoded: EncodedDocument) -> None:
        self._encoded: EncodedDocument | None = encoded
        self.signed_manifest = encoded.signed_manifest
        self.fragments = len(encoded.fragments)

    def frame(self, *, provenance: bytes, publisher_certificate: bytes) -> Body:
        encoded, self._encoded = self._encoded, None
        if encoded is None:
            raise ValueError("framed already")
        return MemoryBody(
            dissemination_to_pb(
                encoded.signed_manifest,
                [(f, encoded.proofs[f.fragment_id]) for f in encoded.fragments],
                provenance=provenance,
                publisher_certificate=publisher_certificate,
            ).SerializeToString()
        )

    def discard(self) -> None:
        self._encoded = None


class StreamedDocument:
    """A document streamed once for the concepts it holds; encoded by streaming it again."""

    def __init__(self, path: Path, mapping: ConceptMapping, staging: Staging) -> None:
        self._path = path
        self._mapping = mapping
        self._staging = staging
        tally = UnpublishedTally({uri: prefix for prefix, uri in mapping.namespaces.items()})
        self.concepts = concepts_present(path, mapping=mapping, unpublished=tally)
        self.unpublished = tally.result()

    def encode(
        self,
        *,
        document_id: str,
        publisher: str,
        version: int,
        issued_at_ms: int,
        keys: Mapping[str, ConceptKey],
        signer: crypto.PrivateKey,
        concept_order: Sequence[str],
        sequencing: Sequencing,
        iv_factory: Callable[[], bytes] | None = None,
    ) -> Encoded:
        path = self._staging.new_path(".records")
        with self._staging.writing(path):
            records = path.open("w+b")
            try:
                writer = DisseminationWriter(records)
                sealed = encode_to_sink(
                    self._path, writer.add, mapping=self._mapping, document_id=document_id,
                    publisher=publisher, version=version, issued_at_ms=issued_at_ms, keys=keys,
                    signer=signer, concept_order=concept_order, sequencing=sequencing,
                    iv_factory=iv_factory,
                )
            except BaseException:
                records.close()
                raise
        return _InFiles(self._staging, path, records, writer, sealed)


class _InFiles:
    def __init__(
        self,
        staging: Staging,
        path: Path,
        records: IO[bytes],
        writer: DisseminationWriter,
        sealed: Sealed,
    ) -> None:
        self._staging = staging
        self._path = path
        self._records = records
        self._writer = writer
        self._sealed = sealed
        self.signed_manifest = sealed.signed_manifest
        self.fragments = len(writer)
        self._framed = False

    def frame(self, *, provenance: bytes, publisher_certificate: bytes) -> Body:
        try:
            with self._staging.writing(self._path):
                body = self._writer.body(
                    self._sealed, provenance=provenance,
                    publisher_certificate=publisher_certificate,
                )  # fmt: skip
        except BaseException:
            self.discard()
            raise
        self._framed = True  # (the body lets the records go)
        return _RecordsBody(body, self._release)

    def discard(self) -> None:
        if not self._framed:
            self._release()

    def _release(self) -> None:
        if not self._records.closed:
            self._records.close()
        self._path.unlink(missing_ok=True)


class _RecordsBody:
    """A :class:`Body` read from the records file where the fragments are (no copy)."""

    def __init__(self, body: SplicedDissemination, release: Callable[[], None]) -> None:
        self._body = body
        self._release = release

    def __len__(self) -> int:
        return len(self._body)

    def read(self, start: int, end: int) -> bytes:
        return self._body.read(start, end)

    def delete(self) -> None:
        self._release()
