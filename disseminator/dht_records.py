"""The DHT records a site stores, in its SQLite state (a :class:`~disseminator.dht.RecordArchive`).

One row per (key, site): the record's serialized wire form, as the DHT node archived it
(:mod:`disseminator.dht._archive`). Written through on every change the node's record store
keeps, loaded once at start, before the site serves. Pure SQL on the store's connection.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

__all__ = ["SCHEMA", "StoredDhtRecords"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS dht_records (
    key BLOB NOT NULL,
    site TEXT NOT NULL,
    record BLOB NOT NULL,
    PRIMARY KEY (key, site)
);
"""


class StoredDhtRecords:
    """The ``dht_records`` table of a site's store."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def load(self) -> list[tuple[bytes, str, bytes]]:
        rows = self._db.execute("SELECT key, site, record FROM dht_records ORDER BY key, site")
        return [(bytes(k), s, bytes(r)) for k, s, r in rows]

    def save(self, key: bytes, site: str, record: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO dht_records VALUES (?, ?, ?)", (key, site, record))

    def retain(self, kept: Iterable[tuple[bytes, str]]) -> None:
        keep = set(kept)
        gone = [(k, s) for k, s, _ in self.load() if (k, s) not in keep]
        if gone:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("DELETE FROM dht_records WHERE key = ? AND site = ?", gone)
