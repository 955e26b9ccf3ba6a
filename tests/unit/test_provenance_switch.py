"""The provenance off switch (``XDN_BENCH_PROVENANCE=off``, for the latency benchmark only).

Off, a site relays a document that carries no provenance without signing anything and a
subscriber accepts it without a receipt. On (the default), a document without provenance is
refused as before, by the site and by the subscriber.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from deploy.network import LocalNetwork
from disseminator.planning import Planner
from disseminator.routing import Registration, RoutingTable
from publisher.client import Publisher, PublisherSetup
from subscriber.session import Session, SubscriberSetup
from tests.unit.chain_fixtures import signer_of
from xdn import certs, provenance
from xdn.errors import ProvenanceError
from xdn.grpc_tls import TlsFiles, server_credentials
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import load_signed_policy
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

PUBLISHER = "production-dept"
GROUP_KEY = b"\x22" * 32  # the group key of the shared `document` fixture (conftest)
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
Document = tuple[pb.Dissemination, dict[str, bytes]]


@pytest.fixture(params=["on", "off"])
def switch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    value: str = request.param
    monkeypatch.setenv(provenance.SWITCH, value)
    return value


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, True), ("", True), ("on", True), ("0", True), ("no", True),
     ("off", False), (" OFF ", False), ("Off", False)],
)
def test_only_off_switches_provenance_off(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    if value is None:
        monkeypatch.delenv(provenance.SWITCH, raising=False)
    else:
        monkeypatch.setenv(provenance.SWITCH, value)
    assert provenance.enabled() is expected


def _bare(document: Document) -> pb.Dissemination:
    diss = pb.Dissemination()
    diss.CopyFrom(document[0])
    diss.provenance = b""
    return diss


def _planner(pki: dict[str, tuple[bytes, bytes]]) -> Planner:
    """Site d1 of the shared ``pki`` (conftest.py), with a local subscriber and a downlink."""
    table = RoutingTable()
    concepts = frozenset(ONTOLOGY.concepts)
    table.local["alice"] = Registration(
        subscriber="alice", certificate=b"", grants={PUBLISHER: concepts}
    )
    table.set_link_members(
        "d2", [Registration(subscriber="bob", certificate=b"", grants={PUBLISHER: concepts})]
    )
    return Planner(
        table=table, ontology=ONTOLOGY, signer=signer_of("d1", pki["d1"]),
        now_ms=lambda: int(datetime.now(UTC).timestamp() * 1000),
        chains=provenance.ChainVerifier(pki["ca"][0]),
    )


def _relayed_provenance(payload: bytes) -> bytes:
    return bytes(pb.Delivery.FromString(payload).dissemination.provenance)


def test_a_site_refuses_a_document_without_provenance_unless_switched_off(
    published: Document, pki: dict[str, tuple[bytes, bytes]], switch: str
) -> None:
    planner, bare = _planner(pki), _bare(published)
    if switch == "on":
        with pytest.raises(ProvenanceError):
            planner.document(bare)
        with pytest.raises(ProvenanceError):
            planner.retained(bare, "carol", ONTOLOGY.concepts)
        return
    plan = planner.document(bare)
    assert {(a.kind, a.name) for a in plan.appends} == {("subscriber", "alice"), ("link", "d2")}
    assert [_relayed_provenance(a.delivery()) for a in plan.appends] == [b"", b""]
    assert plan.graphs == []  # nothing signed, nothing for the log
    retained = planner.retained(bare, "carol", ONTOLOGY.concepts)
    assert retained is not None and retained[1] == b""
    assert _relayed_provenance(retained[0].delivery()) == b""


def test_switched_off_a_site_still_signs_a_hop_on_provenance_it_receives(
    published: Document, pki: dict[str, tuple[bytes, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(provenance.SWITCH, "off")
    plan = _planner(pki).document(published[0])
    assert len(plan.graphs) == 2
    for append in plan.appends:
        relayed = provenance.Message.from_nquads(_relayed_provenance(append.delivery()))
        assert relayed.uri.startswith(certs.node_uri("d1"))  # a hop minted (and signed) by d1


def _session(tmp_path: Path, pki: dict[str, tuple[bytes, bytes]]) -> Session:
    cert_pem, key_pem = pki["carol"]
    setup = SubscriberSetup(
        name="carol", tls=TlsFiles(cert_pem=cert_pem, key_pem=key_pem, ca_pem=pki["ca"][0]),
        connect="site:1", out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "carol.nq",
    )

    def clock() -> datetime:
        return datetime.now(UTC)

    session = Session(setup, clock=clock)
    session.report.grants = {PUBLISHER: []}
    return session


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_subscriber_refuses_a_document_without_provenance_unless_switched_off(
    document: Document, pki: dict[str, tuple[bytes, bytes]], tmp_path: Path, switch: str
) -> None:
    bare = _bare(document)
    session = _session(tmp_path, pki)
    try:
        for concept in {f.concept for f in bare.fragments}:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        receipt = session.on_dissemination(bare, sequence=1)
        accepted = _lines(tmp_path / "out" / "received.jsonl")
        refused = _lines(tmp_path / "out" / "refused.jsonl")
    finally:
        session.close()
    assert receipt == b""  # refused, or accepted without a receipt
    if switch == "on":
        assert accepted == [] and [r["kind"] for r in refused] == ["document"]
        assert "condition 2" in str(refused[0]["reason"])
    else:
        assert [r["document"] for r in accepted] == ["order-1"] and refused == []
        log = tmp_path / "carol.nq"
        assert not log.exists() or b"received" not in log.read_bytes()  # no receipt logged


def test_with_provenance_a_subscriber_signs_its_receipt(
    document: Document, pki: dict[str, tuple[bytes, bytes]], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(provenance.SWITCH, "off")  # off concerns only messages without any
    relayed = document[0]  # as d1 relays it to carol
    session = _session(tmp_path, pki)
    try:
        for concept in {f.concept for f in relayed.fragments}:
            session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
        receipt = session.on_dissemination(relayed, sequence=1)
    finally:
        session.close()
    assert b"received" in receipt
    assert b"received" in (tmp_path / "carol.nq").read_bytes()


class _RootSite(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """A root site that keeps what the publisher sends."""

    def __init__(self) -> None:
        self.received: list[pb.Dissemination] = []

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        return pb.Membership(site="d1", standing=pb.SiteStanding(root=True, policy_version=1))

    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        self.received.append(request.dissemination)
        return pb.PublishAck(document_id=request.dissemination.manifest.document_id)


async def _publish(net: LocalNetwork, state: Path) -> pb.Dissemination:
    site = _RootSite()
    server = grpc.aio.server()
    pb_grpc.add_DisseminatorServicer_to_server(site, server)
    port = server.add_secure_port(
        "127.0.0.1:0", server_credentials(TlsFiles.from_dir(net.certs, "d1"))
    )
    await server.start()
    tls = TlsFiles.from_dir(net.certs, PUBLISHER)
    mapping = REPO_ROOT / "ontology" / "mappings" / f"{PUBLISHER}.toml"
    setup = PublisherSetup(
        name=PUBLISHER, tls=tls, ontology=ONTOLOGY, mapping=load_mapping(mapping, ONTOLOGY),
        policy=load_signed_policy(
            net.workdir / "policies" / f"{PUBLISHER}.toml", ONTOLOGY,
            certs.public_key_of(tls.cert_pem), publisher=PUBLISHER,
        ),
        state_dir=state, provenance_log=state / "provenance.nq", connect=f"127.0.0.1:{port}",
    )
    publisher = Publisher(setup)
    try:
        await publisher.publish(SAMPLE)
    finally:
        await publisher.close()
        await server.stop(None)
    (diss,) = site.received
    return diss


def test_a_publisher_sends_and_logs_provenance_unless_switched_off(
    tmp_path: Path, switch: str
) -> None:
    net = LocalNetwork(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()  # the PKI and the signed policy
    diss = asyncio.run(_publish(net, tmp_path / "publisher"))
    assert diss.fragments  # published either way
    log = tmp_path / "publisher" / "provenance.nq"
    logged = log.read_bytes() if log.exists() else b""
    if switch == "on":
        message = provenance.Message.from_nquads(diss.provenance)
        assert f"/msg/{SAMPLE.stem}/" in message.uri
        assert message.uri.encode() in logged
    else:
        assert diss.provenance == b""
        assert b"/msg/" not in logged  # no message logged (a node description may be)
