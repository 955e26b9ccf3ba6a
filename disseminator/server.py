"""The disseminator daemon: a grpc.aio servicer over the pure routing table.

Theory of operation. Every call is mutual TLS; the servicer first checks the peer's
certificate (issuer, validity, role) and then only converts protobuf to the routing core's
values and back. State lives on one asyncio loop, so handlers mutate it without locks.

* ``Publish`` (publisher → root): route key messages, then the document's fragments.
* ``Subscribe`` (subscriber): evaluate every publisher's policy for the credential; register
  when ``auth_list ⊆ served_list``, otherwise fail with ``FAILED_PRECONDITION`` carrying the
  uplink to solicit in trailing metadata ``xdn-redirect``; then stream deliveries.
* ``Link`` (downlink → uplink): the downlink states the members behind it (re-evaluated here,
  never trusted) and receives what they may receive.
* ``GetMembership`` (publisher's key service): who is registered, with their certificates.

Each destination has an outbox queue with its own sequence numbers, so deliveries arrive in
order, key messages before the fragments they open. Each relayed document gets a signed
provenance envelope, appended to this site's log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import grpc

from disseminator.routing import (
    Accept,
    Destination,
    Redirect,
    Registration,
    RoutingTable,
    decide_subscription,
)
from xdn import certs, provenance
from xdn.errors import CertificateError, PeerError, ProtocolError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, peer_certificate
from xdn.ontology import Ontology
from xdn.policy import PolicySet
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

__all__ = ["DisseminatorService", "SiteIdentity"]

log = logging.getLogger(__name__)

REDIRECT_METADATA = "xdn-redirect"
_OUTBOX_LIMIT = 100_000


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteIdentity:
    """Who this site is and what it serves."""

    name: str
    block: str
    uplink: str | None
    tls: TlsFiles
    signer: provenance.Signer


class _Outbox:
    """Ordered, sequence-numbered deliveries for one destination."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[pb.Delivery] = asyncio.Queue(maxsize=_OUTBOX_LIMIT)
        self.next_sequence = 1
        self.acked = 0

    def put(self, delivery: pb.Delivery) -> None:
        delivery.sequence = self.next_sequence
        self.next_sequence += 1
        self.queue.put_nowait(delivery)


def _to_member(reg: Registration) -> pb.Member:
    return pb.Member(
        subscriber=reg.subscriber,
        certificate=reg.certificate,
        grants=[pb.Grant(publisher=p, concepts=sorted(c)) for p, c in sorted(reg.grants.items())],
    )


