"""The notifications a site's LDN inbox accepted, in the site's SQLite store.

Theory of operation. One row per notification: the id the inbox minted (the last segment of
its URI), when it was accepted, who posted it (the certificate's common name and fingerprint),
the media type it came in, and its statements as N-Quads (:mod:`xdn.linked_data`). Rows are
written in a transaction of their own and never changed; the inbox lists them in the order
they came (``seq``), a page at a time (:meth:`Notifications.page`: ``seq`` is the cursor). The inbox holds at most a configured number of notifications
(``[web] inbox_notifications``): :meth:`Notifications.add` refuses one more, so a flood fills
a bounded table and the disk, not memory.

No clock here: the caller passes the time. Pure SQL on the store's connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["SCHEMA", "InboxFull", "Notifications", "StoredNotification"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    received_ms INTEGER NOT NULL,
    sender TEXT NOT NULL,
    sender_fingerprint TEXT NOT NULL,
    media_type TEXT NOT NULL,
    nquads BLOB NOT NULL
);
"""


class InboxFull(Exception):
    """The inbox holds as many notifications as it may."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredNotification:
    """A notification as the inbox keeps it."""

    id: str
    received_ms: int
    sender: str
    sender_fingerprint: str
    media_type: str
    nquads: bytes


class Notifications:
    """The ``notifications`` table of a store (its connection; no transaction left open)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def add(self, notification: StoredNotification, *, capacity: int) -> None:
        """Store a notification, unless the inbox already holds ``capacity`` of them.

        Raises:
            InboxFull: the inbox is full (nothing written).
            sqlite3.IntegrityError: the id is taken (the caller mints unique ids).
        """
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            (count,) = self._db.execute("SELECT COUNT(*) FROM notifications").fetchone()
            if count >= capacity:
                raise InboxFull(f"the inbox holds {count} notifications, its limit")
            self._db.execute(
                "INSERT INTO notifications "
                "(id, received_ms, sender, sender_fingerprint, media_type, nquads) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (notification.id, notification.received_ms, notification.sender,
                 notification.sender_fingerprint, notification.media_type, notification.nquads),
            )

    def get(self, notification_id: str) -> StoredNotification | None:
        """The notification with this id, if the inbox holds it."""
        row = self._db.execute(
            "SELECT id, received_ms, sender, sender_fingerprint, media_type, nquads "
            "FROM notifications WHERE id = ?",
            (notification_id,),
        ).fetchone()
        if row is None:
            return None
        return StoredNotification(
            id=row[0], received_ms=row[1], sender=row[2], sender_fingerprint=row[3],
            media_type=row[4], nquads=bytes(row[5]),
        )

    def page(self, *, after: int, limit: int) -> tuple[list[tuple[int, str]], bool]:
        """The (sequence number, id) of at most ``limit`` notifications accepted after the one
        numbered ``after``, oldest first, and whether the inbox holds more after them."""
        if limit < 1:
            raise ValueError(f"a page holds at least one notification, not {limit}")
        rows = [
            (int(seq), str(notification_id)) for seq, notification_id in self._db.execute(
                "SELECT seq, id FROM notifications WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit + 1),
            )
        ]
        return rows[:limit], len(rows) > limit

    def ids(self) -> list[str]:
        """The ids of every notification held, oldest first."""
        return [row[0] for row in self._db.execute("SELECT id FROM notifications ORDER BY seq")]

    def count(self) -> int:
        """How many notifications the inbox holds."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM notifications").fetchone()
        return int(count)
