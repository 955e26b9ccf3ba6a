"""Document ids that need escaping, published by real processes: ``order 7.xml``, ``café.xml``
and ids given with ``--id`` (one with ``/``, one with ``../``) each reach alice, verified,
under their original text, with a view file inside her views folder, and a provenance chain
that verifies hop by hop (publisher → d1 → d2 → alice's receipt) against the CA-certified
keys the nodes' logs describe."""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, wait_until
from xdn import certs, crypto, ids, provenance
from xdn.rdf import Quad, parse_nquads

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
FILE_STEMS = ("order 7", "café")  # ids from file names
GIVEN_IDS = ("2024/03/order", "../../escape")  # ids given with --id


def _graphs(logs: list[Path]) -> dict[str, list[Quad]]:
    """Every graph of the given provenance logs, by name (a graph several nodes logged — a
    receipt, which each site on its way up logs too — once)."""
    graphs: dict[str, set[Quad]] = defaultdict(set)
    for log in logs:
        for quad in parse_nquads(log.read_bytes()):
            assert quad.g is not None
            graphs[quad.g.value].add(quad)
    return {name: sorted(quads, key=repr) for name, quads in graphs.items()}


def _node_keys(graphs: dict[str, list[Quad]], ca_pem: bytes) -> dict[str, crypto.PublicKey]:
    """Node URI → public key, from the logs' node descriptions, each certificate CA-checked."""
    keys = {}
    for name, quads in graphs.items():
        if provenance.graph_type(name, quads) == "node":
            node_uri, cert_pem = provenance.read_node_description(name, quads)
            certs.verify_certificate(cert_pem, ca_pem, at=datetime.now(UTC))
            keys[node_uri] = certs.public_key_of(cert_pem)
    return keys


def _message(
    graphs: dict[str, list[Quad]], receipt_graph: str
) -> tuple[provenance.Message, list[str]]:
    """The whole message a receipt envelope ends, rebuilt from the nodes' logs, and the
    senders of its hops from the receipt back to the publication."""
    names, senders = {receipt_graph + "s"}, []
    name: str | None = receipt_graph
    while name is not None:
        envelope = provenance.read_envelope(name, graphs[name])
        senders.append(envelope.sender)
        names.add(name)
        names.update(r.signature_graph for r in envelope.references)
        for content in envelope.content:
            names.update((content, content + "s"))
        name = envelope.contains
    return provenance.Message(quads=frozenset(q for n in names for q in graphs[n])), senders


def test_ids_needing_escapes_are_published_received_and_their_provenance_verifies(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    docs = network.workdir / "docs"
    docs.mkdir()
    files = [docs / f"{stem}.xml" for stem in FILE_STEMS]
    for path in files:
        shutil.copyfile(SAMPLE_DOCUMENTS[PUBLISHER], path)
    out = network.publish(PUBLISHER, files, wait_for=("alice",))
    for document_id in GIVEN_IDS:
        out += network.publish(
            PUBLISHER, [SAMPLE_DOCUMENTS[PUBLISHER]], extra=("--id", document_id)
        )
    expected = {*FILE_STEMS, *GIVEN_IDS}
    for document_id in expected:
        assert f"published {document_id} v1" in out, out

    def received() -> set[str]:
        return {str(r["document"]) for r in network.received("alice")}

    assert wait_until(lambda: received() >= expected, 60), (received(), network.output("alice"))
    assert "refused" not in network.output("alice")

    inbox = network.inbox("alice")
    views = sorted(p.relative_to(inbox) for p in inbox.rglob("*.xml"))
    assert views == sorted(
        Path("views", PUBLISHER, f"{ids.file_stem(d)}.v1.xml") for d in expected
    ), views
    assert not list(network.workdir.glob("inbox/escape*"))  # nothing climbed out

    logs = network.workdir / "logs"
    graphs = _graphs([logs / f"{n}.nq" for n in (PUBLISHER, "d1", "d2", "alice")])
    keys = _node_keys(graphs, (network.certs / "ca.pem").read_bytes())
    receipts = {}
    for name, quads in graphs.items():
        if provenance.graph_type(name, quads) == "envelope":
            envelope = provenance.read_envelope(name, quads)
            if envelope.kind == "receipt":
                receipts[envelope.document_id] = name
    assert set(receipts) >= expected
    for document_id in expected:
        message, senders = _message(graphs, receipts[document_id])
        provenance.verify_message(message, keys)
        assert senders == [certs.node_uri(n) for n in ("alice", "d2", "d1", PUBLISHER)]
        assert message.document_id == document_id
        assert f"/msg/{ids.segment(document_id)}/v1" in message.uri
