"""The message value and the three ways a hop extends it (the paper's Algorithm 1).

A :class:`Message` is the whole dataset so far: content graph, signature graphs and one
envelope per hop. It is validated (well-formedness, :mod:`._shape`) whenever one is built, so a
``Message`` in hand is always well-formed; whether its signatures hold is
:func:`~xdn.provenance.verify_message`'s business.

Each builder adds graphs and signs them, never touching what is there:

* :func:`originate` — content graph ``<M#c1>`` + ``<M#c1s>``, envelope ``<M#e1>`` + ``<M#e1s>``;
* :func:`relay` — envelope ``<M'#eN>`` containing the previous outermost envelope and
  referencing its signature and value, + ``<M'#eNs>``; :func:`relay_many` adds one such hop
  per destination and signs them all as one batch (:mod:`._batch`);
* :func:`receipt` — the subscriber's final envelope (the paper's RECEIVED stage).

What a graph's signature covers is the RDFC-1.0 canonical N-Quads of that graph, graph name
included, so a graph cannot be renamed or moved without breaking it.
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from xdn import crypto
from xdn.errors import ProtocolError, ProvenanceError, UsageError
from xdn.provenance import _vocab as v
from xdn.provenance._batch import MAX_BATCH, BatchProof, sign_batch
from xdn.provenance._facts import (
    ContentFacts,
    PolicyChangeFacts,
    RefusalFacts,
    Signer,
    concept_runs_text,
)
from xdn.provenance._graphs import ContentSummary, EnvelopeInfo
from xdn.provenance._leaves import LeafRanges
from xdn.provenance._shape import Shape, analyse, extend, message_uri_prefix, notice_uri_prefix
from xdn.rdf import IRI, Literal, Quad, canonical_lines, canonicalise, parse_nquads

__all__ = [
    "MAX_CHAIN_BYTES",
    "Hop",
    "Message",
    "originate",
    "receipt",
    "relay",
    "relay_many",
    "signing_input",
]


#: The largest provenance chain a site or subscriber parses from a peer: a hop adds ~2.5 KB, so
#: this allows about a hundred hops and bounds the work a peer can ask for.
MAX_CHAIN_BYTES = 256 * 1024


def signing_input(quads: Iterable[Quad]) -> bytes:
    """The bytes a graph's signature covers: its RDFC-1.0 canonical N-Quads."""
    return canonicalise(quads)


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """An immutable, well-formed provenance message dataset.

    Attributes:
        quads: every quad of the dataset.
        uri: the current (outermost) message URI.
    """

    quads: frozenset[Quad]
    uri: str = field(init=False)
    _shape: Shape = field(init=False, repr=False, compare=False)
    # its canonical N-Quads, written on first use (a receipt's are read for its id, then
    # stored and logged by every site it passes: ~1 ms of a 20 KB chain each time)
    _nquads: bytes | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.quads, frozenset):
            raise TypeError("Message quads must be a frozenset of Quad")
        shape = analyse(self.quads)
        object.__setattr__(self, "_shape", shape)
        object.__setattr__(self, "uri", shape.outermost.message)

    @classmethod
    def _from_parts(cls, quads: frozenset[Quad], shape: Shape) -> Message:
        """A message whose shape the caller has checked already (incrementally, per hop)."""
        message = object.__new__(cls)
        object.__setattr__(message, "quads", quads)
        object.__setattr__(message, "_shape", shape)
        object.__setattr__(message, "uri", shape.outermost.message)
        object.__setattr__(message, "_nquads", None)
        return message

    @classmethod
    def from_nquads(cls, data: bytes, *, max_bytes: int | None = None) -> Message:
        """Parse N-Quads and check well-formedness (raises ``ProvenanceError``).

        Args:
            max_bytes: refuse a larger input before parsing it (a peer's chain:
                :data:`MAX_CHAIN_BYTES`).
        """
        if max_bytes is not None and len(data) > max_bytes:
            raise ProvenanceError(
                f"provenance of {len(data)} bytes is over the limit of {max_bytes} bytes "
                "(a chain of a few hops takes a few KB)"
            )
        return cls(quads=frozenset(parse_nquads(data)))

    def to_nquads(self) -> bytes:
        """Canonical N-Quads of the whole dataset."""
        if self._nquads is None:
            object.__setattr__(self, "_nquads", canonicalise(self.quads))
        assert self._nquads is not None
        return self._nquads

    def latest_graphs_nquads(self) -> bytes:
        """Canonical N-Quads of the graphs the latest hop added (what it appends to its log)."""
        outer = self._shape.outermost
        names = {outer.name, *outer.content}
        names |= {self._shape.signatures[n].name for n in list(names)}
        return canonicalise(q for q in self.quads if q.g is not None and q.g.value in names)

    def envelopes(self) -> tuple[EnvelopeInfo, ...]:
        """The hops of the chain, innermost (the publication, numbered 1) first."""
        return self._shape.envelopes

    def leaves(self) -> LeafRanges:
        """The manifest leaves the outermost envelope says this message carries.

        Raises:
            UsageError: this is a failure notice, which carries none.
        """
        leaves = self._shape.outermost.leaves
        if leaves is None:
            raise UsageError(f"{self.uri} is a failure notice: it carries no document")
        return leaves

    def content(self) -> ContentFacts:
        """The publisher's content facts (document, publisher, manifest root, leaf count).

        Raises:
            UsageError: this is a failure notice (see :attr:`refusal`).
        """
        return self._content().facts()

    @property
    def document_id(self) -> str:
        """The document all envelopes of this message are about.

        Raises:
            UsageError: this is a failure notice, which is about no document's chain.
        """
        return self._content().document_id

    @property
    def refusal(self) -> RefusalFacts | None:
        """What this failure notice says was refused (``None``: not a failure notice)."""
        return self._shape.refusal

    @property
    def policy_change(self) -> PolicyChangeFacts | None:
        """What this policy-change notice says changed (``None``: not such a notice)."""
        return self._shape.policy_change

    def _content(self) -> ContentSummary:
        if self._shape.content is None:
            what = "failure notice" if self.refusal is not None else "policy-change notice"
            raise UsageError(f"{self.uri} is a {what}: it carries no document")
        return self._shape.content

    @property
    def sender(self) -> str:
        """The node that added the outermost envelope."""
        return self._shape.outermost.sender

    @property
    def recipient(self) -> str | None:
        """Where the outermost envelope sends the message (``None`` for a receipt)."""
        return self._shape.outermost.recipient

    def __repr__(self) -> str:
        return f"Message(uri={self.uri!r}, quads={len(self.quads)})"


