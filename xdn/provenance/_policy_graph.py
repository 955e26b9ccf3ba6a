"""The content graph of a policy-change notice, and the notice itself.

When a publisher's key service evaluates a new version of its signed policy for a member whose
grants it changes, it signs a *policy-change notice* for that member (issue #16): a one-hop
message built like a failure notice (:mod:`._notice`) — a content graph ``<M#c1>`` describing
one node ``<M#change>``, an ``xdn:PolicyChange``::

    <M#c1> {
      <M#change> a xdn:PolicyChange ;
        xdn:publisher "production-dept" ;
        xdn:subscriber <https://alice.xdn.example/> ;
        xdn:certificateFingerprint "9f3c…" ;
        xdn:previousPolicyVersion "4"^^xsd:long ;  xdn:policyVersion "5"^^xsd:long ;
        xdn:gains "Quality" ;  xdn:loses "MachineSetting" ;
        xdn:changedAt "1767571200000"^^xsd:long . }

and, when the new version grants the subscriber nothing at all (it is no longer a member),
``xdn:losesEverything "true"^^xsd:boolean`` (with every concept it had as ``xdn:loses``).

with its signature ``<M#c1s>``, and one envelope ``<M#e1>`` with ``msg:hasMessageType
xdn:PolicyNotice`` and its signature ``<M#e1s>``. Like a failure notice the envelope names its
sender and time, no recipient (nothing relays or receipts it: it travels beside the
entitlement it accompanies, not as a hop of a chain) and no document. Its URI lies in the
publisher's own ``policy/`` space (:func:`~xdn.provenance.policy_notice_uri`: one per policy
version and subscriber certificate). Well-formedness is checked as for every message, and
:class:`~xdn.provenance.ChainVerifier` insists its signer holds a publisher certificate of the
name the content graph gives.

The shape is closed; :func:`read_policy_change` inverts :func:`policy_change_quads` exactly.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdn.errors import ProvenanceError
from xdn.provenance import _vocab as v
from xdn.provenance._facts import PolicyChangeFacts
from xdn.provenance._graphs import _CONTENT_NAME, _fail, _long, _nodes, _only
from xdn.rdf import IRI, Literal, Quad, Term

__all__ = ["policy_change_quads", "read_policy_change"]


def policy_change_quads(message: str, facts: PolicyChangeFacts) -> list[Quad]:
    """The content graph ``<message#c1>`` of a policy-change notice saying ``facts``."""
    g, change = IRI(f"{message}#c1"), IRI(f"{message}#change")

    def long(value: int) -> Literal:
        return Literal(str(value), v.XSD_LONG)

    objects: list[tuple[IRI, Term]] = [
        (v.RDF_TYPE, v.POLICY_CHANGE),
        (v.PUBLISHER, Literal(facts.publisher)),
        (v.SUBSCRIBER, IRI(facts.subscriber)),
        (v.CERTIFICATE_FINGERPRINT, Literal(facts.certificate)),
        (v.PREVIOUS_POLICY_VERSION, long(facts.previous_version)),
        (v.POLICY_VERSION, long(facts.version)),
        (v.CHANGED_AT, long(facts.changed_at_ms)),
    ]
    objects += [(v.GAINS, Literal(c)) for c in sorted(facts.gained)]
    objects += [(v.LOSES, Literal(c)) for c in sorted(facts.lost)]
    if facts.everything:
        objects.append((v.LOSES_EVERYTHING, Literal("true", v.XSD_BOOLEAN)))
    return [Quad(change, p, o, g) for p, o in objects]


def read_policy_change(name: str, quads: Iterable[Quad]) -> PolicyChangeFacts:
    """Read the content graph ``<M#c1>`` of a policy-change notice.

    Raises:
        ProvenanceError: naming the graph, if it is not exactly what
            :func:`policy_change_quads` writes for some :class:`PolicyChangeFacts`.
    """
    match = _CONTENT_NAME.fullmatch(name)
    if match is None:
        raise _fail(name, "a content graph must be named <message#cN>")
    change_uri, nodes = f"{match['msg']}#change", _nodes(name, quads)
    _only(name, nodes, {change_uri})
    if change_uri not in nodes:
        raise _fail(name, f"must describe the change <{change_uri}>")
    node = nodes[change_uri]
    if node.iris(v.RDF_TYPE) != [v.POLICY_CHANGE.value]:
        raise _fail(name, "the change must have exactly the type xdn:PolicyChange")
    values = {
        "publisher": node.one_literal(v.PUBLISHER),
        "subscriber": node.one_iri(v.SUBSCRIBER),
        "certificate": node.one_literal(v.CERTIFICATE_FINGERPRINT),
        "previous_version": _long(node, v.PREVIOUS_POLICY_VERSION),
        "version": _long(node, v.POLICY_VERSION),
        "changed_at_ms": _long(node, v.CHANGED_AT),
        "gained": frozenset(node.literals(v.GAINS)),
        "lost": frozenset(node.literals(v.LOSES)),
        "everything": _everything(name, node.literals(v.LOSES_EVERYTHING, v.XSD_BOOLEAN)),
    }
    node.done()
    try:
        return PolicyChangeFacts(**values)  # type: ignore[arg-type]
    except (TypeError, ValueError) as exc:
        raise ProvenanceError(f"graph <{name}>: {exc}") from None


def _everything(name: str, values: list[str]) -> bool:
    """``xdn:losesEverything``: absent, or exactly ``"true"^^xsd:boolean``."""
    if values not in ([], ["true"]):
        raise _fail(name, 'xdn:losesEverything, when said, is exactly "true"^^xsd:boolean')
    return bool(values)
