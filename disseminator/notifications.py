"""The notifications a site's LDN inbox holds, in the site's SQLite store.

Theory of operation. One row per notification: the id the inbox minted (the last segment of
its URI), when it was accepted, who sent it (the certificate's common name and fingerprint),
the media type it came in, and its statements as N-Quads (:mod:`xdn.linked_data`). Rows are
never changed; the inbox lists them in the order they came (``seq``), a page at a time
(:meth:`Notifications.page`: ``seq`` is the cursor).

Three kinds of rows share the table, and the listing:

* notifications POSTed by parties (:meth:`Notifications.add`, a transaction of their own):
  the inbox holds at most a configured number of them (``[web] inbox_notifications``) and
  refuses one more, so a flood fills a bounded table and the disk, not memory;
* delivery receipts the site accepted (``receipt = 1``, :meth:`Notifications.add_receipt`,
  written inside the transaction that queues the receipt, :mod:`disseminator.receipts`): not
  counted against that limit — a network's receipts must not crowd parties' notifications out,
  nor be refused because parties filled the inbox — and bounded otherwise: one per subscriber
  certificate and document version (the id is derived from both, so a second receipt of the
  same version adds none), each wrapping a hop the site signed within its routed retention,
  and pruned with that retention (:meth:`Notifications.prune_receipts`, with
  ``receipts_seen``). So they cost at most a row per delivery the site still remembers routing;
* subscribers' failure notices the site accepted (``receipt = 2``, ``refusal``, the same
  :meth:`Notifications.add_receipt`, :mod:`disseminator.notices`): not counted against that
  limit either, one per subscriber certificate and refused thing (the id is derived from
  both), at most :data:`disseminator.notices.NOTICES_PER_SUBSCRIBER` per subscriber
  (:meth:`Notifications.count_refusals`), pruned with the receipts.
* publishers' policy-change notices the site verified on their way to a subscriber
  (``receipt = 3``, ``policy``, :meth:`Notifications.add_policy_notice`, written inside the
  transaction that routes the entitlement they travel with, :mod:`disseminator.policy_notices`):
  not counted against that limit either, one per subscriber certificate, publisher and policy
  version (the id is derived from the three), pruned with the receipts.

A receipt's notification holds its whole chain (20 to 30 KB of envelopes, signatures and
certificates), unless the site keeps the messages it minted (:mod:`disseminator.messages`):
then the row names the message of this site the receipt wraps (``via``) and holds only the
graphs after it, with the SHA-256 (``digest``) of the whole chain to rebuild
(:mod:`disseminator.receipt_refs`). Rows written before that hold whole chains and are served
as they are.

Who may read a notification (:mod:`xdn.linked_data._readers`: its sender and the parties it
concerns; the site and auditors read all) is decided by the caller when it stores it and
written with it, one row per reader in ``notification_readers`` (keyed by party, then
``seq``): :meth:`Notifications.page` lists what one party may read as a range of that key,
so a page costs its own rows however many notifications the party may not read. The rows go
with their notification (a trigger). A store written before readers existed gets the table
when it opens, and each notification it held is readable by its sender only (besides the
site and auditors: the node URI of the sender's common name), which closes the old "anyone
may read" without guessing whom a row concerned; receipts among them are pruned with the
routed retention anyway.

No clock here: the caller passes the time. Pure SQL on the store's connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field

from xdn import certs

__all__ = ["SCHEMA", "InboxFull", "Notifications", "StoredNotification", "upgrade"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS notifications (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    received_ms INTEGER NOT NULL,
    sender TEXT NOT NULL,
    sender_fingerprint TEXT NOT NULL,
    media_type TEXT NOT NULL,
    nquads BLOB NOT NULL,
    receipt INTEGER NOT NULL DEFAULT 0,
    via TEXT,
    digest TEXT
);
"""

_READERS = (
    "CREATE TABLE IF NOT EXISTS notification_readers (party TEXT NOT NULL, "
    "notification INTEGER NOT NULL, PRIMARY KEY (party, notification)) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS notification_readers_by_notification "
    "ON notification_readers (notification)",
    "CREATE TRIGGER IF NOT EXISTS notification_readers_go AFTER DELETE ON notifications "
    "BEGIN DELETE FROM notification_readers WHERE notification = OLD.seq; END",
)


