"""The disseminator's gRPC servicer: checks peers, converts messages, calls the site node.

Every call is mutual TLS; each handler first checks the peer's certificate (issuer,
revocation, validity, role), then converts protobuf into the routing core's values and back.
Errors map to status codes in one place (:func:`_abort`). A streaming handler reads the
stream's opening message before it may refuse the call (:func:`_opening`), so the caller always
learns the status the site sent.

* ``Publish`` (publisher → root): queue the key messages and the document's fragments (a
  request may carry key messages only). Refused with ``FAILED_PRECONDITION`` at a site that is
  not a root or enforces no policy of the publisher (:mod:`xdn.publication`); the
  acknowledgement says what the document reached and where the site stands. A publication
  routed before as its document's newest version (its ``publish_id``) is not routed again: the
  acknowledgement says ``published_before`` (:mod:`disseminator.publications`).
  ``PublishParts`` is the same for a request too large for one message, sent in parts
  (:mod:`disseminator.publish_parts`); its caller is checked at the first part, and a refused
  caller is read to its half-close (for a few seconds at most) before it gets its status.
* ``Subscribe`` (subscriber): evaluate every publisher's policy for the credential; register
  when ``auth_list ⊆ served_list``, otherwise fail with ``FAILED_PRECONDITION`` carrying the
  uplink to solicit in trailing metadata ``xdn-redirect`` (paper §III.B) — or, at a site that
  is no root and does not know its uplink yet (restarted while it was down), with
  ``UNAVAILABLE`` "not serving yet", which the subscriber retries; a new subscriber
  that asks for it first gets the retained recent documents it may read (state at subscribe
  time); then stream the subscriber's queue, resuming after what it last applied.
* ``Unsubscribe``: end the subscription, drop its queue, acknowledge (paper §III.D); the
  interest sent upstream shrinks accordingly.
* ``Link`` (downlink → uplink): the downlink states the members behind it (re-evaluated here,
  never trusted) and receives what they may receive: the whole set first, then numbered deltas
  of which only the members added or changed are checked (:mod:`disseminator.interest`); a
  delta that does not follow the version in force ends the stream, and the downlink sends the
  whole set on its next one. The downlink's certificate is checked at
  connect (CA, validity, CRL) and again whenever the CRL changes and on every housekeeping
  pass (:meth:`DisseminatorService.cut_untrusted_links`): a revoked or expired one is cut.

A site whose CRL is stale beyond its grace refuses anything new — a subscriber not registered
here, a downlink not linked here — with ``FAILED_PRECONDITION`` (``crl_refusal``, see
:mod:`disseminator.revocation`); what is in place continues.
* ``Receipts`` (downlink → uplink) and ``GetReceipts`` (publisher, at its root): delivery
  receipts travelling upstream; a subscriber's comes with its ``Ack``. Each is verified here
  before it is logged and passed on (:mod:`disseminator.receipts`); a bad one is refused alone
  (counted, logged), never failing the ack or the call that carried it.
* ``GetMembership`` (publisher's key service): who is registered, with their certificates,
  and where the site stands for the publisher (checked before anything is encrypted).

No caller can stall the site (:mod:`disseminator.limits`): a request past a limit is refused
with ``RESOURCE_EXHAUSTED`` by a check that costs O(1) and comes before the work it guards. The
request deserializers refuse an oversized stream message, or a large message the memory budget
cannot hold, before parsing it; streams are counted per certificate from the moment they open;
a peer's heartbeat interval is checked as it arrives; a downlink's interest arrives in chunks,
whose members are verified in small slices between which the loop serves other calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import Message

from disseminator.body_chunks import StoredBytes
from disseminator.intake import Handed, KeptStream, Malformed, add_to_server, well_formed
from disseminator.interest import LinkInterest
from disseminator.limits import (
    LimitExceeded,
    Limits,
    MemoryBudget,
    StreamCounts,
)
from disseminator.members import to_pb_member
from disseminator.node import SiteNode
from disseminator.notices import SiteNotices
from disseminator.payloads import Outgoing
from disseminator.planning import Received
from disseminator.publications import MAX_PUBLISH_ID_BYTES
from disseminator.publish_parts import WHAT, joined_request
from disseminator.receipts import SiteReceipts
from disseminator.routing import (
    Accept,
    Destination,
    NotReady,
    Redirect,
    Registration,
    decide_subscription,
)
from disseminator.store import Body, QueueFull
from disseminator.stored_documents import StagedRequest, StoredDocument, read_request
from disseminator.stream_watch import StreamWatch
from xdn import certs, lease
from xdn.errors import CertificateError, PeerError, ProtocolError, StorageFull
from xdn.grpc_tls import peer_certificate
from xdn.liveness import interval_ms
from xdn.logthrottle import ThrottledLog
from xdn.notices import is_notice
from xdn.publication import site_refusal
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wireconv import published_before_to_pb, standing_to_pb

__all__ = ["REDIRECT_METADATA", "DisseminatorService", "Malformed", "add_to_server"]

log = logging.getLogger(__name__)

REDIRECT_METADATA = "xdn-redirect"
WINDOW = 1024
# How long a stream over its certificate's limit may take to send its opening message (read
# so that the caller learns the status) before it is refused anyway.
_OVER_LIMIT_GRACE_S = 1.0
# Downlink members verified at once before the loop serves other calls.
_VERIFY_SLICE = 32
# How long a refused PublishParts call may go on sending (dropped as read) before the site
# ends it anyway (see _drain).
_REFUSED_PARTS_GRACE_S = 10.0


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
    elif isinstance(exc, LimitExceeded | StorageFull):
        code = grpc.StatusCode.RESOURCE_EXHAUSTED
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


async def _drain(parts: KeptStream, grace_s: float) -> None:
    """Read and drop the rest of a refused client stream, for at most ``grace_s`` seconds.

    A client still writing when the site ends its call may see ``INTERNAL`` ("Internal error
    from Core") in place of the status the site sent: grpc.aio lets the failed write replace
    the status (grpc/grpc#36066). So a refused ``PublishParts`` caller is read to its
    half-close before the status goes out; what it sends is dropped as it arrives and is
    released from the memory budget at once (:meth:`KeptStream.let_go`).
    """
    parts.let_go()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(grace_s):
            async for _ in parts:
                pass


class DisseminatorService(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """The RPC surface of one site."""

    def __init__(
        self,
        node: SiteNode,
        *,
        heartbeat_s: float = 5.0,
        limits: Limits | None = None,
        crl_refusal: Callable[[], str | None] = lambda: None,
        receipts: SiteReceipts | None = None,
        notices: SiteNotices | None = None,
    ) -> None:
        self._node = node
        self._crl_refusal = crl_refusal  # why new registrations and links are refused now
        self._link_peers: dict[str, certs.Credential] = {}  # certificate of each live link
        self._heartbeat_s = heartbeat_s
        # A silent caller is let go like a silent peer, but never before 10 s.
        self._opening_timeout_s = max(3 * heartbeat_s, 10.0)
        self._draining = False
        self._link_blocks: dict[str, str] = {}
        self._stream_errors: dict[Destination, Exception] = {}
        self.limits = limits or Limits()
        self.budget = MemoryBudget(self.limits.memory_bytes)
        self._streams = StreamCounts()
        self._refused_log = ThrottledLog(log)  # (a flood of bad certificates: a line each)
        self.receipts = receipts or SiteReceipts(node, self.limits)
        self.notices = notices or SiteNotices(node, self.limits, wake=self.receipts.queued)

    def stop_taking_work(self) -> None:
        """Refuse new Publish, Subscribe and Link calls (the site is shutting down)."""
        self._draining = True

    async def _refuse_if_draining(self, context: grpc.aio.ServicerContext) -> None:
        if self._draining:
            await context.abort(
                grpc.StatusCode.UNAVAILABLE, f"site {self._node.site.name} is shutting down"
            )

    def _watch(self, destination: Destination, interval_s: float | None = None) -> StreamWatch:
        return StreamWatch(
            destination, interval_s or self._heartbeat_s, site=self._node.site.name,
            metrics=self._node.metrics,
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
            self._refused_log.warning("refused peer: %s", exc)
            raise _Abort(grpc.StatusCode.UNAUTHENTICATED, str(exc)) from None

    # ---- publishing ----------------------------------------------------------------------
    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        await self._refuse_if_draining(context)
        try:
            well_formed(request)
            publisher = self._peer(context, role="publisher")
            storage = self._node.storage
            storage.check("publish")
            with storage.mapped("publish"):
                return self._publish(publisher, request)
        except (_Abort, PeerError, StorageFull) as exc:
            await self._refuse(context, exc)
            raise

    async def PublishParts(
        self, parts: KeptStream, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        """Publish, for a request sent in parts (:mod:`disseminator.publish_parts`): the caller
        is checked at its first part, before any more of the request is read."""
        try:
            first = await _opening(parts, self._opening_timeout_s)
            if self._draining:
                raise _Abort(
                    grpc.StatusCode.UNAVAILABLE, f"site {self._node.site.name} is shutting down"
                )
            publisher = self._peer(context, role="publisher")
            storage = self._node.storage
            storage.check("publish")
            with storage.mapped("publish"):
                return await self._publish_parts(publisher, first, parts)
        except (_Abort, PeerError, StorageFull) as exc:
            await _drain(parts, _REFUSED_PARTS_GRACE_S)
            await self._refuse(context, exc)
            raise

    async def _publish_parts(
        self, publisher: certs.Credential, first: Any, parts: KeptStream
    ) -> pb.PublishAck:
        """Stage the rest of a request sent in parts, then publish it."""
        store = self._node.store
        joined = await joined_request(
            first, parts, limit=self.limits.document_bytes, open_sink=store.stage,
            on_part=parts.release,  # (each part's memory share: it is in the store)
        )
        try:
            staged = _staged_request(joined.message, joined.size)
            self._node.metrics.publish_parts.inc(joined.parts)
            log.info(
                "publish by %s staged from %d parts (%d bytes)",
                publisher.name, joined.parts, joined.size,
            )
            return self._publish(publisher, staged.rest, staged.document)
        finally:
            store.let_go(joined.message)  # (kept if routing refers to it)

    def _publish(
        self,
        publisher: certs.Credential,
        request: pb.PublishRequest,
        staged: StoredDocument | None = None,
    ) -> pb.PublishAck:
        """Route a publisher's request (however it came: ``staged``, the document of one
        staged in the store as its parts came, beside its other fields) and say what it
        reached.

        Raises:
            _Abort: the site takes nothing from this publisher, or the request publishes in
                another publisher's name.
            PeerError: the request is malformed or names another publisher.
        """
        standing = self._node.standing(publisher.name)
        refused = site_refusal(standing, publisher.name)
        if refused is not None:
            raise _Abort(
                grpc.StatusCode.FAILED_PRECONDITION, refused.reason, redirect=refused.uplink
            )
        document: Received | None = staged
        if staged is None and request.HasField("dissemination"):
            if not request.dissemination.HasField("manifest"):
                raise ProtocolError("a PublishRequest's dissemination needs a manifest")
            document = request.dissemination
        has_document = document is not None
        manifest = request.dissemination.manifest if document is None else document.manifest
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
        if len(request.publish_id) > MAX_PUBLISH_ID_BYTES:
            raise ProtocolError(
                f"a publish id is at most {MAX_PUBLISH_ID_BYTES} bytes, "
                f"got {len(request.publish_id)}"
            )
        if not has_document and not addressed and checkpoint is None:
            raise ProtocolError("a PublishRequest carries neither a document nor keys")
        try:
            reach = self._node.route(
                dissemination=document,
                keys=list(request.keys),
                rekeys=list(request.rekeys),
                document_keys=list(request.document_keys),
                checkpoint=checkpoint,
                entitlements=list(request.entitlements),
                publish_id=request.publish_id,
            )
        except QueueFull as exc:  # refused before the acknowledgement: publish again later
            raise _Abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, f"{exc}; nothing routed, publish again later"
            ) from None
        return pb.PublishAck(
            document_id=manifest.document_id,
            fragments_accepted=reach.fragments,
            links_reached=reach.destinations,
            subscribers_reached=reach.subscribers,
            retained=reach.retained,
            standing=standing_to_pb(standing),
            published_before=(
                None if reach.before is None else published_before_to_pb(reach.before)
            ),
        )

    def _asking_publisher(
        self, request: Any, context: grpc.aio.ServicerContext, what: str
    ) -> certs.Credential:
        """The publisher calling, which may ask only about itself (``request.publisher``)."""
        well_formed(request)
        publisher = self._peer(context, role="publisher")
        if request.publisher != publisher.name:
            raise _Abort(grpc.StatusCode.PERMISSION_DENIED, f"ask for your own {what}")
        return publisher

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        try:
            publisher = self._asking_publisher(request, context, "membership")
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        members, gone, everything = self._node.membership(
            publisher.name, view=request.view, since=request.since
        )
        return pb.Membership(
            members=members,
            site=self._node.site.name,
            standing=standing_to_pb(self._node.standing(publisher.name)),
            view=self._node.membership_journal.view,
            version=self._node.membership_journal.version,
            changes_only=not everything,
            gone=gone,
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
        well_formed(first)
        if first is None or first.WhichOneof("kind") != "subscribe":
            raise ProtocolError("a Subscribe stream must start with a SubscribeRequest")
        ending = node.ending(credential.member_id)
        if ending is not None and ending.certificate == pem:
            return ending, first.subscribe, None
        named = first.subscribe.concepts
        self.limits.check_concepts(len(named), ontology_size=len(node.ontology.concepts))
        requested: frozenset[str] = frozenset()
        seen: set[str] = set()
        for concept in named:  # no more than the limit, each looked up once
            if concept not in node.ontology.concepts:
                raise _Abort(grpc.StatusCode.INVALID_ARGUMENT, f"unknown concept {concept!r}")
            if concept in seen:
                raise _Abort(
                    grpc.StatusCode.INVALID_ARGUMENT, f"concept {concept!r} is named twice"
                )
            seen.add(concept)
            requested |= node.ontology.block(concept)
        decision = decide_subscription(
            node.grants(pem), requested=requested, served=node.served, uplink=node.uplink_address,
            uplink_pending=node.uplink_address is None and bool(
                node.ontology.parents(node.site.block)
            ),
        )
        if isinstance(decision, NotReady):
            raise _Abort(
                grpc.StatusCode.UNAVAILABLE,
                f"site {node.site.name} is not serving yet: it does not know its uplink yet "
                f"(it serves {node.site.block}, not {sorted(decision.unserved)}); try again",
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
            subscriber=credential.member_id, certificate=pem, grants=decision.grants,
            lease=self._opening_lease(credential.member_id, pem, first.subscribe.lease),
        )
        return registration, first.subscribe, requested

    def _opening_lease(self, subscriber: str, certificate: bytes, data: bytes) -> bytes:
        """The lease a SubscribeRequest carries, if valid here; else none (the subscriber
        sends one for this site once it has learnt the site's name from ``Subscribed``)."""
        if not data:
            return b""
        try:
            return self._node.check_lease(subscriber, certificate, data)
        except PeerError as exc:
            log.info("opening lease of %s ignored: %s", subscriber, exc)
            return b""

    async def Subscribe(
        self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ServerMessage | Handed]:
        async with self._counted("Subscribe", request_iterator, context) as counted:
            if counted:
                async with contextlib.aclosing(
                    self._subscribe(request_iterator, context)
                ) as replies:
                    async for reply in replies:
                        yield reply

    async def _subscribe(
        self, request_iterator: AsyncIterator[pb.ClientMessage], context: grpc.aio.ServicerContext
    ) -> AsyncGenerator[pb.ServerMessage | Handed, None]:
        """Admit a subscriber and stream its deliveries (sent as stored: bytes)."""
        node = self._node
        try:
            first = await _opening(request_iterator, self._opening_timeout_s)
            await self._refuse_if_draining(context)
            registration, request, requested = await self._admit(first, context)
            destination = Destination("subscriber", registration.subscriber)
            retained = 0
            if requested is not None:
                new = registration.subscriber not in node.table.local
                if new and (refusal := self._crl_refusal()) is not None:
                    raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, refusal)
                if new:  # (one already registered is served what it has, full or not)
                    node.storage.check("subscription", "a new subscription")
                with node.storage.mapped("subscription"):
                    registration = node.register_local(registration, requested)
                if not registration.grants:
                    node.unregister_local(registration.subscriber)
                    raise _Abort(
                        grpc.StatusCode.PERMISSION_DENIED,
                        "no policy grants it anything any more: the certificate has received "
                        "every document instance its grants allowed (max_instances)",
                    )
                if new and request.retained:
                    with node.storage.mapped("subscription"):
                        retained = node.replay_retained(registration)
            cursor = node.connect(destination, request.resume_after, WINDOW)
        except (_Abort, PeerError, StorageFull) as exc:
            await self._refuse(context, exc)
            raise
        generation = node.generation(destination)
        log.info("registered %s for %s", registration.subscriber, dict(registration.grants))
        heartbeat_s = self.limits.stream_heartbeat_s(self._heartbeat_s, self._streams.total)
        watch = self._watch(destination, heartbeat_s)
        acks = asyncio.ensure_future(
            self._read_acks(
                watch.incoming(self._bounded(request_iterator)), destination, cursor, context
            )
        )
        try:
            yield pb.ServerMessage(
                subscribed=pb.Subscribed(
                    subscriber=registration.subscriber,
                    served_by=node.site.name,
                    block=node.site.block,
                    grants=to_pb_member(registration).grants,
                    resumed_after=cursor.sent,
                    retained=retained,
                    crl=node.crl_pem,
                    heartbeat_ms=interval_ms(heartbeat_s),
                )
            )
            pumped = node.pump(destination, cursor, generation)
            async with contextlib.aclosing(
                watch.outgoing(context, pumped, _subscriber_heartbeat)
            ) as messages:
                async for message in messages:  # (read ahead as stored: joined only to go out)
                    if not isinstance(message, Outgoing):
                        yield message
                        continue
                    parts = message.in_parts(self.limits.part_bytes)
                    # Handed: a stream waiting to send, or idle, holds no copy of what it sent
                    for each in map(Handed, message.server_messages(self.limits.part_bytes)):
                        if parts:  # (a large delivery: its parts, made one after another)
                            node.metrics.parts_sent.labels(kind="subscriber").inc()
                        yield each
                    del message
            error = self._stream_errors.pop(destination, None)
            if error is not None:
                await _abort(context, error)
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
        interest = LinkInterest(self.limits, generation=self._node.generation(destination))
        with contextlib.suppress(asyncio.CancelledError):
            try:
                async for message in requests:
                    well_formed(message)
                    kind = message.WhichOneof("kind")
                    if kind == "ack":
                        self._node.on_ack(destination, cursor, message.ack.sequence)
                        if message.ack.receipt and destination.kind == "subscriber":
                            await self._on_receipt(destination.name, message.ack.receipt)
                    elif kind == "interest" and destination.kind == "link":
                        await self._on_interest(destination.name, message.interest, interest)
                    elif kind == "lease" and destination.kind == "subscriber":
                        self._node.renew_lease(destination.name, message.lease)
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
                self._stream_errors[destination] = exc
                self._node.end_stream(destination)
            except (grpc.aio.AioRpcError, grpc.aio.AbortError):
                pass  # the stream ended: the peer went away, or we ended it (silent, refused)
            except Exception:  # never die silently, leaving a stream nobody reads
                log.exception(
                    "%s %s: reading its stream failed", destination.kind, destination.name
                )
                self._stream_errors[destination] = _Abort(
                    grpc.StatusCode.INTERNAL,
                    f"site {self._node.site.name} failed to read the stream",
                )
                self._node.end_stream(destination)

    async def _on_receipt(self, subscriber: str, data: bytes) -> None:
        """A subscriber's receipt, sent with an acknowledgement that is already applied: a
        bad one is counted, logged and dropped, never failing the ack or the stream. It is
        verified on a worker thread, so that documents keep flowing meanwhile."""
        try:
            receipt = await asyncio.to_thread(self.receipts.read, data)
            self.receipts.from_subscriber(subscriber, receipt)
        except PeerError as exc:
            self.receipts.refused("subscriber", exc, sender=subscriber)

    async def Unsubscribe(
        self, request: pb.UnsubscribeRequest, context: grpc.aio.ServicerContext
    ) -> pb.UnsubscribeAck:
        try:
            well_formed(request)
            subscriber = self._peer(context, role="subscriber")
            if subscriber.member_id not in self._node.table.local:
                raise _Abort(
                    grpc.StatusCode.NOT_FOUND,
                    f"{subscriber.name!r} (certificate {subscriber.member_id}) has no "
                    f"subscription at site {self._node.site.name}",
                )
            if request.leave:
                self._check_leave(subscriber.member_id, request.leave)
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        discarded = self._node.unregister_local(
            subscriber.member_id, reason="unsubscribed at the subscriber's request"
        )
        log.info("unsubscribed %s (%d queued deliveries dropped)", subscriber.member_id, discarded)
        return pb.UnsubscribeAck(
            subscriber=subscriber.member_id, site=self._node.site.name, discarded=discarded
        )

    def _check_leave(self, subscriber: str, data: bytes) -> None:
        """A signed leave sent with Unsubscribe must be the subscriber's own.

        Raises:
            PeerError: it is not an authentic leave of ``subscriber``.
        """
        left = lease.open_lease(
            data, certificate_pem=self._node.table.local[subscriber].certificate,
            ca_pem=self._node.site.tls.ca_pem, at=self._node.now(), revoked=self._node.revoked,
            member=subscriber,
        )
        if not left.leave:
            raise ProtocolError("UnsubscribeRequest.leave is a lease, not a signed leave")

    # ---- downlinks -----------------------------------------------------------------------
    async def Link(
        self, request_iterator: AsyncIterator[pb.LinkMessage], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.Delivery | Handed]:
        async with self._counted("Link", request_iterator, context) as counted:
            if counted:
                async with contextlib.aclosing(self._link(request_iterator, context)) as replies:
                    async for reply in replies:
                        yield reply

    async def _link(
        self, request_iterator: AsyncIterator[pb.LinkMessage], context: grpc.aio.ServicerContext
    ) -> AsyncGenerator[pb.Delivery | Handed, None]:
        """Admit a downlink and stream its deliveries (sent as stored: bytes)."""
        node = self._node
        try:
            first = await _opening(request_iterator, self._opening_timeout_s)
            await self._refuse_if_draining(context)
            peer = self._peer(context, role="site")
            well_formed(first)
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
            known = peer.name in node.table.links or peer.name in self._link_peers
            if not known and (refusal := self._crl_refusal()) is not None:
                raise _Abort(grpc.StatusCode.FAILED_PRECONDITION, refusal)
            destination = Destination("link", peer.name)
            cursor = node.connect(destination, hello.resume_after, WINDOW)
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        self._link_peers[peer.name] = peer
        self._link_blocks[peer.name] = hello.block
        node.set_link_block(peer.name, hello.block, peer.serial)
        generation = node.generation(destination)
        watch = self._watch(destination)
        reader = asyncio.ensure_future(
            self._read_acks(
                watch.incoming(self._bounded(request_iterator)), destination, cursor, context
            )
        )
        log.info("downlink %s connected (block %s)", peer.name, hello.block)
        try:
            pumped = node.pump(destination, cursor, generation)
            async with contextlib.aclosing(
                watch.outgoing(context, pumped, _link_heartbeat)
            ) as deliveries:
                async for delivery in deliveries:  # (likewise)
                    if not isinstance(delivery, Outgoing):
                        yield delivery
                        continue
                    parts = delivery.in_parts(self.limits.part_bytes)
                    for each in map(Handed, delivery.delivery_messages(self.limits.part_bytes)):
                        if parts:
                            node.metrics.parts_sent.labels(kind="site").inc()
                        yield each
                    del delivery
            error = self._stream_errors.pop(destination, None)
            if error is not None:
                await _abort(context, error)
            reason = node.ended(peer.name)
            if reason is not None:
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED, f"link ended by the site: {reason}"
                )
        finally:
            reader.cancel()
            if self._link_peers.get(peer.name) is peer:
                del self._link_peers[peer.name]
            node.disconnect(destination, generation)
            log.info("downlink %s disconnected", peer.name)

    def cut_untrusted_links(self) -> list[str]:
        """Cut every live link whose downlink certificate is now revoked or expired.

        Called when the CRL changes and on every housekeeping pass; return what was done.
        """
        node, now, done = self._node, self._node.now(), []
        for site, peer in list(self._link_peers.items()):
            if node.ended(site) is not None:  # already cut (node.set_revoked): ending
                del self._link_peers[site]
                continue
            if peer.serial in node.revoked:
                reason = "its certificate was revoked"
            elif not peer.valid_at(now):
                reason = f"its certificate expired at {peer.not_after.isoformat()}"
            else:
                continue
            del self._link_peers[site]
            node.cut_link(site, reason)
            done.append(f"downlink {site} cut off: {reason}")
            log.warning("downlink %s cut off: %s", site, reason)
        return done

    async def _on_interest(
        self, site: str, interest: pb.InterestUpdate, state: LinkInterest
    ) -> None:
        """One chunk of an update of a downlink's members (the whole set, or a delta); the
        update is put in force with its last chunk. Only the members it lists are checked.

        Raises:
            LimitExceeded: the chunk, or the set it makes, lists too many members.
            ProtocolError: one certificate or one name is listed twice, or a delta does not
                follow the version in force (:class:`~disseminator.interest.InterestGap`).
        """
        node = self._node
        members = state.take(interest)
        served = node.ontology.block(self._link_blocks[site])
        for start in range(0, len(members), _VERIFY_SLICE):
            verified = node.verified_members(
                members[start:start + _VERIFY_SLICE], served, link=site
            )
            state.add_verified(verified)
            await asyncio.sleep(0)  # let other calls run between slices
        if interest.more:
            return
        change = state.finish()
        if node.generation(Destination("link", site)) != state.generation:
            return  # a newer stream of this downlink took over: its whole set counts
        if change.whole:
            node.set_link_members(site, change.verified)
            node.set_link_refreshes(site, change.members)
        else:
            node.change_link_members(site, change.verified, removed=change.removed)
            node.change_link_refreshes(site, change.members, gone=change.gone)
        node.metrics.interest_updates.labels(kind="whole" if change.whole else "delta").inc()

    # ---- receipts (see disseminator.receipts) ---------------------------------------------
    async def Receipts(
        self, request: pb.ReceiptBatch, context: grpc.aio.ServicerContext
    ) -> pb.ReceiptBatchAck:
        try:
            well_formed(request)
            peer = self._peer(context, role="site")
            linked = self._link_peers.get(peer.name)
            if linked is None or linked.fingerprint != peer.fingerprint:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"site {peer.name!r} is not linked here as a downlink: link first",
                )
            self.limits.check_receipts(len(request.receipts))
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        ack = pb.ReceiptBatchAck()
        for data in request.receipts:
            notice = is_notice(data)  # a subscriber's failure notice, passed up with them
            try:
                if notice:
                    fresh = self.notices.from_downlink(
                        peer, await asyncio.to_thread(self.notices.read, data)
                    )
                else:
                    fresh = self.receipts.from_downlink(
                        peer, await asyncio.to_thread(self.receipts.read, data)  # off the loop
                    )
                if fresh:
                    ack.accepted += 1
                else:
                    ack.duplicates += 1
            except PeerError as exc:
                ack.refused += 1
                (self.notices if notice else self.receipts).refused(
                    "downlink", exc, sender=peer.name
                )
        return ack

    async def Notices(
        self, request: pb.NoticeBatch, context: grpc.aio.ServicerContext
    ) -> pb.ReceiptBatchAck:
        """A subscriber hands over its failure notices (see :mod:`disseminator.notices`):
        each is checked alone; a bad one is counted, logged and dropped, never failing the
        call, so the answer tells the subscriber it may forget them all."""
        try:
            well_formed(request)
            peer = self._peer(context, role="subscriber")
            self.limits.check_receipts(len(request.notices))
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        ack = pb.ReceiptBatchAck()
        for data in request.notices:
            try:
                notice = await asyncio.to_thread(self.notices.read, data)  # off the loop
                if self.notices.from_subscriber(peer, notice):
                    ack.accepted += 1
                else:
                    ack.duplicates += 1
            except PeerError as exc:
                ack.refused += 1
                self.notices.refused("subscriber", exc, sender=peer.member_id)
        return ack

    async def GetReceipts(
        self, request: pb.ReceiptsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReceiptsReply:
        try:
            publisher = self._asking_publisher(request, context, "receipts")
            if not self.receipts.root:
                raise _Abort(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    f"site {self._node.site.name} is not a root site: receipts are kept at "
                    f"the root, ask there (its uplink is {self._node.uplink_address})",
                    redirect=self._node.uplink_address,
                )
        except (_Abort, PeerError) as exc:
            await self._refuse(context, exc)
            raise
        kept, more = self.receipts.for_publisher(
            publisher.name, after=request.after, limit=request.limit
        )
        return pb.ReceiptsReply(
            receipts=[pb.StoredReceipt(id=r.seq, receipt=r.data) for r in kept],
            more=more,
            site=self._node.site.name,
        )

    # ---- limits --------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _counted(
        self, method: str, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bool]:
        """Count a stream against its certificate's limit for as long as it is open.

        Yields ``True`` for a stream within the limit; past it, the call is refused with
        ``RESOURCE_EXHAUSTED`` after reading its opening message (briefly) and the body is
        skipped, unless the certificate itself is refused (revoked, the wrong role): that
        refusal is the one that tells the caller what to do.
        """
        kind = "subscriber" if method == "Subscribe" else "site"
        limit = (
            self.limits.streams_per_subscriber if kind == "subscriber"
            else self.limits.streams_per_site
        )
        try:
            key = hashlib.sha256(peer_certificate(context.auth_context())).digest()
        except CertificateError:
            yield True  # no certificate: the handler refuses the peer
            return
        if not self._streams.open(kind, key, limit):
            try:
                self._peer(context, role=kind)
            except _Abort as exc:
                await self._refuse(context, exc)
            with contextlib.suppress(ProtocolError):
                await _opening(requests, _OVER_LIMIT_GRACE_S)
            await self._refuse(context, LimitExceeded(
                f"this {kind} certificate already holds {limit} open {method} streams",
                limit=f"streams_per_{kind}", value=limit,
                advice="close a stream first (a reconnecting client ends its old stream)",
            ))
            yield False
            return
        try:
            yield True
        finally:
            self._streams.close(kind, key)

    async def _bounded(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The peer's messages; a heartbeat announcing an interval out of bounds is refused.

        Raises:
            LimitExceeded: a heartbeat's interval is outside the limits.
        """
        async for message in requests:
            if isinstance(message, Message) and message.WhichOneof("kind") == "heartbeat":
                interval = message.heartbeat.interval_ms
                if interval > 0:  # no interval at all is a protocol error, said further on
                    self.limits.check_heartbeat(interval)
            yield message


def _staged_request(stored: StoredBytes, size: int) -> StagedRequest:
    """A request staged from its parts, its framing read (the document scanned later, when
    it is routed).

    Raises:
        ProtocolError: the bytes are not a ``PublishRequest``.
    """
    try:
        return read_request(Body(stored), WHAT)
    except ProtocolError as exc:
        raise ProtocolError(
            f"the {size} bytes joined from the parts of a PublishParts call are not a valid "
            f"PublishRequest: {exc}"
        ) from None


def _subscriber_heartbeat(interval_ms: int) -> pb.ServerMessage:
    return pb.ServerMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))


def _link_heartbeat(interval_ms: int) -> pb.Delivery:
    return pb.Delivery(sequence=0, heartbeat=pb.Heartbeat(interval_ms=interval_ms))
