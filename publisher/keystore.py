"""The publisher's document versions (SQLite; group key trees live in :mod:`publisher.lkh_store`).

A document's version is stored once the network accepted it, so the next publication of the
same document gets the next version and subscribers can refuse replays of older ones.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["KeyStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    document_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
"""


class KeyStore:
    """The last version of each of one publisher's documents."""

    def __init__(self, path: Path, *, publisher: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._publisher = publisher
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def next_version(self, document_id: str) -> int:
        """The version the next publication of ``document_id`` gets."""
        row = self._db.execute(
            "SELECT version FROM documents WHERE document_id = ?", (document_id,)
        ).fetchone()
        return 1 if row is None else int(row[0]) + 1

    def commit(self, document_id: str, version: int) -> None:
        """Record that ``version`` of ``document_id`` was published."""
        self._db.execute(
            "INSERT OR REPLACE INTO documents (document_id, version) VALUES (?, ?)",
            (document_id, version),
        )
