"""How a site's Admin ``Status`` finds its downlinks' gRPC addresses: their signed DHT records,
looked up at once over an in-memory DHT of real nodes (disseminator.admin_service)."""

from __future__ import annotations

import asyncio

from disseminator.admin_service import _addresses, _announced_address
from disseminator.dht import CaRecordVerifier, DhtConfig
from disseminator.dht.testing import FakeClock, MemoryNetwork
from tests.unit.test_dht_network import ONTOLOGY, ca, clock_start, site
from tests.unit.test_dht_persistence import Site

__all__ = ["ca", "clock_start", "site"]  # (module fixtures shared with test_dht_network)


def test_live_records_give_addresses_a_site_that_left_or_never_came_gives_none(
    ca: tuple[bytes, bytes], site: Site
) -> None:
    async def scenario() -> tuple[dict[str, str], str, str]:
        net = MemoryNetwork(
            ontology=ONTOLOGY,
            verifier=CaRecordVerifier(ca_pem=ca[0]),
            clock=FakeClock(),
            config=DhtConfig(k=20),
        )
        root = net.add_node(credentials=site("root"), address="root.sites.test:7000")
        before = _announced_address(root)
        await root.announce("ProductionProcess")
        for name, block in (("wo", "WorkOrder"), ("prod", "Production")):
            node = net.add_node(credentials=site(name), address=f"{name}.sites.test:7000")
            await node.bootstrap([root.address])
            await node.announce(block)
        await net.nodes["prod.sites.test:7000"].withdraw()  # it left the network
        found = await _addresses(root, ["wo", "prod", "nobody"])
        await net.stop_all()
        return found, before, _announced_address(root)

    found, before, after = asyncio.run(scenario())
    assert found == {"wo": "wo.sites.test:7000"}
    assert (before, after) == ("", "root.sites.test:7000")
    assert _announced_address(None) == ""
