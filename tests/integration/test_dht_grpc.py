"""Real grpc.aio servers with mutual TLS on 127.0.0.1 discovering each other through the DHT.

Six sites in one process, each a grpc.aio server on port 0 serving the Dht service (plus
health and reflection, as the daemon does), certificates from a temporary CA. Each site
bootstraps through the one started before it — no registry — announces its block of the
sample ontology (ontology/production.owl), and then every site answers ``sites_serving`` and
``find_uplink`` correctly. Bad input gets the documented status codes; a site that leaves
disappears.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from disseminator.dht import (
    DHT_SERVICE_NAME,
    DhtConfig,
    DhtNode,
    add_dht_to_server,
    create_grpc_node,
    key_for_concept,
)
from disseminator.dht import _convert as convert
from xdn import certs
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, server_credentials
from xdn.ontology import Ontology, load_ontology
from xdn.wire.v1 import dht_pb2 as pb
from xdn.wire.v1 import dht_pb2_grpc

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BLOCKS = {
    "root": "ProductionProcess",
    "wo": "WorkOrder",
    "prod": "Production",
    "qi": "QualityInspection",
    "ir": "InspectionResult",
    "rd": "ResourceDetails",
}
EXPECTED_UPLINK = {
    "root": None,
    "wo": "root",
    "prod": "wo",
    "qi": "wo",
    "ir": "qi",
    "rd": "root",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Site:
    name: str
    tls: TlsFiles
    server: grpc.aio.Server
    node: DhtNode


def write_credentials(workdir: Path, roles: dict[str, str]) -> dict[str, TlsFiles]:
    """A temporary CA and one certificate per name (in its role), written and read back."""
    workdir.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    ca_pem, ca_key = certs.create_ca("xdn integration CA", now=now)
    (workdir / "ca.pem").write_bytes(ca_pem)
    out = {}
    for name, role in roles.items():
        block = {certs.BLOCK_FIELD: BLOCKS.get(name, "WorkOrder")} if role == "site" else {}
        cert, key = certs.issue(
            ca_pem, ca_key, name=name, role=role, attributes=block, hosts=["127.0.0.1"], now=now
        )
        (workdir / f"{name}.pem").write_bytes(cert)
        (workdir / f"{name}.key").write_bytes(key)
        out[name] = TlsFiles(
            cert_pem=(workdir / f"{name}.pem").read_bytes(),
            key_pem=(workdir / f"{name}.key").read_bytes(),
            ca_pem=(workdir / "ca.pem").read_bytes(),
        )
    return out


async def start_site(name: str, tls: TlsFiles, ontology: Ontology) -> Site:
    """What disseminator/daemon.py does, DHT included: bind, build the node, register, start."""
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    port = server.add_secure_port("127.0.0.1:0", server_credentials(tls))
    node = create_grpc_node(
        tls=tls,
        address=f"127.0.0.1:{port}",
        ontology=ontology,
        config=DhtConfig(k=20, alpha=3, rpc_timeout_s=5.0),
    )
    add_dht_to_server(server, node)
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    reflection.enable_server_reflection(
        (DHT_SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    await server.start()
    return Site(name=name, tls=tls, server=server, node=node)


@asynccontextmanager
async def network(workdir: Path) -> AsyncIterator[tuple[dict[str, Site], dict[str, TlsFiles]]]:
    ontology = load_ontology([ROOT / "ontology" / "production.owl"])
    tls = write_credentials(workdir, {**dict.fromkeys(BLOCKS, "site"), "alice": "subscriber"})
    sites: dict[str, Site] = {}
    try:
        previous: Site | None = None
        for name in BLOCKS:
            site = await start_site(name, tls[name], ontology)
            sites[name] = site
            await site.node.bootstrap([previous.node.address] if previous else [])
            previous = site
        for name, block in BLOCKS.items():
            await sites[name].node.announce(block)
        yield sites, tls
    finally:
        for site in sites.values():
            await site.node.stop(leave=False)
            await site.server.stop(grace=None)


@asynccontextmanager
async def raw_stub(tls: TlsFiles, address: str) -> AsyncIterator[dht_pb2_grpc.DhtStub]:
    channel = grpc.aio.secure_channel(address, channel_credentials(tls), options=CHANNEL_OPTIONS)
    try:
        yield dht_pb2_grpc.DhtStub(channel)
    finally:
        await channel.close()


def test_sites_discover_each_other_and_find_their_uplinks(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with network(tmp_path) as (sites, _):
            for site in sites.values():  # every site knows all the others now
                assert len(site.node.table) == len(sites) - 1
            for asker in sites.values():
                serving = await asker.node.sites_serving("Measurement")
                assert [r.site for r in serving] == ["ir", "qi", "wo", "root"]
                assert serving[0].address == sites["ir"].node.address
                assert [r.site for r in await asker.node.sites_serving("Material")] == [
                    "rd",
                    "root",
                ]
                uplinks = {
                    name: await asker.node.find_uplink(block) for name, block in BLOCKS.items()
                }
                assert {n: u.site if u else None for n, u in uplinks.items()} == EXPECTED_UPLINK
                for name, uplink in uplinks.items():
                    if uplink is not None:
                        assert uplink.address == sites[EXPECTED_UPLINK[name] or ""].node.address

    asyncio.run(scenario())


def test_a_site_that_leaves_is_no_longer_found(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with network(tmp_path) as (sites, _):
            qi = sites["qi"]
            await qi.node.stop(leave=True)  # polite: signed withdrawal
            await qi.server.stop(grace=None)
            asker = sites["prod"].node
            assert [r.site for r in await asker.sites_serving("Measurement")] == [
                "ir",
                "wo",
                "root",
            ]
            uplink = await sites["ir"].node.find_uplink("InspectionResult")
            assert uplink is not None and uplink.site == "wo"

    asyncio.run(scenario())


def test_bad_input_gets_typed_status_codes(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with network(tmp_path) as (sites, tls):
            target = sites["wo"].node.address
            async with raw_stub(tls["rd"], target) as stub:
                with pytest.raises(grpc.aio.AioRpcError) as bad_id:
                    await stub.FindNode(pb.DhtFindNodeRequest(target=b"short"))
                assert bad_id.value.code() is grpc.StatusCode.INVALID_ARGUMENT
                assert "target: node id must be 32 bytes" in (bad_id.value.details() or "")

                with pytest.raises(grpc.aio.AioRpcError) as bad_nonce:
                    await stub.Ping(pb.DhtPingRequest(nonce=b"x"))
                assert bad_nonce.value.code() is grpc.StatusCode.INVALID_ARGUMENT

                with pytest.raises(grpc.aio.AioRpcError) as bad_sender:
                    await stub.Ping(pb.DhtPingRequest(sender_address="nope", nonce=bytes(32)))
                assert bad_sender.value.code() is grpc.StatusCode.INVALID_ARGUMENT

                key = key_for_concept("WorkOrder").to_bytes()
                with pytest.raises(grpc.aio.AioRpcError) as no_record:
                    await stub.Store(pb.DhtStoreRequest(key=key))
                assert no_record.value.code() is grpc.StatusCode.INVALID_ARGUMENT

                with pytest.raises(grpc.aio.AioRpcError) as malformed:
                    await stub.Store(
                        pb.DhtStoreRequest(key=key, record=pb.DhtSiteRecord(site="wo"))
                    )
                assert malformed.value.code() is grpc.StatusCode.INVALID_ARGUMENT

                genuine = sites["wo"].node.announced
                assert genuine is not None
                forged = replace(
                    genuine, address="127.0.0.1:1", issued_at_ms=genuine.issued_at_ms + 1
                )
                with pytest.raises(grpc.aio.AioRpcError) as forgery:
                    await stub.Store(
                        pb.DhtStoreRequest(key=key, record=convert.record_to_pb(forged))
                    )
                assert forgery.value.code() is grpc.StatusCode.UNAUTHENTICATED
                assert "signature" in (forgery.value.details() or "")

                wrong_key = key_for_concept("Production").to_bytes()
                with pytest.raises(grpc.aio.AioRpcError) as misfiled:
                    await stub.Store(
                        pb.DhtStoreRequest(key=wrong_key, record=convert.record_to_pb(genuine))
                    )
                assert misfiled.value.code() is grpc.StatusCode.INVALID_ARGUMENT

                # the node survived all of it and still answers
                reply = await stub.FindValue(pb.DhtFindValueRequest(key=key))
                assert [r.site for r in reply.records] == ["wo"]
                assert [r.address for r in reply.records] == [genuine.address]

            # a subscriber may read, but does not become a DHT contact
            async with raw_stub(tls["alice"], target) as stub:
                await stub.FindNode(
                    pb.DhtFindNodeRequest(sender_address="127.0.0.1:9", target=bytes(32))
                )
            await sites["wo"].node.contacts.settle()
            assert all(c.address != "127.0.0.1:9" for c in sites["wo"].node.table.contacts())

            # a client with a certificate from another CA never gets past the TLS handshake
            other = write_credentials(tmp_path / "rogue", {"rogue": "site"})
            async with raw_stub(other["rogue"], target) as stub:
                with pytest.raises(grpc.aio.AioRpcError) as rogue:
                    await stub.FindNode(pb.DhtFindNodeRequest(target=bytes(32)), timeout=5)
                assert rogue.value.code() is grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())
