"""Well-formedness of a whole message dataset (the paper's conditions 1 to 8, 10 and 11).

:func:`analyse` reads every graph with the strict readers of :mod:`._graphs`, then checks the
dataset-level conditions and returns a :class:`Shape`: the envelope chain from the innermost
(publication) envelope outwards, the signature of every signed graph, the content facts. The
signer checks (condition 9) need keys and live in :mod:`._verify`.

A failure notice (:mod:`._notice`) is a chain of one ``refusal`` envelope around a notice
content graph (:mod:`._refusal`) instead of a document's; its message URI lies below the
signer's ``refusal/`` space (condition 11), and nothing may wrap it, as nothing may wrap a
receipt.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

from xdn import ids
from xdn.errors import ProvenanceError
from xdn.provenance import _vocab as v
from xdn.provenance._facts import PolicyChangeFacts, RefusalFacts
from xdn.provenance._graphs import (
    ContentSummary,
    EnvelopeInfo,
    Reference,
    SignatureInfo,
    check_content,
    graph_type,
    read_envelope,
    read_signature,
)
from xdn.provenance._policy_graph import read_policy_change
from xdn.provenance._refusal import read_refusal
from xdn.rdf import Quad

__all__ = [
    "Shape",
    "analyse",
    "extend",
    "message_uri",
    "message_uri_prefix",
    "notice_uri",
    "notice_uri_prefix",
    "policy_notice_uri",
    "policy_uri_prefix",
]


def message_uri_prefix(node_uri: str, document_id: str) -> str:
    """Message URIs a node mints for a document start with this (condition 11).

    The document id is one percent-encoded path segment (:func:`xdn.ids.segment`).
    """
    return f"{node_uri}msg/{ids.segment(document_id)}/"


def message_uri(node_uri: str, document_id: str, *hop: str) -> str:
    """The URI ``node_uri`` mints for a message of ``document_id``: ``<node>msg/<doc>/<hop…>``.

    Every part is percent-encoded as one path segment, so any id and any hop name (a site or
    subscriber name, ``v3``, ``received``) gives an IRI below :func:`message_uri_prefix`.

    >>> message_uri("https://d1.xdn.example/", "order 7", "v1", "link-d2")
    'https://d1.xdn.example/msg/order%207/v1/link-d2'

    Raises:
        TypeError, ValueError: an empty or non-``str`` part, or no hop at all.
    """
    if not hop:
        raise ValueError("a message URI needs at least one hop segment after the document")
    return message_uri_prefix(node_uri, document_id) + "/".join(ids.segment(h) for h in hop)


def notice_uri_prefix(node_uri: str) -> str:
    """The failure notices a node signs have message URIs starting with this (condition 11):
    their own part of the node's URI space, beside the document messages below ``msg/``."""
    return f"{node_uri}refusal/"


def notice_uri(node_uri: str, *hop: str) -> str:
    """The URI ``node_uri`` mints for one of its failure notices: ``<node>refusal/<hop…>``.

    >>> notice_uri("https://s1.xdn.example/", "1767571200000-9f3c")
    'https://s1.xdn.example/refusal/1767571200000-9f3c'

    Raises:
        TypeError, ValueError: an empty or non-``str`` part, or no part at all.
    """
    if not hop:
        raise ValueError("a notice URI needs at least one segment")
    return notice_uri_prefix(node_uri) + "/".join(ids.segment(h) for h in hop)


def policy_uri_prefix(node_uri: str) -> str:
    """The policy-change notices a publisher signs have message URIs starting with this."""
    return f"{node_uri}policy/"


