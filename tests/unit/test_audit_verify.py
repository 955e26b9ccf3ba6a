"""audit.verify: signature verification per row (plain and batch signatures), without Spark."""

from __future__ import annotations

import base64
import functools
import ssl
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from audit.rows import describe_graph
from audit.trust import read_revocations
from audit.verify import (
    certificate_facts,
    certificate_problem,
    check_certificate,
    judge_signature,
    signed_input,
)
from xdn import certs
from xdn.crypto import load_private_key_pem
from xdn.errors import UsageError
from xdn.provenance import ContentFacts, Hop, LeafRanges, Message, Signer, originate, relay_many
from xdn.rdf import canonical_lines

NOW = datetime(2026, 1, 5, tzinfo=UTC)
PUB = certs.node_uri("pub")
D1 = certs.node_uri("d1")


@functools.cache
def world() -> dict[str, Any]:
    ca = certs.create_ca("ca", now=NOW)
    cert, key = certs.issue(*ca, name="pub", role="publisher", now=NOW)
    rogue_cert, _ = certs.issue(
        *certs.create_ca("rogue", now=NOW), name="pub", role="publisher", now=NOW
    )
    d1_cert, d1_key = certs.issue(
        *ca, name="d1", role="site", attributes={certs.BLOCK_FIELD: "B"}, now=NOW
    )
    pub = Signer(node_uri=PUB, private_key=load_private_key_pem(key), certificate=cert)
    site = Signer(node_uri=D1, private_key=load_private_key_pem(d1_key), certificate=d1_cert)
    message = originate(
        pub,
        message_uri=PUB + "msg/d/1",
        recipient_uri=D1,
        content=ContentFacts(document_id="d", publisher="P", manifest_root=b"\x01", leaf_count=8),
        timestamp_ms=7,
    )
    hops = [
        Hop(
            message_uri=f"{D1}msg/d/{n}",
            recipient_uri=f"https://s{n}.xdn.example/",
            leaves=LeafRanges(((n, n + 1),)),
        )
        for n in range(3)
    ]
    return {
        "ca": ca[0],
        "cert": cert.decode(),
        "rogue": rogue_cert.decode(),
        "d1_cert": d1_cert.decode(),
        "message": message,
        "batch": relay_many(message, site, hops, timestamp_ms=9),
    }


def lines_of(message: Message, name: str) -> list[str]:
    return canonical_lines(q for q in message.quads if q.g is not None and q.g.value == name)


def trusted(pem: str) -> dict[str, Any]:
    return {"cert_pem": pem, "problem": None, "serial": None}


def check(message: Message, graph: str, node_certs: list[dict[str, Any]]) -> dict[str, Any]:
    """What the audit concludes about the signature graph of ``graph`` in ``message``."""
    sig = describe_graph(graph + "s", lines_of(message, graph + "s"))
    prepared = signed_input(
        graph, sig["signer"], lines_of(message, graph), sig["batch"], sig["certificate"], node_certs
    )
    verdict = judge_signature(sig["signer"], sig["value"], prepared["signed"], node_certs)
    return prepared | verdict


def test_check_certificate() -> None:
    ca, cert, rogue = world()["ca"], world()["cert"], world()["rogue"]
    assert check_certificate(PUB, cert, ca, NOW) is None
    assert "not <https://d1" in str(check_certificate(D1, cert, ca, NOW))
    assert "not issued by the trusted CA" in str(check_certificate(PUB, rogue, ca, NOW))
    assert "not valid at" in str(
        check_certificate(PUB, cert, ca, datetime(2030, 1, 1, tzinfo=UTC))
    )


def test_judge_signature() -> None:
    message, cert, rogue = world()["message"], world()["cert"], world()["rogue"]
    graph = message.uri + "#e1"
    signed = signed_input(graph, PUB, lines_of(message, graph), None, None, None)["signed"]
    value = describe_graph(graph + "s", lines_of(message, graph + "s"))["value"]
    untrusted = {"cert_pem": rogue, "problem": "not from the CA", "serial": None}

    def judge(certs_: list[dict[str, Any]], v: str = value, data: bytes = signed) -> Any:
        return judge_signature(PUB, v, data, certs_)

    assert judge([trusted(cert)]) == {"verified": True, "reason": None, "keys": [cert]}
    assert judge([untrusted, trusted(cert)])["verified"]
    assert judge([trusted(cert)], data=signed + b"x")["reason"] == "signature does not verify"
    assert judge([])["reason"].startswith("unknown signer")
    assert judge([untrusted])["reason"] == "forged signer: not from the CA"
    assert judge([trusted(cert)], "%%%")["reason"] == "signature value is not base64"
    assert judge([trusted(cert)], base64.b64encode(b"x").decode())["verified"] is False
    missing = signed_input(graph, PUB, None, None, None, [trusted(cert)])
    assert missing["signed"] is None and missing["problem"].endswith("is in no log")


def test_batch_signatures_verify_each_graph_against_one_root() -> None:
    batch, d1 = world()["batch"], [trusted(world()["d1_cert"])]
    results = [check(m, m.uri + "#e2", d1) for m in batch]
    assert [(r["verified"], r["problem"], r["certificate_problem"]) for r in results] == [
        (True, None, None)
    ] * 3
    # the key the audit groups by: every graph of the batch signs the same root
    assert len({r["signed"] for r in results}) == 1
    assert results[0]["signed"] != lines_of(batch[0], batch[0].uri + "#e2")