class DisseminatorService(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """One site's servicer and state."""

    def __init__(
        self,
        *,
        site: SiteIdentity,
        ontology: Ontology,
        policies: PolicySet,
        log_sink: provenance.ProvenanceLog,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._site = site
        self._ontology = ontology
        self._policies = policies
        self._log = log_sink
        self._clock = clock
        self._served = ontology.block(site.block)
        self._table = RoutingTable()
        self._outboxes: dict[Destination, _Outbox] = {}
        self._seen: set[tuple[str, str, int]] = set()
        self._uplink_updates: asyncio.Queue[pb.LinkMessage] = asyncio.Queue()
        self.uplink_connected = asyncio.Event()

    # ---- identity and policy -------------------------------------------------------------
    def _peer(self, context: grpc.aio.ServicerContext, role: str) -> certs.Credential:
        try:
            pem = peer_certificate(context.auth_context())
            return certs.verify_certificate(pem, self._site.tls.ca_pem, at=self._clock(), role=role)
        except CertificateError as exc:
            log.warning("refused peer: %s", exc)
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None

    def _grants(self, cert_pem: bytes) -> dict[str, frozenset[str]]:
        credential = certs.credential_from_pem(cert_pem)
        return dict(self._policies.auth_lists(credential, at=self._clock()))

    def _now_ms(self) -> int:
        return int(self._clock().timestamp() * 1000)

    # ---- routing -------------------------------------------------------------------------
    def _outbox(self, destination: Destination) -> _Outbox:
        return self._outboxes.setdefault(destination, _Outbox())

    def _route_key(self, key: pb.KeyMessage) -> bool:
        destination = self._table.route_key(key.subscriber)
        if destination is None:
            log.warning("no route for key message to %s; dropped", key.subscriber)
            return False
        self._outbox(destination).put(pb.Delivery(key=key))
        return True

    def _route_dissemination(self, diss: pb.Dissemination) -> tuple[int, int]:
        """Forward one document's fragments; return (fragments accepted, destinations)."""
        manifest = diss.manifest
        identity = (manifest.publisher, manifest.document_id, manifest.version)
        if identity in self._seen:
            log.info("document %s v%d already routed; ignored", identity[1], identity[2])
            return 0, 0
        for fragment in diss.fragments:
            if (fragment.publisher, fragment.document_id) != identity[:2]:
                raise ProtocolError(f"fragment {fragment.fragment_id!r} is not of this document")
            if fragment.concept not in self._ontology.concepts:
                raise ProtocolError(f"fragment {fragment.fragment_id!r}: unknown concept")
        message = provenance.Message.from_nquads(diss.provenance)
        self._seen.add(identity)
        plan = self._table.plan(
            manifest.publisher, [(f.fragment_id, f.concept) for f in diss.fragments]
        )
        for destination, ids in plan.items():
            wanted = set(ids)
            relayed = provenance.relay(
                message,
                self._site.signer,
                message_uri=(
                    f"{self._site.signer.node_uri}msg/{manifest.document_id}/"
                    f"v{manifest.version}/{destination.kind}-{destination.name}"
                ),
                recipient_uri=certs.node_uri(destination.name),
                fragment_ids=ids,
                timestamp_ms=self._now_ms(),
            )
            self._log.append(relayed)
            out = pb.Dissemination(
                manifest=manifest,
                fragments=[f for f in diss.fragments if f.fragment_id in wanted],
                provenance=relayed.to_nquads(),
            )
            self._outbox(destination).put(pb.Delivery(dissemination=out))
        return len(diss.fragments), len(plan)

    def _route_delivery(self, delivery: pb.Delivery) -> None:
        kind = delivery.WhichOneof("body")
        if kind == "key":
            self._route_key(delivery.key)
        elif kind == "dissemination":
            self._route_dissemination(delivery.dissemination)

    def _interest_changed(self) -> None:
        if self._site.uplink is not None:
            members = [_to_member(r) for r in self._table.members()]
            self._uplink_updates.put_nowait(
                pb.LinkMessage(interest=pb.InterestUpdate(members=members))
            )

    # ---- RPCs ----------------------------------------------------------------------------
    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        try:
            return self._publish(request, context)
        except (_Abort, PeerError) as exc:
            await _abort(context, exc)
            raise

    def _publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        publisher = self._peer(context, role="publisher")
        manifest = request.dissemination.manifest
        if manifest.publisher != publisher.name:
            raise _Abort(
                grpc.StatusCode.PERMISSION_DENIED,
                f"publisher {publisher.name!r} may not publish as {manifest.publisher!r}",
            )
        for key in request.keys:
            if key.publisher != publisher.name:
                raise ProtocolError("key message names another publisher")
        for key in request.keys:
            self._route_key(key)
        accepted, links = self._route_dissemination(request.dissemination)
        return pb.PublishAck(
            document_id=manifest.document_id, fragments_accepted=accepted, links_reached=links
        )

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        try:
            publisher = self._peer(context, role="publisher")
            if request.publisher != publisher.name:
                raise _Abort(grpc.StatusCode.PERMISSION_DENIED, "ask for your own membership")
        except _Abort as exc:
            await _abort(context, exc)
            raise
        members = [_to_member(r) for r in self._table.members() if r.grants.get(publisher.name)]
        return pb.Membership(members=members, site=self._site.name)

    async def Subscribe(
        self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        try:
            registration = await self._admit(request_iterator, context)
        except (_Abort, PeerError) as exc:
            await _abort(context, exc)
            raise
        credential_name = registration.subscriber
        destination = Destination("subscriber", credential_name)
        outbox = self._outboxes[destination] = _Outbox()
        self._table.local[credential_name] = registration
        self._interest_changed()
        log.info("registered %s for %s", credential_name, dict(registration.grants))
        acks = asyncio.ensure_future(self._read_acks(request_iterator, outbox))
        try:
            yield pb.ServerMessage(
                subscribed=pb.Subscribed(
                    subscriber=credential_name,
                    served_by=self._site.name,
                    grants=_to_member(registration).grants,
                )
            )
            while True:
                delivery = await outbox.queue.get()
                yield pb.ServerMessage(delivery=delivery)
        finally:
            acks.cancel()
            if self._outboxes.get(destination) is outbox:
                del self._outboxes[destination]
                self._table.local.pop(credential_name, None)
                self._interest_changed()
            log.info("unregistered %s", credential_name)

    async def _admit(
        self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext
    ) -> Registration:
        """Check the subscriber and decide its subscription (paper §III.B)."""
        credential = self._peer(context, role="subscriber")
        pem = peer_certificate(context.auth_context())
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("kind") != "subscribe":
            raise ProtocolError("a Subscribe stream must start with a SubscribeRequest")
        requested: frozenset[str] = frozenset()
        for concept in first.subscribe.concepts:
            if concept not in self._ontology.concepts:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown concept {concept!r}")
            requested |= self._ontology.block(concept)
        decision = decide_subscription(
            self._grants(pem), requested=requested, served=self._served, uplink=self._site.uplink
        )
        if isinstance(decision, Redirect):
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"site {self._site.name} does not serve {sorted(decision.unserved)}; "
                f"subscribe at its uplink {decision.uplink}",
                redirect=decision.uplink,
            )
        if not isinstance(decision, Accept):
            raise _Abort(grpc.StatusCode.PERMISSION_DENIED, decision.reason)
        return Registration(subscriber=credential.name, certificate=pem, grants=decision.grants)

    async def _read_acks(self, requests: AsyncIterator[Any], outbox: _Outbox) -> None:
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            async for message in requests:
                if message.WhichOneof("kind") == "ack":
                    outbox.acked = max(outbox.acked, message.ack.sequence)

    async def Link(
        self, request_iterator: AsyncIterator[pb.LinkMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.Delivery]:
        try:
            peer = self._peer(context, role="site")
            first = await anext(aiter(request_iterator), None)
            if first is None or first.WhichOneof("kind") != "hello":
                raise ProtocolError("a Link stream must start with LinkHello")
            hello = first.hello
            if hello.site != peer.name:
                raise _Abort(grpc.StatusCode.PERMISSION_DENIED, "LinkHello names another site")
            if hello.block not in self._served:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"block {hello.block!r} is not contained in {self._site.block!r}",
                )
        except (_Abort, PeerError) as exc:
            await _abort(context, exc)
            raise
        downlink_served = self._ontology.block(hello.block)
        destination = Destination("link", peer.name)
        outbox = self._outboxes[destination] = _Outbox()
        self._table.set_link_members(peer.name, ())
        reader = asyncio.ensure_future(
            self._read_interest(request_iterator, peer.name, downlink_served, outbox)
        )
        log.info("downlink %s connected (block %s)", peer.name, hello.block)
        try:
            while True:
                yield await outbox.queue.get()
        finally:
            reader.cancel()
            if self._outboxes.get(destination) is outbox:
                del self._outboxes[destination]
                self._table.drop_link(peer.name)
                self._interest_changed()
            log.info("downlink %s disconnected", peer.name)

    async def _read_interest(
        self,
        requests: AsyncIterator[pb.LinkMessage],
        site: str,
        served: frozenset[str],
        outbox: _Outbox,
    ) -> None:
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            async for message in requests:
                kind = message.WhichOneof("kind")
                if kind == "ack":
                    outbox.acked = max(outbox.acked, message.ack.sequence)
                elif kind == "interest":
                    self._table.set_link_members(
                        site, self._verified_members(message.interest.members, served)
                    )
                    self._interest_changed()

    def _verified_members(self, members: Any, served: frozenset[str]) -> list[Registration]:
        """Re-evaluate what a downlink claims: check each certificate, recompute its grants."""
        out = []
        for member in members:
            try:
                credential = certs.verify_certificate(
                    member.certificate, self._site.tls.ca_pem, at=self._clock(), role="subscriber"
                )
            except CertificateError as exc:
                log.warning("downlink member refused: %s", exc)
                continue
            grants = {
                p: c & served for p, c in self._grants(member.certificate).items() if c & served
            }
            if grants:
                out.append(
                    Registration(
                        subscriber=credential.name, certificate=member.certificate, grants=grants
                    )
                )
        return out

    # ---- the uplink connection (this site as a downlink) ---------------------------------
    async def run_uplink(self) -> None:
        """Keep a Link stream to the uplink open, reconnecting with backoff."""
        if self._site.uplink is None:
            return
        delay = 0.2
        while True:
            try:
                await self._link_once(self._site.uplink)
                delay = 0.2
            except (grpc.aio.AioRpcError, PeerError) as exc:
                log.warning("uplink %s: %s; retrying in %.1fs", self._site.uplink, exc, delay)
            finally:
                self.uplink_connected.clear()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)

    async def _link_once(self, address: str) -> None:
        credentials = channel_credentials(self._site.tls)
        async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as ch:
            stub = pb_grpc.DisseminatorStub(ch)

            async def outgoing() -> AsyncIterator[pb.LinkMessage]:
                yield pb.LinkMessage(
                    hello=pb.LinkHello(site=self._site.name, block=self._site.block)
                )
                members = [_to_member(r) for r in self._table.members()]
                yield pb.LinkMessage(interest=pb.InterestUpdate(members=members))
                while True:
                    yield await self._uplink_updates.get()

            call = stub.Link(outgoing())
            self.uplink_connected.set()
            log.info("linked to uplink %s", address)
            async for delivery in call:
                try:
                    self._route_delivery(delivery)
                except PeerError as exc:
                    log.warning("refused delivery %d from uplink: %s", delivery.sequence, exc)


class _Abort(Exception):
    """Internal: end the RPC with a status code and message (and maybe a redirect)."""

    def __init__(self, code: grpc.StatusCode, message: str, *, redirect: str | None = None):
        super().__init__(message)
        self.code = code
        self.redirect = redirect


async def _abort(context: grpc.aio.ServicerContext, exc: Exception) -> None:
    """Map our errors to gRPC status codes (the only place that does); always raises."""
    if isinstance(exc, _Abort):
        trailer = ((REDIRECT_METADATA, exc.redirect),) if exc.redirect else ()
        await context.abort(exc.code, str(exc), trailing_metadata=trailer)
    code = grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(exc, CertificateError):
        code = grpc.StatusCode.UNAUTHENTICATED
    await context.abort(code, str(exc))
