"""Node descriptions and the append-only provenance log of one node (an I/O edge).

A log file is N-Quads: first the node's description graph ``<NODE#cert>`` (its certificate,
so an auditor can verify the node's signatures against the CA without asking the node), then
the graphs each message gained at this node, appended and flushed one message at a time.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from xdn.errors import ProvenanceError, UsageError
from xdn.provenance import _vocab as v
from xdn.provenance._facts import check_node_uri
from xdn.provenance._message import Message
from xdn.rdf import IRI, Literal, Quad, canonicalise

__all__ = ["ProvenanceLog", "node_description", "read_node_description"]


def node_description(node_uri: str, cert_pem: bytes) -> bytes:
    """N-Quads of graph ``<node_uri#cert>`` holding the node's certificate (base64 DER).

    Raises:
        UsageError: ``cert_pem`` is not a PEM certificate.
    """
    check_node_uri(node_uri)
    try:
        der = ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))
    except (ValueError, UnicodeDecodeError):
        raise UsageError("cert_pem is not a PEM certificate") from None
    g, node = IRI(node_uri + "#cert"), IRI(node_uri)
    return canonicalise(
        [
            Quad(g, v.RDF_TYPE, v.NODE_DESCRIPTION, g),
            Quad(node, v.CERTIFICATE, Literal(base64.b64encode(der).decode(), v.XSD_BASE64), g),
        ]
    )


def read_node_description(name: str, quads: Iterable[Quad]) -> tuple[str, bytes]:
    """Invert :func:`node_description` for graph ``name``: return ``(node_uri, cert_pem)``.

    Raises:
        ProvenanceError: the graph is not a node description of the expected shape.
    """
    node_uri = name.removesuffix("#cert")
    expected = {(name, v.RDF_TYPE.value), (node_uri, v.CERTIFICATE.value)}
    quads = list(quads)
    if node_uri == name or {(q.s.value, q.p.value) for q in quads} != expected or len(quads) != 2:
        raise ProvenanceError(f"graph <{name}>: not a node description")
    cert = next(q.o for q in quads if q.p == v.CERTIFICATE)
    if not isinstance(cert, Literal) or cert.datatype != v.XSD_BASE64:
        raise ProvenanceError(f"graph <{name}>: certificate must be an xsd:base64Binary literal")
    try:
        der = base64.b64decode(cert.value, validate=True)
    except ValueError:  # binascii.Error, or non-ASCII text
        raise ProvenanceError(f"graph <{name}>: certificate is not base64") from None
    return node_uri, ssl.DER_cert_to_PEM_cert(der).encode("ascii")


class ProvenanceLog:
    """The append-only N-Quads provenance log of one node.

    Opens ``path`` in append mode (creating its directory); a new (empty) file starts with the
    node's description.
    Each :meth:`append` writes the graphs the node added to a message and flushes.
    """

    __slots__ = ("_file", "node_uri", "path")

    def __init__(self, path: Path, *, node_uri: str, cert_pem: bytes) -> None:
        description = node_description(node_uri, cert_pem)
        self.path, self.node_uri = Path(path), node_uri
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("ab")
        if self._file.tell() == 0:
            self._file.write(description)
            self._file.flush()

    def append(self, message: Message) -> None:
        """Append the graphs the latest hop of ``message`` added; it must be this node's hop.

        Raises:
            UsageError: the latest hop was added by another node, or the log is closed.
        """
        if not isinstance(message, Message):
            raise TypeError("message must be a Message")
        if message.sender != self.node_uri:
            raise UsageError(
                f"{self.node_uri} cannot log the hop {message.sender} added to {message.uri}"
            )
        if self._file.closed:
            raise UsageError(f"provenance log {self.path} is closed")
        self._file.write(message.latest_graphs_nquads())
        self._file.flush()

    def append_raw(self, nquads: bytes) -> int:
        """Append graphs this node produced earlier (e.g. staged in a transactional outbox);
        return the offset in the file they start at (where a reader finds them again).

        The caller vouches that ``nquads`` is canonical N-Quads of this node's own hops, as
        returned by :meth:`Message.latest_graphs_nquads`.
        """
        if self._file.closed:
            raise UsageError(f"provenance log {self.path} is closed")
        offset = self._file.tell()
        self._file.write(nquads)
        self._file.flush()
        return offset

    def close(self) -> None:
        """Close the file (idempotent)."""
        self._file.close()

    def __enter__(self) -> ProvenanceLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
