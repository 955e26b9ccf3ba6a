"""Subscribing: register with a disseminator, then receive over one stream until stopped.

Theory of operation. The subscriber opens a ``Subscribe`` stream over mutual TLS; its
certificate is its credential. A site that does not serve every concept the credential is
granted answers ``FAILED_PRECONDITION`` naming its uplink (paper §III.B: solicit the uplink);
the client follows such redirects. Each delivery is handed to the session
(:class:`subscriber.session.Session`: verify, decrypt, store) and acknowledged with its
receipt; the CRL the site relays (at registration and on each reload) goes to the session,
which keeps it only if it is the CA's and newer (:mod:`subscriber.revocation`); the path
refresh requests it raises go back on the stream. A lost stream is resumed after the last
delivery applied, after a backoff (:class:`xdn.backoff.Backoff`: 0.2 s doubling to 5 s,
jittered) that starts again from 0.2 s once a stream has worked (the site registered us).
The failure notices the session signs (its refusals) are handed to the site by a call of
their own (``Notices``, :func:`send_notices`), from the queue that keeps them
until the site answered (:mod:`subscriber.outbox`).

Both ends send a heartbeat on an idle stream; a site silent for three of its intervals is
taken for dead: the stream is dropped and resumed like any lost connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import grpc

from subscriber.messages import stream_end
from subscriber.session import Session, SubscriberSetup, SubscriptionReport, open_dissemination
from subscriber.spool import SpooledDissemination, read_spooled
from subscriber.store import Keyring
from xdn import certs, crypto, lease
from xdn.backoff import Backoff
from xdn.errors import PeerError, ProtocolError, UsageError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.heartbeat import Heartbeats, PeerSilent
from xdn.span_files import FileSource
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wire_parts import DeliveryJoiner

__all__ = [
    "SubscriberSetup",
    "SubscriptionReport",
    "open_dissemination",
    "run_subscriber",
    "run_subscribers",
    "unsubscribe",
]

log = logging.getLogger(__name__)

_REDIRECT_METADATA = "xdn-redirect"
_MAX_REDIRECTS = 8


class _LeftMeanwhile(Exception):
    """The site registered us, but our state says we left (``xdn unsubscribe`` ran while we
    were reconnecting): leave at that site again, and stop."""


class _ConnectionLost(Exception):
    """The stream to the site broke; reconnect and resume.

    ``registered``: the stream had worked (the site registered us) before it broke, so the
    reconnect backoff starts again from its first delay.
    """

    registered = False


async def _stream(session: Session, address: str, stop: asyncio.Event) -> str | None:
    """Run one Subscribe stream; return a redirect address, or None when finished.

    Raises:
        _ConnectionLost: the site went away (reconnect and resume).
        UsageError: the site refused the subscription.
    """
    setup = session.setup
    session.address = address
    outgoing: asyncio.Queue[pb.ClientMessage | None] = asyncio.Queue()
    outgoing.put_nowait(
        pb.ClientMessage(
            subscribe=pb.SubscribeRequest(
                concepts=list(setup.concepts),
                resume_after=session.keyring.applied(address),
                retained=setup.retained,
                lease=session.lease(),  # empty until we know the site (a first stream)
            )
        )
    )

    async def requests() -> AsyncIterator[pb.ClientMessage]:
        while (item := await outgoing.get()) is not None:
            yield item

    credentials = channel_credentials(setup.tls)
    watch = Heartbeats(setup.heartbeat_s)
    parts: DeliveryJoiner[FileSource] = DeliveryJoiner(
        setup.max_document_bytes, f"site {address}", session.spool.open_sink
    )
    async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as channel:
        call = pb_grpc.DisseminatorStub(channel).Subscribe(
            watch.outgoing(requests(), _heartbeat, opening=1)
        )
        stub = pb_grpc.DisseminatorStub(channel)
        stopper = asyncio.ensure_future(stop.wait())
        renewer = asyncio.ensure_future(_renew_leases(session, outgoing))
        notices: asyncio.Future[None] | None = None  # started once the site registered us
        registered = False
        try:
            while True:
                read = asyncio.ensure_future(watch.receive(call.read()))
                done, _ = await asyncio.wait({read, stopper}, return_when=asyncio.FIRST_COMPLETED)
                if read not in done:
                    read.cancel()
                    call.cancel()
                    return None
                message = _received(read, watch, address)
                if message is None:
                    continue
                if message.WhichOneof("kind") == "delivery":
                    delivery = _whole(parts, message.delivery, address)
                    if isinstance(delivery, SpooledDissemination):
                        try:
                            _handle_spooled(session, delivery, outgoing, stop)
                        finally:
                            delivery.delete()
                    elif delivery is not None:
                        _handle_delivery(session, delivery, outgoing, stop)
                elif message.WhichOneof("kind") == "subscribed":
                    registered = True
                    if session.keyring.left_at_ms() is not None:
                        call.cancel()
                        raise _LeftMeanwhile
                    if message.subscribed.heartbeat_ms:  # a busy site asks for fewer
                        watch.slow_to(message.subscribed.heartbeat_ms / 1000)
                    _on_subscribed(session, message.subscribed, outgoing)
                    if notices is None:
                        notices = asyncio.ensure_future(send_notices(session, stub))
        except _ConnectionLost as exc:
            exc.registered = registered
            raise
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                for key, value in exc.trailing_metadata() or ():
                    if key == _REDIRECT_METADATA:
                        print(f"{setup.name}: {exc.details()}", flush=True)
                        return str(value)
            ending = stream_end(setup.name, address, exc.code().name, exc.details() or "")
            if ending.kind == "done":  # `xdn unsubscribe`: a normal end
                print(ending.text, flush=True)
                stop.set()
                return None
            if ending.kind == "lost":  # the site or the connection went away
                lost = _ConnectionLost(ending.text)
                lost.registered = registered
                raise lost from None
            raise UsageError(ending.text) from None
        finally:
            parts.reset()  # (a delivery partly spooled is deleted)
            stopper.cancel()
            renewer.cancel()
            if notices is not None:
                notices.cancel()
            outgoing.put_nowait(None)


async def _renew_leases(
    session: Session, outgoing: asyncio.Queue[pb.ClientMessage | None]
) -> None:
    """Send a fresh lease every third of the lease period while the stream lasts."""
    while True:
        await asyncio.sleep(session.setup.lease_s / 3)
        if session.lease_site is not None:
            outgoing.put_nowait(pb.ClientMessage(lease=session.lease()))


#: The most failure notices handed over in one ``Notices`` call, and their bytes together.
NOTICES_PER_CALL = 64
NOTICE_CALL_BYTES = 1024 * 1024


async def send_notices(session: Session, stub: pb_grpc.DisseminatorStub) -> None:
    """Hand the failure notices the session queued to the site through ``stub`` until
    cancelled: the oldest first, each batch deleted only once the site answered the call
    (:mod:`subscriber.outbox`), a failed call retried with backoff (0.2 s to 5 s)."""
    delay = 0.2
    while True:
        batch = session.notices.batch(limit=NOTICES_PER_CALL, max_bytes=NOTICE_CALL_BYTES)
        if not batch:
            session.notice_ready.clear()
            await session.notice_ready.wait()
            continue
        try:
            ack = await stub.Notices(pb.NoticeBatch(notices=[d for _, d in batch]), timeout=30)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            if code == grpc.StatusCode.UNIMPLEMENTED:  # an older site: they wait for a newer
                log.warning("site takes no failure notices (%s); %d kept queued",
                            exc.details(), session.notices.count())
                return
            log.warning(
                "handing %d failure notices to the site failed (%s: %s); retrying in %.1fs",
                len(batch), code.name if code else "UNKNOWN", exc.details(), delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            continue
        delay = 0.2
        session.notices.drop([seq for seq, _ in batch])
        log.info(
            "handed %d failure notices to the site: %d accepted, %d duplicates, %d refused",
            len(batch), ack.accepted, ack.duplicates, ack.refused,
        )


def _heartbeat(interval_ms: int) -> pb.ClientMessage:
    return pb.ClientMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))


def _received(
    read: asyncio.Future[pb.ServerMessage], watch: Heartbeats, address: str
) -> pb.ServerMessage | None:
    """The message ``read`` got, or None for a heartbeat (noted in ``watch``).

    Raises:
        _ConnectionLost: the site closed the stream, went silent or sent a bad heartbeat.
    """
    try:
        message = read.result()
        if message is grpc.aio.EOF:
            raise _ConnectionLost(f"{address} closed the stream")
        if message.WhichOneof("kind") != "heartbeat":
            return message
        watch.heard_heartbeat(message.heartbeat.interval_ms)
        return None
    except (PeerSilent, ProtocolError) as exc:
        raise _ConnectionLost(f"{address}: {exc}") from None


def _whole(
    parts: DeliveryJoiner[FileSource], delivery: pb.Delivery, address: str
) -> pb.Delivery | SpooledDissemination | None:
    """``delivery``, or once the last of its parts came the delivery they make (None before):
    spooled, a document is read from the spool (:mod:`subscriber.spool`), anything else parsed.

    Raises:
        _ConnectionLost: the parts do not follow, or could not be spooled (reconnect and
            resume).
    """
    try:
        if delivery.WhichOneof("body") == "part":
            what = f"delivery {delivery.sequence} from site {address}"
            sequence = delivery.sequence
            return parts.add(delivery, lambda spooled: read_spooled(spooled, what, sequence))
        parts.check_whole(delivery)
    except ProtocolError as exc:
        raise _ConnectionLost(f"{address}: {exc}") from None
    except OSError as exc:  # the spool could not keep the parts (a full disk): try again later
        raise _ConnectionLost(f"{address}: spooling a delivery in parts failed: {exc}") from None
    return delivery


def _on_subscribed(
    session: Session,
    subscribed: pb.Subscribed,
    outgoing: asyncio.Queue[pb.ClientMessage | None],
) -> None:
    setup = session.setup
    session.report.served_by = subscribed.served_by
    # Our lease names the site that serves us; until it arrives we are no member.
    session.lease_site = (subscribed.served_by, subscribed.block)
    outgoing.put_nowait(pb.ClientMessage(lease=session.lease()))
    grants = session.grants_at_resume(subscribed)
    if subscribed.resumed_after < session.keyring.applied(session.address):
        # The site lost track of our queue; dedupe by document from here on.
        session.keyring.set_applied(session.address, subscribed.resumed_after)
    session.report.retained += subscribed.retained
    if subscribed.crl:  # the site's CRL: kept if newer than the one in force
        session.on_crl(subscribed.crl, session.keyring.applied(session.address))
    session.completeness.new_stream()  # ask again for what is still missing
    if setup.retained:
        now_ms = int(session.clock().timestamp() * 1000)
        session.subscribed_at_ms = session.keyring.subscribed_since_ms(now_ms)
    session.inbox.write_subscription(
        {"subscriber": setup.name, "served_by": subscribed.served_by, "grants": grants}
    )
    retained = subscribed.retained
    print(
        f"{setup.name}: subscribed at {subscribed.served_by}"
        + (f" ({retained} retained documents queued)" if retained else ""),
        flush=True,
    )
    for publisher, concept in session.keyring.stale():  # a new stream: ask again
        if concept in grants.get(publisher, ()):
            session.ask_refresh(publisher, concept, again=True)
        else:  # no longer granted here: nothing to catch up on
            session.keyring.clear_stale(publisher, concept)
    _send_refresh_requests(session, outgoing)
    _send_missing_requests(session, outgoing)


def _handle_delivery(
    session: Session,
    delivery: pb.Delivery,
    outgoing: asyncio.Queue[pb.ClientMessage | None],
    stop: asyncio.Event,
) -> None:
    setup = session.setup
    if delivery.sequence <= session.keyring.applied(session.address):
        outgoing.put_nowait(pb.ClientMessage(ack=pb.Ack(sequence=delivery.sequence)))
        return  # applied before a reconnect; the site did not see our ack
    receipt = b""
    body = delivery.WhichOneof("body")
    if body in ("key", "rekey", "document_keys"):
        try:
            if body == "key":
                session.on_enrolment(delivery.key)
            elif body == "rekey":
                session.on_rekey(delivery.rekey)
            else:
                session.on_document_keys(delivery.document_keys)
        except PeerError as exc:
            print(f"{setup.name}: refused {body} message: {exc}", flush=True)
        keys = getattr(delivery, body)
        session.release_held(
            delivery.sequence,
            publisher=keys.publisher,
            concept=None if body == "document_keys" else keys.concept,
        )
        session.keyring.set_applied(session.address, delivery.sequence)
        _send_refresh_requests(session, outgoing)
    elif body == "grants_changed":
        session.on_grants_changed(delivery.grants_changed, delivery.sequence)
    elif body == "revocation_list":
        session.on_crl(delivery.revocation_list.crl, delivery.sequence)
        session.keyring.set_applied(session.address, delivery.sequence)
    elif body == "checkpoint":
        session.on_checkpoint(delivery.checkpoint, delivery.sequence)
    elif body == "unavailable":
        session.on_unavailable(delivery.unavailable, delivery.sequence)
    elif body == "entitlement":
        session.on_entitlement(delivery.entitlement, delivery.sequence)
    elif body == "ended":  # the site ends the stream once it has our acknowledgement
        print(f"{setup.name}: subscription ends: {delivery.ended.reason}", flush=True)
        session.keyring.set_applied(session.address, delivery.sequence)
    elif body == "dissemination":
        receipt = session.on_dissemination(delivery.dissemination, delivery.sequence)
        _after_document(session, outgoing, stop)
    outgoing.put_nowait(pb.ClientMessage(ack=pb.Ack(sequence=delivery.sequence, receipt=receipt)))
    _send_released_receipts(session, outgoing, delivery.sequence)
    _send_missing_requests(session, outgoing)


def _send_released_receipts(
    session: Session, outgoing: asyncio.Queue[pb.ClientMessage | None], sequence: int
) -> None:
    """The receipts of held documents the delivery ``sequence`` released, each in an ack of
    that delivery again (a repeated ack moves nothing at the site; its receipt is read)."""
    for receipt in session.released_receipts:
        outgoing.put_nowait(pb.ClientMessage(ack=pb.Ack(sequence=sequence, receipt=receipt)))
    session.released_receipts.clear()


def _handle_spooled(
    session: Session,
    stored: SpooledDissemination,
    outgoing: asyncio.Queue[pb.ClientMessage | None],
    stop: asyncio.Event,
) -> None:
    """A document that came in parts, opened from the spool (the caller deletes it)."""
    receipt = b""
    if stored.sequence > session.keyring.applied(session.address):
        receipt = session.on_dissemination(stored.message, stored.sequence, stored=stored)
        _after_document(session, outgoing, stop)
    outgoing.put_nowait(pb.ClientMessage(ack=pb.Ack(sequence=stored.sequence, receipt=receipt)))
    _send_missing_requests(session, outgoing)


def _after_document(
    session: Session, outgoing: asyncio.Queue[pb.ClientMessage | None], stop: asyncio.Event
) -> None:
    _send_refresh_requests(session, outgoing)  # a held document may show we fell behind
    done = session.report.accepted + session.report.refused
    if session.setup.max_documents is not None and done >= session.setup.max_documents:
        stop.set()


def _send_missing_requests(
    session: Session, outgoing: asyncio.Queue[pb.ClientMessage | None]
) -> None:
    for request in session.completeness.requests():
        outgoing.put_nowait(pb.ClientMessage(missing=request))


def _send_refresh_requests(
    session: Session, outgoing: asyncio.Queue[pb.ClientMessage | None]
) -> None:
    for request in session.refresh_requests:
        outgoing.put_nowait(pb.ClientMessage(refresh=request))
    session.refresh_requests.clear()


async def run_subscriber(
    setup: SubscriberSetup,
    stop: asyncio.Event,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> SubscriptionReport:
    """Subscribe and process deliveries until ``stop`` is set or max_documents arrived."""
    session = Session(setup, clock)
    address, redirects, backoff = setup.connect, 0, Backoff()
    try:
        _rejoin_or_refuse(session)
        while not stop.is_set():
            if (left := session.keyring.left_at_ms()) is not None:
                print(f"{setup.name}: unsubscribed at {_iso(left)} (xdn unsubscribe); "
                      "not registering again", flush=True)
                break
            try:
                redirect = await _stream(session, address, stop)
            except _LeftMeanwhile:
                await _leave_again(setup, address)
                continue
            except UsageError as exc:
                if session.keyring.left_at_ms() is None:
                    raise
                print(f"{setup.name}: {exc}", flush=True)  # (the site ended it: we left)
                continue
            except _ConnectionLost as exc:
                if exc.registered:  # it worked: come back quickly (the site may be back)
                    backoff.reset()
                delay = backoff.next()
                print(f"{setup.name}: connection lost ({exc}); reconnecting in {delay:.1f}s",
                      flush=True)
                await _sleep_or_stop(stop, delay)
                continue
            if redirect is None:
                break
            redirects += 1
            if redirects > _MAX_REDIRECTS:
                raise UsageError(
                    f"more than {_MAX_REDIRECTS} redirects; check the sites' uplinks"
                )
            address = redirect
            backoff.reset()
        return session.report
    finally:
        session.report.held = session.keyring.held_count()
        session.report.unvouched = session.completeness.unvouched(
            int(clock().timestamp() * 1000), int(setup.checkpoint_max_age_s * 1000)
        )
        for publisher, why in session.report.unvouched.items():
            print(f"{setup.name}: cannot vouch that nothing of {publisher} was withheld: {why}",
                  flush=True)
        session.close()


def _rejoin_or_refuse(session: Session) -> None:
    """A state that records a leave subscribes again only when asked to (``rejoin``).

    Raises:
        UsageError: the subscriber left (``xdn unsubscribe``) and is not told to rejoin.
    """
    left, setup = session.keyring.left_at_ms(), session.setup
    if left is None:
        return
    if not setup.rejoin:
        raise UsageError(
            f"{setup.name} unsubscribed at {_iso(left)} (xdn unsubscribe), as its state in "
            f"{setup.state_dir} records; pass --rejoin to subscribe again"
        )
    session.completeness.rejoin()  # (first: if interrupted, the leave stays recorded)
    session.keyring.clear_leave()
    print(f"{setup.name}: subscribing again (unsubscribed at {_iso(left)})", flush=True)


async def _leave_again(setup: SubscriberSetup, address: str) -> None:
    """The site at ``address`` registered us after we left: send it our signed leave."""
    try:
        site, _ = await unsubscribe(setup.tls, address)
        print(f"{setup.name}: left again at {site} (it registered us after we unsubscribed)",
              flush=True)
    except UsageError as exc:  # (its registration lapses with its lease)
        print(f"{setup.name}: could not leave again at {address}: {exc}", flush=True)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


async def run_subscribers(
    setups: Sequence[SubscriberSetup],
    stop: asyncio.Event,
    *,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[SubscriptionReport]:
    """Run many subscribers in this process, on this event loop: each has its own session,
    stream and state, and ends at its own ``max_documents``; all end when ``stop`` is set.

    A load generator or a test runs thousands of subscribers this way without a process each
    (set the collector as :func:`xdn.collector.tune_for_service` does first). One that fails
    (a refused subscription, say) ends the others, and the failures are raised together (an
    ``ExceptionGroup``).
    """
    own = [asyncio.Event() for _ in setups]  # (one reaching its max_documents stops only it)

    async def stop_all() -> None:
        await stop.wait()
        for event in own:
            event.set()

    relay = asyncio.ensure_future(stop_all())
    tasks = []
    try:
        async with asyncio.TaskGroup() as group:
            for setup, event in zip(setups, own, strict=True):
                tasks.append(group.create_task(run_subscriber(setup, event, clock=clock)))
                # One start per turn of the loop: started all at once, their synchronous
                # openings would run in one turn, and no stream would be read meanwhile.
                await asyncio.sleep(0)
    finally:
        relay.cancel()
    return [task.result() for task in tasks]


def _leave(tls: TlsFiles, at: datetime) -> bytes:
    """Our signed leave (:mod:`xdn.lease`): whoever relays it, our membership ends now."""
    member = certs.credential_from_pem(tls.cert_pem).member_id
    made = lease.issue(
        member=member, site="", block="", now_ms=lease.millis(at), period_ms=0, leave=True
    )
    return lease.sign(made, crypto.load_private_key_pem(tls.key_pem)).to_bytes()


async def unsubscribe(
    tls: TlsFiles, address: str, *, at: datetime | None = None, state_dir: Path | None = None
) -> tuple[str, int]:
    """End this credential's subscription at ``address`` with a signed leave; return (site,
    deliveries dropped).

    With ``state_dir`` (the subscriber's), the leave is first recorded there: a subscriber
    running on that state (reconnecting, say) or started on it later does not register
    again, even if the site cannot be told now (then its registration lapses with its lease).

    Raises:
        UsageError: the site refused or could not be reached (the leave stays recorded).
    """
    when = at or datetime.now(UTC)
    if state_dir is not None:
        keyring = Keyring(state_dir / "keyring.sqlite")
        try:
            keyring.record_leave(lease.millis(when))
        finally:
            keyring.close()
    leave = _leave(tls, when)
    credentials = channel_credentials(tls)
    async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as channel:
        try:
            ack = await pb_grpc.DisseminatorStub(channel).Unsubscribe(
                pb.UnsubscribeRequest(leave=leave), timeout=30
            )
        except grpc.aio.AioRpcError as exc:
            raise UsageError(
                f"unsubscribe at {address}: {exc.code().name}: {exc.details()}"
            ) from None
    return ack.site, ack.discarded


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
