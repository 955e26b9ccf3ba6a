"""Strict readers of the single graphs a provenance dataset is made of.

Each reader takes one named graph (its name and quads) and either returns a small typed view of
it or raises :class:`~xdn.errors.ProvenanceError` naming the graph. Shapes are closed: an unknown
predicate, an unexpected subject or a wrong cardinality is an error, so that nothing unsigned or
uninterpretable can ride along. The dataset-level checks (:mod:`._shape`) and the Spark audit
both build on these readers.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from xdn.errors import ProvenanceError
from xdn.provenance import _vocab as v
from xdn.provenance._batch import BatchProof
from xdn.provenance._facts import ContentFacts
from xdn.provenance._leaves import LeafRanges
from xdn.rdf import IRI, XSD_STRING, Literal, Quad, Term

_ENVELOPE_NAME = re.compile(r"(?P<msg>[^#]+)#e(?P<n>[1-9][0-9]*)")
_CONTENT_NAME = re.compile(r"(?P<msg>[^#]+)#c(?P<n>[1-9][0-9]*)")
_LONG = re.compile(r"-?(?:0|[1-9][0-9]*)")
_HEX = re.compile(r"(?:[0-9A-F]{2})+")
_PATH = re.compile(r"[0-9A-F]{64}(?: [0-9A-F]{64})*")


@dataclass(frozen=True, slots=True, kw_only=True)
class SignatureInfo:
    """A signature graph: who signed which graph, with what value (base64 DER).

    Attributes:
        certificate: the signer's certificate (DER), when the graph carries it.
        batch: where the signed graph sits in a batch, for a batch signature (the value then
            signs the batch root, :mod:`._batch`); ``None`` for a plain signature.
    """

    name: str
    signed_graph: str
    signer: str
    value: str
    certificate: bytes | None = None
    batch: BatchProof | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reference:
    """A signature reference inside an envelope (``msg:referencesSignature``)."""

    signature_graph: str
    signed_graph: str
    value: str


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvelopeInfo:
    """An envelope graph: one hop of a message's chain."""

    name: str
    message: str
    number: int
    kind: str  # "publication" | "relay" | "receipt" | "refusal" | "policy-notice"
    sender: str
    recipient: str | None
    timestamp_ms: int
    contains: str | None
    remote_message: str | None
    content: tuple[str, ...]
    document_id: str  # empty for a failure notice (its content graph names what was refused)
    leaves: LeafRanges | None  # the manifest leaves carried; None for a failure notice
    references: tuple[Reference, ...]
    previous_message: str | None = None  # a publication's previous version, if it names one


def _fail(graph: str, detail: str) -> ProvenanceError:
    return ProvenanceError(f"graph <{graph}>: {detail}")


class _Node:
    """The properties of one subject in one graph, consumed predicate by predicate."""

    def __init__(self, graph: str, subject: str, props: dict[IRI, list[Term]]) -> None:
        self._graph, self._subject, self._props = graph, subject, props
        self._used: set[IRI] = set()

    def _objects(self, predicate: IRI) -> list[Term]:
        self._used.add(predicate)
        return self._props.get(predicate, [])

    def _err(self, predicate: IRI, detail: str) -> ProvenanceError:
        return _fail(self._graph, f"<{self._subject}> {detail} <{predicate.value}>")

    def iris(self, predicate: IRI) -> list[str]:
        out = []
        for term in self._objects(predicate):
            if not isinstance(term, IRI):
                raise self._err(predicate, "needs IRI objects for")
            out.append(term.value)
        return sorted(out)

    def literals(self, predicate: IRI, datatype: str = XSD_STRING) -> list[str]:
        out = []
        for term in self._objects(predicate):
            if not isinstance(term, Literal) or term.datatype != datatype:
                raise self._err(predicate, f"needs <{datatype}> literals for")
            out.append(term.value)
        return sorted(out)

    def terms(self, predicate: IRI) -> list[Term]:
        return self._objects(predicate)

    def one_iri(self, predicate: IRI) -> str:
        values = self.iris(predicate)
        if len(values) != 1:
            raise self._err(predicate, f"has {len(values)} values, expected exactly one, for")
        return values[0]

    def optional_iri(self, predicate: IRI) -> str | None:
        values = self.iris(predicate)
        if len(values) > 1:
            raise self._err(predicate, "has several values for")
        return values[0] if values else None

    def one_literal(self, predicate: IRI, datatype: str = XSD_STRING) -> str:
        values = self.literals(predicate, datatype)
        if len(values) != 1:
            raise self._err(predicate, f"has {len(values)} values, expected exactly one, for")
        return values[0]

    def done(self) -> None:
        extra = sorted(p.value for p in set(self._props) - self._used)
        if extra:
            raise _fail(self._graph, f"<{self._subject}> has unexpected property <{extra[0]}>")


