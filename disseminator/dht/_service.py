"""The gRPC server edge of the DHT: the ``xdn.wire.v1.Dht`` servicer.

It only converts protobuf ↔ domain objects and calls the node's ``handle_*`` methods. The
caller's node id is taken from the certificate it presented in the mutual-TLS handshake; the
caller is treated as a DHT contact only when that certificate has role ``site`` and the
request names a listening address. Errors map to status codes here and nowhere else:

=================================================  ===================
malformed message, bad id / address, bad record    INVALID_ARGUMENT
forged record (certificate, CN, signature), no
client certificate                                 UNAUTHENTICATED
store full                                         RESOURCE_EXHAUSTED
node cannot answer (e.g. no credentials to sign)   FAILED_PRECONDITION
=================================================  ===================
"""

from __future__ import annotations

import logging
from typing import Any, NoReturn

import grpc

from disseminator.dht import _convert as convert
from disseminator.dht._errors import (
    DhtProtocolError,
    RecordAuthenticationError,
    StoreFullError,
)
from disseminator.dht._ids import Contact, NodeId
from disseminator.dht._kademlia import KademliaNode
from disseminator.dht._proof import check_nonce
from disseminator.dht._store import PutOutcome
from disseminator.intake import add_lenient
from xdn import certs
from xdn.errors import CertificateError, PeerError, SignatureError, XdnError
from xdn.grpc_tls import peer_certificate
from xdn.wire.v1 import dht_pb2 as pb
from xdn.wire.v1 import dht_pb2_grpc

__all__ = ["DHT_SERVICE_NAME", "DhtServicer", "add_dht_to_server", "status_for"]

log = logging.getLogger(__name__)

DHT_SERVICE_NAME: str = pb.DESCRIPTOR.services_by_name["Dht"].full_name


def status_for(exc: XdnError) -> grpc.StatusCode:
    """The gRPC status an error becomes on the wire."""
    if isinstance(exc, RecordAuthenticationError | CertificateError | SignatureError):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(exc, StoreFullError):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    if isinstance(exc, PeerError):
        return grpc.StatusCode.INVALID_ARGUMENT
    return grpc.StatusCode.FAILED_PRECONDITION


async def _abort(context: Any, exc: XdnError) -> NoReturn:
    code = status_for(exc)
    log.info("DHT request refused (%s): %s", code.name, exc)
    await context.abort(code, str(exc))
    raise AssertionError("context.abort returned")  # pragma: no cover


def _sender(
    context: Any, address_field: str, revoked: frozenset[int] = frozenset()
) -> Contact | None:
    """The caller as a DHT contact: id from its TLS certificate, address from the request.

    Raises:
        CertificateError: the caller's certificate is among the ``revoked`` serials.
    """
    credential = certs.credential_from_pem(peer_certificate(context.auth_context()))
    if credential.serial in revoked:
        raise CertificateError(f"certificate of {credential.name!r} was revoked")
    address = convert.sender_address_from_pb(address_field)
    if address is None or credential.role != "site":
        return None
    return Contact(node_id=NodeId(value=int(credential.fingerprint, 16)), address=address)


class DhtServicer(dht_pb2_grpc.DhtServicer):  # type: ignore[misc]
    """Serves Ping, FindNode, FindValue and Store for one node."""

    def __init__(self, node: KademliaNode) -> None:
        self._node = node

    async def Ping(self, request: Any, context: Any) -> Any:
        try:
            sender = _sender(context, request.sender_address, self._node.revoked())
            proof = self._node.ping_proof(check_nonce(bytes(request.nonce)))
            await self._node.handle_ping(sender)
        except XdnError as exc:
            await _abort(context, exc)
        return convert.proof_to_pb(proof)

    async def FindNode(self, request: Any, context: Any) -> Any:
        try:
            sender = _sender(context, request.sender_address, self._node.revoked())
            target = convert.node_id_from_pb(request.target, "target")
            contacts = await self._node.handle_find_node(sender, target)
        except XdnError as exc:
            await _abort(context, exc)
        return convert.contacts_to_pb(contacts)

    async def FindValue(self, request: Any, context: Any) -> Any:
        try:
            sender = _sender(context, request.sender_address, self._node.revoked())
            key = convert.node_id_from_pb(request.key, "key")
            reply = await self._node.handle_find_value(sender, key)
        except XdnError as exc:
            await _abort(context, exc)
        return convert.value_reply_to_pb(reply)

    async def Store(self, request: Any, context: Any) -> Any:
        try:
            sender = _sender(context, request.sender_address, self._node.revoked())
            key = convert.node_id_from_pb(request.key, "key")
            if not request.HasField("record"):
                raise DhtProtocolError("Store carries no record")
            record = convert.record_from_pb(request.record)
            outcome = await self._node.handle_store(sender, key, record)
        except XdnError as exc:
            await _abort(context, exc)
        return pb.DhtStoreResponse(stored=outcome is not PutOutcome.STALE)


def add_dht_to_server(server: grpc.aio.Server, node: KademliaNode) -> DhtServicer:
    """Register the Dht service of ``node`` on a (mutual-TLS) grpc.aio server.

    Call before ``server.start()``. Add :data:`DHT_SERVICE_NAME` to the reflection and health
    service names.
    """
    servicer = DhtServicer(node)
    add_lenient(dht_pb2_grpc.add_DhtServicer_to_server, servicer, server)
    return servicer
