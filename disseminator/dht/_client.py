"""The gRPC client edge of the DHT: :class:`GrpcTransport`, and :func:`create_grpc_node`.

Peers are dialled with mutual TLS (our site certificate, trusting only the network CA) over
``grpc.aio`` channels cached per address (least recently used closed beyond ``max_channels``).
A Ping carries a fresh nonce and its answer must be a valid proof (:mod:`._proof`): that is how
a caller learns which node id listens at an address. gRPC failures are translated here:
INVALID_ARGUMENT, UNAUTHENTICATED, PERMISSION_DENIED, FAILED_PRECONDITION and
RESOURCE_EXHAUSTED become :class:`PeerRefusedError`; every other status (UNAVAILABLE,
DEADLINE_EXCEEDED, ...) becomes :class:`PeerUnavailableError`, and that channel is redialled
next time.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import grpc

from disseminator.dht import _convert as convert
from disseminator.dht._archive import RecordArchive
from disseminator.dht._config import DhtConfig
from disseminator.dht._errors import PeerRefusedError, PeerUnavailableError
from disseminator.dht._ids import Contact, NodeId
from disseminator.dht._kademlia import Clock, _utc_now
from disseminator.dht._node import DhtNode
from disseminator.dht._proof import PingProof, verify_ping_proof
from disseminator.dht._records import (
    CaRecordVerifier,
    SiteCredentials,
    SiteRecord,
    nothing_revoked,
)
from disseminator.dht._transport import ValueReply
from xdn import certs
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.ontology import Ontology
from xdn.wire.v1 import dht_pb2 as pb
from xdn.wire.v1 import dht_pb2_grpc

__all__ = ["GrpcTransport", "create_grpc_node"]

log = logging.getLogger(__name__)

_REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)
NONCE_BYTES = 32


class GrpcTransport:
    """:class:`~disseminator.dht.Transport` over grpc.aio with mutual TLS."""

    def __init__(
        self,
        *,
        tls: TlsFiles,
        local_address: str | None,
        timeout_s: float = 5.0,
        clock: Clock = _utc_now,
        max_channels: int = 256,
        random_bytes: Callable[[int], bytes] = os.urandom,
        revoked: Callable[[], frozenset[int]] = nothing_revoked,
    ) -> None:
        self._credentials = channel_credentials(tls)
        self._revoked = revoked
        self._ca_pem = tls.ca_pem
        self._local_address = local_address or ""
        self._timeout_s = timeout_s
        self._clock = clock
        self._max_channels = max_channels
        self._random_bytes = random_bytes
        self._channels: OrderedDict[str, tuple[grpc.aio.Channel, Any]] = OrderedDict()
        self._closing: set[asyncio.Task[None]] = set()

    def _stub(self, address: str) -> Any:
        entry = self._channels.get(address)
        if entry is not None:
            self._channels.move_to_end(address)
            return entry[1]
        channel = grpc.aio.secure_channel(address, self._credentials, options=CHANNEL_OPTIONS)
        stub = dht_pb2_grpc.DhtStub(channel)
        self._channels[address] = (channel, stub)
        while len(self._channels) > self._max_channels:
            self._drop(next(iter(self._channels)))
        return stub

    def _drop(self, address: str) -> None:
        entry = self._channels.pop(address, None)
        if entry is not None:
            # let calls still running on it finish (close() would cancel them)
            task = asyncio.get_running_loop().create_task(entry[0].close(grace=self._timeout_s))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _call(self, address: str, method: str, request: Any) -> Any:
        try:
            return await getattr(self._stub(address), method)(request, timeout=self._timeout_s)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # we are being cancelled: not the peer's doing
            self._drop(address)  # the channel was closed under the call
            raise PeerUnavailableError(f"failed: {address} {method}: call cancelled") from None
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            what = f"{address} {method}: {code.name}: {exc.details()}"
            if code in _REFUSALS:
                raise PeerRefusedError(f"refused: {what}") from None
            self._drop(address)
            raise PeerUnavailableError(f"failed: {what}") from None

    async def _proven(self, address: str) -> tuple[PingProof, Contact]:
        nonce = self._random_bytes(NONCE_BYTES)
        request = pb.DhtPingRequest(sender_address=self._local_address, nonce=nonce)
        reply = await self._call(address, "Ping", request)
        proof = convert.proof_from_pb(reply)
        contact = verify_ping_proof(
            proof, nonce=nonce, ca_pem=self._ca_pem, at=self._clock(), revoked=self._revoked()
        )
        return proof, contact

    async def ping(self, address: str) -> Contact:
        """Ping ``address`` and verify the signed proof of who answered."""
        return (await self._proven(address))[1]

    async def identify(self, address: str) -> certs.Credential:
        """Ping ``address``; the verified certificate of the site that answered."""
        proof, _ = await self._proven(address)
        return certs.credential_from_pem(proof.certificate_pem)

    async def find_node(self, peer: Contact, target: NodeId) -> Sequence[Contact]:
        request = pb.DhtFindNodeRequest(
            sender_address=self._local_address, target=target.to_bytes()
        )
        reply = await self._call(peer.address, "FindNode", request)
        return convert.contacts_from_pb(reply.contacts)

    async def find_value(self, peer: Contact, key: NodeId) -> ValueReply:
        request = pb.DhtFindValueRequest(sender_address=self._local_address, key=key.to_bytes())
        reply = await self._call(peer.address, "FindValue", request)
        return convert.value_reply_from_pb(reply)

    async def store(self, peer: Contact, key: NodeId, record: SiteRecord) -> None:
        request = pb.DhtStoreRequest(
            sender_address=self._local_address,
            key=key.to_bytes(),
            record=convert.record_to_pb(record),
        )
        await self._call(peer.address, "Store", request)

    async def close(self) -> None:
        """Close every cached channel."""
        channels = [channel for channel, _ in self._channels.values()]
        self._channels.clear()
        await asyncio.gather(*(c.close() for c in channels), *self._closing, return_exceptions=True)


def create_grpc_node(
    *,
    tls: TlsFiles,
    address: str,
    ontology: Ontology,
    config: DhtConfig | None = None,
    clock: Clock = _utc_now,
    revoked: Callable[[], frozenset[int]] = nothing_revoked,
    archive: RecordArchive | None = None,
) -> DhtNode:
    """A :class:`DhtNode` for a site: id from its certificate, gRPC transport, CA verifier.

    Args:
        tls: the site's certificate, key and CA (the same as its gRPC server's).
        address: the ``host:port`` peers dial (``config.advertise``, or the bound address).
        ontology: the shared ontology (block concepts are checked against it).
        config: DHT tunables; defaults to :class:`DhtConfig` ().
        clock: returns the current aware datetime.
        revoked: the serials revoked by the CRL in force now: records, ping answers and
            callers with such a certificate are refused.
        archive: where stored records outlive a restart (:meth:`DhtNode.restore` loads them).
    """
    config = config or DhtConfig()
    credentials = SiteCredentials.from_pem(tls.cert_pem, tls.key_pem)
    return DhtNode(
        contact=Contact(node_id=credentials.node_id, address=address),
        transport=GrpcTransport(
            tls=tls, local_address=address, timeout_s=config.rpc_timeout_s, clock=clock,
            revoked=revoked,
        ),
        verifier=CaRecordVerifier(ca_pem=tls.ca_pem, revoked=revoked),
        ontology=ontology,
        config=config,
        credentials=credentials,
        clock=clock,
        revoked=revoked,
        archive=archive,
    )