def _nodes(name: str, quads: Iterable[Quad]) -> dict[str, _Node]:
    props: dict[str, dict[IRI, list[Term]]] = defaultdict(lambda: defaultdict(list))
    for quad in quads:
        if quad.g is None or quad.g.value != name:
            raise _fail(name, "reader was given a quad of another graph")
        props[quad.s.value][quad.p].append(quad.o)
    return {subject: _Node(name, subject, dict(p)) for subject, p in props.items()}


def graph_type(name: str, quads: Iterable[Quad]) -> str:
    """Classify a graph by the type its name is given inside it.

    Returns:
        ``"signature"``, ``"envelope"``, ``"node"`` (a node description), ``"refusal"`` (the
        content graph of a failure notice: it describes an ``xdn:FailureNotice``), ``"policy"``
        (that of a policy-change notice: an ``xdn:PolicyChange``) or ``"content"``.
    """
    quads = list(quads)
    types = {q.o for q in quads if q.s.value == name and q.p == v.RDF_TYPE}
    if v.SIGNATURE in types:
        return "signature"
    if v.ENVELOPE_GRAPH in types:
        return "envelope"
    if v.NODE_DESCRIPTION in types:
        return "node"
    if any(q.p == v.RDF_TYPE and q.o == v.FAILURE_NOTICE for q in quads):
        return "refusal"
    if any(q.p == v.RDF_TYPE and q.o == v.POLICY_CHANGE for q in quads):
        return "policy"
    return "content"


def _only(name: str, nodes: dict[str, _Node], allowed: set[str]) -> None:
    stray = sorted(set(nodes) - allowed)
    if stray:
        raise _fail(name, f"unexpected subject <{stray[0]}>")


def read_signature(name: str, quads: Iterable[Quad]) -> SignatureInfo:
    """Read a signature graph ``<G s>`` over graph ``<G>``."""
    nodes = _nodes(name, quads)
    _only(name, nodes, {name})
    if name not in nodes:
        raise _fail(name, "is empty")
    node = nodes[name]
    if node.iris(v.RDF_TYPE) != [v.SIGNATURE.value]:
        raise _fail(name, "must have exactly the type sig:Signature")
    method = node.one_iri(v.HAS_GRAPH_SIGNING_METHOD)
    if method not in (v.SIGNING_METHOD.value, v.BATCH_SIGNING_METHOD.value):
        raise _fail(name, "uses an unknown graph signing method")
    info = SignatureInfo(
        name=name,
        signed_graph=node.one_iri(v.HAS_SIGNED_GRAPH),
        signer=node.one_iri(v.HAS_VERIFICATION_CERTIFICATE),
        value=node.one_literal(v.HAS_SIGNATURE_VALUE),
        certificate=_certificate(node),
        batch=_batch(node) if method == v.BATCH_SIGNING_METHOD.value else None,
    )
    node.done()
    if name != info.signed_graph + "s":
        raise _fail(name, f"is not named after the graph it signs <{info.signed_graph}>")
    return info


def _certificate(node: _Node) -> bytes | None:
    values = node.literals(v.SIGNER_CERTIFICATE, v.XSD_BASE64)
    if len(values) > 1:
        raise node._err(v.SIGNER_CERTIFICATE, "has several values for")
    if not values:
        return None
    try:
        return base64.b64decode(values[0], validate=True)
    except (binascii.Error, ValueError):
        raise node._err(v.SIGNER_CERTIFICATE, "needs base64 for") from None


def _batch(node: _Node) -> BatchProof:
    index = _long(node, v.BATCH_INDEX)
    size = _long(node, v.BATCH_SIZE)
    paths = node.literals(v.BATCH_PATH)
    if len(paths) > 1 or (paths and not _PATH.fullmatch(paths[0])):
        raise node._err(v.BATCH_PATH, "needs one list of upper-case SHA-256 hex hashes for")
    try:
        return BatchProof(
            index=index,
            size=size,
            path=tuple(bytes.fromhex(h) for h in paths[0].split(" ")) if paths else (),
        )
    except ValueError as exc:
        raise node._err(v.BATCH_INDEX, f"is not a batch position ({exc}) for") from None