def shape_of(message: Message) -> Shape:
    """The analysed structure of ``message`` (package-internal)."""
    return message._shape


# ----------------------------------------------------------------------------- building


@functools.lru_cache(maxsize=64)
def _certificate_literal(pem: bytes) -> Literal:
    der = x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)
    return Literal(base64.b64encode(der).decode(), v.XSD_BASE64)


def _signature_quads(
    signer: Signer, name: IRI, value: str, batch: BatchProof | None = None
) -> list[Quad]:
    s = IRI(name.value + "s")
    method = v.SIGNING_METHOD if batch is None else v.BATCH_SIGNING_METHOD
    quads = [
        Quad(s, v.RDF_TYPE, v.SIGNATURE, s),
        Quad(s, v.HAS_SIGNATURE_VALUE, Literal(value), s),
        Quad(s, v.HAS_VERIFICATION_CERTIFICATE, IRI(signer.node_uri), s),
        Quad(s, v.HAS_SIGNED_GRAPH, name, s),
        Quad(s, v.HAS_GRAPH_SIGNING_METHOD, method, s),
    ]
    if signer.certificate is not None:
        quads.append(Quad(s, v.SIGNER_CERTIFICATE, _certificate_literal(signer.certificate), s))
    if batch is not None:
        quads += [
            Quad(s, v.BATCH_INDEX, Literal(str(batch.index), v.XSD_LONG), s),
            Quad(s, v.BATCH_SIZE, Literal(str(batch.size), v.XSD_LONG), s),
        ]
        if batch.path:
            quads.append(Quad(s, v.BATCH_PATH, Literal(_path_text(batch.path)), s))
    return quads


