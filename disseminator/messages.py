"""The messages a site minted, indexed so that their URIs dereference (:mod:`disseminator.web`).

Theory of operation. A message URI a site mints (``<NODE>msg/<doc>/v<version>/<hop>``) names
the message as the site sent it: the chain it received and the graphs of its own hop. When the
store keeps messages (``Store(messages_of=NODE)``: the daemon asks for it when the web endpoint
is on), it keeps

* ``message_chains`` — each received chain, once per routed document version, under the URI
  of its outermost message (the upstream's, or the publisher's), written in the routing
  transaction (:meth:`MessageArchive.keep_chain`: a few KB per document);
* ``message_hops`` — where in the provenance log each hop this site signed under its ``msg/``
  space lies (offset, length), with the URI of the chain it extends (its
  ``msg:hasRemoteMessage``), written when the log outbox is flushed to the log
  (:meth:`MessageArchive.index_hops`, in the transaction that clears the outbox; a hop flushed
  twice after a crash keeps its first place). A hop's graphs are in the log already: only
  their place is written (a fan-out to 1,000 destinations signs 1,000 hops of a few KB each).

:meth:`MessageArchive.find` returns the chain and the hop's place; the reader checks that the
bytes there are still that hop (:func:`hop_of`) before serving them. Receipts and failure
notices are not indexed; a receipt's inbox notification refers to the message it wraps
(:mod:`disseminator.receipt_refs`). Rows older than the routed window's retention are pruned with it
(:meth:`MessageArchive.prune`). No clock here: the caller passes the time.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass

from xdn.provenance._vocab import HAS_REMOTE_MESSAGE

__all__ = ["SCHEMA", "KeptMessage", "MessageArchive", "hop_of"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS message_chains (
    id INTEGER PRIMARY KEY, uri TEXT NOT NULL UNIQUE, nquads BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS message_hops (
    id INTEGER PRIMARY KEY, uri TEXT NOT NULL UNIQUE, chain TEXT NOT NULL,
    log_offset INTEGER NOT NULL, log_length INTEGER NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS message_chains_by_time ON message_chains (at_ms);
CREATE INDEX IF NOT EXISTS message_hops_by_time ON message_hops (at_ms);
"""

_REMOTE = b"<" + HAS_REMOTE_MESSAGE.value.encode() + b"> <"


def hop_of(graphs: bytes) -> tuple[str, str] | None:
    """(message URI, URI of the chain it extends) of one relayed hop's graphs, else ``None``.

    Read off the canonical lines this site wrote, without parsing them: the first line's graph
    name up to its ``#``, and the object of ``msg:hasRemoteMessage``.
    """
    end = graphs.find(b"\n")
    first = graphs[:end] if end >= 0 else graphs
    start = first.rfind(b" <")
    remote_at = graphs.find(_REMOTE)
    if start < 0 or not first.endswith(b"> .") or remote_at < 0:
        return None
    remote_at += len(_REMOTE)
    remote = graphs[remote_at:graphs.find(b">", remote_at)]
    try:
        return first[start + 2:-3].partition(b"#")[0].decode(), remote.decode()
    except UnicodeDecodeError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptMessage:
    """Where a message's parts are: its received chain, and its hop's place in the log."""

    uri: str
    chain: bytes
    log_offset: int
    log_length: int


class MessageArchive:
    """The ``message_chains`` and ``message_hops`` tables of a store, for node ``node_uri``."""

    def __init__(self, db: sqlite3.Connection, node_uri: str) -> None:
        self._db = db
        self._prefix = node_uri + "msg/"

    def keep_chain(self, db: sqlite3.Connection, uri: str, nquads: bytes, at_ms: int) -> None:
        """Keep a received chain (in the caller's transaction; the first one kept stays)."""
        db.execute(
            "INSERT OR IGNORE INTO message_chains (uri, nquads, at_ms) VALUES (?, ?, ?)",
            (uri, nquads, at_ms),
        )

    def index_hops(
        self, db: sqlite3.Connection, blobs: Sequence[bytes], *, log_offset: int, at_ms: int
    ) -> None:
        """Index the hops among ``blobs``, written to the log one after the other from
        ``log_offset`` (in the caller's transaction)."""
        rows, offset = [], log_offset
        for blob in blobs:
            found = hop_of(blob)
            if found is not None and found[0].startswith(self._prefix):
                rows.append((*found, offset, len(blob), at_ms))
            offset += len(blob)
        db.executemany(
            "INSERT OR IGNORE INTO message_hops (uri, chain, log_offset, log_length, at_ms) "
            "VALUES (?, ?, ?, ?, ?)",
            rows,
        )

    def keeps(self, uri: str) -> bool:
        """Whether message ``uri`` is kept: its hop indexed, with the chain it extends."""
        return self._db.execute(
            "SELECT 1 FROM message_hops h JOIN message_chains c ON c.uri = h.chain "
            "WHERE h.uri = ?",
            (uri,),
        ).fetchone() is not None

    def find(self, uri: str) -> KeptMessage | None:
        """Message ``uri``'s chain and the place of its hop in the log, if kept."""
        row = self._db.execute(
            "SELECT c.nquads, h.log_offset, h.log_length FROM message_hops h "
            "JOIN message_chains c ON c.uri = h.chain WHERE h.uri = ?",
            (uri,),
        ).fetchone()
        if row is None:
            return None
        return KeptMessage(uri=uri, chain=bytes(row[0]), log_offset=row[1], log_length=row[2])

    def prune(self, before_ms: int) -> int:
        """Forget what was kept before ``before_ms``; return how many rows went."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            hops = self._db.execute("DELETE FROM message_hops WHERE at_ms < ?", (before_ms,))
            chains = self._db.execute(
                "DELETE FROM message_chains WHERE at_ms < ?", (before_ms,)
            )
            return int(hops.rowcount + chains.rowcount)
