"""Opening the embedded SQLite stores the edges keep (key store, leases, gaps, ...).

Every durable store of a party is one SQLite file in its state directory, opened the same way:
the folder is created if missing, the connection is in autocommit mode (``isolation_level``
``None``: a store that needs a transaction says ``BEGIN`` itself, so nothing stays open by
accident), the journal is write-ahead (readers never block the writer, a crash loses no committed
write) with ``synchronous=FULL`` (every commit syncs the WAL: a commit that returned is on disk,
so what a party acknowledges after committing survives a power loss too; SQLite's compiled-in
default varies by build, so it is set, not assumed) and the schema script (``CREATE TABLE IF
NOT EXISTS ...``) is run in one transaction, so a new file and an existing one come out alike,
at the cost of one commit. Only the edges call this; the core stays free of I/O.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

__all__ = ["open_db"]


def open_db(path: Path, schema: str) -> sqlite3.Connection:
    """Open (or create) the SQLite file ``path`` in WAL, ``synchronous=FULL``, autocommit mode,
    with ``schema`` run.

    Args:
        path: the database file; its folder is created if missing.
        schema: an SQL script of idempotent statements (``CREATE ... IF NOT EXISTS``).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")  # (see above: a commit is on disk when it returns)
    db.executescript(f"BEGIN;\n{schema}\nCOMMIT;")  # one commit (one sync), not one per table
    return db