def _path_text(path: Sequence[bytes]) -> str:
    """A batch inclusion path as written in a signature graph: upper-case hex, spaced."""
    return " ".join(h.hex().upper() for h in path)


def _signature(signer: Signer, name: IRI, quads: list[Quad]) -> tuple[list[Quad], str]:
    value = base64.b64encode(crypto.sign(signer.private_key, signing_input(quads))).decode()
    return _signature_quads(signer, name, value), value


def _hex(data: bytes) -> Literal:
    return Literal(data.hex().upper(), v.XSD_HEX)


def _content_quads(message: str, content: ContentFacts) -> list[Quad]:
    g, doc = IRI(f"{message}#c1"), IRI(f"{message}#document")
    return [
        Quad(doc, v.RDF_TYPE, v.DOCUMENT, g),
        Quad(doc, v.DOCUMENT_ID, Literal(content.document_id), g),
        Quad(doc, v.PUBLISHER, Literal(content.publisher), g),
        Quad(doc, v.MANIFEST_ROOT, _hex(content.manifest_root), g),
        Quad(doc, v.LEAF_COUNT, Literal(str(content.leaf_count), v.XSD_LONG), g),
        *(
            [Quad(doc, v.VERSION, Literal(str(content.version), v.XSD_LONG), g)]
            if content.version is not None
            else []
        ),
        *(
            [Quad(doc, v.CONCEPT_LEAVES, Literal(concept_runs_text(content.concepts)), g)]
            if content.concepts
            else []
        ),
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Hop:
    """Everything one new envelope says, before it is written as quads."""

    message: str
    number: int
    kind: IRI
    sender: str
    recipient: str | None
    timestamp_ms: int
    document_id: str
    leaves: LeafRanges | None  # None: a failure notice's envelope
    contains: str | None = None
    remote_message: str | None = None
    content: str | None = None
    previous: str | None = None  # a publication's previous version (msg:hasPreviousMessage)


def _envelope_quads(hop: _Hop, refs: list[tuple[str, str, str]]) -> list[Quad]:
    g, m = IRI(f"{hop.message}#e{hop.number}"), IRI(hop.message)
    stamp = v.HAS_RECEIVED_TIMESTAMP if hop.kind == v.RECEIPT else v.HAS_SENT_TIMESTAMP
    quads = [
        Quad(g, v.RDF_TYPE, v.ENVELOPE_GRAPH, g),
        Quad(g, v.SUB_GRAPH_OF, m, g),
        Quad(m, v.HAS_MESSAGE_TYPE, hop.kind, g),
        Quad(m, v.HAS_SENDER, IRI(hop.sender), g),
        Quad(m, stamp, Literal(str(hop.timestamp_ms), v.XSD_LONG), g),
    ]
    if hop.leaves is not None:  # a failure notice names what it refused in its content graph
        quads += [
            Quad(m, v.DOCUMENT_ID, Literal(hop.document_id), g),
            Quad(m, v.CARRIES_LEAVES, Literal(str(hop.leaves)), g),
        ]
    optional = [
        (g, v.CONTAINS_ENVELOPE, hop.contains),
        (m, v.HAS_RECIPIENT, hop.recipient),
        (m, v.HAS_REMOTE_MESSAGE, hop.remote_message),
        (m, v.HAS_CONTENT, hop.content),
        (m, v.HAS_PREVIOUS_MESSAGE, hop.previous),
    ]
    quads += [Quad(s, p, IRI(o), g) for s, p, o in optional if o is not None]
    for index, (sig_graph, signed_graph, value) in enumerate(refs, start=1):
        ref = IRI(f"{g.value}-ref{index}")
        quads += [
            Quad(m, v.REFERENCES_SIGNATURE, ref, g),
            Quad(ref, v.HAS_SIGNATURE_GRAPH, IRI(sig_graph), g),
            Quad(ref, v.HAS_SIGNED_GRAPH, IRI(signed_graph), g),
            Quad(ref, v.HAS_SIGNATURE_VALUE, Literal(value), g),
        ]
    return quads


def _check_args(
    signer: Signer, message_uri: str, document_id: str | None, timestamp_ms: int,
    *, prefix: str | None = None,
) -> None:
    """Check a builder's arguments; ``document_id`` ``None`` for a failure notice (``prefix``:
    another notice space, e.g. a policy-change notice's)."""
    if not isinstance(signer, Signer):
        raise TypeError("signer must be a Signer")
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, int):
        raise TypeError("timestamp_ms must be an int (milliseconds since the epoch)")
    if not 0 <= timestamp_ms < 2**63:
        raise ValueError("timestamp_ms is out of range")
    if prefix is None:
        prefix = (
            notice_uri_prefix(signer.node_uri)
            if document_id is None
            else message_uri_prefix(signer.node_uri, document_id)
        )
    if not isinstance(message_uri, str) or not message_uri.startswith(prefix):
        raise UsageError(f"message URI {message_uri!r} must start with {prefix!r}")
    if message_uri == prefix or "#" in message_uri:
        raise UsageError(f"message URI {message_uri!r} needs a hop id and no fragment")
    IRI(message_uri)