def upgrade(db: sqlite3.Connection) -> None:
    """Bring an older store's table up to date (the ``receipt``, ``via`` and ``digest``
    columns, the readers' table: see the module's docstring) and index it."""
    columns = {row[1] for row in db.execute("PRAGMA table_info(notifications)")}
    for name, kind in (("receipt", "INTEGER NOT NULL DEFAULT 0"), ("via", "TEXT"),
                       ("digest", "TEXT")):
        if name not in columns:
            db.execute(f"ALTER TABLE notifications ADD COLUMN {name} {kind}")
    db.execute(
        "CREATE INDEX IF NOT EXISTS notifications_by_kind ON notifications (receipt, received_ms)"
    )
    with db:
        db.execute("BEGIN IMMEDIATE")
        before_readers = db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'notification_readers'"
        ).fetchone() is None
        for statement in _READERS:
            db.execute(statement)
        if before_readers:  # a store from before readers: its rows are their senders' only
            db.executemany(
                "INSERT OR IGNORE INTO notification_readers (party, notification) VALUES (?, ?)",
                [(certs.node_uri(sender), seq)
                 for seq, sender in db.execute("SELECT seq, sender FROM notifications")],
            )


_REFUSAL = 2  # the ``receipt`` column's value for a failure notice's notification
_POLICY = 3  # the ``receipt`` column's value for a policy-change notice's notification


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
    receipt: bool = False  # a delivery receipt the site accepted (see the module's docstring)
    refusal: bool = False  # a subscriber's failure notice the site accepted (ditto)
    policy: bool = False  # a publisher's policy-change notice the site passed on (ditto)
    via: str | None = None  # a receipt by reference: this site's message it wraps...
    digest: str | None = None  # ...and the SHA-256 (hex) of the whole chain; nquads: the rest
    # the node URIs of who may read it besides the site and auditors (its sender among them;
    # xdn.linked_data._readers): written with it, indexed for the listing
    readers: frozenset[str] = field(default=frozenset())

    def __post_init__(self) -> None:
        if (self.via is None) != (self.digest is None) or (self.via and not self.receipt):
            raise ValueError(f"notification {self.id}: a receipt by reference has a via "
                             "message and a digest, and nothing else has either")
        if not isinstance(self.readers, frozenset) or not all(
            isinstance(r, str) and r for r in self.readers
        ):
            raise TypeError(f"notification {self.id}: readers are a frozenset of node URIs")
        if self.receipt + self.refusal + self.policy > 1:
            raise ValueError(f"notification {self.id}: one kind at most of a receipt, a "
                             "refusal or a policy notice")


