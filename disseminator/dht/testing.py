"""In-memory fakes for the DHT: a clock, and a network of nodes without sockets.

:class:`MemoryNetwork` hosts any number of :class:`~disseminator.dht.DhtNode` instances, each
with a :class:`MemoryTransport` that delivers calls straight to the ``handle_*`` methods of
the node registered at the address — with the caller's true contact as ``sender``, as mutual
TLS would. Nodes can be crashed (stop answering), revived or removed; :attr:`MemoryNetwork.calls`
counts RPCs by kind. Nothing here is a mock of our own logic: the nodes are the real ones.

Example::

    clock = FakeClock()
    net = MemoryNetwork(ontology=onto, verifier=CaRecordVerifier(ca_pem=ca), clock=clock)
    first = net.add_node()
    second = net.add_node()
    await second.bootstrap([first.address])
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from disseminator.dht._archive import MemoryArchive, RecordArchive
from disseminator.dht._config import DhtConfig
from disseminator.dht._errors import PeerRefusedError, PeerUnavailableError
from disseminator.dht._ids import ID_BITS, Contact, NodeId
from disseminator.dht._kademlia import Clock
from disseminator.dht._node import DhtNode
from disseminator.dht._records import RecordVerifier, SiteCredentials, SiteRecord
from disseminator.dht._transport import ValueReply
from xdn import certs
from xdn.errors import PeerError
from xdn.ontology import Ontology

__all__ = ["FakeClock", "MemoryArchive", "MemoryNetwork", "MemoryTransport"]


class FakeClock:
    """A settable clock: call it for the time, :meth:`advance` it by hand."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        if self._now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware start")

    def __call__(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += timedelta(seconds=seconds)


class MemoryTransport:
    """Delivers a node's calls to the other nodes of a :class:`MemoryNetwork`."""

    def __init__(self, network: MemoryNetwork, own: Contact) -> None:
        self._network = network
        self._own = own
        self.closed = False

    def _reach(self, address: str, kind: str) -> DhtNode:
        if self.closed:
            raise PeerUnavailableError("this transport is closed")
        self._network.calls[kind] += 1
        return self._network.reachable(address)

    async def ping(self, address: str) -> Contact:
        node = self._reach(address, "ping")
        await asyncio.sleep(0)
        await node.handle_ping(self._own)
        return node.contact

    async def identify(self, address: str) -> certs.Credential:
        node = self._reach(address, "ping")
        await asyncio.sleep(0)
        if node.credentials is None:
            raise PeerRefusedError(f"{address} has no site certificate")
        return certs.credential_from_pem(node.credentials.certificate_pem)

    async def find_node(self, peer: Contact, target: NodeId) -> Sequence[Contact]:
        node = self._reach(peer.address, "find_node")
        await asyncio.sleep(0)
        return await node.handle_find_node(self._own, target)

    async def find_value(self, peer: Contact, key: NodeId) -> ValueReply:
        node = self._reach(peer.address, "find_value")
        await asyncio.sleep(0)
        return await node.handle_find_value(self._own, key)

    async def store(self, peer: Contact, key: NodeId, record: SiteRecord) -> None:
        node = self._reach(peer.address, "store")
        await asyncio.sleep(0)
        try:
            await node.handle_store(self._own, key, record)
        except PeerError as exc:  # what the gRPC edge turns a refusal status into
            raise PeerRefusedError(f"{peer.address} refused Store: {exc}") from None

    async def close(self) -> None:
        self.closed = True


class MemoryNetwork:
    """A set of real DHT nodes wired together in memory."""

    def __init__(
        self,
        *,
        ontology: Ontology,
        verifier: RecordVerifier,
        clock: Clock,
        config: DhtConfig | None = None,
        seed: int = 0,
    ) -> None:
        self.ontology = ontology
        self.verifier = verifier
        self.clock = clock
        self.config = config or DhtConfig()
        self.nodes: dict[str, DhtNode] = {}
        self.down: set[str] = set()
        self.calls: Counter[str] = Counter()
        self._rng = random.Random(seed)

    def add_node(
        self,
        *,
        credentials: SiteCredentials | None = None,
        address: str | None = None,
        config: DhtConfig | None = None,
        archive: RecordArchive | None = None,
    ) -> DhtNode:
        """Create a node (id from ``credentials``, else random) and register it; with an
        ``archive``, it loads the records archived there before it answers anyone."""
        address = address or f"node{len(self.nodes)}.dht.test:7000"
        if address in self.nodes:
            raise ValueError(f"address {address} is taken")
        node_id = (
            credentials.node_id if credentials else NodeId(value=self._rng.getrandbits(ID_BITS))
        )
        contact = Contact(node_id=node_id, address=address)
        node = DhtNode(
            contact=contact,
            transport=MemoryTransport(self, contact),
            verifier=self.verifier,
            ontology=self.ontology,
            config=config or self.config,
            credentials=credentials,
            clock=self.clock,
            rng=random.Random(self._rng.getrandbits(64)),
            archive=archive,
        )
        node.restore()
        self.nodes[address] = node
        return node

    async def restart(self, address: str) -> DhtNode:
        """Crash the node at ``address`` and start a new one there with the same identity,
        configuration and archive (what survives a process: only the archive)."""
        old = self.remove(address)
        await old.stop(leave=False)
        return self.add_node(
            credentials=old.credentials, address=address, config=old.config, archive=old.archive
        )

    def reachable(self, address: str) -> DhtNode:
        """The node answering at ``address``; :class:`PeerUnavailableError` if none."""
        node = self.nodes.get(address)
        if node is None or address in self.down:
            raise PeerUnavailableError(f"nothing answers at {address}")
        return node

    def crash(self, address: str) -> None:
        """The node at ``address`` stops answering (without leaving politely)."""
        self.down.add(address)

    def revive(self, address: str) -> None:
        """The node at ``address`` answers again."""
        self.down.discard(address)

    def remove(self, address: str) -> DhtNode:
        """Take a node out of the network for good."""
        self.down.discard(address)
        return self.nodes.pop(address)

    async def settle(self) -> None:
        """Wait until no node has background pings running."""
        for _ in range(64):
            busy = [n for n in self.nodes.values() if n.contacts.busy]
            if not busy:
                return
            await asyncio.gather(*(n.contacts.settle() for n in busy))

    async def stop_all(self) -> None:
        """Stop every node (without withdrawals)."""
        await asyncio.gather(*(n.stop(leave=False) for n in self.nodes.values()))
