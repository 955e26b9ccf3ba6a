"""Which document versions a site has routed: a bounded window plus a floor per publisher.

Theory of operation. A site must not route the same document version twice (a publisher's
retry, an uplink's redelivery, a replay by someone who recorded the traffic). It remembers
each version it routed — (publisher, document, version), with the version's number in its
publisher's signed sequence and when it was routed — in the ``routed`` table, written in the
routing transaction itself (:meth:`disseminator.store.Store.commit_routing`).

That table would grow with every document ever routed, so it is a window: a housekeeping pass
(:meth:`RoutedWindow.prune`) drops, per publisher, the entries routed longer ago than the
retention period and those numbered more than ``per_publisher`` below the newest number routed
(the publisher numbers every document version, so that keeps at most ``per_publisher``
entries). Pruning alone would let a pruned version in again, so before dropping entries the
pass raises the publisher's **floor** (``routed_floor``) to the highest sequence number it
drops, and drops every entry at or below it. A document is new only if it has no entry *and*
its signed sequence number is above its publisher's floor (:meth:`RoutedWindow.seen`): the
publisher gives every new document version the next number (reserved durably before signing),
so a version that was pruned, or an older version of any document, can never pass again.

The price: a sequenced document that was never routed here and whose number is at or below the
floor — one that arrives more than the retention period after later ones, or more than
``per_publisher`` numbers behind — is taken for a replay and ignored. Unsequenced documents
(sequence 0, the v2 manifests) carry nothing a floor could compare, so their entries are kept
and never pruned. A publisher whose sequence restarted (its key store lost) would find its new
documents ignored by sites until their floors are reset.

No clock here: the caller passes the time. Pure SQL on the store's connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["SCHEMA", "RoutedWindow", "Window"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS routed (
    publisher TEXT NOT NULL, document TEXT NOT NULL, version INTEGER NOT NULL,
    sequence INTEGER NOT NULL DEFAULT 0, routed_ms INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (publisher, document, version)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS routed_floor (
    publisher TEXT PRIMARY KEY, sequence INTEGER NOT NULL
) WITHOUT ROWID;
"""

_INDEXES = """
CREATE INDEX IF NOT EXISTS routed_by_sequence ON routed (publisher, sequence) WHERE sequence > 0;
CREATE INDEX IF NOT EXISTS routed_by_time ON routed (routed_ms) WHERE sequence > 0;
"""

_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """How much of its routing history a site keeps (``[site] routed_retention_days``,
    ``[site] routed_per_publisher``).

    Attributes:
        retention_days: entries routed longer ago than this are pruned.
        per_publisher: entries numbered more than this below their publisher's newest are
            pruned (so at most this many are kept per publisher).
    """

    retention_days: float = 7.0
    per_publisher: int = 100_000

    @property
    def retention_ms(self) -> int:
        """The retention in milliseconds."""
        return int(self.retention_days * _DAY_MS)

    def __post_init__(self) -> None:
        if not self.retention_days > 0:
            raise ValueError("the routed retention must be positive")
        if self.per_publisher < 1:
            raise ValueError("at least one routed entry per publisher must be kept")


class RoutedWindow:
    """The routed entries and floors of one site's store (on its SQLite connection)."""

    def __init__(self, db: sqlite3.Connection, window: Window) -> None:
        self._db = db
        self.window = window
        columns = {row[1] for row in db.execute("PRAGMA table_info(routed)")}
        for column in ("sequence", "routed_ms"):  # a store written before the window
            if column not in columns:
                db.execute(f"ALTER TABLE routed ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
        db.executescript(_INDEXES)

    def seen(self, publisher: str, document: str, version: int, sequence: int = 0) -> bool:
        """Was this version routed here, or is its sequence number at or below the floor?"""
        row = self._db.execute(
            "SELECT 1 FROM routed WHERE publisher = ? AND document = ? AND version = ?",
            (publisher, document, version),
        ).fetchone()
        return row is not None or (sequence > 0 and sequence <= self.floor(publisher))

    def floor(self, publisher: str) -> int:
        """The highest sequence number of ``publisher`` pruned (0: none)."""
        row = self._db.execute(
            "SELECT sequence FROM routed_floor WHERE publisher = ?", (publisher,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def mark(
        self, publisher: str, document: str, version: int, *, sequence: int, at_ms: int
    ) -> None:
        """Record a routed version (inside the caller's routing transaction)."""
        self._db.execute(
            "INSERT OR IGNORE INTO routed (publisher, document, version, sequence, routed_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            (publisher, document, version, sequence, at_ms),
        )

    def entries(self) -> int:
        """How many entries the window holds."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM routed").fetchone()
        return int(count)

    def prune(self, now_ms: int) -> int:
        """Drop the entries past the window, raising each publisher's floor first; return how
        many were dropped (one transaction, and none when there is nothing to drop).

        Cheap when there is nothing to drop (every housekeeping pass): the old entries are
        found by the time index, each publisher's newest number by the sequence index.
        """
        cutoff = now_ms - self.window.retention_ms
        cuts: dict[str, int] = dict(self._db.execute(
            "SELECT publisher, MAX(sequence) FROM routed INDEXED BY routed_by_time "
            "WHERE sequence > 0 AND routed_ms < ? GROUP BY publisher",
            (cutoff,),
        ).fetchall())  # fmt: skip
        for publisher, newest in self._newest():
            if newest - self.window.per_publisher > cuts.get(publisher, 0):
                cuts[publisher] = newest - self.window.per_publisher
        dropped = 0
        if not cuts:
            return dropped
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for publisher, cut in sorted(cuts.items()):
                self._db.execute(
                    "INSERT INTO routed_floor VALUES (?, ?) ON CONFLICT (publisher) DO UPDATE "
                    "SET sequence = MAX(sequence, excluded.sequence)",
                    (publisher, cut),
                )
                dropped += self._db.execute(
                    "DELETE FROM routed WHERE publisher = ? AND sequence > 0 AND sequence <= ?",
                    (publisher, cut),
                ).rowcount
        return dropped

    def _newest(self) -> list[tuple[str, int]]:
        """(publisher, newest sequence number routed) of each publisher with numbered entries,
        one index look-up each (a skip scan: no pass over the entries)."""
        out: list[tuple[str, int]] = []
        (publisher,) = self._db.execute(
            "SELECT MIN(publisher) FROM routed WHERE sequence > 0"
        ).fetchone()
        while publisher is not None:
            (newest,) = self._db.execute(
                "SELECT MAX(sequence) FROM routed WHERE publisher = ? AND sequence > 0",
                (publisher,),
            ).fetchone()
            out.append((str(publisher), int(newest)))
            (publisher,) = self._db.execute(
                "SELECT MIN(publisher) FROM routed WHERE sequence > 0 AND publisher > ?",
                (publisher,),
            ).fetchone()
        return out
