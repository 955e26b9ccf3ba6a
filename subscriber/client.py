"""Subscribing: register with a disseminator, receive, decrypt, verify, reassemble, store.

Theory of operation. The subscriber opens a ``Subscribe`` stream over mutual TLS; its
certificate is its credential. A site that does not serve every concept the credential is
granted answers ``FAILED_PRECONDITION`` naming its uplink (paper §III.B: solicit the uplink);
the client follows such redirects. Deliveries then arrive in order:

* a key message is opened with the subscriber's private key (HPKE) and kept in the keyring;
* a dissemination is checked end to end: the publisher certificate against the CA, then the
  codec verifies the manifest signature, every inclusion proof and every GCM tag before the
  view is rebuilt. Anything that fails is refused — recorded with the reason, never written
  as a view — and the stream goes on;
* a dissemination whose keys have not arrived yet is held (durably) and opened as soon as a
  key message brings them;
* a rekey more than one epoch ahead (we missed one) makes us ask the site for a path refresh
  of that group, repeated on every new stream until the key service's enrolment arrives.

State at subscribe time: a new subscriber may ask its site for the retained recent documents
(``retained``). Their keys come as document-key grants with the publisher's enrolment. The
site holds only the concepts that were flowing to it, so for documents issued before the
subscription began each concept that arrived must be whole, and concepts granted but absent are
recorded as ``missing``; for every later document, every granted concept must arrive whole.

Each accepted document gets a signed receipt envelope (the RECEIVED stage), appended to the
subscriber's provenance log and sent back with the acknowledgement.

Both ends send a heartbeat on an idle stream; a site silent for three of its intervals is
taken for dead: the stream is dropped and resumed like any lost connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import grpc

from subscriber.store import Inbox, Keyring
from xdn import certs, crypto, provenance
from xdn.codec import View, decode, fragment_concepts, key_name
from xdn.errors import DecryptError, PeerError, ProtocolError, UsageError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.heartbeat import Heartbeats, PeerSilent
from xdn.lkh import EpochGapError, MemberKeys, open_document_keys
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wireconv import (
    delivery_from_pb,
    document_keys_from_pb,
    enrolment_from_pb,
    rekey_from_pb,
)

__all__ = [
    "SubscriberSetup",
    "SubscriptionReport",
    "open_dissemination",
    "run_subscriber",
    "unsubscribe",
]

log = logging.getLogger(__name__)

_REDIRECT_METADATA = "xdn-redirect"
_MAX_REDIRECTS = 8
# Status codes by which a site refuses a subscription; any other ends in a reconnect.
_REFUSALS = frozenset(
    {
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberSetup:
    """Everything one subscriber needs."""

    name: str
    tls: TlsFiles
    connect: str
    out_dir: Path
    state_dir: Path
    provenance_log: Path
    concepts: tuple[str, ...] = ()
    max_documents: int | None = None
    retained: bool = False  # ask for the retained recent documents when first registering
    heartbeat_s: float = 5.0


@dataclass(slots=True)
class SubscriptionReport:
    """What a subscription run saw."""

    served_by: str = ""
    grants: dict[str, list[str]] = field(default_factory=dict)
    accepted: int = 0
    refused: int = 0
    keys: int = 0
    held: int = 0  # documents waiting for their keys
    retained: int = 0  # retained documents the site queued at registration


def open_dissemination(
    message: pb.Dissemination,
    *,
    ca_pem: bytes,
    keys: Callable[[str, str, int], bytes | None],
    at: datetime,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    document_keys: Callable[[str], bytes | None] | None = None,
) -> View:
    """Verify and decrypt one received dissemination; raise a PeerError if anything is wrong.

    ``concepts`` are the concepts granted from this publisher (each must arrive whole; default:
    those a key is held for); ``seen`` the last version accepted per (publisher, document);
    ``document_keys`` per-document keys by key name (granted for retained documents).
    """
    manifest = message.manifest
    publisher = certs.verify_certificate(
        manifest.publisher_certificate, ca_pem, at=at, role="publisher"
    )
    if publisher.name != manifest.publisher:
        raise ProtocolError(
            f"manifest names publisher {manifest.publisher!r} but is signed by {publisher.name!r}"
        )
    delivery = delivery_from_pb(message)
    return decode(
        delivery,
        publisher_key=certs.public_key_of(manifest.publisher_certificate),
        keys=keys,
        document_keys=document_keys,
        concepts=concepts,
        seen=seen,
    )


class _Session:
    def __init__(self, setup: SubscriberSetup, clock: Callable[[], datetime]) -> None:
        self.setup = setup
        self.clock = clock
        self.private_key = crypto.load_private_key_pem(setup.tls.key_pem)
        self.signer = provenance.Signer(
            node_uri=certs.node_uri(setup.name), private_key=self.private_key
        )
        self.keyring = Keyring(setup.state_dir / "keyring.sqlite")
        self.inbox = Inbox(setup.out_dir)
        self.inbox.reconcile(self.keyring.records())
        self.address = setup.connect
        setup.provenance_log.parent.mkdir(parents=True, exist_ok=True)
        self.log = provenance.ProvenanceLog(
            setup.provenance_log, node_uri=self.signer.node_uri, cert_pem=setup.tls.cert_pem
        )
        self.report = SubscriptionReport()
        self.subscribed_at_ms: int | None = None  # set when asking for retained documents
        self.refresh_requests: list[pb.PathRefresh] = []  # to send to the site

    def close(self) -> None:
        self.keyring.close()
        self.log.close()

    def on_enrolment(self, message: pb.KeyMessage) -> None:
        """Join a group (or catch up): open our key-tree path sealed to our certificate."""
        enrolment = enrolment_from_pb(message)
        if enrolment.member != self.setup.name:
            raise ProtocolError(f"key message for {enrolment.member!r} delivered to us")
        stored = self.keyring.group_state(enrolment.publisher, enrolment.concept)
        state = (
            MemberKeys.enrol(enrolment, self.private_key)
            if stored is None
            else MemberKeys.from_bytes(stored).apply_enrolment(enrolment, self.private_key)
        )
        self._keep(enrolment.publisher, enrolment.concept, state)
        self.keyring.clear_stale(enrolment.publisher, enrolment.concept)

    def ask_refresh(self, publisher: str, concept: str, *, again: bool = False) -> None:
        """Ask the key service (through the site) for our current path in a group."""
        if self.keyring.mark_stale(publisher, concept) or again:
            self.refresh_requests.append(pb.PathRefresh(publisher=publisher, concept=concept))

    def on_rekey(self, message: pb.GroupRekey) -> None:
        """Apply a group's rekey broadcast to our path, if we are a member."""
        rekey = rekey_from_pb(message)
        stored = self.keyring.group_state(rekey.publisher, rekey.concept)
        if stored is None:
            return  # not (yet) a member: our enrolment carries the keys we need
        try:
            state = MemberKeys.from_bytes(stored).apply_rekey(rekey)
        except EpochGapError:
            log.warning("missed epochs of %s/%s; asking for a path refresh",
                        rekey.publisher, rekey.concept)
            self.ask_refresh(rekey.publisher, rekey.concept)
            return
        except DecryptError:
            log.info("no longer a member of %s/%s", rekey.publisher, rekey.concept)
            self.keyring.set_group(rekey.publisher, rekey.concept, None, epoch=0, key=None)
            return
        self._keep(rekey.publisher, rekey.concept, state)

    def on_document_keys(self, message: pb.DocumentKeys) -> None:
        """Keep the keys of retained documents granted to us with an enrolment."""
        grant = document_keys_from_pb(message)
        if grant.member != self.setup.name:
            raise ProtocolError(f"document keys for {grant.member!r} delivered to us")
        self.keyring.put_document_keys(open_document_keys(grant, self.private_key))
        self.report.keys += 1

    def _keep(self, publisher: str, concept: str, state: MemberKeys) -> None:
        self.keyring.set_group(
            publisher, concept, state.to_bytes(), epoch=state.epoch, key=state.group_key
        )
        self.report.keys += 1

    def _missing_keys(self, message: pb.Dissemination) -> list[str]:
        """Names of the keys the delivered fragments need that we do not hold (yet)."""
        needed = {(f.publisher, f.concept, f.epoch, f.document_id) for f in message.fragments}
        return sorted(
            key_name(*n)
            for n in needed
            if self.keyring.get(*n[:3]) is None and self.keyring.document_key(key_name(*n)) is None
        )

    def on_dissemination(self, message: pb.Dissemination, sequence: int = 0) -> bytes:
        """Handle one document; return the receipt to send back (empty if refused or held)."""
        manifest = message.manifest
        last = self.keyring.version(manifest.publisher, manifest.document_id)
        if last == manifest.version:
            log.info("%s v%d delivered again; already applied", manifest.document_id,
                     manifest.version)
            self.keyring.set_applied(self.address, sequence)
            return b""
        missing = self._missing_keys(message)
        if missing:
            self.keyring.hold(
                manifest.publisher, manifest.document_id, manifest.version,
                message.SerializeToString(),
            )
            self.keyring.set_applied(self.address, sequence)
            print(
                f"{self.setup.name}: holding {manifest.publisher}/{manifest.document_id} "
                f"v{manifest.version} until its keys arrive ({', '.join(missing)})",
                flush=True,
            )
            return b""
        return self._open(message, sequence, last)

    def release_held(self, sequence: int) -> None:
        """Open the held documents whose keys have arrived (``sequence``: the key delivery)."""
        for payload in self.keyring.held():
            message = pb.Dissemination.FromString(payload)
            m = message.manifest
            last = self.keyring.version(m.publisher, m.document_id)
            if last is None or last < m.version:
                if self._missing_keys(message):
                    continue
                self._open(message, sequence, last)
            self.keyring.release(m.publisher, m.document_id, m.version)

    def _expected(self, manifest: pb.Manifest, delivered: set[str]) -> tuple[list[str], list[str]]:
        """(concepts that must arrive whole, granted concepts the site did not retain)."""
        granted = self.report.grants.get(manifest.publisher, [])
        retained = self.subscribed_at_ms is not None and (
            manifest.issued_at_ms < self.subscribed_at_ms
        )
        if not retained:
            return granted, []
        in_document = {r.concept for r in manifest.ranges}
        absent = sorted(set(granted) & in_document - delivered)
        return sorted(set(granted) & delivered), absent

    def _open(self, message: pb.Dissemination, sequence: int, last: int | None) -> bytes:
        manifest = message.manifest
        concepts, absent = self._expected(manifest, {f.concept for f in message.fragments})
        try:
            view = open_dissemination(
                message,
                ca_pem=self.setup.tls.ca_pem,
                keys=self.keyring.get,
                document_keys=self.keyring.document_key,
                at=self.clock(),
                concepts=concepts if manifest.publisher in self.report.grants else None,
                seen={} if last is None else {(manifest.publisher, manifest.document_id): last},
            )
            received = provenance.Message.from_nquads(message.provenance)
        except PeerError as exc:
            self.report.refused += 1
            print(
                f"{self.setup.name}: refused {manifest.publisher}/{manifest.document_id}: {exc}",
                flush=True,
            )
            self.inbox.refuse(
                publisher=manifest.publisher, document_id=manifest.document_id, reason=str(exc)
            )
            self.keyring.set_applied(self.address, sequence)
            return b""
        receipt = provenance.receipt(
            received,
            self.signer,
            message_uri=(
                f"{self.signer.node_uri}msg/{manifest.document_id}/v{manifest.version}/received"
            ),
            timestamp_ms=int(self.clock().timestamp() * 1000),
        )
        self.log.append(receipt)
        self.inbox.write_view(
            publisher=view.publisher,
            document_id=view.document_id,
            version=view.version,
            view_xml=view.to_bytes(),
        )
        record = {
            "publisher": view.publisher,
            "document": view.document_id,
            "version": view.version,
            "fragments": fragment_concepts(view),
            "issued_at_ms": manifest.issued_at_ms,
            "received_at_ms": int(self.clock().timestamp() * 1000),
        }
        if absent:
            record["missing"] = absent  # retained state: concepts this site did not hold
        self.keyring.accept(record, address=self.address, sequence=sequence)
        self.inbox.record(record)
        self.report.accepted += 1
        return receipt.latest_graphs_nquads()


