"""Subscribers' failure notices at a site: accept them, list them, pass them upstream.

Theory of operation. A subscriber that refuses something signs a failure notice
(:mod:`xdn.notices`) and hands it to the site it is registered at — over gRPC (``Notices``, a
unary call the site answers, so the subscriber keeps the notice queued until then) or posted
to the site's inbox. Both come here, to one check (:meth:`SiteNotices.from_subscriber`); the
site accepts the notice only if

* it verifies (:func:`xdn.notices.read_notice`: bounded, well-formed, a failure notice,
  Algorithm 2 under the certificate it carries, checked against the CA and the CRL in force,
  a subscriber's certificate);
* it is signed under the certificate of the party handing it over (else
  :class:`~xdn.errors.ForeignNoticeError`: ``403`` at the inbox), and that party is
  registered here under that certificate;
* the hop it names (``xdn:receivedFrom``), when it names one, is this site;
* it is fresh: signed within the routed retention (an older one would be pruned at once, and
  its id forgotten, so a replay would count again), and not from the future;
* its subscriber holds fewer than :data:`NOTICES_PER_SUBSCRIBER` notices in the inbox.

A downlink passes up the notices it accepted in its ``Receipts`` batches, beside the receipts;
the uplink checks each the same way, but where it came from by the downlink's members: it must
be signed under the certificate of a member the calling downlink registered
(:meth:`SiteNotices.from_downlink`).

An accepted notice goes the receipts' way (:meth:`disseminator.store.SiteStore.accept_receipt`,
one transaction): its graphs staged for the site's provenance log, its notification put in the
inbox (kind ``refusal``, not counted against ``[web] inbox_notifications``, one per subscriber
and refused thing, pruned with the receipts), and queued upstream to the publisher's root
site, which keeps it for the publisher with its receipts — when it names a publisher the
subscriber is granted (the root keeps it for that publisher until fetched); any other (a CRL,
a stranger's document) is logged and listed here only. A notice seen before (by its content
hash) is a duplicate: acknowledged, nothing written. A refused one is counted
(``xdn_notices_refused{source,reason}``), logged as a warning and dropped; it never fails the
call it came with.
"""

from __future__ import annotations

import asyncio
import logging

from disseminator.limits import Limits
from disseminator.node import SiteNode
from disseminator.notifications import StoredNotification
from disseminator.routing import Registration
from xdn import certs
from xdn.errors import ForeignNoticeError, NoticeError, PeerError
from xdn.linked_data import N_QUADS, is_node_uri, party
from xdn.notices import MAX_NOTICE_BYTES, Notice, read_notice

__all__ = ["NOTICES_PER_SUBSCRIBER", "SiteNotices"]

log = logging.getLogger(__name__)

#: The most failure notices of one subscriber a site's inbox holds (within the retention).
NOTICES_PER_SUBSCRIBER = 1000
#: How far ahead of the site's clock a notice may be signed (clocks differ a little).
CLOCK_SKEW_MS = 5 * 60 * 1000


