"""DHT records survive a restart: a node archives what it stores and loads it back, verified,
before it answers; a restarted root then still names the nearest uplink (issue #18, 1)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from disseminator.dht import (
    CaRecordVerifier,
    DhtConfig,
    DhtNode,
    MemoryArchive,
    SiteCredentials,
    key_for_concept,
)
from disseminator.dht._convert import record_to_bytes
from disseminator.dht.testing import FakeClock, MemoryNetwork
from disseminator.store import Store
from tests.unit.test_dht_network import ONTOLOGY, SITE_BLOCKS, ca, clock_start, site
from xdn import certs

__all__ = ["ca", "clock_start", "site"]  # (module fixtures shared with test_dht_network)

Site = Callable[[str], SiteCredentials]
CHAIN = ("root", "wo", "prod")  # ProductionProcess ⊃ WorkOrder ⊃ Production


def _network(ca: tuple[bytes, bytes], revoked: set[int] | None = None) -> MemoryNetwork:
    gone = revoked if revoked is not None else set()
    return MemoryNetwork(
        ontology=ONTOLOGY,
        verifier=CaRecordVerifier(ca_pem=ca[0], revoked=lambda: frozenset(gone)),
        clock=FakeClock(),
        config=DhtConfig(k=20),
    )


async def _chain(net: MemoryNetwork, site: Site, *, archived: bool) -> dict[str, DhtNode]:
    """root, then wo and prod bootstrapping through root (as a network's launcher does)."""
    nodes: dict[str, DhtNode] = {}
    for name in CHAIN:
        node = net.add_node(
            credentials=site(name), address=f"{name}.sites.test:7000",
            archive=MemoryArchive() if archived else None,
        )
        if name != "root":
            await node.bootstrap([nodes["root"].address])
        await node.announce(SITE_BLOCKS[name])
        nodes[name] = node
    await net.settle()
    return nodes


async def _restart(net: MemoryNetwork, node: DhtNode, name: str, root: str) -> DhtNode:
    """Restart ``node`` as the daemon does: restore, join (through ``root``), announce."""
    again = await net.restart(node.address)
    await again.bootstrap([root] if again.address != root else [])
    await again.announce(SITE_BLOCKS[name])
    await net.settle()
    return again


@pytest.mark.parametrize("archived", [True, False], ids=["archived", "in-memory only"])
def test_a_leaf_restarted_after_the_root_finds_its_nearest_uplink(
    ca: tuple[bytes, bytes], site: Site, archived: bool
) -> None:
    """The campaign's case: the root restarts, then the leaf. The leaf joins through the root,
    which knows nobody any more; only what the root stored before it went down can name wo.
    Without an archive the leaf is told of the root alone (the fault the test guards)."""

    async def scenario() -> str | None:
        net = _network(ca)
        nodes = await _chain(net, site, archived=archived)
        root = nodes["root"].address
        await _restart(net, nodes["root"], "root", root)
        prod = await _restart(net, nodes["prod"], "prod", root)
        uplink = await prod.find_uplink("Production")
        await net.stop_all()
        return None if uplink is None else uplink.site

    found = asyncio.run(scenario())
    if archived:
        assert found == "wo"
    else:  # the fault, shown: a farther ancestor (this is why records are archived)
        assert found == "root"


def test_a_restarted_root_knows_the_others_again(ca: tuple[bytes, bytes], site: Site) -> None:
    """No bootstrap peer configured (a root): it pings the sites whose records it restored."""

    async def scenario() -> None:
        net = _network(ca)
        nodes = await _chain(net, site, archived=True)
        root = await _restart(net, nodes["root"], "root", nodes["root"].address)
        assert {c.address for c in root.table.contacts()} >= {
            nodes["wo"].address, nodes["prod"].address,
        }
        await net.stop_all()

    asyncio.run(scenario())


def test_restored_records_are_verified_again(ca: tuple[bytes, bytes], site: Site) -> None:
    """A record whose certificate was revoked meanwhile, an expired one and a forged row are
    not restored, and leave the archive."""
    revoked: set[int] = set()

    async def scenario() -> None:
        net = _network(ca, revoked)
        nodes = await _chain(net, site, archived=True)
        archive = nodes["root"].archive
        assert isinstance(archive, MemoryArchive)
        wo_key = key_for_concept("WorkOrder").to_bytes()
        assert (wo_key, "wo") in archive.rows
        record = nodes["wo"].announced
        assert record is not None
        forged = record_to_bytes(record).replace(b"wo.sites.test", b"evil.sites.tst")
        archive.save(wo_key, "forged", forged)
        revoked.add(_serial(site("prod")))
        root = await net.restart(nodes["root"].address)
        held = {(k.to_bytes(), s) for k, s in root.store.held()}
        assert (wo_key, "wo") in held
        assert not any(s in {"prod", "forged"} for _, s in held)
        assert set(archive.rows) == held
        await net.stop_all()

    asyncio.run(scenario())


def test_expired_records_leave_the_archive(ca: tuple[bytes, bytes], site: Site) -> None:
    async def scenario() -> None:
        net = _network(ca)
        nodes = await _chain(net, site, archived=True)
        archive = nodes["root"].archive
        # three sites, each under its block's key and its name's
        assert isinstance(archive, MemoryArchive) and len(archive.rows) == 6
        assert isinstance(net.clock, FakeClock)
        net.clock.advance(DhtConfig().record_ttl_s + 1)
        for name in ("wo", "prod"):
            await nodes[name].stop(leave=False)
            net.crash(nodes[name].address)
        await nodes["root"].maintain()  # (root republishes its own record)
        assert {s for _, s in archive.rows} == {"root"}
        await net.stop_all()

    asyncio.run(scenario())


def test_a_site_store_keeps_dht_records_across_reopening(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path)
    store.dht_records.save(b"k" * 32, "wo", b"record-1")
    store.dht_records.save(b"k" * 32, "wo", b"record-2")
    store.dht_records.save(b"j" * 32, "prod", b"record-3")
    store.close()
    again = Store(path)
    assert again.dht_records.load() == [(b"j" * 32, "prod", b"record-3"),
                                        (b"k" * 32, "wo", b"record-2")]
    again.dht_records.retain([(b"k" * 32, "wo")])
    assert again.dht_records.load() == [(b"k" * 32, "wo", b"record-2")]
    again.close()


def _serial(credentials: SiteCredentials) -> int:
    return certs.credential_from_pem(credentials.certificate_pem).serial
