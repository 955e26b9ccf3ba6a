"""Pure per-row functions the Spark transforms run on executors (no Spark imports here).

Keeping them free of Spark makes them testable in plain Python and keeps what is shipped to the
Python workers small: each function takes and returns plain values (str, list, dict, tuple).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

from xdn import certs, crypto
from xdn.errors import CertificateError, ProvenanceError, SignatureError, UsageError
from xdn.provenance import (
    graph_type,
    read_content,
    read_envelope,
    read_node_description,
    read_signature,
)
from xdn.rdf import format_quad, parse_line

__all__ = ["check_certificate", "describe_graph", "parse_row", "verify_signature_rows"]


def parse_row(value: str) -> dict[str, str | None] | None:
    """Parse one log line into its canonical form and graph name, or an error.

    Returns:
        ``None`` for blank/comment lines, else ``{"line", "graph", "error"}``.
    """
    try:
        quad = parse_line(value)
    except ProvenanceError as exc:
        return {"line": None, "graph": None, "error": str(exc).replace("line 1: ", "", 1)}
    if quad is None:
        return None
    if quad.g is None:
        return {"line": None, "graph": None, "error": "quad in the default graph"}
    return {"line": format_quad(quad), "graph": quad.g.value, "error": None}


def _blank(kind: str) -> dict[str, Any]:
    keys = ("error signed_graph signer value message number env_kind sender recipient "
            "timestamp_ms contains remote_message content document_id fragments references "
            "node_uri cert_pem").split()
    return {"kind": kind} | dict.fromkeys(keys)


def describe_graph(name: str, lines: Sequence[str]) -> dict[str, Any]:
    """Classify and read one graph gathered from the logs (see :mod:`xdn.provenance`).

    Returns:
        a flat dict: ``kind`` (signature / envelope / content / node), ``error`` when the
        graph is malformed, and the fields of its kind.
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
                "message": env.message, "number": env.number, "env_kind": env.kind,
                "sender": env.sender, "recipient": env.recipient,
                "timestamp_ms": env.timestamp_ms, "contains": env.contains,
                "remote_message": env.remote_message, "content": list(env.content),
                "document_id": env.document_id, "fragments": sorted(env.fragments),
                "references": [
                    {"signature_graph": r.signature_graph, "signed_graph": r.signed_graph,
                     "value": r.value} for r in env.references
                ],
            }
        elif kind == "node":
            node, pem = read_node_description(name, quads)
            row |= {"node_uri": node, "cert_pem": pem.decode("ascii")}
        else:
            facts = read_content(name, quads)
            row |= {"document_id": facts.document_id,
                    "fragments": sorted(f.fragment_id for f in facts.fragments)}
    except ProvenanceError as exc:
        row["error"] = str(exc)
    return row


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


def _key(pem: str, cache: dict[str, crypto.PublicKey | None]) -> crypto.PublicKey | None:
    if pem not in cache:
        try:
            cache[pem] = certs.public_key_of(pem.encode("ascii"))
        except (CertificateError, UsageError, ValueError):
            cache[pem] = None
    return cache[pem]


def _verifies(key: crypto.PublicKey | None, signature: bytes, data: bytes) -> bool:
    if key is None:
        return False
    try:
        crypto.verify(key, signature, data)
    except SignatureError:
        return False
    return True


def _judge(row: Mapping[str, Any], cache: dict[str, crypto.PublicKey | None]) -> str | None:
    """Reason the signature in ``row`` fails, or ``None`` when it verifies."""
    if row["lines"] is None:
        return f"signed graph <{row['signed_graph']}> is in no log"
    node_certs: Iterable[Mapping[str, Any]] = row["certs"] or []
    if not node_certs:
        return f"unknown signer <{row['signer']}>: no node description in any log"
    try:
        signature = base64.b64decode(row["value"], validate=True)
    except ValueError:
        return "signature value is not base64"
    data = "".join(line + "\n" for line in sorted(set(row["lines"]))).encode("utf-8")
    trusted = [c for c in node_certs if c["problem"] is None]
    if any(_verifies(_key(c["cert_pem"], cache), signature, data) for c in trusted):
        return None
    untrusted = [c for c in node_certs if c["problem"] is not None]
    if untrusted and (
        not trusted
        or any(_verifies(_key(c["cert_pem"], cache), signature, data) for c in untrusted)
    ):
        return f"forged signer: {untrusted[0]['problem']}"
    return "signature does not verify"


def verify_signature_rows(rows: Iterable[Mapping[str, Any]]) -> Iterator[tuple[Any, ...]]:
    """Verify a partition of joined signature rows (signature, signed lines, signer's certs).

    Yields:
        ``(signature_graph, signed_graph, node, verified, reason)`` per row.
    """
    cache: dict[str, crypto.PublicKey | None] = {}
    for row in rows:
        reason = _judge(row, cache)
        yield row["sig_graph"], row["signed_graph"], row["signer"], reason is None, reason
