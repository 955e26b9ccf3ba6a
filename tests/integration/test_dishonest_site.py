"""A dishonest site cannot make a subscriber or a publisher rely on its word.

Each case starts the default network with one site replaced by the dishonest-site double
(:mod:`dishonest_site`: the real daemon, patched in its own process to misbehave in one way)
and shows the attack ends in a typed refusal the subscriber records, no key sealed to anyone who
should not have it, and later documents still arriving for whoever is entitled.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from dishonest_site import launcher  # tests/integration is on sys.path (pytest's rootdir)

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from publisher.lkh_store import LkhStore
from xdn import certs, provenance
from xdn.errors import ProvenanceError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.lkh import MemberKeys
from xdn.paths import REPO_ROOT
from xdn.rdf import Quad, parse_nquads
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

pytestmark = [pytest.mark.integration, pytest.mark.long]

PUBLISHER = "production-dept"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
CRED1 = {"OU": "Cred1"}  # granted production-dept's concepts


@pytest.fixture
def dishonest(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalNetwork]:
    """The default network whose site ``request.param[0]`` runs fault ``request.param[1]``."""
    site, fault = request.param
    net = LocalNetwork(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    # mallory: a subscriber certificate a dishonest site may try to slip in.
    issue_party(net.certs, Party(name="mallory", role="subscriber", attributes=CRED1),
                now=datetime.now(UTC))
    fault = fault.replace("{certs}", str(net.certs))
    net.sites[site] = dataclasses.replace(net.sites[site], launcher=launcher(fault))
    try:
        net.start_sites()
        assert f"fault {fault} installed" in net.output(site)
        yield net
    finally:
        net.stop()


def _publish(network: LocalNetwork, document_id: str, *wait_for: str) -> str:
    return network.publish(PUBLISHER, [SAMPLE], wait_for=wait_for, extra=("--id", document_id))


def _documents(network: LocalNetwork, subscriber: str) -> list[str]:
    return [str(r["document"]) for r in network.received(subscriber)]


def _refusals(network: LocalNetwork, subscriber: str) -> list[dict[str, object]]:
    path = network.inbox(subscriber) / "refused.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _groups(network: LocalNetwork, subscriber: str) -> dict[str, int]:
    """The subscriber's key-tree states: concept → epoch."""
    with sqlite3.connect(network.workdir / "state" / subscriber / "keyring.sqlite") as db:
        rows = db.execute("SELECT concept, state FROM groups").fetchall()
    return {concept: MemberKeys.from_bytes(bytes(state)).epoch for concept, state in rows}


def _subscriber(network: LocalNetwork, name: str, site: str) -> None:
    issue_party(network.certs, Party(name=name, role="subscriber", attributes=CRED1),
                now=datetime.now(UTC))
    network.subscribers[name] = SubscriberSpec(name=name, site=site, attributes=CRED1)
    network.start_subscriber(name)
    network.wait_subscribed(name)


@pytest.mark.parametrize("dishonest", [("d2", "tamper-rekey")], indirect=True)
def test_an_altered_rekey_is_refused_and_the_subscriber_catches_up(
    dishonest: LocalNetwork,
) -> None:
    net = dishonest
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    _publish(net, "doc-1", "alice")
    assert wait_until(lambda: _documents(net, "alice") == ["doc-1"])
    before = _groups(net, "alice")

    _subscriber(net, "carol", site="d2")  # her join rekeys alice's groups: d2 alters the rekeys
    output = _publish(net, "doc-2", "carol")
    assert "rekeyed: none" not in output
    assert wait_until(lambda: "doc-2" in _documents(net, "carol"))
    assert wait_until(lambda: any(r.get("key_message") == "rekey" for r in _refusals(net, "alice")))
    assert _groups(net, "alice").keys() == before.keys()  # refused: nothing dropped

    # doc-2 needs a later epoch than alice holds: she asks for her path, which the key service
    # sends when it next runs; the document then opens.
    def caught_up() -> bool:
        net.publish(PUBLISHER, [])  # no document: synchronise keys (answers path refreshes)
        return wait_until(lambda: "doc-2" in _documents(net, "alice"), timeout=5)

    assert wait_until(caught_up, timeout=90), net.output("alice")
    assert _documents(net, "alice") == ["doc-1", "doc-2"]