class _ConnectionLost(Exception):
    """The stream to the site broke; reconnect and resume."""


async def _stream(session: _Session, address: str, stop: asyncio.Event) -> str | None:
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
            )
        )
    )

    async def requests() -> AsyncIterator[pb.ClientMessage]:
        while (item := await outgoing.get()) is not None:
            yield item

    credentials = channel_credentials(setup.tls)
    watch = Heartbeats(setup.heartbeat_s)
    async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as channel:
        call = pb_grpc.DisseminatorStub(channel).Subscribe(
            watch.outgoing(requests(), _heartbeat, opening=1)
        )
        stopper = asyncio.ensure_future(stop.wait())
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
                _handle(session, message, outgoing, stop)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:
                for key, value in exc.trailing_metadata() or ():
                    if key == _REDIRECT_METADATA:
                        print(f"{setup.name}: {exc.details()}", flush=True)
                        return str(value)
            if exc.code() not in _REFUSALS:  # the site or the connection went away
                raise _ConnectionLost(f"{address}: {exc.code().name}: {exc.details()}") from None
            raise UsageError(
                f"subscription refused by {address}: {exc.code().name}: {exc.details()}"
            ) from None
        finally:
            stopper.cancel()
            outgoing.put_nowait(None)


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


def _handle(
    session: _Session,
    message: pb.ServerMessage,
    outgoing: asyncio.Queue[pb.ClientMessage | None],
    stop: asyncio.Event,
) -> None:
    setup = session.setup
    kind = message.WhichOneof("kind")
    if kind == "subscribed":
        if message.subscribed.resumed_after < session.keyring.applied(session.address):
            # The site lost track of our queue; dedupe by document from here on.
            session.keyring.set_applied(session.address, message.subscribed.resumed_after)
        grants = {g.publisher: list(g.concepts) for g in message.subscribed.grants}
        session.report.served_by = message.subscribed.served_by
        session.report.grants = grants
        session.report.retained += message.subscribed.retained
        if setup.retained:
            now_ms = int(session.clock().timestamp() * 1000)
            session.subscribed_at_ms = session.keyring.subscribed_since_ms(now_ms)
        session.inbox.write_subscription(
            {"subscriber": setup.name, "served_by": message.subscribed.served_by, "grants": grants}
        )
        retained = message.subscribed.retained
        print(
            f"{setup.name}: subscribed at {message.subscribed.served_by}"
            + (f" ({retained} retained documents queued)" if retained else ""),
            flush=True,
        )
        for publisher, concept in session.keyring.stale():  # a new stream: ask again
            if concept in grants.get(publisher, ()):
                session.ask_refresh(publisher, concept, again=True)
            else:  # no longer granted here: nothing to catch up on
                session.keyring.clear_stale(publisher, concept)
        _send_refresh_requests(session, outgoing)
        return
    delivery = message.delivery
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
        session.release_held(delivery.sequence)
        session.keyring.set_applied(session.address, delivery.sequence)
        _send_refresh_requests(session, outgoing)
    elif body == "dissemination":
        receipt = session.on_dissemination(delivery.dissemination, delivery.sequence)
        done = session.report.accepted + session.report.refused
        if setup.max_documents is not None and done >= setup.max_documents:
            stop.set()
    outgoing.put_nowait(pb.ClientMessage(ack=pb.Ack(sequence=delivery.sequence, receipt=receipt)))


