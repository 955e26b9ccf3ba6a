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


def check_certificate(
    node: str, cert_pem: str, ca_pem: bytes, at: datetime | None = None
) -> str | None:
    """Why ``cert_pem`` cannot vouch for ``node`` (``None`` when it can).

    The certificate must chain to the CA and carry ``node`` as its URI; with ``at``, it must
    also be valid then (the audit passes none: it judges each signature at the time it was
    made, :mod:`audit.trust`).
    """
    try:
        pem = cert_pem.encode("ascii")
        when = certs.credential_from_pem(pem).not_before if at is None else at
        credential = certs.verify_certificate(pem, ca_pem, at=when)
    except (CertificateError, UsageError, ValueError) as exc:
        return str(exc)
    if credential.uri != node:
        return f"certificate is for <{credential.uri}>, not <{node}>"
    return None


#: Spark type of what :func:`certificate_facts` returns.
FACTS_TYPE = (
    "struct<problem:string,serial:string,name:string,role:string,not_before_ms:bigint,"
    "not_after_ms:bigint>"
)


def certificate_facts(node: str, cert_pem: str, ca_pem: bytes) -> dict[str, Any]:
    """Whether the CA vouches for ``cert_pem`` as ``node`` (``problem``: why not), and the
    facts the audit judges it by at each signing time: serial (decimal text: serials are up
    to 159 bits), holder's name, role and validity period in ms since the epoch."""
    problem = check_certificate(node, cert_pem, ca_pem)
    try:
        credential = certs.credential_from_pem(cert_pem.encode("ascii"))
    except (CertificateError, UsageError, ValueError) as exc:
        return {"problem": problem or str(exc), "serial": None, "name": None, "role": None,
                "not_before_ms": None, "not_after_ms": None}
    return {
        "problem": problem,
        "serial": str(credential.serial),
        "name": credential.name,
        "role": credential.role,
        "not_before_ms": int(credential.not_before.timestamp() * 1000),
        "not_after_ms": int(credential.not_after.timestamp() * 1000),
    }


def certificate_problem(
    signer: str, certificate: bytes | None, node_certs: Sequence[Mapping[str, Any]] | None
) -> str | None:
    """Why the certificate a signature graph carries is suspect (``None``: it is not).

    A signature graph may carry its signer's certificate (``xdn:signerCertificate``, DER). The
    audit counts it among the node's certificates (a node that renewed its certificate keeps
    appending to a log whose description names the old one), so it must be one the CA issued
    to the signer: a carried certificate the CA did not vouch for as that node means someone
    presents another identity than its own. No carried certificate, or none known for the
    node (an unknown signer, reported as such), is no problem here.
    """
    if certificate is None or not node_certs:
        return None
    carried = bytes(certificate)
    for held in node_certs:
        try:
            if ssl.PEM_cert_to_DER_cert(held["cert_pem"]) == carried:
                if held["problem"] is None:
                    return None
                return f"carries a signer certificate that is not <{signer}>'s: {held['problem']}"
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
        ``{"verified": bool, "reason": str | None, "keys": [serial, …]}``: ``keys`` are the
        serials (the PEM when none is given) of the signer's certificates the CA vouches for
        under which the signature verifies (a node
        holds several over time; :mod:`audit.trust` picks the one in force when it signed).
    """
    reason, keys = _judge(
        signer, value, None if signed is None else bytes(signed), node_certs or []
    )
    return {"verified": reason is None, "reason": reason, "keys": keys}


def _judge(
    signer: str, value: str, signed: bytes | None, node_certs: Sequence[Mapping[str, Any]]
) -> tuple[str | None, list[str]]:
    if signed is None:
        return "nothing to verify", []
    if not node_certs:
        return f"unknown signer <{signer}>: no node description in any log", []
    try:
        signature = base64.b64decode(value, validate=True)
    except ValueError:
        return "signature value is not base64", []
    trusted = sorted(
        {(c["cert_pem"], c["serial"]) for c in node_certs if c["problem"] is None},
        key=lambda c: c[0],
    )
    keys = [serial or pem for pem, serial in trusted if _verifies(pem, signature, signed)]
    if keys:
        return None, keys
    untrusted = [c for c in node_certs if c["problem"] is not None]
    if untrusted and (
        not trusted or any(_verifies(c["cert_pem"], signature, signed) for c in untrusted)
    ):
        return f"forged signer: {untrusted[0]['problem']}", []
    return "signature does not verify", []