def policy_notice_uri(node_uri: str, version: int, fingerprint: str) -> str:
    """The URI a publisher mints for its notice of policy ``version`` to the subscriber
    certificate ``fingerprint``: ``<node>policy/v<version>/<fingerprint>`` (one per both).

    >>> policy_notice_uri("https://acme.xdn.example/", 5, "9f3c")
    'https://acme.xdn.example/policy/v5/9f3c'
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError("a policy version is a positive int")
    return policy_uri_prefix(node_uri) + f"v{version}/" + ids.segment(fingerprint)


def uri_prefix(env: EnvelopeInfo) -> str:
    """Where condition 11 wants the message URI of envelope ``env``."""
    if env.kind == "refusal":
        return notice_uri_prefix(env.sender)
    if env.kind == "policy-notice":
        return policy_uri_prefix(env.sender)
    return message_uri_prefix(env.sender, env.document_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Shape:
    """The structure of a well-formed message dataset."""

    envelopes: tuple[EnvelopeInfo, ...]  # innermost (publication) first
    signatures: Mapping[str, SignatureInfo]  # by the name of the graph they sign
    graphs: Mapping[str, tuple[Quad, ...]]
    content_graphs: tuple[str, ...]
    content: ContentSummary | None  # None for a failure notice
    refusal: RefusalFacts | None = None  # what a failure notice says was refused
    policy_change: PolicyChangeFacts | None = None  # what a policy-change notice says

    @property
    def outermost(self) -> EnvelopeInfo:
        return self.envelopes[-1]


# What each graph says, by its name and statements: a node reads the same graphs again when the
# receipt of a document it relayed comes back through it. Readers raise on a malformed graph,
# which is never remembered; what they return is immutable.
# Bounded by the statements its keys hold (they keep them alive), so it stays small whatever
# the graphs' sizes.
_READ: dict[tuple[Callable[..., object], str, frozenset[Quad]], object] = {}
_READ_MAX = 4096
_READ_MAX_QUADS = 8192
_read_quads = 0  # statements in _READ's keys
_T = TypeVar("_T")


def _read(reader: Callable[[str, list[Quad]], _T], name: str, quads: list[Quad]) -> _T:
    global _read_quads
    key = (reader, name, frozenset(quads))
    known = _READ.get(key)
    if known is None:
        known = reader(name, quads)
        if len(_READ) >= _READ_MAX or _read_quads >= _READ_MAX_QUADS:
            _READ.clear()
            _read_quads = 0
        _READ[key] = known
        _read_quads += len(key[2])
    return known  # type: ignore[return-value]


def _group(quads: Iterable[Quad]) -> dict[str, list[Quad]]:
    graphs: dict[str, list[Quad]] = defaultdict(list)
    for quad in quads:
        if quad.g is None:
            raise ProvenanceError("condition 1: the default graph must be empty")
        graphs[quad.g.value].append(quad)
    return graphs


def _chain(envelopes: dict[str, EnvelopeInfo]) -> tuple[EnvelopeInfo, ...]:
    if not envelopes:
        raise ProvenanceError("condition 2: the dataset contains no envelope graph")
    contained = [e.contains for e in envelopes.values() if e.contains is not None]
    for name in contained:
        if name not in envelopes:
            raise ProvenanceError(f"condition 4: contained envelope <{name}> is missing")
        if contained.count(name) > 1:
            raise ProvenanceError(f"condition 4: envelope <{name}> is contained twice")
    outer = sorted(set(envelopes) - set(contained))
    if len(outer) != 1:
        raise ProvenanceError(f"condition 6: {len(outer)} outermost envelopes {outer}, not one")
    chain = [envelopes[outer[0]]]
    while (inner := chain[-1].contains) is not None:
        if len(chain) > len(envelopes):
            raise ProvenanceError("condition 4: the envelopes contain each other in a cycle")
        chain.append(envelopes[inner])
    if len(chain) != len(envelopes):
        raise ProvenanceError("condition 4: some envelopes are not on the chain")
    return tuple(reversed(chain))


def _check_reference(env: EnvelopeInfo, ref: Reference, sigs: Mapping[str, SignatureInfo]) -> None:
    sig = sigs.get(ref.signed_graph)
    if sig is None or sig.name != ref.signature_graph:
        raise ProvenanceError(
            f"graph <{env.name}>: references signature <{ref.signature_graph}> of "
            f"<{ref.signed_graph}>, which is not in the dataset"
        )
    if sig.value != ref.value:
        raise ProvenanceError(
            f"condition 5: graph <{env.name}> references <{sig.name}> with a value "
            "different from that signature's"
        )


def _check_envelope(
    env: EnvelopeInfo, inner: EnvelopeInfo | None, sigs: Mapping[str, SignatureInfo]
) -> None:
    expected = set(env.content) if inner is None else {inner.name}
    if {r.signed_graph for r in env.references} != expected or len(env.references) != len(expected):
        raise ProvenanceError(
            f"graph <{env.name}>: must reference exactly the signatures of {sorted(expected)}"
        )
    for ref in env.references:
        _check_reference(env, ref, sigs)
    try:
        prefix = uri_prefix(env)
    except ValueError as exc:  # e.g. an empty document id: no URI can be below it
        raise ProvenanceError(f"graph <{env.name}>: {exc}") from None
    if not env.message.startswith(prefix) or env.message == prefix:
        raise ProvenanceError(
            f"condition 11: message URI <{env.message}> of graph <{env.name}> is not "
            f"below <{prefix}>"
        )
    previous = env.previous_message
    if previous is not None and (
        not previous.startswith(prefix) or previous in (prefix, env.message)
    ):
        raise ProvenanceError(
            f"graph <{env.name}>: the previous version <{previous}> is not another message of "
            f"the same document by the same publisher (below <{prefix}>)"
        )
    if inner is None:
        return
    if inner.kind in v.FINAL_KINDS:
        raise ProvenanceError(f"graph <{env.name}>: a {inner.kind} envelope cannot be relayed")
    if env.number != inner.number + 1 or env.remote_message != inner.message:
        raise ProvenanceError(
            f"condition 10: graph <{env.name}> does not follow <{inner.name}> "
            "(envelope number or msg:hasRemoteMessage)"
        )
    if (
        env.document_id != inner.document_id
        or env.leaves is None
        or inner.leaves is None
        or not env.leaves.issubset(inner.leaves)
    ):
        raise ProvenanceError(
            f"graph <{env.name}>: document or fragments differ from those of <{inner.name}>"
        )


def _read_content(
    first: EnvelopeInfo, graphs: Mapping[str, list[Quad]], kinds: Mapping[str, str]
) -> ContentSummary:
    facts = None
    for name in first.content:
        if kinds.get(name) != "content" or not name.startswith(first.message + "#c"):
            raise ProvenanceError(f"graph <{first.name}>: <{name}> is not a content graph of it")
        facts = check_content(name, graphs[name])
        if facts.document_id != first.document_id:
            raise ProvenanceError(f"graph <{name}>: document id differs from <{first.name}>")
        if first.leaves is None or first.leaves.runs[-1][1] > facts.leaf_count:
            raise ProvenanceError(
                f"graph <{first.name}>: carries a leaf beyond the {facts.leaf_count} of <{name}>"
            )
    if facts is None or len(first.content) != 1:
        raise ProvenanceError(f"graph <{first.name}>: needs exactly one content graph")
    return facts


def _read_refusal(
    first: EnvelopeInfo, graphs: Mapping[str, list[Quad]], kinds: Mapping[str, str]
) -> RefusalFacts:
    if len(first.content) != 1:
        raise ProvenanceError(f"graph <{first.name}>: needs exactly one content graph")
    name = first.content[0]
    if kinds.get(name) != "refusal" or name != first.message + "#c1":
        raise ProvenanceError(f"graph <{first.name}>: <{name}> is not its failure notice")
    return read_refusal(name, graphs[name])


def _read_policy_change(
    first: EnvelopeInfo, graphs: Mapping[str, list[Quad]], kinds: Mapping[str, str]
) -> PolicyChangeFacts:
    if len(first.content) != 1:
        raise ProvenanceError(f"graph <{first.name}>: needs exactly one content graph")
    name = first.content[0]
    if kinds.get(name) != "policy" or name != first.message + "#c1":
        raise ProvenanceError(f"graph <{first.name}>: <{name}> is not its policy change")
    return read_policy_change(name, graphs[name])


def _signatures(
    graphs: Mapping[str, list[Quad]], kinds: Mapping[str, str]
) -> dict[str, SignatureInfo]:
    sigs: dict[str, SignatureInfo] = {}
    for name, kind in kinds.items():
        if kind != "signature":
            continue
        sig = _read(read_signature, name, graphs[name])
        if kinds.get(sig.signed_graph) in (None, "signature"):
            raise ProvenanceError(
                f"condition 8: signature graph <{name}> signs <{sig.signed_graph}>, "
                "which is not an envelope or content graph of the dataset"
            )
        sigs[sig.signed_graph] = sig
    return sigs


def analyse(quads: Iterable[Quad]) -> Shape:
    """Check the well-formedness of a message dataset and return its structure.

    Raises:
        ProvenanceError: naming the condition and the graph that violates it.
    """
    graphs = _group(quads)
    kinds = {name: _read(graph_type, name, g) for name, g in graphs.items()}
    if "node" in kinds.values():
        raise ProvenanceError("a node description is not part of a message")
    envelopes = {n: _read(read_envelope, n, graphs[n]) for n, k in kinds.items() if k == "envelope"}
    chain = _chain(envelopes)
    sigs = _signatures(graphs, kinds)
    unsigned = sorted(n for n, k in kinds.items() if k != "signature" and n not in sigs)
    if unsigned:
        raise ProvenanceError(f"condition 3: graph <{unsigned[0]}> is not signed")
    content, refusal, policy_change = None, None, None
    if chain[0].kind == "refusal":
        refusal = _read_refusal(chain[0], graphs, kinds)
    elif chain[0].kind == "policy-notice":
        policy_change = _read_policy_change(chain[0], graphs, kinds)
    else:
        content = _read_content(chain[0], graphs, kinds)
    for inner, env in zip((None, *chain), chain, strict=False):
        _check_envelope(env, inner, sigs)
    known = set(envelopes) | set(chain[0].content) | {s.name for s in sigs.values()}
    stray = sorted(set(graphs) - known)
    if stray:
        raise ProvenanceError(f"graph <{stray[0]}> is not part of the message's chain")
    referenced = {r.signature_graph for e in chain for r in e.references}
    if {s.name for s in sigs.values()} - referenced != {sigs[chain[-1].name].name}:
        raise ProvenanceError("condition 7: exactly one signature graph may be unreferenced")
    return Shape(
        envelopes=chain,
        signatures=MappingProxyType(sigs),
        graphs=MappingProxyType({n: tuple(g) for n, g in graphs.items()}),
        content_graphs=chain[0].content,
        content=content,
        refusal=refusal,
        policy_change=policy_change,
    )


def extend(shape: Shape, quads: Iterable[Quad]) -> Shape:
    """The shape of a well-formed dataset plus the graphs one hop adds: a new outermost
    envelope and its signature, checked as :func:`analyse` checks them, without re-reading
    the graphs already there.

    Raises:
        ProvenanceError: the new graphs are not one envelope around the outermost one, signed.
    """
    graphs = _group(quads)
    kinds = {name: _read(graph_type, name, g) for name, g in graphs.items()}
    envelopes = [name for name, kind in kinds.items() if kind == "envelope"]
    if sorted(kinds.values()) != ["envelope", "signature"] or set(graphs) & set(shape.graphs):
        raise ProvenanceError("a hop must add exactly one new envelope graph and its signature")
    envelope = _read(read_envelope, envelopes[0], graphs[envelopes[0]])
    added = _signatures(graphs, kinds)
    if envelope.name not in added:
        raise ProvenanceError(f"condition 3: graph <{envelope.name}> is not signed")
    if envelope.contains != shape.outermost.name:
        raise ProvenanceError(
            f"condition 6: graph <{envelope.name}> does not contain the outermost envelope"
        )
    signatures = {**shape.signatures, **added}
    _check_envelope(envelope, shape.outermost, signatures)
    return Shape(
        envelopes=(*shape.envelopes, envelope),
        signatures=MappingProxyType(signatures),
        graphs=MappingProxyType({**shape.graphs, **{n: tuple(g) for n, g in graphs.items()}}),
        content_graphs=shape.content_graphs,
        content=shape.content,
        refusal=shape.refusal,
        policy_change=shape.policy_change,
    )
