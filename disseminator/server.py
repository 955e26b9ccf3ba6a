"""The disseminator's gRPC servicer: checks peers, converts messages, calls the site node.

Every call is mutual TLS; each handler first checks the peer's certificate (issuer,
revocation, validity, role), then converts protobuf into the routing core's values and back.
Errors map to status codes in one place (:func:`_abort`). A streaming handler reads the
stream's opening message before it may refuse the call (:func:`_opening`), so the caller always
learns the status the site sent.

* ``Publish`` (publisher → root): queue the key messages and the document's fragments (a
  request may carry key messages only). Refused with ``FAILED_PRECONDITION`` at a site that is
  not a root or enforces no policy of the publisher (:mod:`xdn.publication`); the
  acknowledgement says what the document reached and where the site stands.
* ``Subscribe`` (subscriber): evaluate every publisher's policy for the credential; register
  when ``auth_list ⊆ served_list``, otherwise fail with ``FAILED_PRECONDITION`` carrying the
  uplink to solicit in trailing metadata ``xdn-redirect`` (paper §III.B); a new subscriber
  that asks for it first gets the retained recent documents it may read (state at subscribe
  time); then stream the subscriber's queue, resuming after what it last applied.
* ``Unsubscribe``: end the subscription, drop its queue, acknowledge (paper §III.D); the
  interest sent upstream shrinks accordingly.
* ``Link`` (downlink → uplink): the downlink states the members behind it (re-evaluated here,
  never trusted) and receives what they may receive.
* ``GetMembership`` (publisher's key service): who is registered, with their certificates,
  and where the site stands for the publisher (checked before anything is encrypted).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from disseminator.node import SiteNode, to_pb_member
from disseminator.routing import (
    Accept,
    Destination,
    Redirect,
    Registration,
    decide_subscription,
)
from disseminator.stream_watch import StreamWatch
from xdn import certs
from xdn.errors import CertificateError, PeerError, ProtocolError
from xdn.grpc_tls import peer_certificate
from xdn.publication import site_refusal
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wireconv import standing_to_pb

__all__ = ["REDIRECT_METADATA", "DisseminatorService", "Malformed", "add_to_server"]

log = logging.getLogger(__name__)

REDIRECT_METADATA = "xdn-redirect"
WINDOW = 1024


class Malformed:
    """A request whose bytes are not a valid protobuf message.

    grpc.aio turns a failing request deserializer into status UNKNOWN before any handler runs;
    :func:`add_to_server` decodes leniently instead and hands the handler this marker, so the
    caller gets INVALID_ARGUMENT with a clear message.
    """

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name


def _lenient(message_type: Any) -> Any:
    def parse(data: bytes) -> Any:
        try:
            return message_type.FromString(data)
        except DecodeError:
            return Malformed(message_type.DESCRIPTOR.full_name)

    return parse


def _well_formed(message: Any) -> None:
    if isinstance(message, Malformed):
        raise ProtocolError(
            f"malformed {message.type_name}: the bytes are not a valid protobuf message"
        )


def add_to_server(service: DisseminatorService, server: grpc.aio.Server) -> None:
    """Register the Disseminator service with lenient request decoding."""
    handlers = {
        "Publish": grpc.unary_unary_rpc_method_handler(
            service.Publish,
            request_deserializer=_lenient(pb.PublishRequest),
            response_serializer=pb.PublishAck.SerializeToString,
        ),
        "GetMembership": grpc.unary_unary_rpc_method_handler(
            service.GetMembership,
            request_deserializer=_lenient(pb.MembershipRequest),
            response_serializer=pb.Membership.SerializeToString,
        ),
        "Subscribe": grpc.stream_stream_rpc_method_handler(
            service.Subscribe,
            request_deserializer=_lenient(pb.ClientMessage),
            response_serializer=pb.ServerMessage.SerializeToString,
        ),
        "Link": grpc.stream_stream_rpc_method_handler(
            service.Link,
            request_deserializer=_lenient(pb.LinkMessage),
            response_serializer=pb.Delivery.SerializeToString,
        ),
        "Unsubscribe": grpc.unary_unary_rpc_method_handler(
            service.Unsubscribe,
            request_deserializer=_lenient(pb.UnsubscribeRequest),
            response_serializer=pb.UnsubscribeAck.SerializeToString,
        ),
    }
    name = pb.DESCRIPTOR.services_by_name["Disseminator"].full_name
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(name, handlers),))
    server.add_registered_method_handlers(name, handlers)


class _Abort(Exception):
    """End the RPC with a status code and message (and maybe a redirect)."""

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


async def _opening(request_iterator: AsyncIterator[Any], timeout_s: float) -> Any:
    """The first message of a stream, read before the site may refuse the call.

    A client writes its opening message as soon as the stream starts. Were the call ended
    before that message is read, the client's write could fail, and grpc.aio then reports
    ``INTERNAL`` ("Internal error from Core") in place of the status the site sent: the caller
    would lose the reason, a redirect, or the ``UNAVAILABLE`` that tells it to retry.

    Returns:
        The message, or ``None`` if the client half-closed without one.

    Raises:
        ProtocolError: nothing came within ``timeout_s`` (a silent caller cannot hold a handler).
    """
    try:
        return await asyncio.wait_for(anext(aiter(request_iterator), None), timeout_s)
    except TimeoutError:
        raise ProtocolError(f"no opening message within {timeout_s:g}s") from None


class DisseminatorService(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """The RPC surface of one site."""

    def __init__(self, node: SiteNode, *, heartbeat_s: float = 5.0) -> None:
        self._node = node
        self._heartbeat_s = heartbeat_s
        # A silent caller is let go like a silent peer, but never before 10 s.
        self._opening_timeout_s = max(3 * heartbeat_s, 10.0)
        self._draining = False
        self._link_blocks: dict[str, str] = {}
        self._stream_errors: dict[Destination, str] = {}

    def stop_taking_work(self) -> None:
        """Refuse new Publish, Subscribe and Link calls (the site is shutting down)."""
        self._draining = True

    async def _refuse_if_draining(self, context: grpc.aio.ServicerContext) -> None:
        if self._draining:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE, f"site {self._node.site.name} is shutting down"
            )

    def _watch(self, destination: Destination) -> StreamWatch:
        return StreamWatch(
            destination, self._heartbeat_s, site=self._node.site.name, metrics=self._node.metrics
        )

    async def _refuse(self, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        """Count a refused call, then end it with its status (always raises)."""
        reason = type(exc).__name__ if not isinstance(exc, _Abort) else exc.code.name.lower()
        self._node.metrics.refused_peers.labels(reason=reason).inc()
        await _abort(context, exc)

    def _peer(self, context: grpc.aio.ServicerContext, role: str) -> certs.Credential:
        try:
            pem = peer_certificate(context.auth_context())
            return certs.verify_certificate(
                pem, self._node.site.tls.ca_pem, at=self._node.now(), role=role,
                revoked=self._node.revoked,
            )
        except CertificateError as exc:
            log.warning("refused peer: %s", exc)
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None

    # ---- publishing ----------------------------------------------------------------------
    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        await self._refuse_if_draining(context)
        try:
            _well_formed(request)
            publisher = self._peer(context, role="publisher")
            standing = self._node.standing(publisher.name)
            refused = site_refusal(standing, publisher.name)
            if refused is not None:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION, refused.reason, redirect=refused.uplink
                )
            has_document = request.HasField("dissemination")
            if has_document and not request.dissemination.HasField("manifest"):
                raise ProtocolError("a PublishRequest's dissemination needs a manifest")
            manifest = request.dissemination.manifest
            if has_document and manifest.publisher != publisher.name:
                raise _Abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"publisher {publisher.name!r} may not publish as {manifest.publisher!r}",
                )
            addressed = (
                *request.keys, *request.rekeys, *request.document_keys, *request.entitlements
            )
            if any(m.publisher != publisher.name for m in addressed):
                raise ProtocolError("a key message names another publisher")
            checkpoint = request.checkpoint if request.HasField("checkpoint") else None
            if checkpoint is not None and checkpoint.publisher != publisher.name:
                raise ProtocolError("a checkpoint names another publisher")
            if not has_document and not addressed and checkpoint is None:
                raise ProtocolError("a PublishRequest carries neither a document nor keys")
            reach = self._node.route(
                dissemination=request.dissemination if has_document else None,
                keys=list(request.keys),
                rekeys=list(request.rekeys),
                document_keys=list(request.document_keys),
                checkpoint=checkpoint,
                entitlements=list(request.entitlements),
            )
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        return pb.PublishAck(
            document_id=manifest.document_id,
            fragments_accepted=reach.fragments,
            links_reached=reach.destinations,
            subscribers_reached=reach.subscribers,
            retained=reach.retained,
            standing=standing_to_pb(standing),
        )

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        try:
            _well_formed(request)
            publisher = self._peer(context, role="publisher")
            if request.publisher != publisher.name:
                raise _Abort(grpc.StatusCode.PERMISSION_DENIED, "ask for your own membership")
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        members = [
            self._node.member(r) for r in self._node.table.members() if r.grants.get(publisher.name)
        ]
        return pb.Membership(
            members=members,
            site=self._node.site.name,
            standing=standing_to_pb(self._node.standing(publisher.name)),
        )

    # ---- subscribing ---------------------------------------------------------------------
    async def _admit(
        self, first: Any, context: grpc.aio.ServicerContext
    ) -> tuple[Registration, pb.SubscribeRequest, frozenset[str] | None]:
        """Check the subscriber and decide its subscription (paper §III.B).

        Returns:
            The registration, the request, and the concepts asked for — ``None`` for a
            subscription the policy ended, connecting to receive what its queue still holds.
        """
        node = self._node
        credential = self._peer(context, role="subscriber")
        pem = peer_certificate(context.auth_context())
        _well_formed(first)
        if first is None or first.WhichOneof("kind") != "subscribe":
            raise ProtocolError("a Subscribe stream must start with a SubscribeRequest")
        ending = node.ending(credential.name)
        if ending is not None and ending.certificate == pem:
            return ending, first.subscribe, None
        requested: frozenset[str] = frozenset()
        for concept in first.subscribe.concepts:
            if concept not in node.ontology.concepts:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown concept {concept!r}")
            requested |= node.ontology.block(concept)
        decision = decide_subscription(
            node.grants(pem), requested=requested, served=node.served, uplink=node.uplink_address
        )
        if isinstance(decision, Redirect):
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"site {node.site.name} does not serve {sorted(decision.unserved)}; "
                f"subscribe at its uplink {decision.uplink}",
                redirect=decision.uplink,
            )
        if not isinstance(decision, Accept):
            raise _Abort(grpc.StatusCode.PERMISSION_DENIED, decision.reason)
        registration = Registration(
            subscriber=credential.name, certificate=pem, grants=decision.grants
        )
        return registration, first.subscribe, requested

    async def Subscribe(
        self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage]:
        node = self._node
        try:
            first = await _opening(request_iterator, self._opening_timeout_s)
            await self._refuse_if_draining(context)
            registration, request, requested = await self._admit(first, context)
            destination = Destination("subscriber", registration.subscriber)
            retained = 0
            if requested is not None:
                new = registration.subscriber not in node.table.local
                registration = node.register_local(registration, requested)
                if not registration.grants:
                    node.unregister_local(registration.subscriber)
                    raise _Abort(
                        grpc.StatusCode.PERMISSION_DENIED,
                        "no policy grants it anything any more: the certificate has received "
                        "every document instance its grants allowed (max_instances)",
                    )
                retained = node.replay_retained(registration) if new and request.retained else 0
            cursor = node.connect(destination, request.resume_after, WINDOW)
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        generation = node.generation(destination)
        log.info("registered %s for %s", registration.subscriber, dict(registration.grants))
        watch = self._watch(destination)
        acks = asyncio.ensure_future(
            self._read_acks(watch.incoming(request_iterator), destination, cursor, context)
        )
        try:
            yield pb.ServerMessage(
                subscribed=pb.Subscribed(
                    subscriber=registration.subscriber,
                    served_by=node.site.name,
                    grants=to_pb_member(registration).grants,
                    resumed_after=cursor.sent,
                    retained=retained,
                )
            )
            pumped = node.pump(destination, cursor, generation)
            deliveries = (pb.ServerMessage(delivery=d) async for d in pumped)
            async with contextlib.aclosing(
                watch.outgoing(context, deliveries, _subscriber_heartbeat)
            ) as messages:
                async for message in messages:
                    yield message
            error = self._stream_errors.pop(destination, None)
            if error is not None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            reason = node.ended(registration.subscriber)
            if reason is not None:
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED, f"subscription ended by the site: {reason}"
                )
        finally:
            acks.cancel()
            node.disconnect(destination, generation)
            log.info("%s disconnected", registration.subscriber)

    async def _read_acks(
        self,
        requests: AsyncIterator[Any],
        destination: Destination,
        cursor: Any,
        context: grpc.aio.ServicerContext,
    ) -> None:
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            try:
                async for message in requests:
                    _well_formed(message)
                    kind = message.WhichOneof("kind")
                    if kind == "ack":
                        self._node.on_ack(destination, cursor, message.ack.sequence)
                    elif kind == "interest":
                        self._on_interest(destination.name, message.interest)
                    elif kind == "refresh" and destination.kind == "subscriber":
                        self._node.request_refresh(
                            destination.name, message.refresh.publisher, message.refresh.concept
                        )
                    elif kind == "missing" and destination.kind == "subscriber":
                        self._node.replay_missing(
                            destination.name,
                            message.missing.publisher,
                            list(message.missing.sequences),
                        )
            except ProtocolError as exc:
                log.warning("%s %s: %s", destination.kind, destination.name, exc)
                self._stream_errors[destination] = str(exc)
                self._node.end_stream(destination)

    async def Unsubscribe(
        self, request: pb.UnsubscribeRequest, context: grpc.aio.ServicerContext
    ) -> pb.UnsubscribeAck:
        try:
            _well_formed(request)
            subscriber = self._peer(context, role="subscriber")
            if subscriber.name not in self._node.table.local:
                raise _Abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"{subscriber.name!r} has no subscription at site {self._node.site.name}",
                )
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        discarded = self._node.unregister_local(
            subscriber.name, reason="unsubscribed at the subscriber's request"
        )
        log.info("unsubscribed %s (%d queued deliveries dropped)", subscriber.name, discarded)
        return pb.UnsubscribeAck(
            subscriber=subscriber.name, site=self._node.site.name, discarded=discarded
        )

    # ---- downlinks -----------------------------------------------------------------------
    async def Link(
        self, request_iterator: AsyncIterator[pb.LinkMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.Delivery]:
        node = self._node
        try:
            first = await _opening(request_iterator, self._opening_timeout_s)
            await self._refuse_if_draining(context)
            peer = self._peer(context, role="site")
            _well_formed(first)
            if first is None or first.WhichOneof("kind") != "hello":
                raise ProtocolError("a Link stream must start with LinkHello")
            hello = first.hello
            if hello.site != peer.name:
                raise _Abort(grpc.StatusCode.PERMISSION_DENIED, "LinkHello names another site")
            if hello.block != peer.block:
                raise _Abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"site {peer.name!r} may serve block {peer.block!r} (its certificate), "
                    f"not {hello.block!r}",
                )
            if hello.block not in node.served or hello.block == node.site.block:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"block {hello.block!r} is not strictly contained in {node.site.block!r}",
                )
            destination = Destination("link", peer.name)
            cursor = node.connect(destination, hello.resume_after, WINDOW)
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        self._link_blocks[peer.name] = hello.block
        node.set_link_block(peer.name, hello.block, peer.serial)
        generation = node.generation(destination)
        watch = self._watch(destination)
        reader = asyncio.ensure_future(
            self._read_acks(watch.incoming(request_iterator), destination, cursor, context)
        )
        log.info("downlink %s connected (block %s)", peer.name, hello.block)
        try:
            async with contextlib.aclosing(
                watch.outgoing(context, node.pump(destination, cursor, generation), _link_heartbeat)
            ) as deliveries:
                async for delivery in deliveries:
                    yield delivery
            error = self._stream_errors.pop(destination, None)
            if error is not None:
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, error)
            reason = node.ended(peer.name)
            if reason is not None:
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED, f"link ended by the site: {reason}"
                )
        finally:
            reader.cancel()
            node.disconnect(destination, generation)
            log.info("downlink %s disconnected", peer.name)

    def _on_interest(self, site: str, interest: pb.InterestUpdate) -> None:
        served = self._node.ontology.block(self._link_blocks[site])
        self._node.set_link_members(site, self._node.verified_members(interest.members, served))
        self._node.set_link_refreshes(site, interest.members)


def _subscriber_heartbeat(interval_ms: int) -> pb.ServerMessage:
    return pb.ServerMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))


def _link_heartbeat(interval_ms: int) -> pb.Delivery:
    return pb.Delivery(sequence=0, heartbeat=pb.Heartbeat(interval_ms=interval_ms))
