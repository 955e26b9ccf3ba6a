"""Kademlia-style discovery of disseminator sites: concept → the sites serving it.

Sites find each other without a central registry. Each site runs a :class:`DhtNode` on the
same gRPC port and mutual TLS as its Disseminator service; its node id is the SHA-256 of its
certificate. A site announces a signed :class:`SiteRecord` (site, address, HTTPS endpoint,
block concept, expiry, certificate, signature) under the key SHA-256(block concept) and under
the key of its name (:func:`key_for_site`); any node storing or returning a record verifies
it, so records cannot be forged. Queries: :meth:`DhtNode.sites_serving` and
:meth:`DhtNode.find_uplink` look up the block concepts that could answer, in parallel;
:meth:`DhtNode.find_site` a site by its name. See docs/dht.md for the design, the wire
format and the figures.

Pure core: :class:`RoutingTable`, :class:`Lookup`, :class:`RecordStore`, the query functions.
Edges: :class:`GrpcTransport` and :func:`add_dht_to_server` (gRPC),
:mod:`disseminator.dht.testing` (in-memory network, fake clock).
"""

from disseminator.dht._archive import MemoryArchive, RecordArchive
from disseminator.dht._client import GrpcTransport, create_grpc_node
from disseminator.dht._config import DhtConfig
from disseminator.dht._errors import (
    BootstrapError,
    DhtProtocolError,
    DhtUsageError,
    InvalidRecordError,
    LookupStateError,
    PeerRefusedError,
    PeerUnavailableError,
    RecordAuthenticationError,
    StoreFullError,
)
from disseminator.dht._ids import (
    Contact,
    NodeId,
    key_for_concept,
    key_for_site,
    node_id_of_certificate,
)
from disseminator.dht._kademlia import Clock, KademliaNode
from disseminator.dht._lookup import CandidateState, Lookup, LookupEvent, LookupResult
from disseminator.dht._node import DhtNode
from disseminator.dht._proof import PingProof, make_ping_proof, verify_ping_proof
from disseminator.dht._queries import (
    choose_uplink,
    is_fallback,
    recheck_uplink,
    serving_keys,
    serving_sites,
    sites_within,
    uplink_candidates,
)
from disseminator.dht._records import (
    CaRecordVerifier,
    RecordVerifier,
    SiteCredentials,
    SiteRecord,
    record_payload,
    sign_site_record,
)
from disseminator.dht._service import DHT_SERVICE_NAME, DhtServicer, add_dht_to_server, status_for
from disseminator.dht._store import PutOutcome, RecordStore
from disseminator.dht._table import BucketInfo, Observation, Outcome, RoutingTable
from disseminator.dht._transport import Transport, ValueReply

__all__ = [
    "DHT_SERVICE_NAME",
    "BootstrapError",
    "BucketInfo",
    "CaRecordVerifier",
    "CandidateState",
    "Clock",
    "Contact",
    "DhtConfig",
    "DhtNode",
    "DhtProtocolError",
    "DhtServicer",
    "DhtUsageError",
    "GrpcTransport",
    "InvalidRecordError",
    "KademliaNode",
    "Lookup",
    "LookupEvent",
    "LookupResult",
    "LookupStateError",
    "MemoryArchive",
    "NodeId",
    "Observation",
    "Outcome",
    "PeerRefusedError",
    "PeerUnavailableError",
    "PingProof",
    "PutOutcome",
    "RecordArchive",
    "RecordAuthenticationError",
    "RecordStore",
    "RecordVerifier",
    "RoutingTable",
    "SiteCredentials",
    "SiteRecord",
    "StoreFullError",
    "Transport",
    "ValueReply",
    "add_dht_to_server",
    "choose_uplink",
    "create_grpc_node",
    "is_fallback",
    "key_for_concept",
    "key_for_site",
    "make_ping_proof",
    "node_id_of_certificate",
    "recheck_uplink",
    "record_payload",
    "serving_keys",
    "serving_sites",
    "sign_site_record",
    "sites_within",
    "status_for",
    "uplink_candidates",
    "verify_ping_proof",
]