def _seal(signer: Signer, hop: _Hop, refs: list[tuple[str, str, str]]) -> list[Quad]:
    envelope = _envelope_quads(hop, refs)
    signature, _ = _signature(signer, IRI(f"{hop.message}#e{hop.number}"), envelope)
    return envelope + signature


def originate(
    signer: Signer,
    *,
    message_uri: str,
    recipient_uri: str,
    content: ContentFacts,
    timestamp_ms: int,
    previous_message: str | None = None,
) -> Message:
    """Publish: sign the content graph, wrap it in the first envelope and sign that.

    Args:
        previous_message: the message that published the document's previous version, named
            in the envelope (``msg:hasPreviousMessage``) so that versions form one history.
    """
    if not isinstance(content, ContentFacts):
        raise TypeError("content must be ContentFacts")
    _check_args(signer, message_uri, content.document_id, timestamp_ms)
    if previous_message is not None:
        _check_args(signer, previous_message, content.document_id, timestamp_ms)
        if previous_message == message_uri:
            raise UsageError("a message cannot be its own previous version")
    content_quads = _content_quads(message_uri, content)
    c1 = IRI(f"{message_uri}#c1")
    signature, value = _signature(signer, c1, content_quads)
    hop = _Hop(
        message=message_uri,
        number=1,
        kind=v.PUBLICATION,
        sender=signer.node_uri,
        recipient=IRI(recipient_uri).value,
        timestamp_ms=timestamp_ms,
        document_id=content.document_id,
        leaves=LeafRanges(((0, content.leaf_count),)),
        content=c1.value,
        previous=previous_message,
    )
    sealed = _seal(signer, hop, [(c1.value + "s", c1.value, value)])
    return Message(quads=frozenset(content_quads + signature + sealed))


