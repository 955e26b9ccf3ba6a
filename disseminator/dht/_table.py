"""The routing table: k-buckets over XOR distance, split near our own id, LRU with ping.

Theory of operation (Kademlia §2.2 and §2.4). The table covers distances ``[0, 2**256)`` from
our own id with buckets of at most ``k`` contacts each. It starts as one bucket; when the
bucket whose range holds distance 0 (the one around our own id) is full, it splits in two
halves, so the table ends up with one bucket per distance prefix ``[2**i, 2**(i+1))`` far from
us and fine-grained knowledge near us. Other full buckets never split.

Inside a bucket contacts are ordered least-recently-seen first. A newly seen contact for a
full bucket does not evict anyone by itself: :meth:`RoutingTable.observe` parks it in the
bucket's replacement cache and answers :attr:`Outcome.PING_OLDEST`, naming the oldest contact.
(Unless the oldest was itself seen within ``fresh_ms``: then there is no point in pinging it,
and the newcomer just waits in the replacement cache, :attr:`Outcome.CACHED`.)
The caller (who does the I/O) pings it and reports back: :meth:`ping_answered` keeps the old
contact (long-lived nodes are the most likely to stay), :meth:`ping_failed` evicts it and
promotes the most recent replacement. Contacts that fail ``stale_after_failures`` RPCs in a
row during lookups are evicted the same way.

Pure: no sockets, no clock reads (callers pass ``now_ms``), no randomness.
"""

from __future__ import annotations

import enum
import heapq
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from disseminator.dht._ids import ID_BITS, Contact, NodeId

__all__ = ["BucketInfo", "Observation", "Outcome", "RoutingTable"]


class Outcome(enum.Enum):
    """What :meth:`RoutingTable.observe` did with a contact."""

    ADDED = "added"
    UPDATED = "updated"  # already known: moved to the most-recently-seen end
    PING_OLDEST = "ping-oldest"  # bucket full: ping Observation.ping, then report the result
    CACHED = "cached"  # bucket full, its oldest seen recently: kept as a replacement only
    SELF = "self"  # our own id: ignored


@dataclass(frozen=True, slots=True, kw_only=True)
class Observation:
    """The outcome of observing a contact, and whom to ping when the bucket is full."""

    outcome: Outcome
    ping: Contact | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BucketInfo:
    """A read-only view of one bucket: its distance range ``[low, high)`` and contents."""

    low: int
    high: int
    contacts: tuple[Contact, ...]
    replacements: int
    touched_ms: int


@dataclass(slots=True, kw_only=True)
class _Entry:
    contact: Contact
    seen_ms: int
    failures: int = 0


@dataclass(slots=True, kw_only=True)
class _Bucket:
    low: int
    high: int
    entries: OrderedDict[NodeId, _Entry] = field(default_factory=OrderedDict)
    replacements: OrderedDict[NodeId, Contact] = field(default_factory=OrderedDict)
    touched_ms: int = 0