def test_a_tampered_batch_signature_graph_does_not_verify() -> None:
    message, d1 = world()["batch"][1], [trusted(world()["d1_cert"])]
    graph = message.uri + "#e2"
    sig = describe_graph(graph + "s", lines_of(message, graph + "s"))
    assert sig["batch"]["index"] == 1 and len(sig["batch"]["path"]) == 2

    def judge(batch: dict[str, Any], lines: list[str] | None = None) -> dict[str, Any]:
        prepared = signed_input(
            graph, D1, lines or lines_of(message, graph), batch, sig["certificate"], d1
        )
        return prepared | judge_signature(D1, sig["value"], prepared["signed"], d1)

    assert judge(sig["batch"])["verified"]
    flipped = [bytes([sig["batch"]["path"][0][0] ^ 1]) + sig["batch"]["path"][0][1:]]
    path = flipped + sig["batch"]["path"][1:]
    assert judge(sig["batch"] | {"path": path})["reason"] == "signature does not verify"
    assert judge(sig["batch"] | {"index": 0})["reason"] == "signature does not verify"
    short = judge(sig["batch"] | {"path": path[:1]})
    assert short["signed"] is None and short["problem"].startswith("batch signature: ")
    altered = [line.replace('"9"', '"10"') for line in lines_of(message, graph)]
    assert altered != lines_of(message, graph)
    assert judge(sig["batch"], altered)["reason"] == "signature does not verify"


def test_a_carried_certificate_must_be_the_logged_one() -> None:
    message, cert, d1_cert = world()["message"], world()["cert"], world()["d1_cert"]
    graph = message.uri + "#c1"
    assert check(message, graph, [trusted(cert)])["certificate_problem"] is None
    sig = describe_graph(graph + "s", lines_of(message, graph + "s"))
    other = certificate_problem(PUB, sig["certificate"], [trusted(d1_cert)])
    assert other == f"carries a signer certificate other than the one <{PUB}> logged"
    assert certificate_problem(PUB, sig["certificate"], [trusted(d1_cert), trusted(cert)]) is None
    assert certificate_problem(PUB, None, [trusted(d1_cert)]) is None
    assert certificate_problem(PUB, sig["certificate"], []) is None  # unknown signer: said so


def test_certificate_facts_judge_the_issuer_not_the_time() -> None:
    ca, cert = world()["ca"], world()["cert"]
    facts = certificate_facts(PUB, cert, ca)
    credential = certs.credential_from_pem(cert.encode())
    assert facts == {
        "problem": None,
        "serial": str(credential.serial),
        "name": "pub",
        "role": "publisher",
        "not_before_ms": int(credential.not_before.timestamp() * 1000),
        "not_after_ms": int(credential.not_after.timestamp() * 1000),
    }
    # long expired at the time of the audit: still the node's, judged per signature
    assert check_certificate(PUB, cert, ca) is None
    rogue = certificate_facts(PUB, world()["rogue"], ca)
    assert "not issued by the trusted CA" in str(rogue["problem"])
    assert "not <https://d1" in str(certificate_facts(D1, cert, ca)["problem"])


def test_judge_signature_names_every_certificate_it_verifies_under() -> None:
    message, cert = world()["message"], world()["cert"]
    graph = message.uri + "#e1"
    signed = signed_input(graph, PUB, lines_of(message, graph), None, None, None)["signed"]
    value = describe_graph(graph + "s", lines_of(message, graph + "s"))["value"]
    renewed = certs.issue(*certs.create_ca("ca", now=NOW), name="pub", role="publisher", now=NOW)
    held = [
        {"cert_pem": cert, "problem": None, "serial": "7"},
        {"cert_pem": renewed[0].decode(), "problem": None, "serial": "8"},  # another key
    ]
    assert judge_signature(PUB, value, signed, held)["keys"] == ["7"]


def test_a_carried_certificate_must_be_one_the_ca_issued_to_the_signer() -> None:
    cert, d1 = world()["cert"], world()["d1_cert"]
    der = ssl.PEM_cert_to_DER_cert(cert)
    held = [{"cert_pem": cert, "problem": None}, {"cert_pem": d1, "problem": None}]
    assert certificate_problem(PUB, der, held) is None
    wrong = [{"cert_pem": cert, "problem": "certificate is for <x>, not <y>"}]
    assert certificate_problem(PUB, der, wrong) == (
        f"carries a signer certificate that is not <{PUB}>'s: certificate is for <x>, not <y>"
    )
    assert "other than the one" in str(certificate_problem(PUB, der, held[1:]))


def test_read_revocations_takes_the_times_from_the_crls_known_at_the_time() -> None:
    ca = certs.create_ca("ca", now=NOW)
    when = NOW + timedelta(hours=2)
    crl = certs.create_crl(
        *ca, [(12, when), (13, NOW)], now=NOW + timedelta(hours=3),
        next_update=NOW + timedelta(days=1), number=1,
    )
    ms = int(when.timestamp() * 1000)
    assert read_revocations([crl], ca[0], at=NOW + timedelta(days=30)) == [
        ("12", ms), ("13", int(NOW.timestamp() * 1000))
    ]
    assert read_revocations([crl], ca[0], at=NOW) == []  # issued after the audit's time
    other = certs.create_ca("other", now=NOW)
    with pytest.raises(UsageError, match="cannot use CRL"):
        read_revocations([crl], other[0], at=NOW + timedelta(days=1))