def check_extendable(
    message: Message,
    *,
    document_id: str,
    leaves: LeafRanges,
    message_uri: str | None = None,
) -> None:
    """Check that a peer's provenance ``message`` may be extended with a hop for a document.

    A site or a subscriber calls this on the provenance that came with a dissemination before
    it relays or receipts it: a dishonest peer may send another document's chain, a final one
    (a receipt or a refusal notice), one whose outermost envelope does not name every manifest
    leaf of the ``leaves`` that came with it, or one that already uses the URI of the hop about
    to be added. (It may name more than came: a peer that withheld fragments it says it sent;
    the next hop or receipt names what was actually forwarded or received, so the chain shows
    the difference, and the subscriber's completeness checks flag what it was owed.)

    Raises:
        ProtocolError: any of these, naming it.
    """
    if message.document_id != document_id:
        raise ProtocolError(
            f"provenance is about document {message.document_id!r}, not {document_id!r}"
        )
    shape = shape_of(message)
    if message.refusal is not None or shape.outermost.kind == "receipt":
        raise ProtocolError("provenance ends in a receipt or a refusal: it cannot be extended")
    if not leaves.issubset(message.leaves()):
        raise ProtocolError(
            f"provenance says it carries leaves {message.leaves()} of the manifest, but "
            f"leaves {leaves} came with it"
        )
    if message_uri is not None and any(e.message == message_uri for e in shape.envelopes):
        raise ProtocolError(f"provenance already uses the message URI {message_uri!r}")


def _not_a_notice(message: Message) -> None:
    if message.refusal is not None or message.policy_change is not None:
        raise UsageError("a notice is final; it cannot be relayed or receipted")


def _check_extension(message: Message, uri: str) -> None:
    shape = shape_of(message)
    if shape.outermost.kind == "receipt":
        raise UsageError("a receipt is final; it cannot be relayed or receipted again")
    if any(e.message == uri for e in shape.envelopes):
        raise UsageError(f"message URI {uri!r} is already used in this chain")


def _seal_all(
    message: Message, signer: Signer, hops: Sequence[_Hop], *, remember: bool = True
) -> list[tuple[list[Quad], list[str], list[Quad]]]:
    """Each hop's envelope quads, their canonical lines and its signature quads, the
    envelopes signed in batches (one plain signature for a single hop).

    Args:
        remember: keep the new lines in :mod:`xdn.rdf`'s memo (worth it for a few hops, whose
            lines come back in receipts; a large fan-out would only flush it).
    """
    shape = shape_of(message)
    outer = shape.outermost
    sig = shape.signatures[outer.name]
    refs = [(sig.name, outer.name, sig.value)]
    envelopes = [_envelope_quads(hop, refs) for hop in hops]
    lines = [canonical_lines(envelope, remember=remember) for envelope in envelopes]
    names = [IRI(f"{hop.message}#e{hop.number}") for hop in hops]
    if len(hops) == 1:
        value = base64.b64encode(crypto.sign(signer.private_key, _text(lines[0]))).decode()
        return [(envelopes[0], lines[0], _signature_quads(signer, names[0], value))]
    sealed = []
    for first in range(0, len(hops), MAX_BATCH):
        chunk = range(first, min(first + MAX_BATCH, len(hops)))
        raw, proofs = sign_batch(signer.private_key, [_text(lines[i]) for i in chunk])
        value = base64.b64encode(raw).decode()
        for i, proof in zip(chunk, proofs, strict=True):
            signature = _signature_quads(signer, names[i], value, proof)
            sealed.append((envelopes[i], lines[i], signature))
    return sealed


def _text(lines: list[str]) -> bytes:
    """N-Quads text of canonical ``lines`` (a graph's signing input)."""
    return "".join(line + "\n" for line in lines).encode("utf-8")


def _extend_all(message: Message, signer: Signer, hops: Sequence[_Hop]) -> list[Message]:
    """``message`` extended by each of ``hops`` (one message per hop), signed in batches."""
    shape = shape_of(message)
    out = []
    for envelope, _, signature in _seal_all(message, signer, hops):
        graphs = envelope + signature
        out.append(Message._from_parts(message.quads | frozenset(graphs), extend(shape, graphs)))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Hop:
    """One destination of a relay: the URI of the new message, its recipient, its leaves."""

    message_uri: str
    recipient_uri: str
    leaves: LeafRanges


