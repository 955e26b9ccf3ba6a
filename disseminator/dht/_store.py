"""The record store of one node: key → the newest verified record of each site.

Records arrive already verified (the node checks them before calling :meth:`RecordStore.put`).
Per ``(key, site)`` only the record with the latest ``issued_at_ms`` is kept, so a replayed
older record never displaces a newer one, and a withdrawal (tombstone) displaces the record it
withdraws. Expired records are dropped by :meth:`RecordStore.expire`; tombstones are kept for
``retention_ms`` after they were issued so that an older, still-valid record cannot be stored
again behind them. The store is bounded in keys and in records per key.

Pure: the caller passes ``now_ms``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator

from disseminator.dht._errors import StoreFullError
from disseminator.dht._ids import NodeId
from disseminator.dht._records import MAX_TTL_MS, SiteRecord

__all__ = ["PutOutcome", "RecordStore"]


class PutOutcome(enum.Enum):
    """What :meth:`RecordStore.put` did."""

    STORED = "stored"  # first record of this site under this key
    REPLACED = "replaced"  # newer than the one held
    WITHDRAWN = "withdrawn"  # a tombstone replaced (or pre-empted) the site's record
    STALE = "stale"  # not newer than the one held: ignored


class RecordStore:
    """Bounded map key → site → newest record."""

    def __init__(
        self,
        *,
        max_keys: int = 4096,
        max_records_per_key: int = 64,
        retention_ms: int = MAX_TTL_MS,
    ) -> None:
        if max_keys < 1 or max_records_per_key < 1:
            raise ValueError("store limits must be at least 1")
        self.max_keys = max_keys
        self.max_records_per_key = max_records_per_key
        self.retention_ms = retention_ms
        self._records: dict[NodeId, dict[str, SiteRecord]] = {}

    def __len__(self) -> int:
        return sum(len(by_site) for by_site in self._records.values())

    def keys(self) -> Iterator[NodeId]:
        """Every key holding at least one record or tombstone."""
        return iter(tuple(self._records))

    def held(self) -> list[tuple[NodeId, str]]:
        """Every (key, site) holding a record or tombstone (expired ones too, until expiry)."""
        return [(key, site) for key, by_site in self._records.items() for site in by_site]

    def put(self, key: NodeId, record: SiteRecord, now_ms: int) -> PutOutcome:
        """Keep ``record`` unless a record of its site at least as new is held.

        Raises:
            StoreFullError: the key (or the store) is at capacity even after expiry.
        """
        by_site = self._records.get(key)
        held = by_site.get(record.site) if by_site else None
        if held is not None and held.issued_at_ms >= record.issued_at_ms:
            return PutOutcome.STALE
        if held is None:
            self._make_room(key, now_ms)
        self._records.setdefault(key, {})[record.site] = record
        if record.withdrawn:
            return PutOutcome.WITHDRAWN
        return PutOutcome.STORED if held is None else PutOutcome.REPLACED

    def _make_room(self, key: NodeId, now_ms: int) -> None:
        by_site = self._records.get(key)
        if by_site is not None and len(by_site) < self.max_records_per_key:
            return
        if by_site is None and len(self._records) < self.max_keys:
            return
        self.expire(now_ms)
        by_site = self._records.get(key)
        if by_site is None and len(self._records) >= self.max_keys:
            raise StoreFullError(f"record store holds its maximum of {self.max_keys} keys")
        if by_site is not None and len(by_site) >= self.max_records_per_key:
            raise StoreFullError(
                f"record store holds its maximum of {self.max_records_per_key} records for "
                f"key {key}"
            )

    def get(self, key: NodeId, now_ms: int) -> tuple[SiteRecord, ...]:
        """The current record of each site under ``key`` (by site name): live records and
        withdrawals — a withdrawal tells a querier that an older live copy elsewhere is stale.
        """
        by_site = self._records.get(key, {})
        return tuple(r for _, r in sorted(by_site.items()) if r.withdrawn or r.live_at(now_ms))

    def live(self, key: NodeId, now_ms: int) -> tuple[SiteRecord, ...]:
        """Only the live records under ``key``."""
        return tuple(r for r in self.get(key, now_ms) if r.live_at(now_ms))

    def _kept_until(self, record: SiteRecord) -> int:
        if record.withdrawn:
            return record.issued_at_ms + self.retention_ms
        return record.expires_at_ms

    def drop_where(self, condition: Callable[[SiteRecord], bool]) -> int:
        """Drop every record (or tombstone) meeting ``condition``; return how many."""
        dropped = 0
        for key in list(self._records):
            by_site = self._records[key]
            for site in [s for s, r in by_site.items() if condition(r)]:
                del by_site[site]
                dropped += 1
            if not by_site:
                del self._records[key]
        return dropped

    def expire(self, now_ms: int) -> int:
        """Drop expired records and old tombstones; return how many were dropped."""
        dropped = 0
        for key in list(self._records):
            by_site = self._records[key]
            for site in [s for s, r in by_site.items() if self._kept_until(r) <= now_ms]:
                del by_site[site]
                dropped += 1
            if not by_site:
                del self._records[key]
        return dropped