def _long(node: _Node, predicate: IRI) -> int:
    lexical = node.one_literal(predicate, v.XSD_LONG)
    if not _LONG.fullmatch(lexical) or not -(2**63) <= int(lexical) < 2**63:
        raise node._err(predicate, "has a malformed xsd:long for")
    return int(lexical)


def _references(name: str, nodes: dict[str, _Node], refs: list[str]) -> tuple[Reference, ...]:
    out = []
    for ref in refs:
        if not ref.startswith(f"{name}-ref") or ref not in nodes:
            raise _fail(name, f"signature reference <{ref}> is not described in the envelope")
        node = nodes[ref]
        out.append(
            Reference(
                signature_graph=node.one_iri(v.HAS_SIGNATURE_GRAPH),
                signed_graph=node.one_iri(v.HAS_SIGNED_GRAPH),
                value=node.one_literal(v.HAS_SIGNATURE_VALUE),
            )
        )
        node.done()
    return tuple(out)


def _carried(name: str, body: _Node, *, notice: str | None) -> tuple[str, LeafRanges | None]:
    """The document and manifest leaves an envelope carries (none for a notice: ``notice``
    names its kind)."""
    if notice is not None:
        if body.literals(v.DOCUMENT_ID) or body.literals(v.CARRIES_LEAVES):
            raise _fail(name, f"a {notice} envelope carries no document or fragments")
        return "", None
    try:
        leaves = LeafRanges.parse(body.one_literal(v.CARRIES_LEAVES))
    except ValueError as exc:
        raise _fail(name, f"xdn:carriesLeaves: {exc} (sorted, merged, half-open)") from None
    return body.one_literal(v.DOCUMENT_ID), leaves


def _envelope(name: str, head: _Node, body: _Node, nodes: dict[str, _Node]) -> EnvelopeInfo:
    match = _ENVELOPE_NAME.fullmatch(name)
    assert match is not None  # checked by the caller
    kinds = body.iris(v.HAS_MESSAGE_TYPE)
    if len(kinds) != 1 or kinds[0] not in v.KINDS:
        raise _fail(name, "needs exactly one known msg:hasMessageType")
    kind = v.KINDS[kinds[0]]
    final, origin = kind in v.FINAL_KINDS, kind in v.ORIGIN_KINDS
    recipient = body.optional_iri(v.HAS_RECIPIENT)
    remote = body.optional_iri(v.HAS_REMOTE_MESSAGE)
    previous = body.optional_iri(v.HAS_PREVIOUS_MESSAGE)
    if previous is not None and kind != "publication":
        raise _fail(name, f"a {kind} envelope cannot name a previous version")
    content = tuple(body.iris(v.HAS_CONTENT))
    contains = head.optional_iri(v.CONTAINS_ENVELOPE)
    if (recipient is None) != final:
        raise _fail(name, f"a {kind} envelope {'must not' if final else 'must'} name a recipient")
    if origin != (remote is None) or origin != bool(content):
        raise _fail(name, f"a {kind} envelope has the wrong msg:hasRemoteMessage/hasContent")
    if origin != (contains is None):
        raise _fail(name, "only a publication or notice envelope may contain no other envelope")
    document_id, leaves = _carried(
        name, body, notice=kind if kind in v.NOTICE_KINDS else None
    )
    stamp = v.HAS_RECEIVED_TIMESTAMP if kind == "receipt" else v.HAS_SENT_TIMESTAMP
    return EnvelopeInfo(
        name=name,
        message=match["msg"],
        number=int(match["n"]),
        kind=kind,
        sender=body.one_iri(v.HAS_SENDER),
        recipient=recipient,
        timestamp_ms=_long(body, stamp),
        contains=contains,
        remote_message=remote,
        content=content,
        document_id=document_id,
        leaves=leaves,
        references=_references(name, nodes, body.iris(v.REFERENCES_SIGNATURE)),
        previous_message=previous,
    )


def read_envelope(name: str, quads: Iterable[Quad]) -> EnvelopeInfo:
    """Read an envelope graph ``<M#eN>`` of message ``<M>``."""
    match = _ENVELOPE_NAME.fullmatch(name)
    if match is None:
        raise _fail(name, "an envelope graph must be named <message#eN>")
    message, nodes = match["msg"], _nodes(name, quads)
    if name not in nodes or message not in nodes:
        raise _fail(name, "must describe both the envelope and its message")
    head, body = nodes[name], nodes[message]
    if head.iris(v.RDF_TYPE) != [v.ENVELOPE_GRAPH.value]:
        raise _fail(name, "must have exactly the type msg:EnvelopeGraph")
    if head.one_iri(v.SUB_GRAPH_OF) != message:
        raise _fail(name, f"must be rdfg:subGraphOf its message <{message}>")
    info = _envelope(name, head, body, nodes)
    head.done()
    body.done()
    _only(name, nodes, {name, message, *body.iris(v.REFERENCES_SIGNATURE)})
    return info