def _send_refresh_requests(
    session: _Session, outgoing: asyncio.Queue[pb.ClientMessage | None]
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
    session = _Session(setup, clock)
    address, redirects, delay = setup.connect, 0, 0.2
    try:
        while not stop.is_set():
            try:
                redirect = await _stream(session, address, stop)
            except _ConnectionLost as exc:
                print(f"{setup.name}: connection lost ({exc}); reconnecting", flush=True)
                await _sleep_or_stop(stop, delay)
                delay = min(delay * 2, 5.0)
                continue
            if redirect is None:
                break
            redirects += 1
            if redirects > _MAX_REDIRECTS:
                raise UsageError(
                    f"more than {_MAX_REDIRECTS} redirects; check the sites' uplinks"
                )
            address, delay = redirect, 0.2
        return session.report
    finally:
        session.report.held = len(session.keyring.held())
        session.close()


async def unsubscribe(tls: TlsFiles, address: str) -> tuple[str, int]:
    """End this credential's subscription at ``address``; return (site, deliveries dropped)."""
    credentials = channel_credentials(tls)
    async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as channel:
        try:
            ack = await pb_grpc.DisseminatorStub(channel).Unsubscribe(
                pb.UnsubscribeRequest(), timeout=30
            )
        except grpc.aio.AioRpcError as exc:
            raise UsageError(
                f"unsubscribe at {address}: {exc.code().name}: {exc.details()}"
            ) from None
    return ack.site, ack.discarded


async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)
