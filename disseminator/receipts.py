"""Delivery receipts at a site: accept them from subscribers and downlinks, pass them upstream.

Theory of operation. A subscriber acknowledges a document with its signed receipt chain
(``Ack.receipt``: the chain it received, extended by its ``receipt`` envelope). The site it is
registered at accepts the receipt only if (:meth:`SiteReceipts.from_subscriber`)

* it verifies (:func:`xdn.receipts.read_receipt`: bounded, well-formed, outermost envelope a
  receipt, Algorithm 2 under the certificates it carries, checked against the CA and CRL);
* its receipt is signed under exactly the certificate registered on this stream;
* the envelope it wraps is a relay signed by this site (its own certificate) and addressed to
  that subscriber.

A downlink passes the receipts it accepted to its uplink (``Receipts``); the uplink accepts each
only if it verifies the same way and the chain passes through the caller: a relay signed under
the calling downlink's TLS certificate, directly wrapping one signed by the uplink itself
(:meth:`SiteReceipts.from_downlink`). Whatever a peer says, nothing is taken on its word.

An accepted receipt is queued in the site's store, its receipt graphs staged in the log outbox
and — when the site serves an LDN inbox — the chain put in the inbox as a notification
sent by the party that passed it here (the subscriber, or the downlink site), readable by
the parties of its chain and that sender (:func:`xdn.linked_data.chain_readers`; see
:mod:`disseminator.notifications` for how those are bounded; by reference to the message of
this site it wraps when the site keeps it, :mod:`disseminator.receipt_refs`), in one
transaction, then the graphs are flushed to the provenance log (as routing does), so it is
durable, listed once and logged exactly once: a receipt seen before (by its content hash) is
a duplicate, acknowledged but neither logged nor queued again. A refused one is counted
(``xdn_receipts_refused{source,reason}``), logged as a warning and dropped; it never fails the
acknowledgement or the stream it came with.

Upstream (:class:`ReceiptSender`): while the site is linked to its uplink, the queue is sent in
batches (at most ``receipts_per_call`` receipts and half a stream message each), every batch
deleted only once the uplink acknowledged it and retried (with backoff) until then; the queue is
in the store, so it survives a restart. A root site has no uplink: it keeps the receipts per
publisher until the publisher fetches them (``GetReceipts``) and acknowledges what it stored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from disseminator.limits import Limits, chunk_sizes
from disseminator.node import SiteNode
from disseminator.notifications import StoredNotification
from disseminator.receipt_refs import after_message
from disseminator.store import QueuedReceipt
from xdn import certs, identity
from xdn.errors import PeerError, ReceiptError
from xdn.linked_data import N_QUADS, chain_readers
from xdn.receipts import Receipt, read_receipt
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["ReceiptSender", "SiteReceipts"]

log = logging.getLogger(__name__)


class SiteReceipts:
    """The checks and the durable queue of one site's receipts.

    Args:
        node: the site.
        limits: the site's limits (the size of one receipt).
        inbox: whether each accepted receipt also becomes a notification in the site's inbox.
    """

    def __init__(self, node: SiteNode, limits: Limits, *, inbox: bool = False) -> None:
        self._node = node
        self._limits = limits
        self._inbox = inbox  # the site serves an LDN inbox: receipts become notifications
        self._own: str | None = None  # this site's certificate fingerprint, read on first use
        self.queued = asyncio.Event()  # set whenever a receipt is queued (wakes the sender)

    def _fingerprint(self) -> str:
        if self._own is None:
            self._own = certs.credential_from_pem(self._node.site.tls.cert_pem).fingerprint
        return self._own

    @property
    def root(self) -> bool:
        """Whether this site keeps receipts for publishers (it has no uplink to pass them to)."""
        node = self._node
        return node.site.uplink is None and not node.ontology.parents(node.site.block)

    def read(self, data: bytes) -> Receipt:
        """Parse and verify a receipt chain (pure CPU work on values: callers may run it on a
        worker thread, off the site's event loop).

        Raises:
            ReceiptError, SignatureError, ProvenanceError: it is not a receipt that verifies.
        """
        return read_receipt(
            data, self._node.planner.chains, at=self._node.now(),
            max_bytes=self._limits.max_receipt_bytes,
        )

    def from_subscriber(self, subscriber: str, data: bytes | Receipt) -> bool:
        """Accept the receipt local ``subscriber`` sent with an acknowledgement.

        Args:
            data: the receipt's bytes, or the receipt :meth:`read` from them.

        Returns:
            ``True`` if it was new (logged and queued), ``False`` for a duplicate.

        Raises:
            ReceiptError: not a receipt, another certificate's, or not of a hop from here to
                ``subscriber``.
            SignatureError, ProvenanceError: it does not verify.
        """
        registration = self._node.table.local.get(subscriber) or self._node.ending(subscriber)
        if registration is None:
            raise ReceiptError(f"receipt from {subscriber!r}, which is not registered here")
        receipt = data if isinstance(data, Receipt) else self.read(data)
        registered = certs.credential_from_pem(registration.certificate).fingerprint
        if receipt.subscriber.fingerprint != registered:
            raise ReceiptError(
                f"the receipt is signed by {receipt.subscriber.name!r} (certificate "
                f"{receipt.subscriber.fingerprint[:16]}…), not by the certificate registered "
                f"as {subscriber!r}"
            )
        served = receipt.hops[-2]
        if served.kind != "relay" or served.fingerprint != self._fingerprint():
            raise ReceiptError(
                f"the receipt wraps a {served.kind} signed by {served.name!r}, not a hop of "
                f"this site {self._node.site.name!r}"
            )
        expected = certs.node_uri(identity.person(subscriber))
        if served.recipient != expected:
            raise ReceiptError(
                f"the receipt wraps this site's hop to <{served.recipient}>, not to <{expected}>"
            )
        sender = certs.credential_from_pem(registration.certificate)
        return self._accept(receipt, "subscriber", len(receipt.hops) - 2, sender)

    def from_downlink(self, downlink: certs.Credential, data: bytes | Receipt) -> bool:
        """Accept a receipt the linked ``downlink`` passed up.

        Returns:
            ``True`` if it was new (logged and queued), ``False`` for a duplicate.

        Raises:
            ReceiptError: not a receipt, or its chain does not go from this site to the caller.
            SignatureError, ProvenanceError: it does not verify.
        """
        receipt = data if isinstance(data, Receipt) else self.read(data)
        if not receipt.passes_through(self._fingerprint(), downlink.fingerprint):
            raise ReceiptError(
                f"the receipt's chain has no hop of {downlink.name!r} right after one of this "
                f"site {self._node.site.name!r} (path: {' -> '.join(receipt.sites)})"
            )
        own = [i for i, hop in enumerate(receipt.hops) if hop.fingerprint == self._fingerprint()]
        return self._accept(receipt, "downlink", own[-1], downlink)

    def refused(self, source: str, exc: PeerError, *, sender: str) -> None:
        """Count and log a refused receipt (it is dropped)."""
        self._node.metrics.refused_receipts.labels(source=source, reason=type(exc).__name__).inc()
        log.warning("refused a receipt from %s %s: %s", source, sender, exc)

    def _accept(
        self, receipt: Receipt, source: str, own: int, sender: certs.Credential
    ) -> bool:
        """Log and queue ``receipt`` (and list it in the inbox, as sent by ``sender``) unless
        it is a duplicate; ``own``: the index of the hop this site signed that it wraps."""
        hop_ms = receipt.hops[own].timestamp_ms
        now_ms = self._node.now_ms()
        retention_ms = self._node.store.routed.window.retention_ms
        if hop_ms < now_ms - retention_ms:
            raise ReceiptError(
                f"the receipt of {receipt.document_id} v{receipt.version} wraps a hop this site "
                f"signed {(now_ms - hop_ms) / 86_400_000:.1f} days ago, longer than its "
                f"routed retention ({retention_ms / 86_400_000:g} days): stale"
            )
        data = receipt.to_nquads()
        fresh = self._node.store.accept_receipt(
            receipt_id=receipt.id,
            publisher=receipt.publisher.name,
            data=data,
            log_graphs=receipt.latest_graphs(),
            at_ms=now_ms,
            notification=self._notification(receipt, own, sender, now_ms, data)
            if self._inbox else None,
        )
        self._node.log_soon()
        if fresh:
            self._node.metrics.receipts.labels(source=source).inc()
            log.info(
                "receipt of %s v%s by %s accepted from %s",
                receipt.document_id, receipt.version, receipt.member_id, source,
            )
            self.queued.set()
        return fresh

    def _notification(
        self, receipt: Receipt, own: int, sender: certs.Credential, now_ms: int, data: bytes
    ) -> StoredNotification:
        """``receipt``'s inbox notification: by reference to this site's message it wraps
        (hop ``own``) when the site keeps that message, else the whole chain ``data``."""
        envelope = receipt.message.envelopes()[own]
        archive = self._node.store.messages
        # kept: its hop was flushed to the log (at once after routing, before any ack comes)
        by_reference = archive is not None and archive.keeps(envelope.message)
        return StoredNotification(
            id=receipt.notification_id, received_ms=now_ms, sender=sender.name,
            sender_fingerprint=sender.fingerprint, media_type=N_QUADS, receipt=True,
            nquads=after_message(receipt.message, envelope.message) if by_reference else data,
            via=envelope.message if by_reference else None,
            digest=receipt.id if by_reference else None,
            readers=chain_readers(receipt.message, sender),  # its parties and sender
        )

    def batch(self) -> list[QueuedReceipt]:
        """The oldest queued receipts, as many as one ``Receipts`` call may carry."""
        queued = self._node.store.queued_receipts(limit=self._limits.receipts_per_call)
        if not queued:
            return []
        runs = chunk_sizes(
            [len(r.data) for r in queued], max_count=self._limits.receipts_per_call,
            max_bytes=self._limits.stream_message_bytes // 2,
        )
        return queued[: runs[0]]

    def for_publisher(self, publisher: str, *, after: int, limit: int) -> tuple[
        list[QueuedReceipt], bool
    ]:
        """What a publisher fetching its receipts gets: it stored those up to ``after`` (they
        are deleted now), then the next ones within the limits, and whether more are kept."""
        if after:
            dropped = self._node.store.drop_receipts_of(publisher, upto=after)
            if dropped:
                log.info("publisher %s stored %d receipts: deleted here", publisher, dropped)
        wanted = min(limit or self._limits.receipts_per_call, self._limits.receipts_per_call)
        queued = self._node.store.queued_receipts(
            after=after, limit=wanted + 1, publisher=publisher
        )
        runs = chunk_sizes(
            [len(r.data) for r in queued[:wanted]], max_count=wanted,
            max_bytes=self._limits.stream_message_bytes // 2,
        )
        return queued[: runs[0]], len(queued) > runs[0]


#: How long a site lets receipts gather before passing them upstream in one call.
LINGER_S = 0.05


class ReceiptSender:
    """Passes a site's queued receipts to its uplink, reliably, while the link is up.

    Args:
        receipts: the site's receipts (queue and wake-up event).
        node: the site (its store keeps the queue; receipts are deleted once acknowledged).
    """

    def __init__(
        self,
        receipts: SiteReceipts,
        node: SiteNode,
        *,
        linger: Callable[[], Awaitable[object]] = lambda: asyncio.sleep(LINGER_S),
    ) -> None:
        self._receipts = receipts
        self._node = node
        self._linger = linger

    async def run(self, stub: Any, *, timeout_s: float = 30.0) -> None:
        """Send batches through ``stub`` (a ``DisseminatorStub``) until cancelled.

        Receipts that arrive while it lingers (:data:`LINGER_S`) go in one call. A failed call
        is retried with exponential backoff (0.2 s to 5 s); nothing is deleted before the
        uplink acknowledged it.
        """
        delay = 0.2
        while True:
            batch = self._receipts.batch()
            if not batch:
                self._receipts.queued.clear()
                await self._receipts.queued.wait()
                # the other recipients of a document acknowledge it about now: one call
                await self._linger()
                continue
            request = pb.ReceiptBatch(receipts=[r.data for r in batch])
            try:
                ack = await stub.Receipts(request, timeout=timeout_s)
            except grpc.aio.AioRpcError as exc:
                log.warning(
                    "passing %d receipts upstream failed (%s: %s); retrying in %.1fs",
                    len(batch), exc.code().name if exc.code() else "UNKNOWN", exc.details(),
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.2
            self._node.store.drop_receipts(r.seq for r in batch)
            log.info(
                "passed %d receipts upstream: %d accepted, %d duplicates, %d refused",
                len(batch), ack.accepted, ack.duplicates, ack.refused,
            )