@pytest.mark.parametrize("dishonest", [("d2", "forge-enrolment")], indirect=True)
def test_a_forged_far_future_enrolment_is_refused_and_not_adopted(
    dishonest: LocalNetwork,
) -> None:
    net = dishonest
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    _publish(net, "doc-1", "alice")
    assert wait_until(
        lambda: any(r.get("key_message") == "enrolment" for r in _refusals(net, "alice"))
    ), net.output("alice")
    refused = [r for r in _refusals(net, "alice") if r.get("key_message") == "enrolment"]
    assert all("signature" in str(r["reason"]) for r in refused), refused
    assert all(epoch < 1000 for epoch in _groups(net, "alice").values())
    assert _documents(net, "alice") == []  # held for keys it never got, not opened with fakes


@pytest.mark.parametrize("dishonest", [("d2", "forge-documents")], indirect=True)
def test_forged_documents_are_refused_and_never_held(dishonest: LocalNetwork) -> None:
    net = dishonest
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    _publish(net, "doc-1", "alice")
    _publish(net, "doc-2", "alice")
    assert wait_until(
        lambda: {r.get("document") for r in _refusals(net, "alice")} >= {"doc-1", "doc-2"}
    ), net.output("alice")
    assert _documents(net, "alice") == []
    # d2 dropped every key message: the forged documents could only have been held, and were
    # refused as unverifiable instead.
    assert {r.get("kind") for r in _refusals(net, "alice")} == {"unverified"}
    with sqlite3.connect(net.workdir / "state" / "alice" / "keyring.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM held_documents").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM groups").fetchone() == (0,)
    # each refusal reaches the audit: a failure notice alice signed, naming the site (#13)
    assert wait_until(lambda: _notified(net, "alice") >= {"doc-1", "doc-2"})
    assert {n.received_from for n in _notices(net, "alice")} == {certs.node_uri("d2")}


def _notified(network: LocalNetwork, subscriber: str) -> set[str | None]:
    """The documents the subscriber's failure notices name (none while one is half-written)."""
    try:
        return {n.document_id for n in _notices(network, subscriber)}
    except ProvenanceError:
        return set()


def _notices(network: LocalNetwork, subscriber: str) -> list[provenance.RefusalFacts]:
    """The failure notices in a party's (a subscriber's or a site's) provenance log, each
    verified under its certificate (complete lines only: the party may be appending)."""
    data = (network.logs / f"{subscriber}.nq").read_bytes()
    messages: dict[str, set[Quad]] = defaultdict(set)
    for quad in parse_nquads(data[: data.rfind(b"\n") + 1]):
        if quad.g is not None and "/refusal/" in quad.g.value:
            messages[quad.g.value.split("#")[0]].add(quad)
    cert = TlsFiles.from_dir(network.certs, subscriber).cert_pem
    keys = {certs.node_uri(subscriber): certs.public_key_of(cert)}
    out = []
    for quads in messages.values():
        notice = provenance.Message(quads=frozenset(quads))
        provenance.verify_message(notice, keys)
        assert notice.refusal is not None
        out.append(notice.refusal)
    return out


def _member_id(folder: Path, name: str) -> str:
    return certs.credential_from_pem(TlsFiles.from_dir(folder, name).cert_pem).member_id


@pytest.mark.parametrize(
    "dishonest", [("d1", "list-member:{certs}/mallory.pem")], indirect=True
)
def test_a_root_listing_a_revoked_subscriber_gets_no_key_sealed_to_her(
    dishonest: LocalNetwork,
) -> None:
    net = dishonest
    mallory = _member_id(net.certs, "mallory")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "certs", "revoke", "--dir", str(net.certs),
         "--name", "mallory"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    _publish(net, "doc-1", "alice")
    assert wait_until(lambda: _documents(net, "alice") == ["doc-1"])
    groups = LkhStore(net.workdir / "state" / PUBLISHER / "keys.sqlite", publisher=PUBLISHER)
    try:
        members = {m for group in groups.load_all().values() for m in group.members()}
    finally:
        groups.close()
    assert _member_id(net.certs, "alice") in members
    assert mallory not in members


