"""The failure notices a subscriber still has to hand to its site, kept until the site took them.

Theory of operation. Every refusal the subscriber signs as a failure notice
(:mod:`subscriber.notices`) is appended to its provenance log *and* put here
(``STATE/notices.sqlite``), in the order signed. The client hands the oldest to the site it is
subscribed at (``Notices``, :func:`subscriber.client.send_notices`) and deletes them only once
the site answered the call — accepted, a duplicate or refused there, the site has dealt with
each — so a notice survives a dropped stream, a site that is down and a restart of the
subscriber, and a retry after a lost answer is a duplicate the site acknowledges without
listing it twice.

Bounded: at most :data:`MAX_QUEUED` notices wait. A subscriber cut off from its site for long
while refusing ever more (a flood of forged documents) drops the *oldest* ones past that, with
a warning naming how many: they stay in its provenance log (and ``refused.jsonl``), so the
audit still sees them; only the publisher does not hear of them.
"""

from __future__ import annotations

import logging
from pathlib import Path

from xdn.sqlitedb import open_db

__all__ = ["MAX_QUEUED", "NoticeOutbox"]

log = logging.getLogger(__name__)

#: The most failure notices waiting to be handed to the site (the oldest go past it).
MAX_QUEUED = 1000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outgoing (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, data BLOB NOT NULL
);
"""


class NoticeOutbox:
    """Failure notices waiting for the site, oldest first (SQLite; one connection).

    Args:
        path: the database file.
        capacity: the most notices kept (:data:`MAX_QUEUED`).
    """

    def __init__(self, path: Path, *, capacity: int = MAX_QUEUED) -> None:
        if capacity < 1:
            raise ValueError(f"the outbox holds at least one notice, not {capacity}")
        self._db = open_db(path, _SCHEMA)
        self._capacity = capacity

    def close(self) -> None:
        self._db.close()

    def put(self, data: bytes) -> None:
        """Queue one notice (N-Quads); past the capacity, the oldest are dropped."""
        if not isinstance(data, bytes) or not data:
            raise TypeError("a notice is non-empty N-Quads bytes")
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("INSERT INTO outgoing (data) VALUES (?)", (data,))
            dropped = self._db.execute(
                "DELETE FROM outgoing WHERE seq <= (SELECT MAX(seq) FROM outgoing) - ?",
                (self._capacity,),
            ).rowcount
        if dropped:
            log.warning(
                "%d failure notice(s) dropped unsent: more than %d wait for the site (they "
                "stay in the provenance log)", dropped, self._capacity,
            )

    def batch(self, *, limit: int, max_bytes: int) -> list[tuple[int, bytes]]:
        """The oldest notices, at most ``limit`` and ``max_bytes`` together (at least one)."""
        out: list[tuple[int, bytes]] = []
        size = 0
        for seq, data in self._db.execute(
            "SELECT seq, data FROM outgoing ORDER BY seq LIMIT ?", (limit,)
        ):
            if out and size + len(data) > max_bytes:
                break
            out.append((int(seq), bytes(data)))
            size += len(data)
        return out

    def drop(self, seqs: list[int]) -> None:
        """Forget notices the site took."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM outgoing WHERE seq = ?", [(s,) for s in seqs])

    def count(self) -> int:
        """How many notices wait."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM outgoing").fetchone()
        return int(count)
