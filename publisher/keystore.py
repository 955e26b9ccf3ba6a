"""The publisher key service's durable state: group epochs and document versions (SQLite).

Every change is one transaction: a batch of new epochs is stored whole or not at all, and only
after the document that needed it was accepted by the network, so a failed publish leaves the
previous epochs in force.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path

from xdn.groupkeys import GroupState

__all__ = ["KeyStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS groups (
    concept TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    key BLOB NOT NULL,
    members TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS documents (
    document_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
"""


class KeyStore:
    """Group states of one publisher and the last version of each of its documents."""

    def __init__(self, path: Path, *, publisher: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._publisher = publisher
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def groups(self) -> dict[str, GroupState]:
        """Concept → current group state."""
        rows = self._db.execute("SELECT concept, epoch, key, members FROM groups")
        return {
            concept: GroupState(
                publisher=self._publisher,
                concept=concept,
                epoch=epoch,
                key=bytes(key),
                members=frozenset(json.loads(members)),
            )
            for concept, epoch, key, members in rows
        }

    def next_version(self, document_id: str) -> int:
        """The version the next publication of ``document_id`` gets."""
        row = self._db.execute(
            "SELECT version FROM documents WHERE document_id = ?", (document_id,)
        ).fetchone()
        return 1 if row is None else int(row[0]) + 1

    def commit(self, document_id: str, version: int, changed: Mapping[str, GroupState]) -> None:
        """Record a published document version and the epochs it started, atomically."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO groups (concept, epoch, key, members) VALUES (?, ?, ?, ?)",
                [
                    (g.concept, g.epoch, g.key, json.dumps(sorted(g.members)))
                    for g in changed.values()
                ],
            )
            self._db.execute(
                "INSERT OR REPLACE INTO documents (document_id, version) VALUES (?, ?)",
                (document_id, version),
            )
