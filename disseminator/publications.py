"""Which publication a root site routed as each document's newest version: publishing is
idempotent per content.

Theory of operation. A publisher names each publication by a ``publish_id`` (a keyed digest of
its document id and content, :mod:`publisher.client`) and sends it with the document. When a
publisher crashes after its root routed a document but before it recorded or reported it, or
its acknowledgement is lost, the operator's only recovery is to publish again; that used to make
the same content the next version, received twice by every subscriber, and to log a newly
signed message the root's hop never referenced. Now the root remembers, per (publisher,
document), the id of the newest version it routed, with that version, its sequence number and
the publisher's signed message routed — in the ``publications`` table, written in the routing
transaction itself (:meth:`disseminator.store.Store.commit_routing`), so the memory is exactly as
durable as the routing.

A request whose id is the one remembered for its document is a publication routed before:
:meth:`Publications.routed_before` returns what was routed (:class:`xdn.publication.
PublishedBefore`), and the site routes neither the document nor its checkpoint again. Only the
*newest* version's id counts: content published as v1, replaced by v2, then published again is a
new version (v3) — a revert is no retry. A document routed without an id (an older publisher)
replaces its document's entry with an empty id, which nothing matches.

Retention: entries routed longer ago than the routed window's retention are dropped with it
(:meth:`Publications.prune`, from :meth:`disseminator.store.Store.prune_routed`), so a retry
is recognised for that long (7 days by default); later, the same content becomes a new version.
One row per document id: the table grows with distinct document ids within the retention only.

No clock here: the caller passes the time. Pure SQL on the store's connection.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from xdn.publication import PublishedBefore

__all__ = ["MAX_PUBLISH_ID_BYTES", "SCHEMA", "Publication", "Publications"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS publications (
    publisher TEXT NOT NULL, document TEXT NOT NULL, publish_id BLOB NOT NULL,
    version INTEGER NOT NULL, sequence INTEGER NOT NULL, provenance BLOB NOT NULL,
    routed_ms INTEGER NOT NULL,
    PRIMARY KEY (publisher, document)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS publications_by_time ON publications (routed_ms);
"""

#: The longest publish id a site stores (a publisher's is a 32-byte digest).
MAX_PUBLISH_ID_BYTES = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class Publication:
    """A document version routed, under the publication id it came with (``b""``: none)."""

    publisher: str
    document: str
    publish_id: bytes
    version: int
    sequence: int
    provenance: bytes  # the publisher's signed message routed (N-Quads; empty: none)

    def __post_init__(self) -> None:
        if len(self.publish_id) > MAX_PUBLISH_ID_BYTES:
            raise ValueError(f"a publish id is at most {MAX_PUBLISH_ID_BYTES} bytes")


class Publications:
    """The newest routed publication of each document, on one site's store connection."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def routed_before(
        self, publisher: str, document: str, publish_id: bytes
    ) -> PublishedBefore | None:
        """What was routed as ``document``'s newest version under ``publish_id`` (``None``: not
        that publication, or none remembered)."""
        if not publish_id:
            return None
        row = self._db.execute(
            "SELECT version, sequence, provenance FROM publications "
            "WHERE publisher = ? AND document = ? AND publish_id = ?",
            (publisher, document, publish_id),
        ).fetchone()
        if row is None:
            return None
        return PublishedBefore(
            version=int(row[0]), sequence=int(row[1]), provenance=bytes(row[2])
        )

    def record(self, publication: Publication, *, at_ms: int) -> None:
        """Remember ``publication`` as its document's newest (inside the caller's routing
        transaction); an older version never replaces a newer one."""
        p = publication
        self._db.execute(
            "INSERT INTO publications VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (publisher, document) DO UPDATE SET publish_id = excluded.publish_id, "
            "version = excluded.version, sequence = excluded.sequence, "
            "provenance = excluded.provenance, routed_ms = excluded.routed_ms "
            "WHERE excluded.version > publications.version",
            (p.publisher, p.document, p.publish_id, p.version, p.sequence, p.provenance, at_ms),
        )

    def prune(self, before_ms: int) -> int:
        """Forget the publications routed before ``before_ms``; return how many."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            return self._db.execute(
                "DELETE FROM publications WHERE routed_ms < ?", (before_ms,)
            ).rowcount

    def entries(self) -> int:
        """How many publications are remembered."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM publications").fetchone()
        return int(count)