def _hex(node: _Node, predicate: IRI) -> bytes:
    lexical = node.one_literal(predicate, v.XSD_HEX)
    if not _HEX.fullmatch(lexical):
        raise node._err(predicate, "needs canonical (upper-case) xsd:hexBinary for")
    return bytes.fromhex(lexical)


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentSummary:
    """A checked content graph."""

    document_id: str
    publisher: str
    manifest_root: bytes
    leaf_count: int
    version: int | None = None
    concepts: tuple[tuple[str, int, int], ...] = ()

    def facts(self) -> ContentFacts:
        """The content facts."""
        return ContentFacts(
            document_id=self.document_id,
            publisher=self.publisher,
            manifest_root=self.manifest_root,
            leaf_count=self.leaf_count,
            version=self.version,
            concepts=self.concepts,
        )


_CONCEPT_RUN = re.compile(r"(?P<first>0|[1-9][0-9]{0,18})-(?P<end>[1-9][0-9]{0,18}) (?P<c>.+)")


def _concept_runs(name: str, doc: _Node, leaf_count: int) -> tuple[tuple[str, int, int], ...]:
    """The ``xdn:conceptLeaves`` of a content graph (checked to partition the leaves in leaf
    order: one set of runs has one spelling)."""
    said = doc.literals(v.CONCEPT_LEAVES)
    if len(said) > 1:
        raise doc._err(v.CONCEPT_LEAVES, "has several values for")
    runs = []
    for line in said[0].split("\n") if said else ():
        match = _CONCEPT_RUN.fullmatch(line)
        if match is None:
            raise _fail(name, f"xdn:conceptLeaves line {line!r} is not 'first-end concept'")
        runs.append((match["c"], int(match["first"]), int(match["end"])))
    try:
        ContentFacts(
            document_id="-", publisher="-", manifest_root=b"-", leaf_count=leaf_count,
            concepts=tuple(runs),
        )
    except (TypeError, ValueError) as exc:
        raise _fail(name, f"xdn:conceptLeaves: {exc}") from None
    return tuple(runs)


def check_content(name: str, quads: Iterable[Quad]) -> ContentSummary:
    """Check a content graph ``<M#cN>`` (document, publisher, manifest root and size)."""
    match = _CONTENT_NAME.fullmatch(name)
    if match is None:
        raise _fail(name, "a content graph must be named <message#cN>")
    doc_uri, nodes = f"{match['msg']}#document", _nodes(name, quads)
    if doc_uri not in nodes:
        raise _fail(name, f"must describe the document <{doc_uri}>")
    doc = nodes[doc_uri]
    if doc.iris(v.RDF_TYPE) != [v.DOCUMENT.value]:
        raise _fail(name, "the document must have exactly the type xdn:Document")
    _only(name, nodes, {doc_uri})
    leaf_count = _long(doc, v.LEAF_COUNT)
    if leaf_count < 1:
        raise _fail(name, "xdn:leafCount must be at least 1")
    versions = doc.literals(v.VERSION, v.XSD_LONG)
    if len(versions) > 1:
        raise doc._err(v.VERSION, "has several values for")
    summary = ContentSummary(
        document_id=doc.one_literal(v.DOCUMENT_ID),
        publisher=doc.one_literal(v.PUBLISHER),
        manifest_root=_hex(doc, v.MANIFEST_ROOT),
        leaf_count=leaf_count,
        version=_long(doc, v.VERSION) if versions else None,
        concepts=_concept_runs(name, doc, leaf_count),
    )
    if not summary.document_id or not summary.publisher or not summary.manifest_root:
        raise _fail(name, "document id, publisher and manifest root must not be empty")
    if summary.version is not None and summary.version < 0:
        raise _fail(name, "xdn:version must not be negative")
    doc.done()
    return summary


def read_content(name: str, quads: Iterable[Quad]) -> ContentFacts:
    """Read a content graph ``<M#cN>`` (document, publisher, manifest root and size)."""
    return check_content(name, quads).facts()
