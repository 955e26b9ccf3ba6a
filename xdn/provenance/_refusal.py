"""The content graph of a failure notice: what one party refused, and why.

A failure notice is a message of its own (the paper's FAILURE response, made by the party that
refuses): one content graph ``<M#c1>``, one envelope ``<M#e1>`` of type ``xdn:Refusal`` and
their signatures. The content graph describes one node, ``<M#notice>``, a
``xdn:FailureNotice``::

    <M#c1> {
      <M#notice> a xdn:FailureNotice ;
        xdn:refusalKind "document" ;  xdn:reason "…" ;
        xdn:publisher "ACME" ;  xdn:documentId "order 7" ;  xdn:version "3"^^xsd:long ;
        xdn:manifestRoot "…"^^xsd:hexBinary ;
        xdn:receivedFrom <https://d2.xdn.example/> . }

A refused key message names ``xdn:keyMessage`` (rekey, enrolment, document-keys),
``xdn:concept`` and ``xdn:epoch`` instead of a document; a gap (a document of the publisher's
signed sequence that never came and the site cannot replay) names ``xdn:sequence``. Every
property but the kind and the reason is optional (at most one value each); the shape is closed
like every other graph's.
:func:`read_refusal` inverts :func:`refusal_quads` exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdn.errors import ProvenanceError
from xdn.provenance import _vocab as v
from xdn.provenance._facts import RefusalFacts
from xdn.provenance._graphs import _CONTENT_NAME, _fail, _hex, _long, _Node, _nodes, _only
from xdn.rdf import IRI, Literal, Quad, Term

__all__ = ["read_refusal", "refusal_quads"]

_TEXT = (
    (v.PUBLISHER, "publisher"),
    (v.DOCUMENT_ID, "document_id"),
    (v.KEY_MESSAGE, "key_message"),
    (v.CONCEPT, "concept"),
)
_COUNTS = ((v.VERSION, "version"), (v.EPOCH, "epoch"), (v.SEQUENCE, "sequence"))


def refusal_quads(message: str, facts: RefusalFacts) -> list[Quad]:
    """The content graph ``<message#c1>`` of a failure notice saying ``facts``."""
    g, notice = IRI(f"{message}#c1"), IRI(f"{message}#notice")
    objects: list[tuple[IRI, Term]] = [
        (v.RDF_TYPE, v.FAILURE_NOTICE),
        (v.REFUSAL_KIND, Literal(facts.kind)),
        (v.REASON, Literal(facts.reason)),
    ]
    for predicate, field in _TEXT:
        text = getattr(facts, field)
        if text is not None:
            objects.append((predicate, Literal(text)))
    for predicate, field in _COUNTS:
        count = getattr(facts, field)
        if count is not None:
            objects.append((predicate, Literal(str(count), v.XSD_LONG)))
    if facts.manifest_root is not None:
        objects.append((v.MANIFEST_ROOT, Literal(facts.manifest_root.hex().upper(), v.XSD_HEX)))
    if facts.received_from is not None:
        objects.append((v.RECEIVED_FROM, IRI(facts.received_from)))
    return [Quad(notice, p, o, g) for p, o in objects]


def _optional_literal(node: _Node, predicate: IRI) -> str | None:
    values = node.literals(predicate)
    if len(values) > 1:
        raise node._err(predicate, "has several values for")
    return values[0] if values else None


def _optional_count(node: _Node, predicate: IRI) -> int | None:
    if not node.terms(predicate):
        return None
    count = _long(node, predicate)  # one canonical xsd:long
    if count < 0:
        raise node._err(predicate, "needs a non-negative count for")
    return count


def read_refusal(name: str, quads: Iterable[Quad]) -> RefusalFacts:
    """Read the content graph ``<M#c1>`` of a failure notice.

    Raises:
        ProvenanceError: naming the graph, if it is not exactly what :func:`refusal_quads`
            writes for some :class:`RefusalFacts`.
    """
    match = _CONTENT_NAME.fullmatch(name)
    if match is None:
        raise _fail(name, "a content graph must be named <message#cN>")
    notice_uri, nodes = f"{match['msg']}#notice", _nodes(name, quads)
    _only(name, nodes, {notice_uri})
    if notice_uri not in nodes:
        raise _fail(name, f"must describe the notice <{notice_uri}>")
    node = nodes[notice_uri]
    if node.iris(v.RDF_TYPE) != [v.FAILURE_NOTICE.value]:
        raise _fail(name, "the notice must have exactly the type xdn:FailureNotice")
    texts = {field: _optional_literal(node, p) for p, field in _TEXT}
    counts = {field: _optional_count(node, p) for p, field in _COUNTS}
    root = _hex(node, v.MANIFEST_ROOT) if node.terms(v.MANIFEST_ROOT) else None
    kind, reason = node.one_literal(v.REFUSAL_KIND), node.one_literal(v.REASON)
    received_from = node.optional_iri(v.RECEIVED_FROM)
    node.done()
    try:
        return RefusalFacts(
            kind=kind,
            reason=reason,
            publisher=texts["publisher"],
            document_id=texts["document_id"],
            version=counts["version"],
            manifest_root=root,
            key_message=texts["key_message"],
            concept=texts["concept"],
            epoch=counts["epoch"],
            sequence=counts["sequence"],
            received_from=received_from,
        )
    except (TypeError, ValueError) as exc:
        raise ProvenanceError(f"graph <{name}>: {exc}") from None
