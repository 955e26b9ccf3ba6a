"""Pure per-row functions the Spark transforms run on executors (no Spark imports here).

Keeping them free of Spark makes them testable in plain Python and keeps what is shipped to the
Python workers small: each function takes and returns plain values (str, list, dict, tuple).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from xdn.errors import ProvenanceError
from xdn.provenance import (
    EnvelopeInfo,
    LeafRanges,
    RefusalFacts,
    SignatureInfo,
    graph_type,
    read_content,
    read_envelope,
    read_node_description,
    read_policy_change,
    read_refusal,
    read_signature,
)
from xdn.rdf import Quad, format_quad, parse_line

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"

__all__ = [
    "CONCEPTS_TYPE",
    "DESCRIPTION_FIELDS",
    "DESCRIPTION_TYPE",
    "LEAVES_TYPE",
    "PATH_TYPE",
    "describe_graph",
    "parse_row",
    "walk_paths",
]


def parse_row(value: str) -> dict[str, str | None] | None:
    """Parse one log line into its canonical form and graph name, or an error.

    Returns:
        ``None`` for blank/comment lines, else ``{"line", "graph", "error"}``.
    """
    try:
        quad = parse_line(value)
    except ProvenanceError as exc:
        return {"line": None, "graph": None, "error": str(exc).removeprefix("N-Quads line 1: ")}
    if quad is None:
        return None
    if quad.g is None:
        return {"line": None, "graph": None, "error": "quad in the default graph"}
    return {"line": format_quad(quad), "graph": quad.g.value, "error": None}


#: Spark type of a set of manifest leaves: half-open ``[start, end)`` runs, sorted and merged
#: (:class:`xdn.provenance.LeafRanges`).
LEAVES_TYPE = "array<struct<start:bigint,end:bigint>>"
_LONG_MAX = 2**63 - 1

#: Spark type of a content graph's concept runs (``xdn:conceptLeaves``): half-open
#: ``[start, end)`` leaf runs, one per concept, in leaf order.
CONCEPTS_TYPE = "array<struct<concept:string,start:bigint,end:bigint>>"

#: Spark type of each field :func:`describe_graph` returns (the UDF's struct, in order).
DESCRIPTION_FIELDS = (
    ("kind", "string"),
    ("error", "string"),
    ("signed_graph", "string"),
    ("signer", "string"),
    ("value", "string"),
    ("certificate", "binary"),
    ("batch", "struct<index:int,size:int,path:array<binary>>"),
    ("message", "string"),
    ("number", "int"),
    ("env_kind", "string"),
    ("sender", "string"),
    ("recipient", "string"),
    ("timestamp_ms", "bigint"),
    ("contains", "string"),
    ("remote_message", "string"),
    ("content", "array<string>"),
    ("document_id", "string"),
    ("leaves", LEAVES_TYPE),
    ("leaf_count", "bigint"),
    ("references", "array<struct<signature_graph:string,signed_graph:string,value:string>>"),
    ("node_uri", "string"),
    ("cert_pem", "string"),
    ("cert_pems", "array<string>"),
    ("publisher", "string"),
    ("document_version", "bigint"),
    ("concepts", CONCEPTS_TYPE),
    (
        "refusal",
        "struct<kind:string,reason:string,publisher:string,document_id:string,version:bigint,"
        "manifest_root:string,key_message:string,concept:string,epoch:bigint,"
        "received_from:string,sequence:bigint>",
    ),
    (
        "policy_change",
        "struct<publisher:string,subscriber:string,version:bigint,changed_at_ms:bigint,"
        "everything:boolean>",
    ),
)
DESCRIPTION_TYPE = "struct<" + ",".join(f"{n}:{t}" for n, t in DESCRIPTION_FIELDS) + ">"


def _blank(kind: str) -> dict[str, Any]:
    return dict.fromkeys(name for name, _ in DESCRIPTION_FIELDS) | {"kind": kind}


def describe_graph(name: str, lines: Sequence[str]) -> dict[str, Any]:
    """Classify and read one graph gathered from the logs (see :mod:`xdn.provenance`).

    Returns:
        a flat dict: ``kind`` (signature / envelope / content / node / refusal: a failure
        notice's content / policy: a policy-change notice's), ``error`` when the graph is
        malformed, and the fields of its kind.
    """
    try:
        quads = [q for q in (parse_line(line) for line in lines) if q is not None]
    except ProvenanceError as exc:
        return _blank("content") | {"error": f"graph <{name}>: {exc}"}
    kind = graph_type(name, quads)
    row = _blank(kind)
    try:
        if kind == "signature":
            row |= _signature(read_signature(name, quads))
        elif kind == "envelope":
            row |= _envelope(read_envelope(name, quads))
        elif kind == "node":
            node, pems = _node_certificates(name, quads)
            row |= {"node_uri": node, "cert_pem": pems[0], "cert_pems": pems}
        elif kind == "refusal":
            row["refusal"] = _refusal(read_refusal(name, quads))
        elif kind == "policy":  # a publisher's policy-change notice (audit.faults.entitlement)
            change = read_policy_change(name, quads)
            row["policy_change"] = {
                "publisher": change.publisher,
                "subscriber": change.subscriber,
                "version": change.version,
                "changed_at_ms": change.changed_at_ms,
                "everything": change.everything,
            }
        else:
            facts = read_content(name, quads)
            row |= {
                "document_id": facts.document_id,
                "leaf_count": facts.leaf_count,
                "publisher": facts.publisher,
                "document_version": facts.version,
                "concepts": [
                    {"concept": c, "start": start, "end": end} for c, start, end in facts.concepts
                ]
                or None,
            }
    except ProvenanceError as exc:
        row["error"] = str(exc)
    return row


def _node_certificates(name: str, quads: Sequence[Quad]) -> tuple[str, list[str]]:
    """A node description graph gathered from all logs → ``(node, [cert_pem, …])``.

    A node whose certificate was renewed or its key rotated starts its logs (and rotated logs)
    with a description of each certificate it held: the same graph name, one type quad, one
    certificate quad per certificate. Each certificate quad is read as a description of its
    own (:func:`xdn.provenance.read_node_description`), so a node holds every certificate it
    ever logged (judged each at the time it signed, :mod:`audit.trust`).
    """
    typed = [q for q in quads if q.p.value == RDF_TYPE]
    held = [q for q in quads if q.p.value != RDF_TYPE]
    if not held or len(typed) != 1:
        read_node_description(name, quads)  # raises, naming the graph
    pems, node = [], ""
    for cert in sorted(held, key=lambda q: q.o.value):
        node, pem = read_node_description(name, [typed[0], cert])
        pems.append(pem.decode("ascii"))
    return node, pems


def _signature(sig: SignatureInfo) -> dict[str, Any]:
    batch = sig.batch
    return {
        "signed_graph": sig.signed_graph,
        "signer": sig.signer,
        "value": sig.value,
        "certificate": sig.certificate,
        "batch": None
        if batch is None
        else {"index": batch.index, "size": batch.size, "path": list(batch.path)},
    }


def _leaf_runs(leaves: LeafRanges) -> list[dict[str, int]]:
    """``leaves`` as rows of :data:`LEAVES_TYPE`.

    Raises:
        ProvenanceError: a run ends beyond what a Spark ``bigint`` holds (no manifest has that
            many leaves: a content graph's leaf count is an ``xsd:long``).
    """
    if leaves.runs[-1][1] > _LONG_MAX:
        raise ProvenanceError(f"leaf ranges {leaves} reach beyond any manifest")
    return [{"start": start, "end": end} for start, end in leaves.runs]


def _envelope(env: EnvelopeInfo) -> dict[str, Any]:
    return {
        "message": env.message,
        "number": env.number,
        "env_kind": env.kind,
        "sender": env.sender,
        "recipient": env.recipient,
        "timestamp_ms": env.timestamp_ms,
        "contains": env.contains,
        "remote_message": env.remote_message,
        "content": list(env.content),
        "document_id": env.document_id or None,  # none for a failure notice
        "leaves": None if env.leaves is None else _leaf_runs(env.leaves),
        "references": [
            {"signature_graph": r.signature_graph, "signed_graph": r.signed_graph, "value": r.value}
            for r in env.references
        ],
    }


def _refusal(facts: RefusalFacts) -> dict[str, Any]:
    root = facts.manifest_root
    return {
        "kind": facts.kind,
        "reason": facts.reason,
        "publisher": facts.publisher,
        "document_id": facts.document_id,
        "version": facts.version,
        "manifest_root": None if root is None else root.hex(),
        "key_message": facts.key_message,
        "concept": facts.concept,
        "epoch": facts.epoch,
        "received_from": facts.received_from,
        "sequence": facts.sequence,
    }


#: Spark type of what :func:`walk_paths` returns.
PATH_TYPE = (
    "array<struct<leaf:string,nodes:array<string>,envelopes:array<string>,"
    f"timestamps_ms:array<bigint>,leaves:{LEAVES_TYPE},receipt:boolean,subscriber:string,"
    "missing_envelope:string,chain_ok:boolean>>"
)


def walk_paths(hops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild every chain of one document: from each leaf envelope back to its publication.

    Args:
        hops: the document's envelopes (``envelope``, ``parent``, ``node``, ``kind``,
            ``timestamp_ms``, ``hop_ok``, ``leaves``: the manifest leaves it carries).

    Returns:
        one dict per leaf of the tree (an envelope nothing contains): the path root → leaf, the
        manifest leaves the leaf envelope carries, whether it ends in a receipt, the first
        envelope it names but nobody logged, and whether every hop is sound and the path
        reaches a publication.
    """
    by_name = {h["envelope"]: h for h in hops}
    parents = {h["parent"] for h in hops if h["parent"] is not None}
    out = []
    for leaf in sorted(set(by_name) - parents):
        path, seen, name = [], set(), leaf
        while name is not None and name in by_name and name not in seen:
            seen.add(name)
            path.append(by_name[name])
            name = by_name[name]["parent"]
        path.reverse()
        receipt = by_name[leaf]["kind"] == "receipt"
        out.append(
            {
                "leaf": leaf,
                "nodes": [h["node"] for h in path],
                "envelopes": [h["envelope"] for h in path],
                "timestamps_ms": [h["timestamp_ms"] for h in path],
                "leaves": list(by_name[leaf]["leaves"] or []),
                "receipt": receipt,
                "subscriber": by_name[leaf]["node"] if receipt else None,
                "missing_envelope": name,
                "chain_ok": name is None
                and path[0]["kind"] == "publication"
                and all(h["hop_ok"] for h in path),
            }
        )
    return out
