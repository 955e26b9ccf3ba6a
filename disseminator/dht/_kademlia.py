"""The Kademlia machinery of a node: answering peers, iterative lookups, joining.

:class:`KademliaNode` owns the pure parts (:class:`RoutingTable`, :class:`RecordStore`, one
:class:`Lookup` per query) and drives them over a :class:`Transport`; it never opens a socket
itself. The ``handle_*`` methods are what the gRPC servicer (or the in-memory fake) calls when
a peer asks us something; the caller's id comes from its TLS certificate (``sender``), never
from the message. Records offered for storage are checked (known block concept, the key of
that concept, certificate, name, signature) before they are kept, and records that lookups
bring back are checked again before anyone sees them.

The lookup driver keeps up to ``alpha`` queries in flight, feeds each answer or failure to the
:class:`Lookup`, and stops when it is done. :class:`disseminator.dht.DhtNode` builds the site
directory (announce, sites_serving, find_uplink, upkeep) on top.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from disseminator.dht import _convert as convert
from disseminator.dht._archive import RecordArchive
from disseminator.dht._config import DhtConfig
from disseminator.dht._contacts import ContactKeeper, with_timeout
from disseminator.dht._errors import (
    BootstrapError,
    DhtUsageError,
    InvalidRecordError,
    LookupStateError,
)
from disseminator.dht._ids import Contact, NodeId, record_keys
from disseminator.dht._lookup import Lookup, LookupResult
from disseminator.dht._proof import PingProof, make_ping_proof
from disseminator.dht._records import (
    RecordVerifier,
    SiteCredentials,
    SiteRecord,
    nothing_revoked,
)
from disseminator.dht._store import PutOutcome, RecordStore
from disseminator.dht._table import RoutingTable
from disseminator.dht._transport import Transport, ValueReply
from xdn.errors import PeerError
from xdn.ontology import Ontology

__all__ = ["Clock", "KademliaNode"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
_VERIFIED_CACHE = 4096
_VERIFIED_FOR_MS = 600_000


def _utc_now() -> datetime:
    return datetime.now(UTC)


class KademliaNode:
    """Routing table, record store and lookups of one node (see the module docstring)."""

    def __init__(
        self,
        *,
        contact: Contact,
        transport: Transport,
        verifier: RecordVerifier,
        ontology: Ontology,
        config: DhtConfig | None = None,
        credentials: SiteCredentials | None = None,
        clock: Clock = _utc_now,
        rng: random.Random | None = None,
        revoked: Callable[[], frozenset[int]] = nothing_revoked,
        archive: RecordArchive | None = None,
    ) -> None:
        if credentials is not None and credentials.node_id != contact.node_id:
            raise DhtUsageError("the node id must be the SHA-256 of the site certificate")
        self.contact = contact
        self.config = config or DhtConfig()
        self.transport = transport
        self.verifier = verifier
        self.ontology = ontology
        self.credentials = credentials
        self._clock = clock
        self.revoked = revoked  # serials revoked by the CRL in force (callers are refused)
        self._rng = rng or random.Random()
        self.table = RoutingTable(
            contact.node_id, k=self.config.k, stale_after_failures=self.config.stale_after_failures
        )
        self.store = RecordStore(
            max_keys=self.config.max_keys, max_records_per_key=self.config.max_records_per_key
        )
        self.contacts = ContactKeeper(
            own=contact,
            table=self.table,
            transport=transport,
            now_ms=self.now_ms,
            timeout_s=self.config.rpc_timeout_s,
            max_tasks=self.config.max_background_tasks,
        )
        self.archive = archive  # where the store's records outlive a restart (see restore)
        # Set whenever the store takes a new or newer record (a site appeared or moved):
        # a downlink re-checks its uplink at once (disseminator.discovery).
        self.records_changed = asyncio.Event()
        self._bootstrap_peers = self.config.bootstrap
        self._verified: OrderedDict[SiteRecord, int] = OrderedDict()

    @property
    def node_id(self) -> NodeId:
        """Our id: SHA-256 of our certificate."""
        return self.contact.node_id

    @property
    def address(self) -> str:
        """The ``host:port`` we advertise."""
        return self.contact.address

    def now_ms(self) -> int:
        """The injected clock, in Unix milliseconds."""
        return int(self._clock().timestamp() * 1000)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.contact}, {len(self.table)} contacts)"

    # ---- serving peers -----------------------------------------------------------------------
    def ping_proof(self, nonce: bytes) -> PingProof:
        """Our signed answer to a ping (needs credentials)."""
        if self.credentials is None:
            raise DhtUsageError("this DHT node has no site credentials to sign with")
        return make_ping_proof(self.credentials, nonce=nonce, address=self.address)

    async def handle_ping(self, sender: Contact | None) -> None:
        """A peer pinged us (refreshes it if verified; never starts a ping back)."""
        self.contacts.heard_from(sender, verify=False)

    async def handle_find_node(self, sender: Contact | None, target: NodeId) -> tuple[Contact, ...]:
        """The ``k`` contacts we know nearest to ``target``."""
        self.contacts.heard_from(sender)
        return tuple(self.table.closest(target, self.config.k))

    async def handle_find_value(self, sender: Contact | None, key: NodeId) -> ValueReply:
        """Our live records under ``key`` and the ``k`` contacts nearest to it."""
        self.contacts.heard_from(sender)
        return ValueReply(
            records=self.store.get(key, self.now_ms()),
            contacts=tuple(self.table.closest(key, self.config.k)),
        )

    async def handle_store(
        self, sender: Contact | None, key: NodeId, record: SiteRecord
    ) -> PutOutcome:
        """Keep ``record`` under ``key`` once it checks out.

        Raises:
            InvalidRecordError: unknown block, wrong key, expired.
            RecordAuthenticationError: certificate, name or signature wrong (a forgery).
            StoreFullError: no room left for this key.
        """
        if self.ontology.resolve(record.block) != record.block:
            raise InvalidRecordError(
                f"record of site {record.site!r} names unknown block concept {record.block!r}"
            )
        if key not in record_keys(record.site, record.block):
            raise InvalidRecordError(
                f"record of site {record.site!r} for block {record.block!r} was sent under key "
                f"{key}, neither the key of its block nor of its name"
            )
        now = self.now_ms()
        self.check_record(record, now, allow_withdrawal=True)
        outcome = self.keep(key, record, now)
        self.contacts.heard_from(sender)
        return outcome

    def keep(self, key: NodeId, record: SiteRecord, now: int) -> PutOutcome:
        """Put a verified record in the store, and in the archive when the store kept it.

        Raises:
            StoreFullError: no room left for this key.
        """
        outcome = self.store.put(key, record, now)
        if outcome is not PutOutcome.STALE:
            self.records_changed.set()
            if self.archive is not None:
                self.archive.save(key.to_bytes(), record.site, convert.record_to_bytes(record))
        return outcome

    def sync_archive(self) -> None:
        """Forget in the archive what the store no longer holds (expired, purged)."""
        if self.archive is not None:
            self.archive.retain((key.to_bytes(), site) for key, site in self.store.held())

    def restore(self) -> int:
        """Load the archived records into the store, verified again as if a peer offered them
        (a record whose certificate was revoked or expired meanwhile, or that expired, is
        dropped); return how many were kept. Call before the node answers anyone."""
        if self.archive is None:
            return 0
        now, kept = self.now_ms(), 0
        for key_bytes, site, data in self.archive.load():
            try:
                key, record = NodeId.from_bytes(key_bytes), convert.record_from_bytes(data)
                if record.site != site or key not in record_keys(record.site, record.block):
                    raise InvalidRecordError(f"archived record of {site!r} under a wrong key")
                if self.ontology.resolve(record.block) != record.block:
                    raise InvalidRecordError(f"archived record of {site!r}: unknown block")
                self.check_record(record, now, allow_withdrawal=True)
                kept += self.store.put(key, record, now) is not PutOutcome.STALE
            except (PeerError, ValueError) as exc:
                log.info("archived DHT record of %r dropped: %s", site, exc)
        self.store.expire(now)
        self.sync_archive()
        log.info("restored %d DHT records from the archive", len(self.store))
        return kept

    def known_addresses(self) -> list[str]:
        """Addresses of the other sites whose live records we hold (a restarted node pings
        them to fill its routing table when it knows no bootstrap peer that answers)."""
        now, keys = self.now_ms(), {key for key, _ in self.store.held()}
        return sorted({
            r.address for key in keys for r in self.store.live(key, now)
            if r.address != self.address
        })

    def check_record(self, record: SiteRecord, now: int, *, allow_withdrawal: bool = False) -> None:
        """Verify a record (cached for live records already verified)."""
        until = self._verified.get(record)
        if until is not None and now < until:
            return
        self.verifier.verify(record, now_ms=now, allow_withdrawal=allow_withdrawal)
        if not record.withdrawn:
            self._verified[record] = min(record.expires_at_ms, now + _VERIFIED_FOR_MS)
            while len(self._verified) > _VERIFIED_CACHE:
                self._verified.popitem(last=False)

    def purge_untrusted(self) -> int:
        """Re-check every stored record (after a CRL reload, or as time passes); return how
        many were dropped because their certificate is now revoked or expired.

        Forgets every cached verification too, so nothing verified before is taken on trust.
        """
        self._verified.clear()
        now = self.now_ms()

        def untrusted(record: SiteRecord) -> bool:
            try:
                self.verifier.verify(record, now_ms=now, allow_withdrawal=True)
            except PeerError:
                return True
            return False

        dropped = self.store.drop_where(untrusted)
        self.sync_archive()
        if dropped:
            log.warning("dropped %d stored records of revoked or expired sites", dropped)
        return dropped

    # ---- lookups -------------------------------------------------------------------------------
    async def lookup(self, target: NodeId) -> LookupResult:
        """Iterative FIND_NODE: the ``k`` live nodes nearest to ``target``."""
        result, _ = await self._iterate(target, values=False)
        return result

    async def find_records(self, key: NodeId) -> tuple[list[SiteRecord], LookupResult]:
        """Iterative FIND_VALUE: the verified live records under ``key``, and the lookup.

        Only the ``k`` nodes nearest to the key are responsible for it: records from nodes
        met on the way there are ignored (they may hold copies that were since withdrawn),
        and so is our own store unless we are among the ``k`` nearest. Of each site, the most
        recently issued record wins; if that is a withdrawal, the site is left out.
        """
        result, replies = await self.find_value_replies(key)
        now = self.now_ms()
        found = [r for peer in result.closest for r in replies.get(peer, ())]
        if self._responsible(key, result):
            found.extend(self.store.get(key, now))
        newest: dict[str, SiteRecord] = {}
        for record in sorted(set(found), key=lambda r: (r.site, r.issued_at_ms)):
            if key not in record_keys(record.site, record.block):
                log.warning("dropped a record of %r returned under a foreign key", record.site)
                continue
            try:
                self.check_record(record, now, allow_withdrawal=True)
            except PeerError as exc:
                log.warning("dropped a record a peer returned: %s", exc)
                continue
            newest[record.site] = record  # sorted by issue time: the last one is the newest
        return [r for r in newest.values() if r.live_at(now)], result

    async def find_value_replies(
        self, key: NodeId
    ) -> tuple[LookupResult, dict[Contact, tuple[SiteRecord, ...]]]:
        """Iterative FIND_VALUE returning every responder's (unchecked) records."""
        return await self._iterate(key, values=True)

    def _responsible(self, key: NodeId, result: LookupResult) -> bool:
        """Whether we are among the ``k`` nodes nearest to ``key`` (given a lookup of it)."""
        if len(result.closest) < self.config.k:
            return True
        return self.node_id.distance(key) < result.closest[-1].node_id.distance(key)

    async def _iterate(
        self, target: NodeId, *, values: bool
    ) -> tuple[LookupResult, dict[Contact, tuple[SiteRecord, ...]]]:
        self.table.touch(target, self.now_ms())
        lookup = Lookup(
            target=target,
            own=self.node_id,
            seeds=self.table.closest(target, self.config.k),
            k=self.config.k,
            alpha=self.config.alpha,
        )
        replies: dict[Contact, tuple[SiteRecord, ...]] = {}
        pending: dict[asyncio.Task[ValueReply], Contact] = {}
        try:
            while not lookup.done:
                for peer in lookup.next_queries():
                    call = with_timeout(self._ask(peer, target, values), self.config.rpc_timeout_s)
                    pending[asyncio.ensure_future(call)] = peer
                if not pending:
                    raise LookupStateError("lookup stalled with nothing in flight")
                finished, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in [t for t in pending if t in finished]:  # in query order
                    peer = pending.pop(task)
                    try:
                        reply = task.result()
                    except PeerError as exc:
                        log.debug("lookup query to %s failed: %s", peer, exc)
                        lookup.on_failure(peer.node_id)
                        self.contacts.failed(peer)
                    else:
                        lookup.on_answer(peer.node_id, reply.contacts)
                        if reply.records:
                            replies[peer] = reply.records
                        self.contacts.heard_from(peer)
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        return lookup.result(), replies

    async def _ask(self, peer: Contact, target: NodeId, values: bool) -> ValueReply:
        if values:
            return await self.transport.find_value(peer, target)
        return ValueReply(contacts=tuple(await self.transport.find_node(peer, target)))

    # ---- joining -------------------------------------------------------------------------------
    async def bootstrap(self, addresses: Iterable[str] | None = None) -> int:
        """Join through ``addresses`` (default: ``config.bootstrap``); return how many answered.

        Pings each bootstrap peer and the sites whose records we hold (restored from the
        archive after a restart: so a restarted root knows the others again at once), looks up
        our own id (filling the buckets near us), then refreshes every bucket. Nobody to ask:
        we are the first node and there is nothing to do.

        Raises:
            BootstrapError: addresses were given and none answered.
        """
        peers = tuple(addresses) if addresses is not None else self.config.bootstrap
        self._bootstrap_peers = peers
        known = [a for a in self.known_addresses() if a not in peers]  # (restored records)
        answers = await asyncio.gather(
            *(self.contacts.ping(a) for a in (*peers, *known)), return_exceptions=True
        )
        joined = 0
        for i, (address, answer) in enumerate(zip((*peers, *known), answers, strict=True)):
            if isinstance(answer, Contact):
                self.contacts.admit(answer)
                joined += answer.node_id != self.node_id
            elif not isinstance(answer, PeerError):
                raise answer
            elif i < len(peers):
                log.warning("bootstrap peer %s did not answer: %s", address, answer)
            else:
                log.info("site at %s (a record we hold) did not answer: %s", address, answer)
        if peers and not joined:
            raise BootstrapError(f"none of the bootstrap peers answered ({', '.join(peers)})")
        if joined:
            await self.lookup(self.node_id)
            await self.contacts.settle()
            await self.refresh(self.table.stale_ranges(self.now_ms() + 1, 0))
            await self.contacts.settle()
        return joined

    async def refresh(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Look up a random id in each distance range (refreshing those buckets)."""
        for low, high in ranges:
            await self.lookup(NodeId(value=self.node_id.value ^ self._rng.randrange(low, high)))
