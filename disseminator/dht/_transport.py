"""The transport interface a :class:`~disseminator.dht.DhtNode` talks to its peers through.

Two implementations: :class:`disseminator.dht.GrpcTransport` (mutual TLS, the production
edge) and :class:`disseminator.dht.testing.MemoryTransport` (an in-memory network of nodes).
Every method raises :class:`~disseminator.dht.PeerUnavailableError` when the peer does not
answer and :class:`~disseminator.dht.PeerRefusedError` when it answers with an error; a
malformed reply raises :class:`~disseminator.dht.DhtProtocolError`. Nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from disseminator.dht._ids import Contact, NodeId
from disseminator.dht._records import SiteRecord
from xdn import certs

__all__ = ["Transport", "ValueReply"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueReply:
    """A FIND_VALUE answer: the records held under the key and the nearest contacts known."""

    records: tuple[SiteRecord, ...] = ()
    contacts: tuple[Contact, ...] = ()


class Transport(Protocol):
    """What a DHT node needs from the network."""

    async def ping(self, address: str) -> Contact:
        """Ping whoever listens at ``address``; return its *verified* id and own address."""
        ...

    async def identify(self, address: str) -> certs.Credential:
        """Ping ``address``; return the *verified* (CA, validity, CRL) site credential there."""
        ...

    async def find_node(self, peer: Contact, target: NodeId) -> Sequence[Contact]:
        """Ask ``peer`` for the contacts it knows nearest to ``target``."""
        ...

    async def find_value(self, peer: Contact, key: NodeId) -> ValueReply:
        """Ask ``peer`` for its records under ``key`` and its contacts nearest to it."""
        ...

    async def store(self, peer: Contact, key: NodeId, record: SiteRecord) -> None:
        """Ask ``peer`` to store ``record`` under ``key``."""
        ...

    async def close(self) -> None:
        """Release connections."""
        ...