class Notifications:
    """The ``notifications`` table of a store (its connection; no transaction left open)."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def add(self, notification: StoredNotification, *, capacity: int) -> None:
        """Store a posted notification, unless the inbox already holds ``capacity`` of them
        (receipts not counted).

        Raises:
            InboxFull: the inbox is full (nothing written).
            sqlite3.IntegrityError: the id is taken (the caller mints unique ids).
        """
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            (count,) = self._db.execute(
                "SELECT COUNT(*) FROM notifications WHERE receipt = 0"
            ).fetchone()
            if count >= capacity:
                raise InboxFull(f"the inbox holds {count} notifications, its limit")
            self._insert("INSERT", notification)

    def add_receipt(self, notification: StoredNotification) -> bool:
        """Store a receipt's (or a failure notice's) notification unless one with its id is
        held; inside the caller's transaction (no transaction of its own). Returns whether it
        was stored."""
        if not (notification.receipt or notification.refusal):
            raise ValueError(f"notification {notification.id} is not a receipt or a refusal")
        return self._insert("INSERT OR IGNORE", notification) > 0

    def add_policy_notice(self, notification: StoredNotification) -> bool:
        """Store a policy-change notice's notification unless one with its id is held; inside
        the caller's transaction. Returns whether it was stored."""
        if not notification.policy:
            raise ValueError(f"notification {notification.id} is not a policy notice")
        return self._insert("INSERT OR IGNORE", notification) > 0

    def _insert(self, verb: str, n: StoredNotification) -> int:
        cursor = self._db.execute(
            f"{verb} INTO notifications "
            "(id, received_ms, sender, sender_fingerprint, media_type, nquads, receipt, via, "
            "digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (n.id, n.received_ms, n.sender, n.sender_fingerprint, n.media_type, n.nquads,
             _REFUSAL if n.refusal else _POLICY if n.policy else int(n.receipt), n.via, n.digest),
        )
        if cursor.rowcount > 0:
            self._db.executemany(
                "INSERT INTO notification_readers (party, notification) VALUES (?, ?)",
                [(reader, cursor.lastrowid) for reader in sorted(n.readers)],
            )
        return int(cursor.rowcount)

    def prune_receipts(self, before_ms: int) -> int:
        """Delete the notifications of receipts, failure notices and policy notices accepted
        before ``before_ms`` (inside the caller's transaction); return how many."""
        return int(self._db.execute(
            "DELETE FROM notifications WHERE receipt <> 0 AND received_ms < ?", (before_ms,)
        ).rowcount)

    def get(self, notification_id: str) -> StoredNotification | None:
        """The notification with this id, if the inbox holds it."""
        row = self._db.execute(
            "SELECT id, received_ms, sender, sender_fingerprint, media_type, nquads, receipt, "
            "via, digest, seq FROM notifications WHERE id = ?",
            (notification_id,),
        ).fetchone()
        if row is None:
            return None
        readers = frozenset(
            str(reader) for (reader,) in self._db.execute(
                "SELECT party FROM notification_readers WHERE notification = ?", (row[9],)
            )
        )
        return StoredNotification(
            id=row[0], received_ms=row[1], sender=row[2], sender_fingerprint=row[3],
            media_type=row[4], nquads=bytes(row[5]), receipt=row[6] == 1,
            refusal=row[6] == _REFUSAL, policy=row[6] == _POLICY, via=row[7], digest=row[8],
            readers=readers,
        )

    def page(
        self, *, after: int, limit: int, reader: str | None = None
    ) -> tuple[list[tuple[int, str]], bool]:
        """The (sequence number, id) of at most ``limit`` notifications accepted after the one
        numbered ``after``, oldest first, and whether the inbox holds more after them.

        Args:
            reader: only those this party (a node URI) may read, by the readers written with
                them (an index range: the cost is the page's, however many it may not read);
                ``None``: every one (the site, auditors).
        """
        if limit < 1:
            raise ValueError(f"a page holds at least one notification, not {limit}")
        if reader is None:
            found = self._db.execute(
                "SELECT seq, id FROM notifications WHERE seq > ? ORDER BY seq LIMIT ?",
                (after, limit + 1),
            )
        else:
            found = self._db.execute(
                "SELECT r.notification, n.id FROM notification_readers AS r "
                "JOIN notifications AS n ON n.seq = r.notification "
                "WHERE r.party = ? AND r.notification > ? ORDER BY r.notification LIMIT ?",
                (reader, after, limit + 1),
            )
        rows = [(int(seq), str(i)) for seq, i in found]
        return rows[:limit], len(rows) > limit

    def ids(self) -> list[str]:
        """The ids of every notification held, oldest first."""
        return [row[0] for row in self._db.execute("SELECT id FROM notifications ORDER BY seq")]

    def count(self, *, receipts: bool | None = None) -> int:
        """How many notifications the inbox holds (only receipts, or only those posted by
        parties, if asked)."""
        where = "" if receipts is None else (
            " WHERE receipt = 1" if receipts else " WHERE receipt = 0"
        )
        (count,) = self._db.execute(f"SELECT COUNT(*) FROM notifications{where}").fetchone()
        return int(count)

    def count_refusals(self, sender_fingerprint: str) -> int:
        """How many failure notices' notifications the inbox holds from one sender."""
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM notifications WHERE receipt = ? AND sender_fingerprint = ?",
            (_REFUSAL, sender_fingerprint),
        ).fetchone()
        return int(count)
