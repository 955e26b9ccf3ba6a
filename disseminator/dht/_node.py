"""The site directory over the DHT: what a disseminator daemon calls.

:class:`DhtNode` adds to :class:`KademliaNode` the site-facing operations:

* :meth:`DhtNode.announce` — sign our :class:`SiteRecord` (with :attr:`DhtNode.web`, the
  address of our HTTPS endpoint, if we serve one) and store it at the ``k`` nodes nearest to
  the key of our block concept and at the ``k`` nearest to the key of our name (and keep a
  copy of each). :meth:`maintain` republishes it
  (re-signed, fresh expiry) every ``republish_interval_s``; if we stop, it expires after
  ``record_ttl_s``. :meth:`withdraw` (called by :meth:`stop`) replaces it with a signed
  withdrawal at once.
* :meth:`sites_serving`, :meth:`sites_within`, :meth:`sites_with_block` and
  :meth:`find_uplink` — parallel FIND_VALUE lookups over the block concepts that could answer
  (see :mod:`disseminator.dht._queries`), verified, then filtered by the ontology.
* :meth:`find_site` — a site's record by its name (one lookup of the name's key): how a node
  URI, a name, is resolved to the site's addresses (``GET /nodes/NAME`` at the endpoint).
* :meth:`maintain` / :meth:`start` / :meth:`stop` — upkeep: expire stored records, rejoin
  through the bootstrap peers when the table has emptied, republish, refresh idle buckets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable

from disseminator.dht import _queries as queries
from disseminator.dht._errors import BootstrapError, DhtUsageError, PeerUnavailableError
from disseminator.dht._ids import Contact, NodeId, key_for_concept, key_for_site, record_keys
from disseminator.dht._kademlia import KademliaNode
from disseminator.dht._records import SiteCredentials, SiteRecord, sign_site_record
from xdn import certs
from xdn.errors import PeerError, XdnError
from xdn.ontology import Ontology

__all__ = ["DhtNode"]

log = logging.getLogger(__name__)


class DhtNode(KademliaNode):
    """A site's DHT node: Kademlia plus the site directory (see the module docstring)."""

    _announced: SiteRecord | None = None
    _loop_task: asyncio.Task[None] | None = None
    _last_issued_ms: int = -1
    web: str = ""  # host:port of our HTTPS endpoint, announced in our record ("": none)

    def _issue_time(self) -> int:
        """Now, but strictly after anything we signed before (so newer always wins)."""
        self._last_issued_ms = max(self.now_ms(), self._last_issued_ms + 1)
        return self._last_issued_ms

    @property
    def announced(self) -> SiteRecord | None:
        """The record this node currently announces (``None``: none, or withdrawn)."""
        return self._announced

    def restore(self) -> int:
        """Load the archived records (see :meth:`KademliaNode.restore`); anything we sign
        from now on is issued after the newest record of ours among them."""
        kept = super().restore()
        if self.credentials is not None:
            name, now = self.credentials.name, self.now_ms()
            for key in {key for key, site in self.store.held() if site == name}:
                for record in self.store.get(key, now):
                    if record.site == name:
                        self._last_issued_ms = max(self._last_issued_ms, record.issued_at_ms)
        return kept

    def _signer(self) -> SiteCredentials:
        if self.credentials is None:
            raise DhtUsageError("this DHT node has no site credentials to sign with")
        return self.credentials

    # ---- announcing and leaving ----------------------------------------------------------------
    async def announce(self, block: str) -> SiteRecord:
        """Sign and store our record under the key of ``block``; return the record.

        Announcing another block withdraws the previous one.

        Raises:
            DhtUsageError: no credentials, ``block`` is not a concept of the ontology, or our
                certificate does not authorise it.
        """
        credentials = self._signer()
        if self.ontology.resolve(block) != block:
            raise DhtUsageError(f"cannot announce unknown block concept {block!r}")
        authorised = certs.credential_from_pem(credentials.certificate_pem).block
        if block != authorised:
            raise DhtUsageError(
                f"cannot announce block {block!r}: our certificate authorises {authorised!r}"
            )
        previous = self._announced
        record = sign_site_record(
            credentials,
            address=self.address,
            block=block,
            issued_at_ms=self._issue_time(),
            ttl_ms=self.config.record_ttl_ms,
            web=self.web,
        )
        self._announced = record
        if previous is not None and previous.block != block:  # (under our name: replaced)
            await self._retract(previous, keys=(key_for_concept(previous.block),))
        replicas = await self._publish(record)
        log.info(
            "%s announced block %s at %s (%d replicas)", record.site, block, self.address, replicas
        )
        return record

    def _withdrawal_of(self, record: SiteRecord) -> SiteRecord:
        return sign_site_record(
            self._signer(),
            address=record.address,
            block=record.block,
            issued_at_ms=self._issue_time(),
            ttl_ms=0,
            web=record.web,
        )

    async def withdraw(self) -> None:
        """Politely leave: replace our record with a signed withdrawal wherever it is stored.

        "Wherever": the ``k`` nodes nearest to the key now, plus every node met on the way
        that still returns our record (it may have been among the nearest when we announced).
        """
        if self._announced is not None:
            record, self._announced = self._announced, None
            await self._retract(record)

    async def _retract(self, record: SiteRecord, *, keys: tuple[NodeId, ...] = ()) -> None:
        """Withdraw ``record`` under ``keys`` (default: all it is stored under)."""
        withdrawal = self._withdrawal_of(record)
        await asyncio.gather(
            *(self._retract_at(key, withdrawal)
              for key in keys or record_keys(record.site, record.block))
        )

    async def _retract_at(self, key: NodeId, withdrawal: SiteRecord) -> None:
        self.keep(key, withdrawal, self.now_ms())
        result, replies = await self.find_value_replies(key)
        holders = {
            p for p, records in replies.items() if any(r.site == withdrawal.site for r in records)
        }
        targets = [*result.closest, *(p for p in holders if p not in result.closest)]
        await asyncio.gather(*(self._store_at(p, key, withdrawal) for p in targets))

    async def _publish(self, record: SiteRecord) -> int:
        """Store ``record`` under its block's key and its name's; return the replicas under
        its block's (what routing depends on)."""
        by_block, _ = await asyncio.gather(
            *(self._publish_at(key, record) for key in record_keys(record.site, record.block))
        )
        return by_block

    async def _publish_at(self, key: NodeId, record: SiteRecord) -> int:
        self.keep(key, record, self.now_ms())
        nearest = await self.lookup(key)
        stored = await asyncio.gather(*(self._store_at(p, key, record) for p in nearest.closest))
        return sum(stored)

    async def _store_at(self, peer: Contact, key: NodeId, record: SiteRecord) -> bool:
        try:
            async with asyncio.timeout(self.config.rpc_timeout_s):
                await self.transport.store(peer, key, record)
        except (PeerError, TimeoutError) as exc:
            log.warning("storing the record of %s at %s failed: %s", record.site, peer, exc)
            return False
        return True

    # ---- what the disseminator asks ------------------------------------------------------------
    async def _records_for(self, concepts: Iterable[str]) -> list[SiteRecord]:
        keys = [key_for_concept(c) for c in sorted(concepts)]
        found = await asyncio.gather(*(self.find_records(key) for key in keys))
        return [record for records, _ in found for record in records]

    async def find_site(self, name: str) -> SiteRecord | None:
        """The live record of site ``name`` (ours: the one we announce), ``None`` if the DHT
        holds none. One lookup, of the key of the name; the record is verified as every
        record a lookup returns is.

        Raises:
            ValueError: ``name`` is empty.
        """
        own = self._announced
        if own is not None and own.site == name:
            return own
        records, _ = await self.find_records(key_for_site(name))
        mine = [r for r in records if r.site == name]
        return max(mine, key=lambda r: r.issued_at_ms) if mine else None

    async def sites_with_block(self, concept: str) -> list[SiteRecord]:
        """Live sites whose block concept is exactly ``concept`` (one lookup), by name."""
        records = await self._records_for([concept])
        newest = queries.newest_per_site(records).values()
        now = self.now_ms()
        return sorted(
            (r for r in newest if r.block == concept and r.live_at(now)), key=lambda r: r.site
        )

    async def sites_serving(
        self, concept: str, ontology: Ontology | None = None
    ) -> list[SiteRecord]:
        """Live sites whose block contains ``concept``, smallest block first.

        One parallel lookup per block concept that could serve it (``concept`` and its
        ancestors). Raises :class:`~xdn.errors.OntologyError` for an unknown concept.
        """
        onto = ontology or self.ontology
        records = await self._records_for(queries.serving_keys(concept, onto))
        return queries.serving_sites(records, concept, onto, now_ms=self.now_ms())

    async def sites_within(
        self, concept: str, ontology: Ontology | None = None
    ) -> list[SiteRecord]:
        """Live sites whose block lies inside block(``concept``) — downlink candidates."""
        onto = ontology or self.ontology
        records = await self._records_for(onto.block(concept))
        return queries.sites_within(records, concept, onto, now_ms=self.now_ms())

    async def find_uplink(
        self, block_concept: str, ontology: Ontology | None = None
    ) -> SiteRecord | None:
        """The site serving the smallest block strictly containing ``block_concept``'s block.

        ``None`` when no site serves any ancestor (a root block). Any node may ask on behalf
        of any block; for our own block the answer is never ourselves.
        """
        candidates = await self.uplink_candidates(block_concept, ontology)
        return candidates[0] if candidates else None

    async def uplink_candidates(
        self, block_concept: str, ontology: Ontology | None = None
    ) -> list[SiteRecord]:
        """Every live site serving a block strictly containing ``block_concept``'s block,
        nearest first (:meth:`find_uplink` is the first)."""
        onto = ontology or self.ontology
        records = await self._records_for(onto.ancestors(block_concept))
        return queries.uplink_candidates(records, block_concept, onto, now_ms=self.now_ms())

    async def identify(self, address: str) -> certs.Credential:
        """The verified certificate of the site answering at ``address`` (a signed ping).

        Raises:
            RecordAuthenticationError: its certificate is not the CA's, not a site's, expired
                or revoked, or its answer is not signed with it.
            PeerUnavailableError: nothing answered in time.
        """
        try:
            async with asyncio.timeout(self.config.rpc_timeout_s):
                return await self.transport.identify(address)
        except TimeoutError:
            raise PeerUnavailableError(f"{address} did not answer a ping in time") from None

    # ---- upkeep --------------------------------------------------------------------------------
    async def maintain(self) -> None:
        """One upkeep pass: expire, rejoin if alone, republish if due, refresh idle buckets."""
        now = self.now_ms()
        if self.store.expire(now):
            self.sync_archive()
        if len(self.table) == 0 and (self._bootstrap_peers or self.known_addresses()):
            try:
                await self.bootstrap(self._bootstrap_peers)
            except BootstrapError as exc:
                log.warning("still alone in the DHT: %s", exc)
        announced = self._announced
        if announced and now - announced.issued_at_ms >= self.config.republish_interval_ms:
            await self.announce(announced.block)
        await self.refresh(self.table.stale_ranges(now, self.config.refresh_interval_ms))

    def start(self) -> None:
        """Run :meth:`maintain` every ``maintenance_interval_s`` in the background."""
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._maintenance_loop())

    async def _maintenance_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.maintenance_interval_s)
            try:
                await self.maintain()
            except Exception:  # the loop must outlive any one failed pass
                log.exception("DHT maintenance pass failed")

    async def stop(self, *, leave: bool = True) -> None:
        """Stop upkeep; with ``leave``, first withdraw our record; then close the transport."""
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
            self._loop_task = None
        if leave:
            try:
                async with asyncio.timeout(2 * self.config.rpc_timeout_s):
                    await self.withdraw()
            except (TimeoutError, XdnError) as exc:
                log.warning("could not withdraw our record: %s", exc)
        await self.contacts.cancel()
        await self.transport.close()
