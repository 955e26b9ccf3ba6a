"""A site's fan-out: one relay hop per destination, written from one template.

:func:`~xdn.provenance.relay_many` builds each hop as quads and a whole message. A site relaying
a document to thousands of subscribers needs only each hop's own graphs, as canonical N-Quads
(what it sends after the chain it received, and logs), and they differ from one destination to
the next in a handful of terms: the hop's message URI, the recipient, the leaves it carries and,
in its signature graph, the batch position and inclusion path (and, per batch, the signature
value and size). So :func:`relay_fanout` writes one hop's graphs once, with random placeholder
terms in those places, and makes every hop's lines by substituting its own terms.

Why this is exact. A placeholder is a random token inside a term of its own kind (an IRI for
the URIs, a literal for the rest), so it occurs only where that term is written; the terms put
in its place need no escaping in canonical N-Quads (IRIs are checked when the hops are built,
the literals are digits, hex, base64 and leaf ranges), so each substituted line is the line the
quads would have been written as; the lines are sorted again. And it is checked at run time:
the first hop of every batch is also built the general way, as the whole message kept for its
receipts, and must come out byte for byte the same (:class:`~xdn.errors.ProvenanceError`
otherwise). A hop whose batch holds it alone (no inclusion path) is built the general way.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from xdn.errors import ProvenanceError
from xdn.provenance import _vocab as v
from xdn.provenance._batch import MAX_BATCH, BatchProof, sign_batch
from xdn.provenance._facts import Signer
from xdn.provenance._leaves import LeafRanges
from xdn.provenance._message import (
    Hop,
    Message,
    _envelope_quads,
    _Hop,
    _path_text,
    _relay_hops,
    _seal_all,
    _signature_quads,
    _text,
    shape_of,
)
from xdn.provenance._shape import extend
from xdn.rdf import IRI, Literal, canonical_lines, format_term

__all__ = ["RelayedHops", "relay_fanout"]


@dataclass(frozen=True, slots=True)
class RelayedHops:
    """A fan-out as a site keeps it (:func:`relay_fanout`).

    Attributes:
        graphs: per hop, in order, the canonical N-Quads of the graphs it added (its envelope
            and that envelope's signature): what the site sends after the chain it received,
            and logs.
        batch_heads: the whole message of the first hop of each signed batch (one batch
            signature covers the rest of its batch).
    """

    graphs: list[bytes]
    batch_heads: list[Message]


def relay_fanout(
    message: Message, signer: Signer, hops: Sequence[Hop], *, timestamp_ms: int
) -> RelayedHops:
    """:func:`~xdn.provenance.relay_many` for a site's fan-out, without a whole message per
    destination: the same hops, signatures and bytes (``graphs[i]`` is
    ``relay_many(...)[i].latest_graphs_nquads()``), at a cost per destination of a few string
    substitutions.

    Raises:
        ProvenanceError: a hop written from the template differs from the same hop built as
            quads (a defect, never a peer's doing).
    """
    built = _relay_hops(message, signer, hops, timestamp_ms)
    if len(built) < 2:  # a single hop is signed plainly, not as a batch
        return _general(message, signer, built)
    template = _Template(message, signer, built[0])
    graphs: list[bytes] = []
    heads: list[Message] = []
    for first in range(0, len(built), MAX_BATCH):
        batch = built[first:first + MAX_BATCH]
        envelopes = [template.envelope(hop) for hop in batch]
        raw, proofs = sign_batch(signer.private_key, [_text(lines) for lines in envelopes])
        value = base64.b64encode(raw).decode()
        for hop, lines, proof in zip(batch, envelopes, proofs, strict=True):
            if not proof.path:  # alone in its batch: no path to substitute
                quads = _envelope_quads(hop, template.refs) + _signature_quads(
                    signer, _envelope_name(hop), value, proof
                )
                graphs.append(_text(canonical_lines(quads, remember=False)))
            else:
                lines = lines + template.signature(hop, value, proof)
                lines.sort()
                graphs.append(_text(lines))
        heads.append(_head(message, signer, template, batch[0], value, proofs[0], graphs[first]))
    return RelayedHops(graphs=graphs, batch_heads=heads)


def _general(message: Message, signer: Signer, built: list[_Hop]) -> RelayedHops:
    graphs, heads = [], []
    shape = shape_of(message)
    for envelope, envelope_lines, signature in _seal_all(message, signer, built):
        graphs.append(_text(sorted(envelope_lines + canonical_lines(signature))))
        quads = envelope + signature
        heads.append(Message._from_parts(message.quads | frozenset(quads), extend(shape, quads)))
    return RelayedHops(graphs=graphs, batch_heads=heads)


def _head(
    message: Message, signer: Signer, template: _Template, hop: _Hop, value: str,
    proof: BatchProof, written: bytes,
) -> Message:
    """The whole message of a batch's first hop, built as quads, checked against the template."""
    quads = _envelope_quads(hop, template.refs) + _signature_quads(
        signer, _envelope_name(hop), value, proof
    )
    if _text(canonical_lines(quads, remember=False)) != written:
        raise ProvenanceError(f"hop {hop.message} written from its template differs from its quads")
    return Message._from_parts(message.quads | frozenset(quads), extend(shape_of(message), quads))


def _envelope_name(hop: _Hop) -> IRI:
    return IRI(f"{hop.message}#e{hop.number}")


def _long(value: int) -> str:
    return format_term(Literal(str(value), v.XSD_LONG))


class _Template:
    """One hop's graphs as text, with placeholders for what differs between hops."""

    def __init__(self, message: Message, signer: Signer, model: _Hop) -> None:
        token = secrets.token_hex(8)
        self._uri = f"{model.message}-{token}"  # (an IRI: checked when its quads are built)
        self._recipient = f"https://{token}.invalid/"
        self._leaves = LeafRanges(((0, 10**15 + int(token[:12], 16)),))
        self._value = f"value{token}"
        self._index = 3 * 10**17 + int(token[:12], 16)
        self._size = 4 * 10**17 + int(token[:12], 16)
        self._path = bytes.fromhex(token * 4)
        shape = shape_of(message)
        signature = shape.signatures[shape.outermost.name]
        self.refs = [(signature.name, shape.outermost.name, signature.value)]
        hop = _Hop(
            message=self._uri, number=model.number, kind=model.kind, sender=model.sender,
            recipient=self._recipient, timestamp_ms=model.timestamp_ms,
            document_id=model.document_id, leaves=self._leaves, contains=model.contains,
            remote_message=model.remote_message,
        )
        self._envelope = canonical_lines(_envelope_quads(hop, self.refs), remember=False)
        proof = _placeholder_proof(self._index, self._size, self._path)
        self._signature = canonical_lines(
            _signature_quads(signer, _envelope_name(hop), self._value, proof), remember=False
        )
        self._leaves_term = format_term(Literal(str(self._leaves)))
        self._leaves_of: dict[int, str] = {}  # by LeafRanges object (a few per fan-out)
        self._index_term, self._size_term = _long(self._index), _long(self._size)
        self._path_term = format_term(Literal(_path_text((self._path,))))

    def envelope(self, hop: _Hop) -> list[str]:
        """The hop's envelope graph as sorted canonical lines (its signing input)."""
        assert hop.leaves is not None and hop.recipient is not None
        leaves = self._leaves_of.get(id(hop.leaves))
        if leaves is None:
            leaves = self._leaves_of[id(hop.leaves)] = format_term(Literal(str(hop.leaves)))
        lines = [
            line.replace(self._uri, hop.message)
            .replace(self._recipient, hop.recipient)
            .replace(self._leaves_term, leaves)
            for line in self._envelope
        ]
        lines.sort()
        return lines

    def signature(self, hop: _Hop, value: str, proof: BatchProof) -> list[str]:
        """The lines of the hop's signature graph (a batch signature ``value``, ``proof``)."""
        index, size = _long(proof.index), _long(proof.size)
        path = format_term(Literal(_path_text(proof.path)))
        return [
            line.replace(self._uri, hop.message)
            .replace(self._value, value)
            .replace(self._index_term, index)
            .replace(self._size_term, size)
            .replace(self._path_term, path)
            for line in self._signature
        ]


def _placeholder_proof(index: int, size: int, path: bytes) -> BatchProof:
    """A batch position out of any real batch's range, written only into the template."""
    proof = object.__new__(BatchProof)
    object.__setattr__(proof, "index", index)
    object.__setattr__(proof, "size", size)
    object.__setattr__(proof, "path", (path,))
    return proof
