"""This site as a downlink: keep a Link stream to the uplink open and apply what arrives.

The link states the members registered here (and behind our own downlinks): the whole set
first on every stream, then, whenever they change, only what changed (numbered deltas, see
:mod:`disseminator.interest`); the uplink re-evaluates them and sends what they may receive.
Changes are coalesced: :meth:`Uplink.interest_changed` only queues a mark, and the delta is
computed when the stream comes to it, however many changes came before. An update travels in
chunks within the site limits (``interest_members`` entries and half of
``stream_message_bytes`` per InterestUpdate), every chunk but the last marked ``more``: the
uplink puts it in force with its last chunk. A gap the uplink finds ends the stream; the next
one starts with the whole set again. A delivery too large for one
message comes in parts, checked here (:class:`~xdn.wire_parts.DeliveryJoiner`, at most ``[limits]
document_bytes``) and staged in the store as they come, never joined in memory: the document is
routed from the stored bytes (:mod:`disseminator.stored_documents`), which its deliveries then
share, and a staged body nothing refers to is deleted at once. Each delivery is routed
on (to our subscribers and downlinks) in one transaction that also records its sequence number,
so after a crash or a reconnect the uplink resumes right after the last delivery applied here:
nothing lost, nothing applied twice.

While linked, the delivery receipts this site accepted go up the same channel
(:class:`disseminator.receipts.ReceiptSender`: ``Receipts`` calls, each batch deleted once
acknowledged, the rest sent again on the next link).

Both ends send a heartbeat on an idle link; an uplink silent for three of its intervals is
taken for dead and the link is reconnected (see :mod:`xdn.heartbeat`).

Trust in the uplink. The gRPC client API does not show the server's certificate, so before
each connection the site asks whoever answers at the address to prove who it is (``identify``:
a DHT ping signed with the site's key, :mod:`disseminator.dht._proof`), and refuses an uplink
whose certificate is not the CA's, has expired or is revoked by the CRL in force.
:meth:`Uplink.check_peer` repeats the check whenever the CRL changes and on every housekeeping
pass, and cuts the link at once when it fails. :meth:`Uplink.run` then returns, so that the
daemon looks for another uplink (the DHT refuses records of revoked or expired sites).

Moving to another uplink (:mod:`disseminator.discovery`). The new link opens with ``hold``:
it states our members at once (so the uplink we leave sees them relayed by another downlink
and stops queueing for us, :mod:`disseminator.moves`) but reads nothing until the old link
ended, handed over once we acknowledged all it had queued for us: deliveries routed before the
move are applied before those routed after it. The hand-over ends the old :meth:`Uplink.run`
(``refused`` says ``handed over``); it is not retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import grpc

from disseminator.body_chunks import StoredBytes
from disseminator.interest import InterestSender, interest_chunks
from disseminator.limits import Limits
from disseminator.members import to_pb_member
from disseminator.moves import HANDED_OVER
from disseminator.node import SiteNode
from disseminator.payloads import ReceivedDocument, read_document
from disseminator.receipts import ReceiptSender, SiteReceipts
from disseminator.refresh import Group
from disseminator.routing import Registration
from disseminator.store import Body, QueueFull
from disseminator.stored_documents import StagedDelivery
from disseminator.stored_documents import read_delivery as read_staged
from xdn import certs, lease
from xdn.backoff import Backoff
from xdn.errors import CertificateError, PeerError, ProtocolError, StorageFull
from xdn.grpc_tls import CHANNEL_OPTIONS, channel_credentials
from xdn.heartbeat import Heartbeats
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wire_parts import DeliveryJoiner

__all__ = ["Uplink", "applied_counter", "interest_chunks", "read_delivery"]

log = logging.getLogger(__name__)

_LEGACY_APPLIED = "uplink_applied"  # one counter for any uplink (stores before per-uplink)


def applied_counter(uplink: str) -> str:
    """The name of the counter holding the last delivery applied from ``uplink`` (its site
    name when verified, else its address): each uplink numbers its queue for us on its own, so
    a resume point belongs to one uplink and is never sent to another."""
    return f"{_LEGACY_APPLIED}/{uplink}"

_Token = tuple[Registration, frozenset[Group]]  # what a member's wire form is made of


class Uplink:
    """The Link client of one site."""

    def __init__(
        self,
        node: SiteNode,
        address: str,
        *,
        heartbeat_s: float = 5.0,
        identify: Callable[[str], Awaitable[certs.Credential]] | None = None,
        limits: Limits | None = None,
        receipts: SiteReceipts | None = None,
        hold: asyncio.Event | None = None,
    ) -> None:
        self._node = node
        # Set: read what the uplink sends (until then the stream is open, our members are
        # stated, nothing is read: the uplink we leave hands us over first).
        self._hold = hold
        self._receipts = None if receipts is None else ReceiptSender(receipts, node)
        self._address = address
        self._heartbeat_s = heartbeat_s
        self._identify = identify
        self._limits = limits or Limits()
        # What to send: messages, and ``None`` marking that our members changed since.
        self._outgoing: asyncio.Queue[pb.LinkMessage | None] = asyncio.Queue()
        self._interest_due = False  # a mark is queued
        self._sender: InterestSender[_Token] = InterestSender(self._limits, _wire)
        self._leases = _Leases()
        self.connected = asyncio.Event()
        self.peer: certs.Credential | None = None  # the uplink's verified certificate
        self.refused: str | None = None  # why the uplink is no longer trusted
        self.heard = False  # the current link brought something (it worked)
        self._link: asyncio.Task[None] | None = None
        self._applied = applied_counter(address)  # set per connection (see resume_after)

    @property
    def address(self) -> str:
        """The address this uplink is dialled at."""
        return self._address

    def resume_after(self) -> int:
        """The last delivery applied from this uplink (0: none), for ``LinkHello``.

        Keyed by the uplink's verified site name (its address before it is known), so a
        resume point learnt from one uplink never acknowledges anything at another. A store
        written before resume points were per uplink has one counter for whichever uplink it
        had: the first uplink this site links to adopts it (its uplink, unless it moved while
        it was being upgraded).
        """
        self._applied = applied_counter(self.peer.name if self.peer is not None else self._address)
        store = self._node.store
        return store.adopt_counter(_LEGACY_APPLIED, self._applied)

    def _distrust(self, peer: certs.Credential) -> str | None:
        if peer.serial in self._node.revoked:
            return f"certificate of uplink {peer.name!r} was revoked"
        if not peer.valid_at(self._node.now()):
            return f"certificate of uplink {peer.name!r} expired at {peer.not_after.isoformat()}"
        return None

    def check_peer(self) -> str | None:
        """Re-check the uplink's certificate (CRL changed, time passed); cut the link if it
        fails. Return why it was cut (``None``: it was not)."""
        if self.peer is None or self.refused is not None:
            return None
        reason = self._distrust(self.peer)
        if reason is not None:
            self.refused = reason
            log.warning("uplink %s cut off: %s", self._address, reason)
            if self._link is not None:
                self._link.cancel()
        return reason

    def interest_changed(self) -> None:
        """Our members changed (called by the node on every change): send what changed, once
        the stream comes to it (one delta for every change signalled until then)."""
        if not self._interest_due:
            self._interest_due = True
            self._outgoing.put_nowait(None)

    def _members(self) -> dict[str, _Token]:
        """The members we vouch for now (see :meth:`SiteNode.reported`), as tokens."""
        node = self._node
        regs = node.table.by_name()
        asked: dict[str, set[Group]] = {}  # (few members ask: not looked up one by one)
        for requests in (node.refreshes.local, *node.refreshes.links.values()):
            for name, groups in requests.items():
                asked.setdefault(name, set()).update(groups)
        return {
            name: (regs[name], frozenset(asked.get(name, ())))
            for name in self._leases.holding(regs, node.now_ms())
        }

    def _interest(self, *, whole: bool) -> list[pb.LinkMessage]:
        """Our members as an InterestUpdate in chunks: the whole set (one chunk, maybe empty,
        at least), or what changed since the last update (maybe nothing)."""
        self._interest_due = False
        members = self._members()
        return self._sender.whole(members) if whole else self._sender.delta(members)

    async def run(self) -> None:
        """Stay linked, reconnecting with exponential backoff, while the uplink is trusted.

        The backoff (:class:`xdn.backoff.Backoff`) starts again from its first delay once a
        link has worked (the uplink sent something on it: :attr:`heard`).

        Returns when the uplink's certificate is refused (:attr:`refused` says why).
        """
        backoff = Backoff()
        while self.refused is None:
            self.heard = False
            self._link = asyncio.ensure_future(self._link_once())
            try:
                await self._link
            except asyncio.CancelledError:
                if self.refused is None:  # we are being cancelled, not cutting the link
                    raise
            except StorageFull as exc:  # not acknowledged: the uplink keeps it and resends
                log.warning("uplink %s: %s; reconnecting", self._address, exc)
                self.heard = False  # (back off while the disk stays full)
            except (grpc.aio.AioRpcError, PeerError) as exc:
                details = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
                log.warning("uplink %s: %s; reconnecting", self._address, details)
            except QueueFull as exc:  # not acknowledged: the uplink keeps it, sent again later
                log.warning("uplink %s: %s; reconnecting", self._address, exc)
                self.heard = False  # (back off: the queue drains at its reader's pace)
            finally:
                self._link = None
                self.connected.clear()
            if self.heard:  # the link worked: come back quickly (the uplink may be back)
                backoff.reset()
            if self.refused is None:
                await asyncio.sleep(backoff.next())
        log.error("uplink %s refused: %s", self._address, self.refused)

    async def _verify_peer(self) -> None:
        if self._identify is None:
            return
        try:
            peer = await self._identify(self._address)
        except CertificateError as exc:
            self.refused = str(exc)
            raise
        reason = self._distrust(peer)
        if reason is not None:
            self.refused = reason
            raise CertificateError(reason)
        self.peer = peer

    async def _link_once(self) -> None:
        node = self._node
        await self._verify_peer()
        credentials = channel_credentials(node.site.tls)
        async with grpc.aio.secure_channel(
            self._address, credentials, options=CHANNEL_OPTIONS
        ) as channel:
            stub = pb_grpc.DisseminatorStub(channel)
            while not self._outgoing.empty():  # superseded by the whole set sent below
                self._outgoing.get_nowait()
            self._interest_due = False
            resume_after = self.resume_after()

            async def outgoing() -> AsyncIterator[pb.LinkMessage]:
                yield pb.LinkMessage(
                    hello=pb.LinkHello(
                        site=node.site.name,
                        block=node.site.block,
                        resume_after=resume_after,
                    )
                )
                for message in self._interest(whole=True):
                    yield message
                while True:
                    item = await self._outgoing.get()
                    for message in [item] if item is not None else self._interest(whole=False):
                        yield message

            watch = Heartbeats(self._heartbeat_s)
            link = channel.stream_stream(
                _LINK, request_serializer=pb.LinkMessage.SerializeToString,
                response_deserializer=read_delivery,
            )  # fmt: skip
            call = link(watch.outgoing(outgoing(), _heartbeat, opening=1))
            self.connected.set()
            log.info("linked to uplink %s", self._address)
            receipts = None if self._receipts is None else asyncio.ensure_future(
                self._receipts.run(stub)
            )
            parts: DeliveryJoiner[StoredBytes] = DeliveryJoiner(
                self._limits.document_bytes, f"uplink {self._address}", node.store.stage
            )
            try:
                if self._hold is not None and not self._hold.is_set():
                    log.info("uplink %s: waiting for the uplink we leave to hand us over",
                             self._address)
                    await self._hold.wait()
                while (delivery := await watch.receive(call.read())) is not grpc.aio.EOF:
                    self.heard = True
                    if (kind := _kind(delivery)) == "heartbeat":
                        watch.heard_heartbeat(delivery.heartbeat.interval_ms)
                    elif kind == "part":
                        assert isinstance(delivery, pb.Delivery)
                        with self._storing(delivery.sequence):
                            self._take_part(parts, delivery)
                    else:
                        parts.check_whole(delivery)
                        with self._storing(delivery.sequence):
                            self._apply(delivery)
            except grpc.aio.AioRpcError as exc:
                if exc.code() is grpc.StatusCode.PERMISSION_DENIED and HANDED_OVER in (
                    exc.details() or ""
                ):
                    self.refused = f"handed over: {exc.details()}"  # (run() ends: not retried)
                    # It freed our queue: a queue it makes for us anew numbers from 1 again.
                    node.store.forget_counter(self._applied)
                raise
            finally:
                parts.reset()  # (a delivery partly staged goes)
                if receipts is not None:  # what was not acknowledged stays queued
                    receipts.cancel()

    @contextlib.contextmanager
    def _storing(self, sequence: int) -> Iterator[None]:
        """Store a delivery (or a part) from the uplink, or end the link with
        :class:`StorageFull` before acknowledging it: below the free-space floor, or when a
        write fails for want of space (:mod:`disseminator.storage`)."""
        storage = self._node.storage
        what = f"delivery {sequence} from uplink {self._address}"
        storage.check("delivery", what)
        with storage.mapped("delivery", what):
            yield

    def _take_part(self, parts: DeliveryJoiner[StoredBytes], delivery: pb.Delivery) -> None:
        """Stage one part; apply the delivery once its last part came, then let its staged
        bytes go (kept if routing refers to them)."""
        staged: list[StoredBytes] = []

        def read(stored: StoredBytes) -> StagedDelivery | pb.Delivery:
            staged.append(stored)
            return read_staged(Body(stored), f"delivery {delivery.sequence} from the uplink")

        try:
            whole = parts.add(delivery, read)
            if whole is not None:
                self._apply(whole)
        finally:
            for stored in staged:
                self._node.store.let_go(stored)

    def _apply(self, delivery: pb.Delivery | ReceivedDocument | StagedDelivery) -> None:
        counter = (self._applied, delivery.sequence)
        try:
            if isinstance(delivery, ReceivedDocument):
                self._node.route(
                    dissemination=delivery.dissemination, wire=delivery.wire, counter=counter
                )
            elif isinstance(delivery, StagedDelivery):
                self._node.route(dissemination=delivery.document, counter=counter)
            elif (kind := delivery.WhichOneof("body")) == "key":
                self._node.route(keys=[delivery.key], counter=counter)
            elif kind == "rekey":
                self._node.route(rekeys=[delivery.rekey], counter=counter)
            elif kind == "document_keys":
                self._node.route(document_keys=[delivery.document_keys], counter=counter)
            elif kind == "checkpoint":
                self._node.route(checkpoint=delivery.checkpoint, counter=counter)
            elif kind == "entitlement":
                self._node.route(
                    entitlements=[delivery.entitlement], counter=counter,
                    came_from=None if self.peer is None else self.peer.name,
                )
            else:
                self._node.route(dissemination=delivery.dissemination, counter=counter)
        except PeerError as exc:
            log.warning("refused delivery %d from uplink: %s", delivery.sequence, exc)
            self._node.route(counter=counter)  # skip it for good, and say so upstream
        self._outgoing.put_nowait(pb.LinkMessage(ack=pb.Ack(sequence=delivery.sequence)))


# The Link method, called with our own reader of what the uplink sends.
_LINK = "/{}/Link".format(pb.DESCRIPTOR.services_by_name["Disseminator"].full_name)


def read_delivery(data: bytes | bytearray) -> pb.Delivery | ReceivedDocument:
    """A Delivery from the uplink. One that carries a document is read as records with its
    bytes, what routing forwards (see :mod:`disseminator.payloads`); any other is parsed
    whole, which checks every field."""
    document = read_document(data)
    if document is not None:
        return document
    delivery: pb.Delivery = pb.Delivery.FromString(data)
    return delivery


def _kind(delivery: pb.Delivery | ReceivedDocument) -> str | None:
    if isinstance(delivery, ReceivedDocument):
        return "dissemination"
    kind: str | None = delivery.WhichOneof("body")
    return kind


def _wire(token: _Token) -> pb.Member:
    registration, refresh = token
    return to_pb_member(registration, refresh)


class _Leases:
    """:func:`disseminator.leases.holds` over all members, each lease parsed once: a lease is
    replaced, never changed in place, so what was read holds while the bytes are the same."""

    def __init__(self) -> None:
        self._read: dict[str, tuple[bytes, lease.Lease | None]] = {}

    def holding(self, regs: dict[str, Registration], now_ms: int) -> list[str]:
        """The names of ``regs`` whose lease makes them members at ``now_ms``."""
        known, read, out = self._read, {}, []
        for name, reg in regs.items():
            entry = known.get(name)
            if entry is None or entry[0] is not reg.lease:
                entry = (reg.lease, _parsed(reg.lease))
            read[name] = entry
            if entry[1] is not None and entry[1].active_at(now_ms):
                out.append(name)
        self._read = read  # (those gone are forgotten)
        return out


def _parsed(data: bytes) -> lease.Lease | None:
    if not data:
        return None
    try:
        return lease.SignedLease.from_bytes(data).lease
    except ProtocolError:
        return None


def _heartbeat(interval_ms: int) -> pb.LinkMessage:
    return pb.LinkMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))