class RoutingTable:
    """The k-buckets of one node."""

    def __init__(
        self,
        own: NodeId,
        *,
        k: int = 20,
        stale_after_failures: int = 2,
        fresh_ms: int = 60_000,
    ) -> None:
        if k < 1 or stale_after_failures < 1 or fresh_ms < 0:
            raise ValueError("k and stale_after_failures must be at least 1, fresh_ms >= 0")
        self.own = own
        self.k = k
        self._stale_after = stale_after_failures
        self._fresh_ms = fresh_ms
        self._buckets: list[_Bucket] = [_Bucket(low=0, high=1 << ID_BITS)]
        self._flat: list[tuple[int, Contact]] | None = None  # cache for closest()

    # ---- lookups into the table ------------------------------------------------------------
    def _index(self, distance: int) -> int:
        return bisect_right([b.low for b in self._buckets], distance) - 1

    def _bucket(self, node_id: NodeId) -> _Bucket:
        return self._buckets[self._index(self.own.distance(node_id))]

    def __len__(self) -> int:
        return sum(len(b.entries) for b in self._buckets)

    def __contains__(self, node_id: object) -> bool:
        return isinstance(node_id, NodeId) and node_id in self._bucket(node_id).entries

    def get(self, node_id: NodeId) -> Contact | None:
        """The contact with ``node_id``, if the table holds it."""
        entry = self._bucket(node_id).entries.get(node_id)
        return entry.contact if entry else None

    def contacts(self) -> Iterator[Contact]:
        """Every contact, nearest bucket first."""
        for bucket in self._buckets:
            for entry in bucket.entries.values():
                yield entry.contact

    def closest(
        self, target: NodeId, count: int, *, exclude: Iterable[NodeId] = ()
    ) -> list[Contact]:
        """Up to ``count`` contacts nearest to ``target``, nearest first."""
        if self._flat is None:
            self._flat = [(c.node_id.value, c) for c in self.contacts()]
        skip = {n.value for n in exclude}
        t = target.value
        pool = self._flat if not skip else [p for p in self._flat if p[0] not in skip]
        return [c for _, c in heapq.nsmallest(count, pool, key=lambda p: p[0] ^ t)]

    def buckets(self) -> tuple[BucketInfo, ...]:
        """A snapshot of every bucket, nearest range first."""
        return tuple(
            BucketInfo(
                low=b.low,
                high=b.high,
                contacts=tuple(e.contact for e in b.entries.values()),
                replacements=len(b.replacements),
                touched_ms=b.touched_ms,
            )
            for b in self._buckets
        )

    def stale_ranges(self, now_ms: int, interval_ms: int) -> list[tuple[int, int]]:
        """Distance ranges of buckets no lookup or contact touched in ``interval_ms``."""
        return [(b.low, b.high) for b in self._buckets if now_ms - b.touched_ms >= interval_ms]

    def touch(self, target: NodeId, now_ms: int) -> None:
        """Mark the bucket covering ``target`` as refreshed (a lookup went there)."""
        self._bucket(target).touched_ms = now_ms

    # ---- transitions ------------------------------------------------------------------------
    def observe(self, contact: Contact, now_ms: int) -> Observation:
        """Record that ``contact`` is alive (it answered us, or verifiably called us)."""
        if contact.node_id == self.own:
            return Observation(outcome=Outcome.SELF)
        while True:
            bucket = self._bucket(contact.node_id)
            entry = bucket.entries.get(contact.node_id)
            if entry is not None:
                if entry.contact != contact:
                    self._flat = None
                entry.contact, entry.failures, entry.seen_ms = contact, 0, now_ms
                bucket.entries.move_to_end(contact.node_id)
                bucket.touched_ms = now_ms
                return Observation(outcome=Outcome.UPDATED)
            if len(bucket.entries) < self.k:
                bucket.entries[contact.node_id] = _Entry(contact=contact, seen_ms=now_ms)
                if self._flat is not None:
                    self._flat.append((contact.node_id.value, contact))
                bucket.replacements.pop(contact.node_id, None)
                bucket.touched_ms = now_ms
                return Observation(outcome=Outcome.ADDED)
            if bucket.low == 0 and bucket.high > 1:
                self._split(self._buckets.index(bucket))
                continue
            bucket.replacements.pop(contact.node_id, None)
            bucket.replacements[contact.node_id] = contact
            while len(bucket.replacements) > self.k:
                bucket.replacements.popitem(last=False)
            oldest = next(iter(bucket.entries.values()))
            if now_ms - oldest.seen_ms < self._fresh_ms:
                return Observation(outcome=Outcome.CACHED)
            return Observation(outcome=Outcome.PING_OLDEST, ping=oldest.contact)

    def ping_answered(self, node_id: NodeId, now_ms: int) -> None:
        """The contact we pinged answered: it stays, as the most recently seen."""
        bucket = self._bucket(node_id)
        entry = bucket.entries.get(node_id)
        if entry is not None:
            entry.failures, entry.seen_ms = 0, now_ms
            bucket.entries.move_to_end(node_id)
            bucket.touched_ms = now_ms

    def ping_failed(self, node_id: NodeId, now_ms: int) -> Contact | None:
        """The contact we pinged did not answer: evict it; return the promoted replacement."""
        return self._evict(node_id, now_ms)

    def rpc_failed(self, node_id: NodeId, now_ms: int) -> Contact | None:
        """An RPC to the contact failed; evict it once it has failed too often in a row."""
        entry = self._bucket(node_id).entries.get(node_id)
        if entry is None:
            return None
        entry.failures += 1
        return self._evict(node_id, now_ms) if entry.failures >= self._stale_after else None

    def remove(self, node_id: NodeId) -> None:
        """Forget a contact (and any replacement with the same id)."""
        bucket = self._bucket(node_id)
        bucket.entries.pop(node_id, None)
        bucket.replacements.pop(node_id, None)
        self._flat = None

    def _evict(self, node_id: NodeId, now_ms: int) -> Contact | None:
        bucket = self._bucket(node_id)
        if bucket.entries.pop(node_id, None) is None:
            return None
        self._flat = None
        if not bucket.replacements:
            return None
        _, promoted = bucket.replacements.popitem(last=True)
        bucket.entries[promoted.node_id] = _Entry(contact=promoted, seen_ms=now_ms)
        return promoted

    def _split(self, index: int) -> None:
        old = self._buckets[index]
        middle = (old.low + old.high) // 2
        near = _Bucket(low=old.low, high=middle, touched_ms=old.touched_ms)
        far = _Bucket(low=middle, high=old.high, touched_ms=old.touched_ms)
        for node_id, entry in old.entries.items():
            side = near if self.own.distance(node_id) < middle else far
            side.entries[node_id] = entry
        for node_id, contact in old.replacements.items():
            side = near if self.own.distance(node_id) < middle else far
            side.replacements[node_id] = contact
        self._buckets[index : index + 1] = [near, far]