@pytest.mark.parametrize("dishonest", [("d1", "forge-provenance:doc-forged")], indirect=True)
def test_a_site_refuses_a_forged_provenance_chain_and_serves_on(dishonest: LocalNetwork) -> None:
    net = dishonest
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    _publish(net, "doc-forged")
    # d1 altered the publisher's envelope and signed its own hop over it: d2 runs Algorithm 2
    # before it routes or signs anything, refuses the document, counts it ...
    assert wait_until(
        lambda: net.metric("d2", "xdn_documents_refused_total", kind="provenance") >= 1
    ), net.output("d2")
    # ... and signs a failure notice naming the graph at fault.
    assert wait_until(lambda: "doc-forged" in _notified(net, "d2")), net.output("d2")
    (notice,) = [n for n in _notices(net, "d2") if n.document_id == "doc-forged"]
    assert notice.kind == "provenance"
    assert "does not verify graph <https://production-dept.xdn.example/msg/doc-forged/v1#e1>" in (
        notice.reason
    )
    assert notice.received_from == certs.node_uri("d1")
    # d2 serves on: the next (honestly relayed) document reaches alice; the forged one never.
    _publish(net, "doc-ok", "alice")
    assert "doc-forged" not in _documents(net, "alice")
    assert net.metric("d2", "xdn_documents_refused_total", kind="provenance") == 1


@pytest.mark.parametrize("dishonest", [("d2", "drop-document:doc-2")], indirect=True)
def test_a_withheld_document_is_noticed_and_asked_for(dishonest: LocalNetwork) -> None:
    net = dishonest
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    for document_id in ("doc-1", "doc-2", "doc-3"):
        _publish(net, document_id, "alice")
    # doc-3's signed back pointers (or the checkpoint after doc-2) name doc-2: alice asks her
    # site for it, and the site replays it from the documents it retains.
    assert wait_until(
        lambda: sorted(_documents(net, "alice")) == ["doc-1", "doc-2", "doc-3"], timeout=60
    ), net.output("alice")
    assert "missing document #2 of production-dept; asking the site" in net.output("alice")


@pytest.mark.parametrize("dishonest", [("d2", "drop-concept:Measurement")], indirect=True)
def test_a_granted_concept_dropped_and_hidden_from_the_grants_is_flagged(
    dishonest: LocalNetwork,
) -> None:
    net = dishonest
    net.start_subscriber("alice")
    granted = net.wait_subscribed("alice")["grants"]
    assert "Measurement" not in granted[PUBLISHER]  # type: ignore[index]  # the site's word
    _publish(net, "doc-1", "alice")
    assert wait_until(lambda: _documents(net, "alice") == ["doc-1"])

    def gaps() -> list[dict[str, object]]:
        path = net.inbox("alice") / "gaps.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    assert wait_until(
        lambda: any("Measurement" in g["concepts"] for g in gaps())  # type: ignore[operator]
    ), net.output("alice")
    assert "signed policy grants us" in net.output("alice")


async def _listed_by(network: LocalNetwork, site: str) -> set[str]:
    """Who ``site`` lists as members when the publisher asks."""
    tls = TlsFiles.from_dir(network.certs, PUBLISHER)
    async with grpc.aio.secure_channel(
        network.address(site), channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        reply = await pb_grpc.DisseminatorStub(channel).GetMembership(
            pb.MembershipRequest(publisher=PUBLISHER), timeout=30
        )
    return {m.subscriber for m in reply.members}


def _members(network: LocalNetwork) -> set[str]:
    """Who the publisher's key service holds in its groups (member ids)."""
    groups = LkhStore(network.workdir / "state" / PUBLISHER / "keys.sqlite", publisher=PUBLISHER)
    try:
        return {m for group in groups.load_all().values() for m in group.members()}
    finally:
        groups.close()


@pytest.mark.parametrize("dishonest", [("d1", "keep-members")], indirect=True)
def test_a_root_keeping_a_departed_member_delays_her_rekey_by_one_lease_at_most(
    dishonest: LocalNetwork,
) -> None:
    net = dishonest
    alice = _member_id(net.certs, "alice")
    net.start_subscriber("alice", extra=("--lease", "4"))
    net.wait_subscribed("alice")
    _publish(net, "doc-1", "alice")
    assert wait_until(lambda: _documents(net, "alice") == ["doc-1"])
    assert alice in _members(net)

    net.stop_subscriber("alice")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", net.address("d2"),
         "--name", "alice", "--certs", str(net.certs)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert alice in asyncio.run(_listed_by(net, "d1"))  # the dishonest root still lists her
    # d1 still lists her, with her last lease: until it lapses she may stay in the groups; once
    # it has, the next publication rekeys her out, whatever d1 says. (Without leases, never.)
    published = iter(range(2, 1000))

    def rekeyed_out() -> bool:
        _publish(net, f"doc-{next(published)}")
        return alice not in _members(net)

    assert wait_until(rekeyed_out, timeout=60)
