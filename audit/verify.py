"""Pure per-row functions that verify signature graphs (no Spark imports here).

Theory of operation
-------------------
A signature graph signs either one graph (``xdn``'s plain method: ECDSA over the
graph's RDFC-1.0 canonical N-Quads) or a *batch* (``xdn:Rdfc10MerkleBatchEcdsa``: one
signature over the Merkle root of up to 1,024 graphs, each signature graph giving its graph's
inclusion path, :mod:`xdn.provenance._batch`). The audit verifies in two steps, so that the
ECDSA check runs once per batch however many graphs it covers:

1. :func:`signed_input` — per signature graph, the bytes its signature value covers: the signed
   graph's canonical form, or for a batch the root rebuilt from that form and the inclusion
   path. It also says why nothing can be checked (the signed graph is in no log, the path does
   not fit) and whether the carried signer certificate differs from every certificate the node
   logged (:func:`certificate_problem`).
2. :func:`judge_signature` — once per distinct (signer, signature value, signed bytes): the
   ECDSA check under the certified keys of the signer, from the node descriptions in the logs.
   A signature only a certificate the CA does not vouch for explains is a *forged signer*.
"""

from __future__ import annotations

import base64
import functools
import ssl
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from xdn import certs, crypto
from xdn.errors import CertificateError, SignatureError, UsageError
from xdn.provenance._batch import BatchProof, batch_root, signed_root

__all__ = [
    "SIGNED_TYPE",
    "certificate_problem",
    "check_certificate",
    "judge_signature",
    "signed_input",
]

#: Spark type of what :func:`signed_input` returns.
SIGNED_TYPE = "struct<signed:binary,problem:string,certificate_problem:string>"


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


def certificate_problem(
    signer: str, certificate: bytes | None, node_certs: Sequence[Mapping[str, Any]] | None
) -> str | None:
    """Why the certificate a signature graph carries is suspect (``None``: it is not).

    A signature graph may carry its signer's certificate (``xdn:signerCertificate``, DER); the
    audit takes keys from the node descriptions in the logs, so a carried certificate that is
    none of the ones the node logged means someone presents another identity than it logs.
    No carried certificate, or no logged one (an unknown signer, reported as such), is no
    problem here.
    """
    if certificate is None or not node_certs:
        return None
    carried = bytes(certificate)
    for logged in node_certs:
        try:
            if ssl.PEM_cert_to_DER_cert(logged["cert_pem"]) == carried:
                return None
        except ValueError:
            continue
    return f"carries a signer certificate other than the one <{signer}> logged"


def _batch_proof(batch: Mapping[str, Any]) -> BatchProof:
    path = batch["path"] or []
    return BatchProof(index=batch["index"], size=batch["size"], path=tuple(bytes(h) for h in path))


def signed_input(
    signed_graph: str,
    signer: str,
    lines: Sequence[str] | None,
    batch: Mapping[str, Any] | None,
    certificate: bytes | None,
    node_certs: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """What one signature graph's value signs, before any ECDSA check.

    Args:
        signed_graph / signer: what the signature graph says.
        lines: the signed graph's canonical N-Quads lines (``None``: the graph is in no log).
        batch: ``index``, ``size`` and ``path`` (hashes) for a batch signature, else ``None``.
        certificate: the signer certificate the signature graph carries (DER), if any.
        node_certs: the signer's logged certificates (``cert_pem``, ``problem``).

    Returns:
        ``{"signed": bytes | None, "problem": str | None, "certificate_problem": str | None}``:
        the bytes the signature covers, or why there are none.
    """
    cert = certificate_problem(signer, certificate, node_certs)
    if lines is None:
        return {
            "signed": None,
            "problem": f"signed graph <{signed_graph}> is in no log",
            "certificate_problem": cert,
        }
    data = "".join(line + "\n" for line in sorted(set(lines))).encode("utf-8")
    if batch is None:
        return {"signed": data, "problem": None, "certificate_problem": cert}
    try:
        proof = _batch_proof(batch)
        root = batch_root(data, proof)
    except (SignatureError, ValueError) as exc:
        return {"signed": None, "problem": f"batch signature: {exc}", "certificate_problem": cert}
    return {"signed": signed_root(root, proof.size), "problem": None, "certificate_problem": cert}


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
    signer: str,
    value: str,
    signed: bytes | None,
    node_certs: Sequence[Mapping[str, Any]] | None,
) -> dict[str, Any]:
    """Verify one signature value over the bytes it signs (:func:`signed_input`).

    Args:
        signer / value: what the signature graph says.
        signed: the bytes the value covers (``None``: nothing to check, see ``problem``).
        node_certs: the signer's certificates (``cert_pem``, ``problem``: why the CA does not
            vouch for it, or ``None``).

    Returns:
        ``{"verified": bool, "reason": str | None}``.
    """
    reason = _judge(signer, value, None if signed is None else bytes(signed), node_certs or [])
    return {"verified": reason is None, "reason": reason}


def _judge(
    signer: str, value: str, signed: bytes | None, node_certs: Sequence[Mapping[str, Any]]
) -> str | None:
    if signed is None:
        return "nothing to verify"
    if not node_certs:
        return f"unknown signer <{signer}>: no node description in any log"
    try:
        signature = base64.b64decode(value, validate=True)
    except ValueError:
        return "signature value is not base64"
    trusted = [c["cert_pem"] for c in node_certs if c["problem"] is None]
    if any(_verifies(pem, signature, signed) for pem in trusted):
        return None
    untrusted = [c for c in node_certs if c["problem"] is not None]
    if untrusted and (
        not trusted or any(_verifies(c["cert_pem"], signature, signed) for c in untrusted)
    ):
        return f"forged signer: {untrusted[0]['problem']}"
    return "signature does not verify"
