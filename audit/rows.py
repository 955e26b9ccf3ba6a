"""Pure per-row functions the Spark transforms run on executors (no Spark imports here).

Keeping them free of Spark makes them testable in plain Python and keeps what is shipped to the
Python workers small: each function takes and returns plain values (str, list, dict, tuple).
"""

from __future__ import annotations

import base64
import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from xdn import certs, crypto
from xdn.errors import CertificateError, ProvenanceError, SignatureError, UsageError
from xdn.provenance import (
    RefusalFacts,
    graph_type,
    read_content,
    read_envelope,
    read_node_description,
    read_refusal,
    read_signature,
)
from xdn.rdf import format_quad, parse_line

__all__ = [
    "DESCRIPTION_FIELDS",
    "DESCRIPTION_TYPE",
    "PATH_TYPE",
    "check_certificate",
    "describe_graph",
    "judge_signature",
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


#: Spark type of each field :func:`describe_graph` returns (the UDF's struct, in order).
DESCRIPTION_FIELDS = (
    ("kind", "string"),
    ("error", "string"),
    ("signed_graph", "string"),
    ("signer", "string"),
    ("value", "string"),
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
    ("fragments", "array<string>"),
    ("references", "array<struct<signature_graph:string,signed_graph:string,value:string>>"),
    ("node_uri", "string"),
    ("cert_pem", "string"),
    (
        "refusal",
        "struct<kind:string,reason:string,publisher:string,document_id:string,version:bigint,"
        "manifest_root:string,key_message:string,concept:string,epoch:bigint,"
        "received_from:string>",
    ),
)
DESCRIPTION_TYPE = "struct<" + ",".join(f"{n}:{t}" for n, t in DESCRIPTION_FIELDS) + ">"


def _blank(kind: str) -> dict[str, Any]:
    return dict.fromkeys(name for name, _ in DESCRIPTION_FIELDS) | {"kind": kind}


def describe_graph(name: str, lines: Sequence[str]) -> dict[str, Any]:
    """Classify and read one graph gathered from the logs (see :mod:`xdn.provenance`).

    Returns:
        a flat dict: ``kind`` (signature / envelope / content / node / refusal: a failure
        notice's content), ``error`` when the graph is malformed, and the fields of its kind.
    """
    try:
        quads = [q for q in (parse_line(line) for line in lines) if q is not None]
    except ProvenanceError as exc:
        return _blank("content") | {"error": f"graph <{name}>: {exc}"}
    kind = graph_type(name, quads)
    row = _blank(kind)
    try:
        if kind == "signature":
            sig = read_signature(name, quads)
            row |= {"signed_graph": sig.signed_graph, "signer": sig.signer, "value": sig.value}
        elif kind == "envelope":
            env = read_envelope(name, quads)
            row |= {
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
                "fragments": sorted(env.fragments),
                "references": [
                    {
                        "signature_graph": r.signature_graph,
                        "signed_graph": r.signed_graph,
                        "value": r.value,
                    }
                    for r in env.references
                ],
            }
        elif kind == "node":
            node, pem = read_node_description(name, quads)
            row |= {"node_uri": node, "cert_pem": pem.decode("ascii")}
        elif kind == "refusal":
            row["refusal"] = _refusal(read_refusal(name, quads))
        else:
            facts = read_content(name, quads)
            row |= {
                "document_id": facts.document_id,
                "fragments": sorted(f.fragment_id for f in facts.fragments),
            }
    except ProvenanceError as exc:
        row["error"] = str(exc)
    return row


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
    }


def check_certificate(node: str, cert_pem: str, ca_pem: bytes, at: datetime) -> str | None:
    """Why ``cert_pem`` cannot vouch for ``node`` (``None`` when it can).

    The certificate must chain to the CA, be valid at ``at`` and carry ``node`` as its URI.
    """
    try:
        credential = certs.verify_certificate(cert_pem.encode("ascii"), ca_pem, at=at)
    except (CertificateError, UsageError, ValueError) as exc:
        return str(exc)
    if credential.uri != node:
        return f"certificate is for <{credential.uri}>, not <{node}>"
    return None


@functools.lru_cache(maxsize=1024)
def _key(pem: str) -> crypto.PublicKey | None:
    """The public key of a certificate, cached per worker process."""
    try:
        return certs.public_key_of(pem.encode("ascii"))
    except (CertificateError, UsageError, ValueError):
        return None


def _verifies(pem: str, signature: bytes, data: bytes) -> bool:
    key = _key(pem)
    if key is None:
        return False
    try:
        crypto.verify(key, signature, data)
    except SignatureError:
        return False
    return True


def judge_signature(
    signed_graph: str,
    signer: str,
    value: str,
    lines: Sequence[str] | None,
    node_certs: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """Verify one signature graph against the canonical form of the graph it signs.

    Args:
        signed_graph / signer / value: what the signature graph says.
        lines: the signed graph's canonical N-Quads lines (``None``: the graph is in no log).
        node_certs: the signer's certificates (``cert_pem``, ``problem``: why the CA does not
            vouch for it, or ``None``).

    Returns:
        ``{"verified": bool, "reason": str | None}``. A signature that only a certificate the CA
        does not vouch for explains is a *forged signer*.
    """
    reason = _judge(signed_graph, signer, value, lines, node_certs or [])
    return {"verified": reason is None, "reason": reason}


def _judge(
    signed_graph: str,
    signer: str,
    value: str,
    lines: Sequence[str] | None,
    node_certs: Sequence[Mapping[str, Any]],
) -> str | None:
    if lines is None:
        return f"signed graph <{signed_graph}> is in no log"
    if not node_certs:
        return f"unknown signer <{signer}>: no node description in any log"
    try:
        signature = base64.b64decode(value, validate=True)
    except ValueError:
        return "signature value is not base64"
    data = "".join(line + "\n" for line in sorted(set(lines))).encode("utf-8")
    trusted = [c["cert_pem"] for c in node_certs if c["problem"] is None]
    if any(_verifies(pem, signature, data) for pem in trusted):
        return None
    untrusted = [c for c in node_certs if c["problem"] is not None]
    if untrusted and (
        not trusted or any(_verifies(c["cert_pem"], signature, data) for c in untrusted)
    ):
        return f"forged signer: {untrusted[0]['problem']}"
    return "signature does not verify"


#: Spark type of what :func:`walk_paths` returns.
PATH_TYPE = (
    "array<struct<leaf:string,nodes:array<string>,envelopes:array<string>,"
    "timestamps_ms:array<bigint>,fragments:array<string>,receipt:boolean,subscriber:string,"
    "missing_envelope:string,chain_ok:boolean>>"
)


def walk_paths(hops: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild every chain of one document: from each leaf envelope back to its publication.

    Args:
        hops: the document's envelopes (``envelope``, ``parent``, ``node``, ``kind``,
            ``timestamp_ms``, ``hop_ok``, ``fragments``).

    Returns:
        one dict per leaf (an envelope nothing contains): the path root → leaf, whether it ends
        in a receipt, the first envelope it names but nobody logged, and whether every hop is
        sound and the path reaches a publication.
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
                "fragments": list(by_name[leaf]["fragments"]),
                "receipt": receipt,
                "subscriber": by_name[leaf]["node"] if receipt else None,
                "missing_envelope": name,
                "chain_ok": name is None
                and path[0]["kind"] == "publication"
                and all(h["hop_ok"] for h in path),
            }
        )
    return out