class SiteNotices:
    """The checks of one site's failure notices; accepted ones join the receipts' queue.

    Args:
        node: the site.
        limits: the site's limits (the size of one notice: at most a receipt's).
        wake: set whenever a notice is queued upstream (the receipts' sender's event).
        inbox: whether each accepted notice also becomes a notification in the site's inbox.
    """

    def __init__(
        self, node: SiteNode, limits: Limits, *, wake: asyncio.Event, inbox: bool = False
    ) -> None:
        self._node = node
        self._max_bytes = min(limits.max_receipt_bytes, MAX_NOTICE_BYTES)
        self._wake = wake
        self._inbox = inbox

    def read(self, data: bytes) -> Notice:
        """Parse and verify a notice (pure CPU work: callers may run it on a worker thread).

        Raises:
            NoticeError, SignatureError, ProvenanceError: not a subscriber's notice that
                verifies.
        """
        return read_notice(
            data, self._node.planner.chains, at=self._node.now(), max_bytes=self._max_bytes
        )

    def from_subscriber(self, credential: certs.Credential, data: bytes | Notice) -> bool:
        """Accept the notice the subscriber of ``credential`` (the TLS client's certificate)
        handed over, on its gRPC call or posted to the inbox.

        Returns:
            ``True`` if it was new (logged, listed, queued), ``False`` for a duplicate.

        Raises:
            ForeignNoticeError: it is signed under another certificate.
            NoticeError: the subscriber is not registered here, the notice names another site,
                is stale, or the subscriber has too many notices here.
            SignatureError, ProvenanceError: it does not verify.
        """
        notice = data if isinstance(data, Notice) else self.read(data)
        if notice.signer.fingerprint != credential.fingerprint:
            raise ForeignNoticeError(
                f"the notice is signed by {notice.signer.name!r} (certificate "
                f"{notice.signer.fingerprint[:16]}…), not by {credential.name!r} (certificate "
                f"{credential.fingerprint[:16]}…): a subscriber hands over its own notices only"
            )
        node = self._node
        registration = node.table.local.get(credential.member_id) or node.ending(
            credential.member_id
        )
        if registration is None or _fingerprint(registration) != credential.fingerprint:
            raise NoticeError(
                f"notice from {credential.member_id!r}, which is not registered here"
            )
        here = certs.node_uri(node.site.name)
        came_from = notice.facts.received_from
        if came_from is not None and came_from != here:
            raise NoticeError(
                f"the notice names <{came_from}> as the hop it refused, not this site <{here}>"
            )
        if self._inbox and (
            node.store.notifications.count_refusals(credential.fingerprint)
            >= NOTICES_PER_SUBSCRIBER
        ):
            raise NoticeError(
                f"{credential.member_id!r} has {NOTICES_PER_SUBSCRIBER} notices here, the "
                "most a subscriber may have within the routed retention"
            )
        return self._accept(notice, "subscriber", credential, registration)

    def from_downlink(self, downlink: certs.Credential, data: bytes | Notice) -> bool:
        """Accept a notice the linked ``downlink`` passed up: its signer must be a member
        the downlink registered, under the same certificate.

        Raises:
            NoticeError: the signer is not a member behind ``downlink``, or it is stale.
            SignatureError, ProvenanceError: it does not verify.
        """
        notice = data if isinstance(data, Notice) else self.read(data)
        member = self._node.table.links.get(downlink.name, {}).get(notice.member_id)
        if member is None or _fingerprint(member) != notice.signer.fingerprint:
            raise NoticeError(
                f"the notice is signed by {notice.signer.name!r}, who is not a member behind "
                f"downlink {downlink.name!r}"
            )
        return self._accept(notice, "downlink", downlink, member)

    def refused(self, source: str, exc: PeerError, *, sender: str) -> None:
        """Count and log a refused notice (it is dropped)."""
        self._node.metrics.refused_notices.labels(source=source, reason=type(exc).__name__).inc()
        log.warning("refused a failure notice from %s %s: %s", source, sender, exc)

    def _accept(
        self, notice: Notice, source: str, sender: certs.Credential, member: Registration
    ) -> bool:
        """Log, list and queue ``notice`` (sent by ``sender``; its subscriber registered as
        ``member``) unless it is a duplicate."""
        now_ms = self._node.now_ms()
        retention_ms = self._node.store.routed.window.retention_ms
        if notice.signed_ms < now_ms - retention_ms:
            raise NoticeError(
                f"the notice <{notice.message.uri}> was signed "
                f"{(now_ms - notice.signed_ms) / 86_400_000:.1f} days ago, longer than the "
                f"routed retention ({retention_ms / 86_400_000:g} days): stale"
            )
        if notice.signed_ms > now_ms + CLOCK_SKEW_MS:
            raise NoticeError(f"the notice <{notice.message.uri}> is signed in the future")
        publisher = notice.facts.publisher
        upstream = publisher is not None and publisher in member.grants
        data = notice.to_nquads()
        fresh = self._node.store.accept_receipt(
            receipt_id=notice.id, publisher=publisher or "", data=data, log_graphs=data,
            at_ms=now_ms, queue=upstream,
            notification=StoredNotification(
                id=notice.notification_id, received_ms=now_ms, sender=sender.name,
                sender_fingerprint=sender.fingerprint, media_type=N_QUADS, refusal=True,
                nquads=data, readers=_readers(notice, sender),
            ) if self._inbox else None,
        )
        self._node.log_soon()
        if fresh:
            self._node.metrics.notices.labels(source=source).inc()
            log.info(
                "failure notice of %s (%s: %s) by %s accepted from %s%s",
                notice.facts.kind, publisher or "-", notice.facts.document_id or "-",
                notice.member_id, source, "" if upstream else " (not passed upstream)",
            )
            if upstream:
                self._wake.set()
        return fresh


def _fingerprint(registration: Registration) -> str:
    return certs.credential_from_pem(registration.certificate).fingerprint


def _readers(notice: Notice, sender: certs.Credential) -> frozenset[str]:
    """Who may read ``notice``'s notification: its subscriber, the party that passed it here
    and the publisher whose document or key it refused (the site and auditors read every
    one)."""
    readers = {party(notice.signer), party(sender)}
    publisher = notice.facts.publisher  # a name or a node URI
    if publisher:
        readers.add(publisher if is_node_uri(publisher) else certs.node_uri(publisher))
    return frozenset(readers)
