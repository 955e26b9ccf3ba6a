"""A downlink that fell back to a farther ancestor moves to the nearer one once it appears
(disseminator.discovery.watch_uplink over an in-memory DHT of real nodes)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from disseminator.dht import CaRecordVerifier, DhtConfig, MemoryArchive
from disseminator.dht.testing import FakeClock, MemoryNetwork
from disseminator.discovery import describe_choice, uplink_other_than, watch_uplink
from tests.unit.test_dht_network import ONTOLOGY, ca, clock_start, site
from tests.unit.test_dht_persistence import Site
from xdn import certs

__all__ = ["ca", "clock_start", "site"]  # (module fixtures shared with test_dht_network)


@dataclass
class _Link:
    address: str
    peer: certs.Credential | None = None
    connected: asyncio.Event = field(default_factory=asyncio.Event)


def _network(ca: tuple[bytes, bytes], recheck_s: float) -> MemoryNetwork:
    return MemoryNetwork(
        ontology=ONTOLOGY, verifier=CaRecordVerifier(ca_pem=ca[0]), clock=FakeClock(),
        config=DhtConfig(k=20, uplink_recheck_s=recheck_s),
    )


def test_a_fallback_moves_when_the_nearer_ancestor_announces_itself(
    ca: tuple[bytes, bytes], site: Site
) -> None:
    """The re-check runs as soon as a record arrives, not only when the period is up (an hour
    here: the test would time out waiting for it)."""

    async def scenario() -> None:
        net = _network(ca, recheck_s=3600)
        root = net.add_node(credentials=site("root"), address="root.sites.test:7000")
        await root.announce("ProductionProcess")
        prod = net.add_node(credentials=site("prod"), address="prod.sites.test:7000")
        await prod.bootstrap([root.address])
        await prod.announce("Production")
        chosen = await prod.find_uplink("Production")
        assert chosen is not None and chosen.site == "root"
        assert "FALLBACK" in describe_choice("Production", chosen, prod)
        link = _Link(address=chosen.address)
        link.connected.set()
        watching = asyncio.ensure_future(watch_uplink(prod, "Production", link))
        await asyncio.sleep(0)
        assert not watching.done()
        wo = net.add_node(
            credentials=site("wo"), address="wo.sites.test:7000", archive=MemoryArchive()
        )
        await wo.bootstrap([root.address])
        await wo.announce("WorkOrder")
        async with asyncio.timeout(10):
            moved = await watching
        assert moved.site == "wo" and moved.address == wo.address
        assert "FALLBACK" not in describe_choice("Production", moved, prod)
        await net.stop_all()

    asyncio.run(scenario())


def test_the_proper_uplink_is_kept(ca: tuple[bytes, bytes], site: Site) -> None:
    async def scenario() -> None:
        net = _network(ca, recheck_s=0.05)
        for name, block in (("root", "ProductionProcess"), ("wo", "WorkOrder")):
            node = net.add_node(credentials=site(name), address=f"{name}.sites.test:7000")
            if name != "root":
                await node.bootstrap(["root.sites.test:7000"])
            await node.announce(block)
        prod = net.add_node(credentials=site("prod"), address="prod.sites.test:7000")
        await prod.bootstrap(["root.sites.test:7000"])
        link = _Link(address="wo.sites.test:7000")  # down, but listed: it is waited for
        watching = asyncio.ensure_future(watch_uplink(prod, "Production", link))
        done, _ = await asyncio.wait([watching], timeout=0.5)  # ten re-checks, no move
        assert not done
        watching.cancel()
        await net.stop_all()

    asyncio.run(scenario())


def test_the_uplink_that_handed_us_over_is_not_taken_again_until_another_is_named(
    ca: tuple[bytes, bytes], site: Site
) -> None:
    """root handed prod over (prod's members come through wo now), but prod's DHT view names
    root only: prod waits for wo's record instead of linking to root again (to be handed over
    again, and again)."""

    async def scenario() -> None:
        net = _network(ca, recheck_s=3600)
        root = net.add_node(credentials=site("root"), address="root.sites.test:7000")
        await root.announce("ProductionProcess")
        prod = net.add_node(credentials=site("prod"), address="prod.sites.test:7000")
        await prod.bootstrap([root.address])
        waiting = asyncio.ensure_future(uplink_other_than(prod, "Production", "root"))
        done, _ = await asyncio.wait([waiting], timeout=0.3)
        assert not done
        wo = net.add_node(credentials=site("wo"), address="wo.sites.test:7000")
        await wo.bootstrap([root.address])
        await wo.announce("WorkOrder")
        async with asyncio.timeout(10):
            assert (await waiting).site == "wo"
        async with asyncio.timeout(10):  # and at once when root is not the one to avoid
            assert (await uplink_other_than(prod, "Production", "qi")).site == "wo"
        await net.stop_all()

    asyncio.run(scenario())