def relay(
    message: Message,
    signer: Signer,
    *,
    message_uri: str,
    recipient_uri: str,
    leaves: LeafRanges,
    timestamp_ms: int,
) -> Message:
    """A disseminator hop: a new signed envelope around the previous one.

    Args:
        leaves: the manifest leaves forwarded on this link; a subset of ``message.leaves()``.
    """
    hop = Hop(message_uri=message_uri, recipient_uri=recipient_uri, leaves=leaves)
    return relay_many(message, signer, [hop], timestamp_ms=timestamp_ms)[0]


def relay_many(
    message: Message, signer: Signer, hops: Sequence[Hop], *, timestamp_ms: int
) -> list[Message]:
    """One relay hop per destination, all signed at once: a batch signature over up to
    :data:`~xdn.provenance.MAX_BATCH` envelopes (one plain signature for a single hop).

    Returns:
        One message per hop, in order.
    """
    return _extend_all(message, signer, _relay_hops(message, signer, hops, timestamp_ms))


def _relay_hops(
    message: Message, signer: Signer, hops: Sequence[Hop], timestamp_ms: int
) -> list[_Hop]:
    """Check a relay's arguments; the envelope each hop adds."""
    if not isinstance(message, Message):
        raise TypeError("message must be a Message")
    _not_a_notice(message)
    if not hops:
        return []
    outer = shape_of(message).outermost
    carried = message.leaves()
    built = []
    uris: set[str] = set()
    for hop in hops:
        if not isinstance(hop, Hop) or not isinstance(hop.leaves, LeafRanges):
            raise TypeError("hops must be Hop values with LeafRanges")
        if not hop.leaves.issubset(carried):
            raise UsageError("a hop's leaves must be a subset of the message's leaves")
        if hop.message_uri in uris:
            raise UsageError(f"message URI {hop.message_uri!r} is used by two hops")
        uris.add(hop.message_uri)
        _check_args(signer, hop.message_uri, message.document_id, timestamp_ms)
        _check_extension(message, hop.message_uri)
        built.append(
            _Hop(
                message=hop.message_uri,
                number=outer.number + 1,
                kind=v.RELAY,
                sender=signer.node_uri,
                recipient=IRI(hop.recipient_uri).value,
                timestamp_ms=timestamp_ms,
                document_id=message.document_id,
                leaves=hop.leaves,
                contains=outer.name,
                remote_message=outer.message,
            )
        )
    return built


def receipt(
    message: Message,
    signer: Signer,
    *,
    message_uri: str,
    timestamp_ms: int,
    leaves: LeafRanges | None = None,
) -> Message:
    """The subscriber's RECEIVED stage: a final envelope signed by the subscriber.

    Args:
        leaves: the manifest leaves actually received (a subset of ``message.leaves()``;
            default: all of them).
    """
    if not isinstance(message, Message):
        raise TypeError("message must be a Message")
    _not_a_notice(message)
    if leaves is None:
        leaves = message.leaves()
    elif not isinstance(leaves, LeafRanges) or not leaves.issubset(message.leaves()):
        raise UsageError("a receipt's leaves must be a subset of the message's leaves")
    _check_args(signer, message_uri, message.document_id, timestamp_ms)
    _check_extension(message, message_uri)
    outer = shape_of(message).outermost
    hop = _Hop(
        message=message_uri,
        number=outer.number + 1,
        kind=v.RECEIPT,
        sender=signer.node_uri,
        recipient=None,
        timestamp_ms=timestamp_ms,
        document_id=message.document_id,
        leaves=leaves,
        contains=outer.name,
        remote_message=outer.message,
    )
    return _extend_all(message, signer, [hop])[0]
