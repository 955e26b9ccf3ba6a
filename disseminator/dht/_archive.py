"""Where a node keeps the records it stores across restarts: the :class:`RecordArchive`.

A node's :class:`~disseminator.dht.RecordStore` lives in memory. Without an archive, a node
that restarts answers FIND_VALUE from an empty store until the records' owners republish
(every ``republish_interval_s``, 10 minutes): a root site restarted that way lets a leaf that
starts next pick a farther ancestor as its uplink (issue #18, finding 1). With one, every
change the store keeps (a new record, a newer one, a withdrawal, ours included) is written
through, and :meth:`disseminator.dht.KademliaNode.restore` loads them back — verified again,
as if a peer had offered them — before the node answers anyone.

Records are archived as their serialized wire form (``DhtSiteRecord``), so a field added to
the record travels through the archive unchanged. Rows are keyed by (key, site) as in the
store; :meth:`RecordArchive.retain` drops what the store no longer holds (expired, purged).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

__all__ = ["ArchivedRecord", "MemoryArchive", "RecordArchive"]

ArchivedRecord = tuple[bytes, str, bytes]  # (key, site, serialized record)


class RecordArchive(Protocol):
    """Durable (key, site) → serialized record (the site's SQLite state in production)."""

    def load(self) -> list[ArchivedRecord]:
        """Every archived record."""
        ...

    def save(self, key: bytes, site: str, record: bytes) -> None:
        """Keep ``record`` as the one of ``site`` under ``key`` (replacing any)."""
        ...

    def retain(self, kept: Iterable[tuple[bytes, str]]) -> None:
        """Forget every record whose (key, site) is not in ``kept``."""
        ...


class MemoryArchive:
    """An in-memory :class:`RecordArchive` (tests; it survives a node, not a process)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[bytes, str], bytes] = {}

    def load(self) -> list[ArchivedRecord]:
        return [(key, site, record) for (key, site), record in sorted(self.rows.items())]

    def save(self, key: bytes, site: str, record: bytes) -> None:
        self.rows[(key, site)] = record

    def retain(self, kept: Iterable[tuple[bytes, str]]) -> None:
        keep = set(kept)
        self.rows = {k: v for k, v in self.rows.items() if k in keep}
