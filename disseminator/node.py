"""One site's routing state and durable queues, behind the gRPC servicer.

Theory of operation. :class:`SiteNode` owns the routing table (who is registered here and
behind each downlink), the durable :class:`~disseminator.store.Store`, the provenance log and
one wake-up event per destination. Everything runs on one asyncio loop, so methods mutate state
without locks.

* :meth:`route` turns a received document (and key messages) into queued deliveries — one
  signed provenance hop per destination, planned by :mod:`disseminator.planning` — committed
  in one transaction with the document's retention, then wakes the destinations' streams;
  :meth:`replay_retained` queues the retained documents for a new subscriber, and
  :meth:`replay_missing` those a subscriber found missing in a publisher's signed sequence.
* :meth:`pump` is the sending side of one connection: it reads the destination's queue after
  the connection's cursor, within its flow-control window, and sleeps until woken.
* Registrations are durable: a subscriber that disconnects stays registered (its queue fills)
  until it unsubscribes, its lease runs out, or its certificate expires
  (:meth:`housekeeping`) or is revoked (:meth:`set_revoked`, from a reloaded CRL).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import logging
import secrets
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from disseminator import leases, moves, replay
from disseminator.delivery import StreamCursor, resume_point
from disseminator.fingerprints import Fingerprints
from disseminator.grant_changes import (
    ENDING,
    Ending,
    end_of_queue,
    grants_changed,
    subscription_ended,
)
from disseminator.members import from_stored, to_pb_member, to_stored
from disseminator.membership import MembershipJournal
from disseminator.metrics import SiteMetrics
from disseminator.notifications import StoredNotification
from disseminator.payloads import Outgoing
from disseminator.planning import DocumentPlan, Planner, Received
from disseminator.policy_notices import Checked, SitePolicyNotices
from disseminator.publications import Publication
from disseminator.refresh import RefreshRequests
from disseminator.routing import Destination, Registration, RoutingTable
from disseminator.storage import StorageGuard, is_full_error
from disseminator.store import Append, History, QueueFull, Retained, Store
from disseminator.stored_documents import StoredDocument
from xdn import certs, provenance
from xdn.errors import PeerError, ProtocolError, ProvenanceError, SignatureError, StorageFull
from xdn.grpc_tls import TlsFiles
from xdn.ontology import Ontology
from xdn.policy import ChangeSet, PolicyEngine, PolicySet
from xdn.publication import Reach, Standing
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import revocation_list_delivery

__all__ = ["SiteIdentity", "SiteNode"]

log = logging.getLogger(__name__)
# Acknowledgements that could not be committed for want of space are tried again this late.
_FULL_RETRY_S = 1.0

#: Queued deliveries a stream's pump reads from the store at once, and so holds in memory
#: until they are sent (a subscriber back after an absence, 10,000 of them at once).
_BATCH = 16
#: Acknowledgements that arrive within this many seconds are committed together.
ACK_WINDOW_S = 0.01
_MAX_MISSING = 1024  # missing documents one request may ask for


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteIdentity:
    """Who this site is and what it serves."""

    name: str
    block: str
    uplink: str | None
    tls: TlsFiles
    signer: provenance.Signer
    lease_s: float = 86_400.0


class SiteNode:
    """Routing table, durable queues and streams of one disseminator."""

    def __init__(
        self,
        *,
        site: SiteIdentity,
        ontology: Ontology,
        engine: PolicyEngine,
        store: Store,
        log_sink: provenance.ProvenanceLog,
        clock: Callable[[], datetime],
        on_interest_change: Callable[[], None] = lambda: None,
        metrics: SiteMetrics | None = None,
        state_dir: Path | None = None,
        min_free_bytes: int = 0,
    ) -> None:
        self.site = site
        self.uplink_address = site.uplink  # found through the DHT when not configured
        self.metrics = metrics or SiteMetrics(site.name)
        self.ontology = ontology
        self.engine = engine
        self.store = store
        # The state directory's free-space floor and write-failure mapping (a full disk).
        self.storage = StorageGuard(
            state_dir, min_free_bytes=min_free_bytes, rollback=store.rollback,
            counted=lambda op: self.metrics.storage_full.labels(operation=op).inc(),
        )
        self.table = RoutingTable()
        self._fingerprints = Fingerprints()  # of the certificates in table.local
        self.planner = Planner(
            table=self.table, ontology=ontology, signer=site.signer, now_ms=self.now_ms,
            chains=provenance.ChainVerifier(site.tls.ca_pem, revoked=lambda: self.revoked),
        )
        self.policy_notices = SitePolicyNotices(
            site.name, self.planner.chains, self.metrics.refused_policy_notices
        )
        self.served = ontology.block(site.block)
        self._log = log_sink
        self._clock = clock
        self.membership_journal = MembershipJournal()

        def on_membership_change() -> None:  # (one signal: upstream interest, key services)
            self.membership_journal.touch()
            on_interest_change()

        self._on_interest_change = on_membership_change
        self._events: dict[Destination, asyncio.Event] = {}
        self._idle: dict[Destination, int] = {}  # streams waiting to be woken: their generation
        self._generation: dict[Destination, int] = {}
        # destination -> the generation of its live stream (end_stream moves the generation on
        # to make that stream finish; the stream is still live until it disconnects)
        self._online: dict[Destination, int] = {}
        self._last_seen: dict[Destination, int] = {}
        self._requested: dict[str, frozenset[str]] = {}
        self._link_blocks: dict[str, str] = {}
        self._link_serials: dict[str, int] = {}  # certificate serial of each linked downlink
        self.refreshes = RefreshRequests()
        self._ended: dict[str, str] = {}
        self._moving: dict[str, str] = {}  # downlink moved below another → that one
        self._ending: dict[str, Ending] = {}  # see disseminator.grant_changes
        self._acks: dict[Destination, int] = {}  # acknowledged, not yet committed
        self._ack_flush: asyncio.TimerHandle | None = None
        # Acknowledgements are committed on a thread of their own (see _flush_acks_aside).
        self._ack_thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="acks")
        self._acks_committing: asyncio.Future[int] | None = None
        self._log_flush: asyncio.TimerHandle | None = None
        self.revoked: frozenset[int] = frozenset()  # serials of the CA's current CRL
        self.crl_pem = b""  # that CRL as the CA signed it: relayed to local subscribers
        self._recover()
        self._gauges: dict[str, float] = {}
        self.refresh_gauges()
        # Scrapes run on the HTTP server's thread: they read a snapshot, never the live state.
        self.metrics.watch(lambda: dict(self._gauges))

    def refresh_gauges(self) -> None:
        """Snapshot the state gauges (on the event loop; scrapes read the snapshot)."""
        self._gauges = {
            "local_subscribers": len(self.table.local),
            "downlinks": len(self.table.links),
            "members": len(self.table.members()),
            "connected_streams": len(self._online),
            "queued_deliveries": self.store.queued_total(),
        }

    # ---- time, identity, policy ----------------------------------------------------------
    def now(self) -> datetime:
        return self._clock()

    def now_ms(self) -> int:
        return int(self._clock().timestamp() * 1000)

    def grants(self, cert_pem: bytes) -> dict[str, frozenset[str]]:
        """``auth_list`` of a certificate under every publisher's policy."""
        credential = certs.credential_from_pem(cert_pem)
        return dict(self.engine.auth_lists(credential, self._clock()))

    def verified_members(
        self, members: Iterable[pb.Member], served: frozenset[str], *, link: str
    ) -> list[Registration]:
        """Re-evaluate what downlink ``link`` claims: check each certificate and lease (the
        subscriber's own, naming ``link`` or a site below it), recompute its grants."""
        out = []
        for member in members:
            self.metrics.members_verified.inc()
            try:
                credential = certs.verify_certificate(
                    member.certificate, self.site.tls.ca_pem, at=self._clock(),
                    role="subscriber", revoked=self.revoked,
                )
                leases.check_relayed(
                    member.lease, member=member.subscriber, certificate=member.certificate,
                    link=link, link_served=served, ca_pem=self.site.tls.ca_pem,
                    revoked=self.revoked, at=self._clock(),
                )
            except PeerError as exc:
                log.warning("downlink member refused: %s", exc)
                continue
            if member.subscriber != credential.member_id:
                log.warning(
                    "downlink member %r refused: its certificate is %r's",
                    member.subscriber, credential.member_id,
                )
                continue
            grants = {
                p: c & served for p, c in self.grants(member.certificate).items() if c & served
            }
            if grants:
                out.append(
                    Registration(
                        subscriber=credential.member_id,
                        certificate=member.certificate,
                        grants=grants,
                        lease=member.lease,
                    )
                )
        return out

    # ---- recovery and the provenance log -------------------------------------------------
    def _recover(self) -> None:
        expired = ChangeSet()
        for stored in self.store.registrations():
            reg = from_stored(stored)
            if stored.kind == "subscriber":
                credential = certs.credential_from_pem(reg.certificate)
                if not credential.valid_at(self._clock()):
                    self.store.delete_registration("subscriber", "", reg.subscriber)
                    self.store.drop_destination("subscriber", reg.subscriber)
                    continue
                self.table.local[reg.subscriber] = reg
                self._fingerprints.remember(reg.subscriber, reg.certificate, credential.fingerprint)
                self._requested[reg.subscriber] = reg.concepts()
                expired += _expiry_of_others(
                    self.engine.subscribe(reg.subscriber, credential, at=self._clock())
                )
                self._replay_instances(reg.subscriber, credential.fingerprint)
                dest = Destination("subscriber", reg.subscriber)
            elif stored.kind == ENDING:
                self._recover_ending(reg)
                dest = Destination("subscriber", reg.subscriber)
            else:
                self.table.links.setdefault(stored.owner, {})[reg.subscriber] = reg
                dest = Destination("link", stored.owner)
            self._last_seen[dest] = max(self._last_seen.get(dest, 0), stored.seen_ms)
        self.apply_changes(expired)
        self.flush_log()
        if self.table.local or self.table.links:
            log.info(
                "recovered %d local subscribers and %d downlinks",
                len(self.table.local), len(self.table.links),
            )

    def _recover_ending(self, reg: Registration) -> None:
        end = end_of_queue(
            self.store.pending("subscriber", reg.subscriber, after=0, limit=2**62)
        )
        if end is None:  # its end was acknowledged before the site stopped
            self.store.delete_registration(ENDING, "", reg.subscriber)
            self.store.drop_destination("subscriber", reg.subscriber)
            return
        self._ending[reg.subscriber] = Ending(registration=reg, sequence=end[0], reason=end[1])

    def log_soon(self) -> None:
        """:meth:`flush_log` once the loop has run what is ready (the streams just woken send
        first: the log is not on a delivery's way); at once without a running loop."""
        if self._log_flush is None:
            self._log_flush = self._later(self.flush_log, 0.0)

    def _later(self, flush: Callable[[], None], delay_s: float) -> asyncio.TimerHandle | None:
        """Run ``flush`` in ``delay_s`` on the running loop, or now (``None``) without one."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a synchronous caller
            flush()
            return None
        return loop.call_later(delay_s, flush)

    def flush_log(self) -> None:
        """Write committed provenance graphs to the log, then drop them from the outbox."""
        if self._log_flush is not None:
            self._log_flush.cancel()
            self._log_flush = None
        try:
            with self.storage.mapped("log", "writing the provenance log"):
                staged = self.store.take_log_outbox()
                if staged:
                    blobs = [data for _, data in staged]
                    offset = self._log.append_raw(b"".join(blobs))
                    self.store.clear_log_outbox(
                        (i for i, _ in staged), logged=(offset, blobs), at_ms=self.now_ms()
                    )
        except StorageFull as exc:  # the outbox keeps them: written at the next flush
            log.warning("%s", exc)

    # ---- routing -------------------------------------------------------------------------
    def route(
        self,
        *,
        dissemination: Received | None = None,
        wire: bytes | memoryview | None = None,
        keys: Sequence[pb.KeyMessage] = (),
        rekeys: Sequence[pb.GroupRekey] = (),
        document_keys: Sequence[pb.DocumentKeys] = (),
        checkpoint: pb.Checkpoint | None = None,
        entitlements: Sequence[pb.Entitlement] = (),
        counter: tuple[str, int] | None = None,
        came_from: str | None = None,
        publish_id: bytes | None = None,
    ) -> Reach:
        """Queue group rekeys, key messages (and members' entitlements), a document and the
        publisher's checkpoint (after the document) for every destination, atomically.

        An entitlement's policy-change notice is checked first (refused: the entitlement goes
        without it) and, when the site serves an inbox, put in it in the same transaction
        (:mod:`disseminator.policy_notices`; ``came_from``: the site it came from, a reader).

        The document is retained (when the site retains documents) for new subscribers.
        ``wire``, the bytes ``dissemination`` was read from, if at hand, is what is forwarded
        (see :class:`~disseminator.payloads.DocumentParts`).

        ``publish_id`` (a publisher's request: ``b""`` when it sent none) names the publication:
        one routed before as its document's newest version is not routed again, nor is its
        checkpoint (which names the sequence number of a document that will never come); the
        key messages and entitlements are (:mod:`disseminator.publications`).

        Returns:
            What the document reached (all zero without a document, or for a retransmission;
            with ``before`` set for a publication routed before).

        Raises:
            QueueFull: a destination's queue is full: nothing is routed or committed, so the
                caller acknowledges nothing (a publisher is refused, an uplink's delivery
                stays queued there and comes again).
        """
        before = None
        if publish_id and dissemination is not None:
            manifest = dissemination.manifest
            before = self.store.publications.routed_before(
                manifest.publisher, manifest.document_id, publish_id
            )
            if before is not None:
                log.info(
                    "publication of %s by %s routed before as v%d; not routed again",
                    manifest.document_id, manifest.publisher, before.version,
                )
                dissemination, checkpoint = None, None
        appends = [a for rekey in rekeys for a in self.planner.rekey(rekey)]
        checked = [self.policy_notices.check(e, at=self.now()) for e in entitlements]
        addressed: list[pb.KeyMessage | pb.DocumentKeys | pb.Entitlement] = [
            *keys, *document_keys, *(c.entitlement for c in checked)
        ]
        for key in addressed:
            if (append := self.planner.addressed(key)) is not None:
                appends.append(append)
        notices = self._inbox_notices(checked, came_from)
        refreshed = [
            self.refreshes.served(k.subscriber, (k.publisher, k.concept)) for k in keys
        ]
        planned: DocumentPlan | None = None
        retained: Retained | None = None
        if dissemination is not None and (
            isinstance(dissemination, StoredDocument) or dissemination.HasField("manifest")
        ):  # (a staged one has its manifest: it was read when it was found)
            planned = self._plan_document(dissemination, wire)
        if planned is not None and dissemination is not None:
            appends += planned.appends
            self.metrics.routed.inc()
            if self.store.retain > 0:
                publisher, document, version = planned.identity
                retained = Retained(
                    publisher=publisher, document=document, version=version,
                    body=planned.body, pieces=planned.retained,
                )
        if checkpoint is not None:
            appends += self.planner.checkpoint(checkpoint)
        try:
            last, _ = self.store.commit_routing(
                document=None if planned is None else planned.identity,
                appends=appends,
                log_graphs=() if planned is None else planned.graphs,
                counter=counter,
                retained=retained,
                history=None if planned is None else self._history(planned),
                sequence=0 if dissemination is None else dissemination.manifest.sequence,
                at_ms=self.now_ms(),
                chain=None if planned is None else planned.chain,
                notices=notices,
                publication=None if planned is None or publish_id is None else Publication(
                    publisher=planned.identity[0], document=planned.identity[1],
                    publish_id=publish_id, version=planned.identity[2],
                    sequence=dissemination.manifest.sequence if dissemination is not None else 0,
                    provenance=b"" if planned.chain is None else planned.chain[1],
                ),
                refuse_full=True,
            )
        except QueueFull as exc:  # nothing committed: refused before any acknowledgement
            for kind, name in exc.destinations:
                self.metrics.queue_full.inc()
                log.error(
                    "queue of %s %s is full; nothing routed (the sender keeps it and retries)",
                    kind, name,
                )
            raise
        self.log_soon()
        for kind, name in last:
            self.wake(Destination(kind, name))
        if any(refreshed):
            self._on_interest_change()
        if planned is None:
            return Reach(before=before)
        self._record_dissemination(planned)
        return Reach(
            fragments=planned.fragments,
            destinations=len(planned.appends),
            subscribers=planned.subscribers,
            retained=retained is not None,
        )

    def _inbox_notices(
        self, checked: Sequence[Checked], came_from: str | None
    ) -> list[StoredNotification]:
        """The inbox notifications of the verified policy notices routed (none when the site
        serves no inbox, or for an entitlement it has no route for)."""
        if self.store.messages is None:  # no endpoint, no inbox
            return []
        out = []
        for item in checked:
            if item.notice is None:
                continue
            destination = self.table.route_key(item.entitlement.subscriber)
            if destination is None:
                continue
            path = {certs.node_uri(came_from)} if came_from else set()
            if destination.kind == "link":
                path.add(certs.node_uri(destination.name))
            out.append(self.policy_notices.notification(
                item.notice, path=frozenset(path), at_ms=self.now_ms()
            ))
        return out

    def standing(self, publisher: str) -> Standing:
        """Where this site stands for ``publisher``: root or not, the policy version it
        enforces (0: none), its uplink (see :mod:`xdn.publication`)."""
        policy = self.engine.policies.policies.get(publisher)
        return Standing(
            site=self.site.name,
            root=self.site.uplink is None and not self.ontology.parents(self.site.block),
            policy_version=0 if policy is None else policy.version,
            uplink=self.uplink_address,
        )

    def _plan_document(
        self, diss: Received, wire: bytes | memoryview | None
    ) -> DocumentPlan | None:
        """Plan a document, unless it was routed before (a retransmission)."""
        manifest = diss.manifest
        if self.store.is_routed(
            manifest.publisher, manifest.document_id, manifest.version, manifest.sequence
        ):
            log.info(
                "document %s v%d (sequence %d) already routed, or older than the routed window; "
                "ignored", manifest.document_id, manifest.version, manifest.sequence,
            )
            return None
        try:
            return self.planner.document(diss, wire)
        except PeerError as exc:
            self._refused_document(diss, exc)
            raise

    def _refused_document(
        self, diss: Received, exc: PeerError
    ) -> None:
        """Count a document refused before routing and sign a failure notice into the log."""
        kind = "provenance" if isinstance(exc, (SignatureError, ProvenanceError)) else "document"
        self.metrics.refused_documents.labels(kind).inc()
        manifest = diss.manifest
        log.warning(
            "refused document %s v%d of %s: %s",
            manifest.document_id, manifest.version, manifest.publisher, exc,
        )
        notice = provenance.failure_notice(
            self.site.signer,
            refusal=provenance.RefusalFacts(
                kind=kind,
                reason=str(exc) or type(exc).__name__,
                publisher=manifest.publisher or None,
                document_id=manifest.document_id or None,
                version=manifest.version if manifest.document_id else None,
                received_from=_sender(diss),
            ),
            message_uri=provenance.notice_uri(
                self.site.signer.node_uri, f"{self.now_ms()}-{secrets.token_hex(6)}"
            ),
            timestamp_ms=self.now_ms(),
        )
        self._log.append(notice)

    def _history(self, plan: DocumentPlan) -> History:
        """What routing ``plan`` adds to the durable history (see :class:`History`)."""
        local = self.table.local
        instances = {
            self._fingerprints.of(name, local[name].certificate): frozenset(c)
            for name, c in plan.delivered.items()
            if name in local
        }
        return History(publisher=plan.identity[0], concepts=plan.concepts, instances=instances)

    def _replay_instances(self, subscriber: str, fingerprint: str) -> ChangeSet:
        """Tell the engine what ``subscriber``'s certificate (of ``fingerprint``, read as it
        registers) received before, under any registration.

        Counts past the largest ``max_instances`` budget of a policy change nothing, so the
        replay stops there.
        """
        changes = ChangeSet()
        for publisher, counts in sorted(self.store.instances(fingerprint).items()):
            policy = self.engine.policies.policies.get(publisher)
            budgets = [r.max_instances for r in policy.rules if r.max_instances] if policy else []
            for k in range(min(max(counts.values()), max(budgets, default=0))):
                received = [c for c, n in counts.items() if n > k]
                changes += self.engine.record_delivery(subscriber, publisher, received)
        return changes

    def _record_dissemination(self, plan: DocumentPlan) -> None:
        """Feed the policy engine's dissemination state (temporal and separation-of-duty rules)."""
        publisher = plan.identity[0]
        changes = self.engine.mark_disseminated(publisher, set(plan.concepts))
        for name, concepts in plan.delivered.items():
            if name in self.table.local:
                changes += self.engine.record_delivery(name, publisher, concepts)
        self.apply_changes(changes)

    # ---- streams -------------------------------------------------------------------------
    def wake(self, destination: Destination) -> None:
        self._idle.pop(destination, None)
        self._events.setdefault(destination, asyncio.Event()).set()

    def idle(self, destination: Destination) -> bool:
        """Whether the current stream of ``destination`` has sent all it may (its window is
        full, or nothing more is queued) and waits to be woken; what a test can wait for."""
        return self._idle.get(destination, -1) == self.generation(destination)

    def connect(self, destination: Destination, applied: int, window: int) -> StreamCursor:
        """Start a connection to ``destination``; supersede any earlier one."""
        self.flush_acks()
        assigned, acked = self.store.cursor(destination.kind, destination.name)
        start = resume_point(acked=acked, assigned=assigned, applied=applied)
        if start > acked:
            self.store.ack(destination.kind, destination.name, start)
        self._generation[destination] = self._generation.get(destination, 0) + 1
        self._online[destination] = self._generation[destination]
        self.wake(destination)
        return StreamCursor(sent=start, acked=start, window=window)

    def disconnect(self, destination: Destination, generation: int) -> None:
        if self._online.get(destination) == generation:  # (not superseded by a later stream)
            del self._online[destination]
            self._last_seen[destination] = self.now_ms()
            self._touch(destination)

    def connected(self) -> frozenset[Destination]:
        """Destinations with a live stream."""
        return frozenset(self._online)

    def generation(self, destination: Destination) -> int:
        return self._generation.get(destination, 0)

    def end_stream(self, destination: Destination) -> None:
        """Make the current stream of ``destination`` (if any) finish."""
        self._generation[destination] = self._generation.get(destination, 0) + 1
        self.wake(destination)

    def on_ack(self, destination: Destination, cursor: StreamCursor, seq: int) -> None:
        """A destination acknowledged up to ``seq``: the stream may send more at once; the
        store drops what was acknowledged with the other acknowledgements of the next
        :data:`ACK_WINDOW_S` (one commit for them all). Until then a restart sends those
        deliveries again, which a receiver tells from new ones by their sequence numbers."""
        blocked = cursor.room == 0  # the stream waits for this ack (else for new deliveries)
        if cursor.on_ack(seq):
            self.metrics.acks.labels(kind=destination.kind).inc()
            self._acks[destination] = max(seq, self._acks.get(destination, 0))
            if destination.kind == "link" and destination.name in self._moving:
                self._hand_over_if_drained(destination.name)
                if destination.name not in self._moving:
                    return
            ending = self._ending.get(destination.name)
            if destination.kind == "subscriber" and ending and seq >= ending.sequence:
                self.flush_acks()
                self._finish_ending(destination.name)
            elif self._ack_flush is None:
                self._ack_flush = self._later(self._flush_acks_aside, ACK_WINDOW_S)
            if blocked:
                self.wake(destination)

    def flush_acks(self) -> None:
        """Commit the acknowledgements received since the last flush, in one transaction, now
        (one committed on the worker thread meanwhile is not waited for)."""
        if self._ack_flush is not None:
            self._ack_flush.cancel()
            self._ack_flush = None
        acks, self._acks = self._acks, {}
        if acks:
            self.store.ack_many({(d.kind, d.name): seq for d, seq in acks.items()})

    def _flush_acks_aside(self) -> None:
        """Commit the acknowledgements received since the last flush on the acknowledgement
        thread, while the loop goes on (one flush at a time: the next waits for this one)."""
        self._ack_flush = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # a synchronous caller
            return self.flush_acks()
        if not self.store.acks_aside:
            return self.flush_acks()
        if self._acks_committing is not None or not self._acks:
            return None
        acks = {(d.kind, d.name): seq for d, seq in self._acks.items()}
        self._acks = {}
        committing = loop.run_in_executor(
            self._ack_thread, self.store.commit_acks_aside, acks
        )
        self._acks_committing = committing
        committing.add_done_callback(functools.partial(self._acks_committed, acks))
        return None

    def _acks_committed(
        self, acks: dict[tuple[str, str], int], committing: asyncio.Future[int]
    ) -> None:
        self._acks_committing = None
        delay_s = ACK_WINDOW_S
        failed = None if committing.cancelled() else committing.exception()
        if committing.cancelled() or failed is not None:
            if failed is not None and is_full_error(failed):  # not again at once: every 1 s
                self.metrics.storage_full.labels(operation="ack").inc()
                log.warning(
                    "committing acknowledgements failed for want of space in %s (kept, to try "
                    "again in %gs): %s", self.storage.directory, _FULL_RETRY_S, failed,
                )
                delay_s = _FULL_RETRY_S
            else:
                log.error("committing acknowledgements failed (kept, to try again): %r", failed)
            for (kind, name), seq in acks.items():  # (acknowledged twice is harmless)
                destination = Destination(kind, name)
                self._acks[destination] = max(seq, self._acks.get(destination, 0))
        else:
            self.store.acked(acks, committing.result())
        if self._acks and self._ack_flush is None:
            self._ack_flush = self._later(self._flush_acks_aside, delay_s)

    async def settle_acks(self) -> None:
        """Wait for the acknowledgements being committed on the worker thread, then commit the
        rest here (before the store closes)."""
        if self._acks_committing is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._acks_committing)
        self.flush_acks()
        self._ack_thread.shutdown(wait=True)

    async def pump(
        self, destination: Destination, cursor: StreamCursor, generation: int
    ) -> AsyncIterator[Outgoing]:
        """Yield queued deliveries for one connection until it is superseded (as stored:
        the stream sends their bytes, :class:`~disseminator.payloads.Outgoing`)."""
        event = self._events.setdefault(destination, asyncio.Event())
        while self._generation.get(destination) == generation:
            batch = []
            if cursor.room:
                batch = self.store.pending_chunks(
                    destination.kind, destination.name,
                    after=cursor.sent, limit=min(_BATCH, cursor.room),
                )
            if not batch:
                event.clear()
                self._idle[destination] = generation
                try:
                    await event.wait()
                finally:
                    if self._idle.get(destination) == generation:  # (cancelled, not woken)
                        del self._idle[destination]
                continue
            sent = self.metrics.deliveries_sent.labels(kind=destination.kind)
            for seq, payload in batch:
                cursor.on_sent(seq)
                sent.inc()
                yield Outgoing(seq, payload)

    # ---- registrations -------------------------------------------------------------------
    def register_local(
        self, registration: Registration, requested: frozenset[str]
    ) -> Registration:
        """Register (or re-register) a local subscriber with the grants decided for it.

        The certificate's earlier deliveries count (``max_instances``), whatever registration
        they were made under: the grants kept are those still left after them.

        Returns:
            The registration as kept (its grants may be narrower than decided).
        """
        name = registration.subscriber
        previous = self.table.local.get(name)
        kept_lease = leases.newer(previous.lease if previous else b"", registration.lease)
        if name in self.engine:
            self.engine.unsubscribe(name)
        if self._ending.pop(name, None) is not None:  # granted again (say, a new certificate)
            self.store.delete_registration(ENDING, "", name)
        credential = certs.credential_from_pem(registration.certificate)
        changes = self.engine.subscribe(name, credential, at=self._clock())
        self._replay_instances(name, credential.fingerprint)
        left = self.engine.grants(name)
        registration = Registration(
            subscriber=name,
            certificate=registration.certificate,
            grants={
                p: c & left.get(p, frozenset())
                for p, c in registration.grants.items()
                if c & left.get(p, frozenset())
            },
            lease=kept_lease,
        )
        self._ended.pop(name, None)
        self._requested[name] = requested
        self.table.local[name] = registration
        self._fingerprints.remember(name, registration.certificate, credential.fingerprint)
        if previous is not None and dict(previous.grants) != dict(registration.grants):
            self._queue_grants_change(previous, registration, "registered again for other concepts")
        else:
            self.store.save_registration(
                to_stored("subscriber", "", registration, self.now_ms())
            )
        self._on_interest_change()
        self.apply_changes(_expiry_of_others(changes))
        return registration

    def ending(self, subscriber: str) -> Registration | None:
        """The registration of a subscription that ends once its queue is delivered, if any."""
        ending = self._ending.get(subscriber)
        return None if ending is None else ending.registration

    def _queue_grants_change(self, previous: Registration, updated: Registration, why: str) -> None:
        """Store ``updated`` and queue the change for its subscriber, atomically."""
        payload = grants_changed(previous.grants, updated.grants, why)
        self.store.change_registration(
            save=to_stored("subscriber", "", updated, self.now_ms()),
            control=Append(kind="subscriber", name=updated.subscriber, payload=payload),
        )
        self.wake(Destination("subscriber", updated.subscriber))

    def _end_after_queue(self, subscriber: str, reason: str) -> None:
        """Route nothing more to ``subscriber``; end it once its queue is delivered."""
        reg = self.table.local.pop(subscriber)
        self._fingerprints.forget(subscriber)
        self.membership_journal.touch()
        if subscriber in self.engine:
            self.engine.unsubscribe(subscriber)
        self._requested.pop(subscriber, None)
        self.refreshes.forget(subscriber)
        seq = self.store.change_registration(
            save=to_stored(ENDING, "", reg, self.now_ms()),
            delete=("subscriber", "", subscriber),
            control=Append(kind="subscriber", name=subscriber, payload=subscription_ended(reason)),
        )
        self._ending[subscriber] = Ending(registration=reg, sequence=seq, reason=reason)
        self.wake(Destination("subscriber", subscriber))

    def _finish_ending(self, subscriber: str) -> None:
        ending = self._ending.pop(subscriber)
        self.store.delete_registration(ENDING, "", subscriber)
        self.store.drop_destination("subscriber", subscriber)
        self._ended[subscriber] = ending.reason
        self.end_stream(Destination("subscriber", subscriber))
        self._online.pop(Destination("subscriber", subscriber), None)
        log.warning("subscription of %s ended: %s", subscriber, ending.reason)

    def replay_retained(self, registration: Registration) -> int:
        """Queue the retained documents ``registration`` may read (state at subscribe time).

        Each goes restricted to the subscriber's grants, with a signed provenance hop of its
        own; returns how many documents were queued.
        """
        destination = Destination("subscriber", registration.subscriber)
        appends, graphs = replay.retained(self.store.retained(), self.planner, registration)
        if appends:
            self.store.commit_routing(document=None, appends=appends, log_graphs=graphs,
                                     at_ms=self.now_ms())
            self.log_soon()
            self.wake(destination)
        return len(appends)

    def check_lease(self, subscriber: str, certificate: bytes, data: bytes) -> bytes:
        """Check a lease a subscriber registering (or registered) here sent; return it.

        Raises:
            PeerError: it is not this subscriber's valid lease for this site.
        """
        leases.check_local(
            data, member=subscriber, certificate=certificate, site=self.site.name,
            block=self.site.block, ca_pem=self.site.tls.ca_pem, revoked=self.revoked,
            at=self._clock(),
        )
        return data

    def renew_lease(self, subscriber: str, data: bytes) -> None:
        """A registered subscriber sent a new lease on its stream: check it, keep the newer.

        Raises:
            ProtocolError: it is not registered here, or the lease is not valid.
        """
        reg = self.table.local.get(subscriber)
        if reg is None:
            raise ProtocolError(f"lease of {subscriber!r}, which is not registered here")
        try:
            self.check_lease(subscriber, reg.certificate, data)
        except PeerError as exc:
            raise ProtocolError(f"lease refused: {exc}") from None
        kept = leases.newer(reg.lease, data)
        if kept == reg.lease:
            return
        renewed = dataclasses.replace(reg, lease=kept)
        was_member = leases.holds(reg, self.now_ms())
        self.table.local[subscriber] = renewed
        self.store.save_registration(to_stored("subscriber", "", renewed, self.now_ms()))
        if not was_member:
            log.info("%s holds a lease again: reported as a member", subscriber)
        self._on_interest_change()

    def reported(self, *, publisher: str | None = None) -> list[pb.Member]:
        """The members this site vouches for: registered here or behind a downlink, holding
        an unexpired lease (for ``publisher``: only those it grants something, its part)."""
        now_ms = self.now_ms()
        return [
            self.member(r, publisher=publisher)
            for r in self.table.members()
            if leases.holds(r, now_ms) and (publisher is None or r.grants.get(publisher))
        ]

    def membership(
        self, publisher: str, *, view: int = 0, since: int = 0
    ) -> tuple[list[pb.Member], list[str], bool]:
        """``publisher``'s part of the membership a key service holding version ``since`` of
        ``view`` asks for (see :mod:`disseminator.membership`).

        Returns:
            (members, names gone, whether it is all of it): the current entry of each member
            changed since then and the names of those changed that are no members now, or,
            when the journal cannot tell, every member (:meth:`reported`).
        """
        self.membership_journal.settle(
            lambda: {
                name: (reg, frozenset(self.refreshes.of(name)))
                for name, reg in self.table.by_name().items()
            }
        )
        changed = self.membership_journal.since(view, since)
        if changed is None:
            return self.reported(publisher=publisher), [], True
        now_ms = self.now_ms()
        members, gone = [], []
        for name in sorted(changed):
            reg = self.table.member(name)
            if reg is not None and leases.holds(reg, now_ms) and reg.grants.get(publisher):
                members.append(self.member(reg, publisher=publisher))
            else:
                gone.append(name)
        return members, gone, False

    def member(self, reg: Registration, *, publisher: str | None = None) -> pb.Member:
        """The wire form of a registration here, with its open path refresh requests.

        Args:
            publisher: show only this publisher's part (a key service asking); ``None``: all.
        """
        return to_pb_member(reg, self.refreshes.of(reg.subscriber), publisher=publisher)

    def replay_missing(self, subscriber: str, publisher: str, sequences: Sequence[int]) -> int:
        """Queue the retained documents of ``publisher`` numbered ``sequences`` that local
        ``subscriber`` may read, then a note naming those this site cannot replay.

        Returns:
            How many documents were queued.

        Raises:
            ProtocolError: ``subscriber`` is not registered here, or asks for too many.
        """
        reg = self.table.local.get(subscriber)
        if reg is None:
            raise ProtocolError(f"missing documents asked by {subscriber!r}, not registered here")
        wanted = set(sequences)
        if len(wanted) > _MAX_MISSING:
            raise ProtocolError(f"more than {_MAX_MISSING} missing documents asked at once")
        appends, graphs, found = replay.missing(
            self.store.retained(), self.planner, reg, publisher, wanted
        )
        log.info(
            "%s asks for %d missing documents of %s; %d replayed",
            subscriber, len(wanted), publisher, len(found),
        )
        if appends:
            self.store.commit_routing(document=None, appends=appends, log_graphs=graphs,
                                     at_ms=self.now_ms())
            self.log_soon()
            self.wake(Destination("subscriber", subscriber))
        return len(found)

    def request_refresh(self, subscriber: str, publisher: str, concept: str) -> None:
        """A local subscriber missed epochs of a group it is granted: ask for its path.

        Raises:
            ProtocolError: it is not registered here or not granted that concept.
        """
        reg = self.table.local.get(subscriber)
        if reg is None or concept not in reg.grants.get(publisher, frozenset()):
            raise ProtocolError(
                f"path refresh of {publisher}/{concept} asked by {subscriber!r}, "
                "which is not granted it here"
            )
        if self.refreshes.ask(subscriber, (publisher, concept)):
            log.info("%s asks for a path refresh of %s/%s", subscriber, publisher, concept)
            self._on_interest_change()

    def set_link_refreshes(self, site: str, members: Iterable[pb.Member]) -> None:
        """The path refreshes the (verified) members behind a downlink ask for."""
        if self.refreshes.set_link(site, self._link_requests(site, members)):
            self._on_interest_change()

    def change_link_refreshes(
        self, site: str, members: Iterable[pb.Member], *, gone: Iterable[str] = ()
    ) -> None:
        """The path refreshes of the members a downlink's delta lists (added or changed; the
        others' stay), none for those ``gone``."""
        requests: dict[str, set[tuple[str, str]]] = {name: set() for name in gone}
        requests.update(self._link_requests(site, members))
        if self.refreshes.change_link(site, requests):
            self._on_interest_change()

    def _link_requests(
        self, site: str, members: Iterable[pb.Member]
    ) -> dict[str, set[tuple[str, str]]]:
        """The refresh requests ``members`` carry, of groups they are granted behind ``site``."""
        regs = self.table.links.get(site, {})
        out = {}
        for m in members:
            reg = regs.get(m.subscriber)
            granted = reg.grants if reg is not None else {}
            out[m.subscriber] = {
                (g.publisher, c)
                for g in m.refresh
                for c in g.concepts
                if c in granted.get(g.publisher, frozenset())
            }
        return out

    def unregister_local(self, subscriber: str, *, reason: str = "") -> int:
        """Remove a subscriber and its queue; return how many deliveries were discarded."""
        destination = Destination("subscriber", subscriber)
        self.membership_journal.touch()
        if self.table.local.pop(subscriber, None) is not None and subscriber in self.engine:
            self.engine.unsubscribe(subscriber)
        self._fingerprints.forget(subscriber)
        if self._ending.pop(subscriber, None) is not None:
            self.store.delete_registration(ENDING, "", subscriber)
        self._requested.pop(subscriber, None)
        self.refreshes.forget(subscriber)
        if reason:
            self._ended[subscriber] = reason
        self.store.delete_registration("subscriber", "", subscriber)
        discarded = self.store.drop_destination("subscriber", subscriber)
        self.end_stream(destination)
        self._online.pop(destination, None)
        self._on_interest_change()
        return discarded

    def ended(self, subscriber: str) -> str | None:
        """Why the site ended a subscription or a downlink's link (forced), if it did."""
        return self._ended.get(subscriber)

    def apply_changes(self, changes: ChangeSet) -> list[str]:
        """Act on what the policy engine says changed: narrow, widen or end subscriptions."""
        done: list[str] = []
        touched = {change.subscriber for change in changes}
        for name in sorted(touched & set(self.table.local)):
            reg = self.table.local[name]
            wanted = self._requested.get(name, frozenset()) or self.served
            held = self.engine.grants(name) if name in self.engine else {}
            grants = {p: c & wanted & self.served for p, c in held.items() if c & wanted}
            if not grants and name not in self.engine:  # cut off at once
                self.unregister_local(name, reason="its certificate expired")
                done.append(f"forced unsubscription of {name}: its certificate expired")
                continue
            if not grants:  # what was routed to it under its old grants still reaches it
                self._end_after_queue(name, "no policy grants it anything any more")
                done.append(
                    f"subscription of {name} ends after its queued deliveries: "
                    "no policy grants it anything any more"
                )
                continue
            updated = Registration(
                subscriber=name, certificate=reg.certificate, grants=grants, lease=reg.lease
            )
            if dict(updated.grants) != dict(reg.grants):
                self.table.local[name] = updated
                self._queue_grants_change(reg, updated, "the policy changed")
                done.append(f"grants of {name} changed to {sorted(updated.concepts())}")
        if changes:
            self._reevaluate_links()
            self._on_interest_change()
        for line in done:
            log.warning("%s", line)
        return done

    def _reevaluate_links(self) -> None:
        self.membership_journal.touch()
        for site, regs in list(self.table.links.items()):
            members = [to_pb_member(r) for r in regs.values()]
            block = self._link_blocks.get(site)
            served = self.ontology.block(block) if block else self.served
            kept = self.verified_members(members, served, link=site)
            self.table.set_link_members(site, kept)
            now = self.now_ms()
            self.store.save_registrations(
                "link", site, [to_stored("link", site, r, now) for r in kept]
            )

    def set_revoked(self, serials: frozenset[int]) -> list[str]:
        """Put a CRL's revoked serials in force at once; return what was done.

        Local subscribers holding a revoked certificate are force-unsubscribed (their live
        streams end with the reason); a downlink site holding one is cut off (its stream ends,
        its queue and members are dropped); downlink members holding one are dropped.
        """
        self.revoked = serials
        done: list[str] = []
        for site, serial in list(self._link_serials.items()):
            if serial in serials:
                self.cut_link(site, "its certificate was revoked")
                done.append(f"downlink {site} cut off: its certificate was revoked")
        local = [*self.table.local.items(), *((n, e.registration) for n, e in self._ending.items())]
        for name, reg in local:
            if certs.credential_from_pem(reg.certificate).serial in serials:
                self.unregister_local(name, reason="its certificate was revoked")
                done.append(f"forced unsubscription of {name}: its certificate was revoked")
        before = sum(len(regs) for regs in self.table.links.values())
        self._reevaluate_links()
        dropped = before - sum(len(regs) for regs in self.table.links.values())
        if dropped:
            done.append(f"{dropped} downlink members dropped: revoked certificates")
            self._on_interest_change()
        for line in done:
            log.warning("%s", line)
        return done

    def relay_crl(self, crl_pem: bytes, *, queue: bool = True) -> int:
        """Relay the CA-signed CRL in force to local subscribers; return how many it was queued to.

        Subscribers get it in ``Subscribed`` when they (re)connect and, with ``queue`` (a
        reload), as a ``RevocationList`` delivery in their queues; they check the CA's signature
        and the CRL number themselves. An unchanged CRL is not queued again.
        """
        if crl_pem == self.crl_pem:
            return 0
        self.crl_pem = crl_pem
        if not queue or not crl_pem:
            return 0
        payload = revocation_list_delivery(crl_pem)
        last, _ = self.store.commit_routing(
            document=None,
            appends=[Append(kind="subscriber", name=n, payload=payload) for n in self.table.local],
        )
        for kind, name in last:
            self.wake(Destination(kind, name))
        return len(last)

    def reload_policies(self, policies: PolicySet) -> list[str]:
        """Put new signed policies in force without a restart; all or nothing."""
        changes = self.engine.apply(policies, at=self._clock())
        return self.apply_changes(changes)

    def set_link_block(self, site: str, block: str, serial: int) -> None:
        """A downlink site connected: the block it serves and its certificate's serial."""
        self._link_blocks[site] = block
        self._link_serials[site] = serial
        self._ended.pop(site, None)

    def link_block(self, site: str) -> str:
        """The block downlink ``site`` said it serves when it connected ("": not known)."""
        return self._link_blocks.get(site, "")

    def set_link_members(self, site: str, members: Sequence[Registration]) -> None:
        """Put the (verified) whole set of the members behind downlink ``site`` in force
        (less those it moved below another downlink, see :mod:`disseminator.moves`)."""
        stale = moves.claimed_elsewhere(
            self.table.links, site, members, connected=self._connected_links()
        )
        members = [m for m in members if m.subscriber not in stale]
        self.table.set_link_members(site, members)
        now = self.now_ms()
        self.store.save_registrations(
            "link", site, [to_stored("link", site, r, now) for r in members]
        )
        self._on_interest_change()
        self._take_over(site, members)
        if stale and not members:  # it states (again) only members it moved elsewhere
            self._moving.setdefault(site, "another downlink")
            self._hand_over_if_drained(site)

    def change_link_members(
        self, site: str, added: Sequence[Registration], *, removed: Iterable[str] = ()
    ) -> None:
        """Change the members behind downlink ``site`` by a delta: the entries of ``removed``
        go, then the (verified) ``added`` come in (a changed member is in both). The routing
        table, the store and the membership journal change by those members only."""
        gone = set(removed)
        stale = moves.claimed_elsewhere(
            self.table.links, site, added, connected=self._connected_links()
        )
        added = [m for m in added if m.subscriber not in stale]
        if not added and not gone:
            return
        self.table.change_link_members(site, added, removed=gone)
        now = self.now_ms()
        self.store.change_registrations(
            "link", site,
            save=[to_stored("link", site, r, now) for r in added],
            delete=sorted(gone - {r.subscriber for r in added}),
        )
        self._on_interest_change()
        self._take_over(site, added)

    def _connected_links(self) -> list[str]:
        return [d.name for d in self._online if d.kind == "link"]

    def _take_over(self, via: str, members: Sequence[Registration]) -> None:
        """Downlink ``via`` now relays members of direct downlinks (they moved below it):
        take them off those links, and hand each link over once it holds no member and has
        acknowledged everything (see :mod:`disseminator.moves`)."""
        for site, names in sorted(moves.moved_below(self.table.links, via, members).items()):
            log.warning(
                "downlink %s moved below %s: %d of its members now come through %s",
                site, via, len(names), via,
            )
            self.change_link_members(site, [], removed=names)
            if not self.table.links.get(site):
                self._moving[site] = via
                self._hand_over_if_drained(site)

    def _hand_over_if_drained(self, site: str) -> None:
        """End a moved downlink's link once it acknowledged all that was queued for it."""
        via = self._moving.get(site)
        if via is None:
            return
        if self.table.links.get(site):  # members again (it came back): no longer moving
            del self._moving[site]
            return
        destination = Destination("link", site)
        assigned, acked = self.store.cursor("link", site)
        if max(acked, self._acks.get(destination, 0)) < assigned:
            return  # what it still has to acknowledge is sent first
        del self._moving[site]
        self.flush_acks()
        self.cut_link(site, f"{moves.HANDED_OVER} {via}; all it was sent was acknowledged")
        log.warning("downlink %s handed over to %s: its link ended, nothing left queued", site, via)

    def cut_link(self, site: str, reason: str) -> None:
        """End a downlink's link for ``reason`` (its stream ends saying so) and free it."""
        self._ended[site] = reason
        self.drop_link(site)

    def drop_link(self, site: str) -> None:
        self._link_serials.pop(site, None)
        self.refreshes.drop_link(site)
        self.table.drop_link(site)
        self.store.save_registrations("link", site, [])
        self.store.drop_destination("link", site)
        self.end_stream(Destination("link", site))
        self._on_interest_change()

    def _touch(self, destination: Destination) -> None:
        if destination.kind == "subscriber" and destination.name in self.table.local:
            reg = self.table.local[destination.name]
            self.store.save_registration(
                to_stored("subscriber", "", reg, self._last_seen[destination])
            )

    def housekeeping(self) -> list[str]:
        """Free what dead peers hold and force out expired credentials, prune the routed window
        and the receipt ids seen before it; return what was done."""
        now, now_ms, done = self._clock(), self.now_ms(), []
        lease_ms = int(self.site.lease_s * 1000)
        done += self.apply_changes(self.engine.advance(now))
        for name in [*self.table.local, *self._ending]:
            destination = Destination("subscriber", name)
            if destination not in self._online and (
                now_ms - self._last_seen.get(destination, now_ms) > lease_ms
            ):
                self.unregister_local(name)
                done.append(f"lease of {name} ran out; its queue was freed")
        for site in list(self.table.links):
            destination = Destination("link", site)
            if destination not in self._online and (
                now_ms - self._last_seen.get(destination, now_ms) > lease_ms
            ):
                self.drop_link(site)
                done.append(f"downlink {site} gone for longer than its lease; freed")
        for line in done:
            log.warning("%s", line)
        if pruned := self.store.prune_routed(now_ms):
            log.info("%d routed entries past the routed window pruned", pruned)
        if forgotten := self.store.prune_receipts_seen(
            now_ms - self.store.routed.window.retention_ms
        ):
            log.info("%d receipt ids past the routed retention forgotten", forgotten)
        self.refresh_gauges()
        return done


def _expiry_of_others(changes: ChangeSet) -> ChangeSet:
    """What a subscription's ChangeSet says expired for *other* subscribers.

    The engine processes expiry up to the time of every operation, so subscribing may end
    someone else's grants (a policy past ``valid_until``, an expired credential) before the
    next housekeeping tick; the site acts on those at once.
    """
    return ChangeSet(changes=tuple(c for c in changes.changes if c.reason == "expiry"))


def _sender(diss: Received) -> str | None:
    """The node that says it sent ``diss`` (its provenance's last hop), if that can be read
    (not that of a staged document refused before its chain was read)."""
    chain = diss.provenance if not isinstance(diss, StoredDocument) else diss.provenance or b""
    try:
        return provenance.Message.from_nquads(chain).sender
    except PeerError:
        return None
