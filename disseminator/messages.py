"""The messages a site minted, kept so that their URIs dereference (:mod:`disseminator.web`).

Theory of operation. A message URI a site mints (``<NODE>msg/<doc>/v<version>/<hop>``) names
the message as the site sent it: the chain it received and the graphs of its own hop. Both
are written in the routing transaction, beside the log outbox, when the store keeps messages
(``Store(messages_of=NODE)``: the daemon asks for it when the web endpoint is on):

* ``message_chains`` — a received chain, once per routed document version, under the URI of
  its outermost message (the upstream's, or the publisher's);
* ``message_hops`` — each hop this site signed under its ``msg/`` space (routing, and replays
  of retained documents to new subscribers), with the URI of the chain it extends (its
  ``msg:hasRemoteMessage``). Receipts and failure notices are not kept here.

:meth:`MessageArchive.get` joins the two. Rows older than the routed window's retention are
pruned with it (:meth:`MessageArchive.prune`), so a message dereferences for as long as the
site remembers routing it. No clock here: the caller passes the time. SQL on the store's
connection; the writes join the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from xdn.errors import PeerError
from xdn.provenance._vocab import HAS_REMOTE_MESSAGE
from xdn.rdf import parse_nquads

__all__ = ["SCHEMA", "MessageArchive"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS message_chains (
    id INTEGER PRIMARY KEY, uri TEXT NOT NULL UNIQUE, nquads BLOB NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS message_hops (
    id INTEGER PRIMARY KEY, uri TEXT NOT NULL UNIQUE, chain TEXT NOT NULL,
    nquads BLOB NOT NULL, at_ms INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS message_chains_by_time ON message_chains (at_ms);
CREATE INDEX IF NOT EXISTS message_hops_by_time ON message_hops (at_ms);
"""


def _hop(graphs: bytes, prefix: str) -> tuple[str, str] | None:
    """(message URI, URI of the chain it extends) of one hop's graphs, if minted below
    ``prefix`` and relaying a chain; else ``None``."""
    try:
        quads = parse_nquads(graphs)
    except PeerError:  # (our own graphs: cannot happen; never fail routing over an index)
        return None
    if not quads or quads[0].g is None:
        return None
    uri = quads[0].g.value.partition("#")[0]
    if not uri.startswith(prefix):
        return None
    remote = next((q.o for q in quads if q.p == HAS_REMOTE_MESSAGE), None)
    return None if remote is None else (uri, str(remote))


class MessageArchive:
    """The ``message_chains`` and ``message_hops`` tables of a store, for node ``node_uri``."""

    def __init__(self, db: sqlite3.Connection, node_uri: str) -> None:
        self._db = db
        self._prefix = node_uri + "msg/"

    def keep(
        self, db: sqlite3.Connection, *, chain: tuple[str, bytes] | None,
        hops: Iterable[bytes], at_ms: int,
    ) -> None:
        """Keep a received chain and the hops signed over it (in the caller's transaction)."""
        if chain is not None:
            db.execute(
                "INSERT OR IGNORE INTO message_chains (uri, nquads, at_ms) VALUES (?, ?, ?)",
                (chain[0], chain[1], at_ms),
            )
        rows = []
        for graphs in hops:
            if (found := _hop(graphs, self._prefix)) is not None:
                rows.append((*found, graphs, at_ms))
        db.executemany(
            "INSERT OR IGNORE INTO message_hops (uri, chain, nquads, at_ms) VALUES (?, ?, ?, ?)",
            rows,
        )

    def get(self, uri: str) -> bytes | None:
        """The N-Quads of message ``uri`` (the chain it extends, then its hop), if kept."""
        row = self._db.execute(
            "SELECT c.nquads, h.nquads FROM message_hops h "
            "JOIN message_chains c ON c.uri = h.chain WHERE h.uri = ?",
            (uri,),
        ).fetchone()
        if row is None:
            return None
        chain, hop = bytes(row[0]), bytes(row[1])
        return chain + (b"" if chain.endswith(b"\n") else b"\n") + hop

    def prune(self, before_ms: int) -> int:
        """Forget what was kept before ``before_ms``; return how many rows went."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            gone = self._db.execute("DELETE FROM message_hops WHERE at_ms < ?", (before_ms,))
            chains = self._db.execute(
                "DELETE FROM message_chains WHERE at_ms < ?", (before_ms,)
            )
            return int(gone.rowcount + chains.rowcount)
