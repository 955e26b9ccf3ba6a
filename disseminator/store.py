"""Durable state of one disseminator (SQLite): queues, registrations, routed documents.

Theory of operation. Routing a document is one transaction: the deliveries for every
destination are appended to their queues (each with the next sequence number of that
destination), the document is marked as routed (so a retransmission is not routed twice; a
bounded window with a floor per publisher, :mod:`disseminator.routed`), and the provenance
graphs the site signed are put in an outbox. Only after the commit are the
graphs flushed to the N-Quads log (and flushed again at start-up if the process died first), so
the log never records a hop that did not happen, nor misses one that did.

A destination's deliveries stay queued until acknowledged, so a receiver that reconnects —
after its own crash or the site's — resumes from its last acknowledgement. Registrations (local
subscribers and the members behind each downlink) persist too, so a restarted site routes to
durable subscribers before they reconnect. Queues are bounded per destination; a full queue
refuses its appends (counted and logged) — and, for routing acknowledged after the commit
(``refuse_full``), the whole transaction, so no acknowledgement covers a dropped delivery.
How many deliveries wait over all destinations is a counter kept in memory (read once
at opening from the destinations' counters), so the gauges read no table.

Notifications the site's LDN inbox holds are rows of ``notifications``
(:mod:`disseminator.notifications`; a store written before it gets the table when it opens),
and so are the receipts the site accepts, when its inbox is on (below).

Delivery receipts a site accepted (:mod:`disseminator.receipts`) are kept in ``receipts`` until
passed upstream (or, at a root site, until their publisher fetched them), and their ids in
``receipts_seen`` for the routed window's retention, so that a receipt sent twice (a retry whose
acknowledgement was lost) is neither logged nor passed on twice; a receipt of a hop older than
that retention is refused as stale, so none can come again once its id is pruned. Accepting
one queues it, stages its graphs in the log outbox and puts its notification in the inbox in
one transaction, like routing; the notification goes when its id is pruned.

The last ``retain`` documents of each publisher (latest version of each, as this site received
them) are retained in the same transaction, for new subscribers that ask for the state at
subscribe time.

A document goes to many destinations, each a selection of its fragments with a provenance hop
of its own. Its bytes are stored once, as a :class:`Body` in ``bodies``; each delivery (and the
retained copy) stores only its *pieces*: literal bytes (its framing, its provenance) and spans
of the body. A body counts the rows that refer to it and goes with the last of them, so a
document costs one multi-megabyte write and one delete however many destinations it has. A
document that came in parts is staged as it arrives, in chunks of a body that is never held
whole in memory (:mod:`disseminator.body_chunks`): :meth:`Store.stage` writes it,
:meth:`Store.let_go` deletes it unless some row refers to it, its deliveries are read back a
span at a time, and a staged body no row refers to is deleted when the store opens.

Durability. The store is in WAL mode. Its main connection commits everything that precedes an
acknowledgement: routing a publisher's document (then ``PublishAck``), applying an uplink's
delivery with its resume counter (then the ``Ack`` upstream), a receipt accepted. It runs with
``synchronous=FULL`` (``durable=True``, the default; ``[site] durability = "full"``): in WAL
mode every commit syncs the WAL, so an acknowledged delivery is on disk before the
acknowledgement leaves, and survives a power loss, not only a crash of the process.
``durable=False`` (``durability = "normal"``) keeps ``synchronous=NORMAL``: the WAL is synced
only at checkpoints, and a power loss can take the last commits, acknowledged or not (a crash
of the process cannot). The second connection, which only commits the acknowledgements
*received* from destinations (deleting what they hold), stays NORMAL: no acknowledgement
follows its commits, and losing one redelivers deliveries that the receiver recognises by
sequence number and skips; WAL frames are synced in order, so the next FULL commit of the main
connection makes those before it durable too. For the same reasons the main connection commits
two kinds of bookkeeping unsynced (:meth:`Store._unsynced`), each ~2-4 ms of a blocked event
loop per document per site otherwise: dropping graphs from the log outbox once the log has them
(the log file itself is not synced: losing the drop writes them again, never loses them) and
dropping receipts passed upstream (a receipt sent again is a duplicate the uplink skips).

``Store(":memory:")`` is the in-memory implementation for tests.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from disseminator import (
    body_chunks,
    dht_records,
    messages,
    notifications,
    publications,
    routed,
)
from disseminator.body_chunks import Staging, StoredBytes, StoredSpan
from disseminator.dht_records import StoredDhtRecords
from disseminator.messages import MessageArchive
from disseminator.notifications import Notifications, StoredNotification
from disseminator.publications import Publication, Publications
from disseminator.routed import RoutedWindow, Window

__all__ = [
    "Append",
    "Body",
    "Chunk",
    "History",
    "Piece",
    "QueueFull",
    "QueuedReceipt",
    "Retained",
    "Store",
    "StoredRegistration",
    "Window",
    "chunks_size",
    "joined",
    "piece_size",
]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS destinations (
    kind TEXT NOT NULL, name TEXT NOT NULL,
    next_seq INTEGER NOT NULL DEFAULT 1,
    acked INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (kind, name)
);
CREATE TABLE IF NOT EXISTS deliveries (
    kind TEXT NOT NULL, name TEXT NOT NULL, seq INTEGER NOT NULL, payload BLOB NOT NULL,
    body INTEGER,
    PRIMARY KEY (kind, name, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bodies (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS registrations (
    kind TEXT NOT NULL, owner TEXT NOT NULL, subscriber TEXT NOT NULL,
    certificate BLOB NOT NULL, grants TEXT NOT NULL, seen_ms INTEGER NOT NULL,
    lease BLOB NOT NULL DEFAULT x'',
    PRIMARY KEY (kind, owner, subscriber)
);
CREATE TABLE IF NOT EXISTS log_outbox (id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS disseminated (
    publisher TEXT NOT NULL, concept TEXT NOT NULL, PRIMARY KEY (publisher, concept)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS instances (
    certificate TEXT NOT NULL, publisher TEXT NOT NULL, concept TEXT NOT NULL,
    count INTEGER NOT NULL, PRIMARY KEY (certificate, publisher, concept)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS policy_versions (
    publisher TEXT PRIMARY KEY, version INTEGER NOT NULL, digest TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS retained (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    publisher TEXT NOT NULL, document TEXT NOT NULL, version INTEGER NOT NULL,
    payload BLOB NOT NULL, body INTEGER,
    UNIQUE (publisher, document)
);
CREATE TABLE IF NOT EXISTS crl (
    id INTEGER PRIMARY KEY CHECK (id = 1), number TEXT NOT NULL, pem BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts_seen (
    id TEXT PRIMARY KEY, seen_ms INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    publisher TEXT NOT NULL, data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_by_publisher ON receipts (publisher, seq);
"""


_REG_COLUMNS = "(kind, owner, subscriber, certificate, grants, seen_ms, lease)"


class QueueFull(Exception):
    """A destination's queue reached its bound (``destinations``: the (kind, name) of each)."""

    def __init__(self, destinations: Sequence[tuple[str, str]]) -> None:
        self.destinations = tuple(destinations)
        names = ", ".join(f"{kind} {name}" for kind, name in self.destinations)
        super().__init__(f"queue full: {names}")


@dataclass(frozen=True, slots=True, eq=False)
class Body:
    """Bytes several rows share (a document's fragments), stored once per routing step, or
    already in the store (staged as its parts came: :class:`StoredBytes`)."""

    data: bytes | memoryview | StoredBytes  # (a view: of the message a document came in)


#: Part of a stored message: literal bytes, or the span ``[start, end)`` of its :class:`Body`.
Piece = bytes | tuple[int, int]


def piece_size(piece: Piece) -> int:
    """How many bytes ``piece`` stands for."""
    return len(piece) if isinstance(piece, bytes) else piece[1] - piece[0]


#: A chunk of a stored message: bytes, a view of a body in memory, or a span of a staged one.
Chunk = bytes | memoryview | StoredSpan


def _chunks(body: bytes | memoryview | StoredBytes, pieces: Sequence[Piece]) -> list[Chunk]:
    """The byte chunks ``pieces`` of ``body`` stand for (views of the body, or spans of a
    staged one to be read when needed: no copy)."""
    if isinstance(body, StoredBytes):
        return [p if isinstance(p, bytes) else body.span(*p) for p in pieces]
    view = memoryview(body)
    return [p if isinstance(p, bytes) else view[p[0]:p[1]] for p in pieces]


def chunks_size(chunks: Sequence[Chunk]) -> int:
    """How many bytes ``chunks`` hold."""
    return sum(len(c) for c in chunks)


def joined(chunks: Sequence[Chunk]) -> bytes:
    """``chunks`` as one ``bytes`` (spans of a staged body read: for small messages only)."""
    return b"".join(c.read(0, len(c)) if isinstance(c, StoredSpan) else c for c in chunks)


def _assemble(body: bytes | memoryview | StoredBytes, pieces: Sequence[Piece]) -> bytes:
    return joined(_chunks(body, pieces))


def _encode_pieces(pieces: Sequence[Piece]) -> bytes:
    """Pieces as a row stores them: ``L`` length data, or ``S`` start end (8-byte big-endian)."""
    out = []
    for piece in pieces:
        if isinstance(piece, bytes):
            out.append(b"L" + len(piece).to_bytes(8, "big") + piece)
        else:
            out.append(b"S" + piece[0].to_bytes(8, "big") + piece[1].to_bytes(8, "big"))
    return b"".join(out)


def _decode_pieces(data: bytes) -> list[Piece]:
    pieces: list[Piece] = []
    pos = 0
    while pos < len(data):
        first = int.from_bytes(data[pos + 1:pos + 9], "big")
        if data[pos:pos + 1] == b"L":
            pieces.append(data[pos + 9:pos + 9 + first])
            pos += 9 + first
        else:
            pieces.append((first, int.from_bytes(data[pos + 9:pos + 17], "big")))
            pos += 17
    return pieces


@dataclass(frozen=True, slots=True, kw_only=True)
class Append:
    """One delivery to queue for one destination: ``payload``, or ``pieces`` of a shared
    ``body`` (the deliveries of one document)."""

    kind: str
    name: str
    payload: bytes = b""
    body: Body | None = None
    pieces: tuple[Piece, ...] = ()

    def delivery(self) -> bytes:
        """The delivery's bytes."""
        return self.payload if self.body is None else _assemble(self.body.data, self.pieces)

    def chunks(self) -> list[Chunk]:
        """The delivery's bytes in the chunks it is stored as (views of the body)."""
        return [self.payload] if self.body is None else _chunks(self.body.data, self.pieces)


@dataclass(frozen=True, slots=True, kw_only=True)
class Retained:
    """A document kept for new subscribers: the serialised Dissemination this site received
    (``payload``, or ``pieces`` of the ``body`` its deliveries share)."""

    publisher: str
    document: str
    version: int
    payload: bytes = b""
    body: Body | None = None
    pieces: tuple[Piece, ...] = ()

    def dissemination(self) -> bytes:
        """The serialised Dissemination."""
        return self.payload if self.body is None else _assemble(self.body.data, self.pieces)

    def chunks(self) -> list[Chunk]:
        """The serialised Dissemination in the chunks it is stored as (views of the body)."""
        return [self.payload] if self.body is None else _chunks(self.body.data, self.pieces)


@dataclass(frozen=True, slots=True, kw_only=True)
class History:
    """What routing one document adds to the state history-dependent rules read.

    ``publisher``'s ``concepts`` were disseminated (``after`` rules); each certificate in
    ``instances`` (by fingerprint) received one more instance of its concepts
    (``max_instances`` rules). Kept per certificate, so a new registration starts from them.
    """

    publisher: str
    concepts: frozenset[str]
    instances: dict[str, frozenset[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class QueuedReceipt:
    """A receipt chain a site accepted, kept until passed upstream or fetched by its publisher.

    Attributes:
        seq: its place in this site's queue (increasing; never reused).
        publisher: the publisher of the document received.
        data: the chain, canonical N-Quads.
    """

    seq: int
    publisher: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRegistration:
    """A persisted registration: a local subscriber (owner "") or a member behind a link."""

    kind: str  # "subscriber" | "link"
    owner: str  # the link's site name, or "" for local subscribers
    subscriber: str
    certificate: bytes
    grants: dict[str, list[str]]
    seen_ms: int
    lease: bytes = b""  # the subscriber's signed membership lease (xdn.lease), if any


_PAGE_SIZE = 65536  # SQLite's largest
_RECENT_BYTES = 64 * 1024 * 1024  # deliveries just queued, kept in memory for the streams


class _Recent:
    """The deliveries just committed, by (kind, name, sequence), so that a stream sends them
    without reading them back; bounded in bytes, the oldest dropped first (a dropped or taken
    one is read from the store when it is needed again)."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._size = 0
        self._items: dict[tuple[str, str, int], tuple[Append, int]] = {}  # oldest first
        self._sequences: dict[tuple[str, str], set[int]] = {}

    def put(self, key: tuple[str, str, int], item: Append) -> None:
        size = len(item.payload) + sum(piece_size(p) for p in item.pieces)
        if size > self._capacity or (item.body and isinstance(item.body.data, StoredBytes)):
            return  # (a staged body is read from the store a span at a time, never held)
        self._items[key] = (item, size)
        self._sequences.setdefault(key[:2], set()).add(key[2])
        self._size += size
        while self._size > self._capacity:
            self._pop(next(iter(self._items)))

    def take(self, key: tuple[str, str, int]) -> list[Chunk] | None:
        return self._pop(key).chunks() if key in self._items else None

    def discard(self, kind: str, name: str, upto: int | None = None) -> None:
        """Forget a destination's deliveries (up to sequence ``upto``; all when ``None``)."""
        for seq in list(self._sequences.get((kind, name), ())):
            if upto is None or seq <= upto:
                self._pop((kind, name, seq))

    def _pop(self, key: tuple[str, str, int]) -> Append:
        item, size = self._items.pop(key)
        self._size -= size
        sequences = self._sequences[key[:2]]
        sequences.discard(key[2])
        if not sequences:
            del self._sequences[key[:2]]
        return item


# SQLite checkpoints its write-ahead log after 1,000 pages: 64 MiB with the store's 64 KiB
# pages, and the file never shrinks after. A site whose disk fills needs that space bounded
# (and counted in [limits] min_free_bytes): checkpoint every 4 MiB, keep at most 8 MiB after.
_WAL_CHECKPOINT_PAGES = 4 * 1024 * 1024 // _PAGE_SIZE
_WAL_KEEP_BYTES = 8 * 1024 * 1024


def _bound_wal(db: sqlite3.Connection) -> None:
    db.execute(f"PRAGMA wal_autocheckpoint={_WAL_CHECKPOINT_PAGES}")
    db.execute(f"PRAGMA journal_size_limit={_WAL_KEEP_BYTES}")


class Store:
    """The SQLite-backed state of one site."""

    def __init__(
        self,
        path: Path | str,
        *,
        max_queue: int = 1_000_000,
        retain: int = 0,
        routed_window: Window | None = None,
        messages_of: str | None = None,
        durable: bool = True,
    ) -> None:
        if isinstance(path, Path):
            path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None)
        # Queued deliveries are whole documents: with 64 KiB pages a multi-megabyte row takes
        # a few dozen pages instead of hundreds, which makes writing, reading and deleting it
        # about three times cheaper. (It applies to a new store; an older one keeps its size.)
        self._recent = _Recent(_RECENT_BYTES)
        self._retained: list[Retained] | None = None  # read from the table once, until it changes
        self._db.execute(f"PRAGMA page_size={_PAGE_SIZE}")
        self._db.execute("PRAGMA journal_mode=WAL")
        # Durability (see "Durability" above): this connection's commits precede an
        # acknowledgement, so FULL (in WAL mode: the WAL is synced at every commit).
        self._db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        self._durable = durable
        # A delivered row is ciphertext the site could never read: zero freed space only where
        # that costs no extra writes (some SQLite builds zero every freed page by default).
        self._db.execute("PRAGMA secure_delete=FAST")
        _bound_wal(self._db)
        self._db.executescript(
            _SCHEMA + routed.SCHEMA + publications.SCHEMA + notifications.SCHEMA + messages.SCHEMA
            + dht_records.SCHEMA
        )
        if "chunked_size" not in {row[1] for row in self._db.execute("PRAGMA table_info(bodies)")}:
            self._db.execute("ALTER TABLE bodies ADD COLUMN chunked_size INTEGER")
        self._db.executescript(body_chunks.SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(registrations)")}
        if "lease" not in columns:  # a store written before leases: add the column
            self._db.execute(
                "ALTER TABLE registrations ADD COLUMN lease BLOB NOT NULL DEFAULT x''"
            )
        for table in ("deliveries", "retained"):  # a store written before shared bodies
            if "body" not in {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}:
                self._db.execute(f"ALTER TABLE {table} ADD COLUMN body INTEGER")
            self._db.execute(  # which rows use a body, for its release
                f"CREATE INDEX IF NOT EXISTS {table}_by_body ON {table} (body) "
                "WHERE body IS NOT NULL"
            )
        if "refs" in {row[1] for row in self._db.execute("PRAGMA table_info(bodies)")}:
            # a store that counted a body's references in its row: updating that count
            # rewrote the whole multi-megabyte row (SQLite writes a row whole)
            self._db.execute("ALTER TABLE bodies DROP COLUMN refs")
        self._max_queue = max_queue
        self.retain = retain
        self.routed = RoutedWindow(self._db, routed_window or Window())
        self.publications = Publications(self._db)  # publish ids: routed before? (a root's)
        notifications.upgrade(self._db)
        self.notifications = Notifications(self._db)  # the LDN inbox (disseminator.web)
        self.dht_records = StoredDhtRecords(self._db)  # what the DHT node stores, kept
        # the messages this site mints, for their URIs to dereference (messages_of: its node)
        self.messages = None if messages_of is None else MessageArchive(self._db, messages_of)
        seen = {row[1] for row in self._db.execute("PRAGMA table_info(receipts_seen)")}
        if "seen_ms" not in seen:  # a store that kept receipt ids for good: pruned at once
            self._db.execute(
                "ALTER TABLE receipts_seen ADD COLUMN seen_ms INTEGER NOT NULL DEFAULT 0"
            )
        self._db.execute(
            "CREATE INDEX IF NOT EXISTS receipts_seen_by_time ON receipts_seen (seen_ms)"
        )
        # Deliveries waiting for acknowledgement: counted once here (from the destinations'
        # counters: a queue holds exactly the sequence numbers after its acknowledgement), then
        # kept up to date by every append, acknowledgement and drop.
        (queued,) = self._db.execute(
            "SELECT COALESCE(SUM(next_seq - 1 - acked), 0) FROM destinations"
        ).fetchone()
        self._queued = int(queued)
        # A second connection, for acknowledgements committed off the event loop. (So every
        # transaction begins IMMEDIATE: one that read first could not then write past a commit
        # of the other connection, where waiting for the lock is all it takes otherwise.)
        self._aside: sqlite3.Connection | None = None
        if str(path) != ":memory:":
            self._aside = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
            self._aside.execute("PRAGMA synchronous=NORMAL")  # (no ack follows its commits)
            self._aside.execute("PRAGMA secure_delete=FAST")
            _bound_wal(self._aside)
        with self._db:  # documents staged by a site that stopped before routing them
            self._db.execute("BEGIN IMMEDIATE")
            body_chunks.drop_unreferenced(self._db)

    @contextlib.contextmanager
    def _unsynced(self) -> Iterator[None]:
        """Commit the main connection's transaction in this block without syncing the WAL:
        for writes no acknowledgement waits on and whose loss is harmless (see "Durability")."""
        if not self._durable:
            yield
            return
        self._db.execute("PRAGMA synchronous=NORMAL")
        try:
            yield
        finally:
            self._db.execute("PRAGMA synchronous=FULL")

    def rollback(self) -> None:
        """End a transaction a failed write left open (a full disk), so the next one works."""
        if self._db.in_transaction:
            self._db.rollback()

    def close(self) -> None:
        if self._aside is not None:
            self._aside.close()
        self._db.close()

    # ---- documents staged as their parts come (see disseminator.body_chunks) -----------------
    def stage(self, size: int, *, chunk_bytes: int = body_chunks.CHUNK_BYTES) -> Staging:
        """A new body, written a chunk at a time as a message's ``size`` bytes come (a
        :class:`~xdn.parts.Sink`); :meth:`let_go` it once routed (or refused)."""
        return Staging(self._db, size, chunk_bytes)

    def let_go(self, body: StoredBytes) -> None:
        """Delete a staged body unless a delivery or a retained document refers to it."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._release([body.row])

    def staged_bodies(self) -> int:
        """How many staged bodies the store holds (in use or not)."""
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM bodies WHERE chunked_size IS NOT NULL"
        ).fetchone()
        return int(count)

    # ---- routing -------------------------------------------------------------------------
    def is_routed(self, publisher: str, document: str, version: int, sequence: int = 0) -> bool:
        """Was this document version routed before (or is its signed ``sequence`` number at or
        below what the routed window pruned, see :mod:`disseminator.routed`)?"""
        return self.routed.seen(publisher, document, version, sequence)

    def prune_routed(self, now_ms: int) -> int:
        """Drop the routed entries past the window (see :mod:`disseminator.routed`), and the
        messages kept for as long (:mod:`disseminator.messages`)."""
        pruned = self.routed.prune(now_ms)
        self.publications.prune(now_ms - self.routed.window.retention_ms)
        if self.messages is not None:
            self.messages.prune(now_ms - self.routed.window.retention_ms)
        return pruned

    def commit_routing(
        self,
        *,
        document: tuple[str, str, int] | None,
        appends: Sequence[Append],
        log_graphs: Iterable[bytes] = (),
        counter: tuple[str, int] | None = None,
        retained: Retained | None = None,
        history: History | None = None,
        sequence: int = 0,
        at_ms: int = 0,
        chain: tuple[str, bytes] | None = None,
        notices: Sequence[StoredNotification] = (),
        publication: Publication | None = None,
        refuse_full: bool = False,
    ) -> tuple[dict[tuple[str, str], int], list[tuple[str, str]]]:
        """Queue ``appends``, mark ``document`` routed, retain it and stage log graphs, atomically.

        ``notices``: the policy-change notices of the entitlements routed, put in the inbox in
        the same transaction (one per id: a notice routed again adds none).

        ``counter`` (name, value) is stored in the same transaction — e.g. the sequence number
        of the uplink delivery this routing applies, so it is applied exactly once. ``sequence``
        is the document's number in its publisher's signed sequence (0: unsequenced) and
        ``at_ms`` the time it is routed, for the routed window. ``chain`` (its outermost message
        URI, its N-Quads) is the provenance the document came with, kept for the hops signed
        over it when the store keeps messages (:mod:`disseminator.messages`). ``publication``:
        the document routed as a publisher's, remembered under its publish id
        (:mod:`disseminator.publications`).

        ``refuse_full``: a full queue refuses the whole transaction (nothing is committed,
        :class:`QueueFull` is raised) instead of only its own appends — for routing that is
        acknowledged after the commit, so an acknowledgement never covers a dropped delivery.

        Returns:
            (last sequence appended per destination, destinations whose queue was full: none
            with ``refuse_full``).

        Raises:
            QueueFull: with ``refuse_full``, a destination's queue is full (``destinations``).
        """
        last: dict[tuple[str, str], int] = {}
        full: list[tuple[str, str]] = []
        rows: list[tuple[tuple[str, str, int], Append]] = []
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            for item in appends:
                dest = (item.kind, item.name)
                if dest in full:
                    continue
                seq = self._assign(dest)
                if seq is None:
                    full.append(dest)
                    continue
                last[dest] = seq
                rows.append(((*dest, seq), item))
            if full and refuse_full:
                raise QueueFull(full)  # (rolled back: nothing taken)
            keep = retained if retained is not None and self.retain > 0 else None
            bodies = self._store_bodies([item.body for _, item in rows]
                                        + [keep.body if keep else None])  # fmt: skip
            self._db.executemany(
                "INSERT INTO deliveries (kind, name, seq, payload, body) VALUES (?, ?, ?, ?, ?)",
                [(*key, *self._row(item.payload, item.body, item.pieces, bodies))
                 for key, item in rows],
            )  # fmt: skip
            if document is not None:
                self.routed.mark(*document, sequence=sequence, at_ms=at_ms)
            if publication is not None:
                self.publications.record(publication, at_ms=at_ms)
            self._db.executemany(
                "INSERT INTO log_outbox (data) VALUES (?)", [(g,) for g in log_graphs]
            )
            if self.messages is not None and chain is not None:
                self.messages.keep_chain(self._db, *chain, at_ms)
            for notice in notices:
                self.notifications.add_policy_notice(notice)
            if counter is not None:
                self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", counter)
            if keep is not None:
                self._retain(keep, bodies)
            if history is not None:
                self._record_history(history)
        self._queued += len(rows)
        for key, item in rows:  # committed: the streams may send them from memory
            self._recent.put(key, item)
        return last, full

    def _assign(self, dest: tuple[str, str]) -> int | None:
        """The next sequence number of ``dest``'s queue, taken (inside a transaction); ``None``
        if the queue is full. One statement: a site routing to thousands of destinations runs
        it once per destination per document."""
        row = self._db.execute(
            "INSERT INTO destinations (kind, name, next_seq) VALUES (?, ?, 2) "
            "ON CONFLICT (kind, name) DO UPDATE SET next_seq = next_seq + 1 "
            "WHERE next_seq - 1 - acked < ? RETURNING next_seq - 1",
            (*dest, self._max_queue),
        ).fetchone()
        return None if row is None else int(row[0])

    def _store_bodies(self, uses: Sequence[Body | None]) -> dict[int, int]:
        """Insert each body used, once (a staged one is in already); return ``id(body)`` →
        row id."""
        used = {id(body): body for body in uses if body is not None}
        return {
            key: body.data.row if isinstance(body.data, StoredBytes) else int(
                self._db.execute("INSERT INTO bodies (data) VALUES (?)", (body.data,)).lastrowid
                or 0
            )
            for key, body in used.items()
        }  # fmt: skip

    @staticmethod
    def _row(
        payload: bytes, body: Body | None, pieces: Sequence[Piece], bodies: dict[int, int]
    ) -> tuple[bytes, int | None]:
        """(payload column, body column) of a stored message."""
        if body is None:
            return payload, None
        return _encode_pieces(pieces), bodies[id(body)]

    def _release(self, bodies: Iterable[int], db: sqlite3.Connection | None = None) -> None:
        """Delete those of ``bodies`` no delivery or retained document uses any more."""
        (self._db if db is None else db).executemany(
            "DELETE FROM bodies WHERE id = ?1 "
            "AND NOT EXISTS (SELECT 1 FROM deliveries WHERE body = ?1) "
            "AND NOT EXISTS (SELECT 1 FROM retained WHERE body = ?1)",
            [(body,) for body in set(bodies)],
        )

    def _stored_chunks(
        self, payload: bytes, body: int | None, cache: dict[int, bytes | StoredBytes]
    ) -> list[Chunk]:
        """A stored message's chunks (``cache``: the bodies read so far by this call; a staged
        one is read a span at a time as its chunks are)."""
        if body is None:
            return [bytes(payload)]
        return _chunks(self._body(body, cache), _decode_pieces(bytes(payload)))

    def _body(self, body: int, cache: dict[int, bytes | StoredBytes]) -> bytes | StoredBytes:
        if body not in cache:
            data, chunked_size = self._db.execute(
                "SELECT data, chunked_size FROM bodies WHERE id = ?", (body,)
            ).fetchone()
            cache[body] = data if chunked_size is None else StoredBytes(
                self._db, body, chunked_size
            )
        return cache[body]

    def _record_history(self, history: History) -> None:
        self._db.executemany(
            "INSERT OR IGNORE INTO disseminated VALUES (?, ?)",
            [(history.publisher, c) for c in sorted(history.concepts)],
        )
        self._db.executemany(
            "INSERT INTO instances VALUES (?, ?, ?, 1) ON CONFLICT (certificate, publisher, "
            "concept) DO UPDATE SET count = count + 1",
            [
                (fingerprint, history.publisher, c)
                for fingerprint, concepts in sorted(history.instances.items())
                for c in sorted(concepts)
            ],
        )

    def disseminated(self) -> frozenset[tuple[str, str]]:
        """Every (publisher, concept) this site has routed."""
        return frozenset(self._db.execute("SELECT publisher, concept FROM disseminated"))

    def instances(self, fingerprint: str) -> dict[str, dict[str, int]]:
        """publisher → concept → document instances the certificate was sent from here."""
        out: dict[str, dict[str, int]] = {}
        rows = self._db.execute(
            "SELECT publisher, concept, count FROM instances WHERE certificate = ?", (fingerprint,)
        )
        for publisher, concept, count in rows:
            out.setdefault(publisher, {})[concept] = int(count)
        return out

    def _retain(self, doc: Retained, bodies: dict[int, int]) -> None:
        self._retained = None
        replaced = "publisher = ? AND document = ?"
        trimmed = (
            "publisher = ? AND seq NOT IN "
            "(SELECT seq FROM retained WHERE publisher = ? ORDER BY seq DESC LIMIT ?)"
        )
        self._drop_retained(replaced, (doc.publisher, doc.document))
        self._db.execute(
            "INSERT INTO retained (publisher, document, version, payload, body) "
            "VALUES (?, ?, ?, ?, ?)",
            (doc.publisher, doc.document, doc.version,
             *self._row(doc.payload, doc.body, doc.pieces, bodies)),
        )  # fmt: skip
        self._drop_retained(trimmed, (doc.publisher, doc.publisher, self.retain))

    def _drop_retained(self, where: str, args: tuple[str | int, ...]) -> None:
        self._retained = None
        bodies = [b for (b,) in self._db.execute(
            f"SELECT DISTINCT body FROM retained WHERE {where} AND body IS NOT NULL", args
        )]  # fmt: skip
        self._db.execute(f"DELETE FROM retained WHERE {where}", args)
        self._release(bodies)

    def retained(self) -> list[Retained]:
        """The retained documents of every publisher, oldest first (read once for all the
        subscribers joining until they change)."""
        if self._retained is None:
            rows = self._db.execute(
                "SELECT publisher, document, version, payload, body FROM retained ORDER BY seq"
            ).fetchall()
            cache: dict[int, bytes | StoredBytes] = {}
            self._retained = [self._retained_row(p, d, v, b, i, cache) for p, d, v, b, i in rows]
        return list(self._retained)

    def _retained_row(
        self, publisher: str, document: str, version: int, payload: bytes, body: int | None,
        cache: dict[int, bytes | StoredBytes],
    ) -> Retained:
        """A retained document as read: its bytes, or a staged body's pieces (read when
        replayed, a span at a time)."""
        found = None if body is None else self._body(body, cache)
        if isinstance(found, StoredBytes):
            return Retained(
                publisher=publisher, document=document, version=version, body=Body(found),
                pieces=tuple(_decode_pieces(bytes(payload))),
            )
        return Retained(
            publisher=publisher, document=document, version=version,
            payload=joined(self._stored_chunks(payload, body, cache)),
        )

    def counter(self, name: str) -> int:
        """A value stored with :meth:`commit_routing` (0 if never stored)."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (name,)).fetchone()
        return 0 if row is None else int(row[0])

    def adopt_counter(self, old: str, new: str) -> int:
        """Counter ``new``'s value, after moving counter ``old`` into it if ``new`` was never
        stored (``old`` is deleted either way): the upgrade of a counter to a finer key."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT OR IGNORE INTO meta SELECT ?, value FROM meta WHERE key = ?", (new, old)
            )
            self._db.execute("DELETE FROM meta WHERE key = ?", (old,))
        return self.counter(new)

    def forget_counter(self, name: str) -> None:
        """Delete counter ``name`` (it reads 0 again)."""
        self._db.execute("DELETE FROM meta WHERE key = ?", (name,))

    def take_log_outbox(self) -> list[tuple[int, bytes]]:
        return [(i, bytes(d)) for i, d in self._db.execute("SELECT id, data FROM log_outbox")]

    def clear_log_outbox(
        self, ids: Iterable[int], *, logged: tuple[int, Sequence[bytes]] | None = None,
        at_ms: int = 0,
    ) -> None:
        """Drop flushed graphs from the outbox; ``logged`` (the log offset they were written
        at, the graphs in order) indexes the hops among them when the store keeps messages."""
        with self._unsynced(), self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM log_outbox WHERE id = ?", [(i,) for i in ids])
            if self.messages is not None and logged is not None:
                self.messages.index_hops(self._db, logged[1], log_offset=logged[0], at_ms=at_ms)

    # ---- receipts (see disseminator.receipts) ----------------------------------------------
    def accept_receipt(
        self, *, receipt_id: str, publisher: str, data: bytes, log_graphs: bytes, at_ms: int,
        notification: StoredNotification | None = None, queue: bool = True,
    ) -> bool:
        """Queue a verified receipt and stage its graphs for the log (and put ``notification``
        in the inbox, if given), atomically, unless a receipt with this id was accepted before
        (and its id not yet pruned: the caller refuses receipts older than the retention, see
        :meth:`prune_receipts_seen`). A subscriber's failure notice takes the same road
        (:mod:`disseminator.notices`); one that goes to no publisher is not queued
        (``queue=False``): logged and listed only.

        Returns:
            ``False`` for a duplicate (nothing written), ``True`` otherwise.
        """
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            fresh = self._db.execute(
                "INSERT OR IGNORE INTO receipts_seen (id, seen_ms) VALUES (?, ?)",
                (receipt_id, at_ms),
            ).rowcount
            if not fresh:
                return False
            if queue:
                self._db.execute(
                    "INSERT INTO receipts (publisher, data) VALUES (?, ?)", (publisher, data)
                )
            self._db.execute("INSERT INTO log_outbox (data) VALUES (?)", (log_graphs,))
            if notification is not None:
                self.notifications.add_receipt(notification)
        return True

    def prune_receipts_seen(self, before_ms: int) -> int:
        """Forget the ids of receipts accepted before ``before_ms``, and drop their
        notifications from the inbox; return how many ids."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self.notifications.prune_receipts(before_ms)
            return self._db.execute(
                "DELETE FROM receipts_seen WHERE seen_ms < ?", (before_ms,)
            ).rowcount

    def queued_receipts(
        self, *, after: int = 0, limit: int, publisher: str | None = None
    ) -> list[QueuedReceipt]:
        """The oldest receipts kept after ``after`` (of ``publisher`` only, if given)."""
        where: str = "seq > ?"
        args: tuple[str | int, ...] = (after,)
        if publisher is not None:
            where, args = "publisher = ? AND seq > ?", (publisher, after)
        rows = self._db.execute(
            f"SELECT seq, publisher, data FROM receipts WHERE {where} ORDER BY seq LIMIT ?",
            (*args, limit),
        )
        return [QueuedReceipt(seq=q, publisher=p, data=bytes(d)) for q, p, d in rows]

    def drop_receipts(self, seqs: Iterable[int]) -> None:
        """Forget receipts passed upstream (their ids stay known: a retry is a duplicate)."""
        with self._unsynced(), self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("DELETE FROM receipts WHERE seq = ?", [(s,) for s in seqs])

    def drop_receipts_of(self, publisher: str, *, upto: int) -> int:
        """Forget ``publisher``'s receipts up to ``upto`` (it stored them); return how many."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            return int(
                self._db.execute(
                    "DELETE FROM receipts WHERE publisher = ? AND seq <= ?", (publisher, upto)
                ).rowcount
            )

    def receipts_queued(self) -> int:
        """How many receipts are kept (waiting to go upstream or to be fetched)."""
        (count,) = self._db.execute("SELECT COUNT(*) FROM receipts").fetchone()
        return int(count)

    # ---- policy versions -----------------------------------------------------------------
    def enforced_policies(self) -> dict[str, tuple[int, str]]:
        """publisher → (version, digest) of the newest policy this site ever put in force."""
        rows = self._db.execute("SELECT publisher, version, digest FROM policy_versions")
        return {publisher: (version, digest) for publisher, version, digest in rows}

    def record_policies(self, enforced: dict[str, tuple[int, str]]) -> None:
        """Remember the policies put in force (a version is never lowered)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "INSERT INTO policy_versions VALUES (?, ?, ?) ON CONFLICT (publisher) DO UPDATE "
                "SET version = excluded.version, digest = excluded.digest "
                "WHERE excluded.version >= policy_versions.version",
                [(p, v, d) for p, (v, d) in sorted(enforced.items())],
            )

    # ---- the CRL in force (see disseminator.revocation) ------------------------------------
    def saved_crl(self) -> tuple[int, bytes] | None:
        """``(number, PEM)`` of the newest CRL this site put in force, if any."""
        row = self._db.execute("SELECT number, pem FROM crl WHERE id = 1").fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def save_crl(self, number: int, pem: bytes) -> None:
        """Remember the CRL put in force (a CRL number is never lowered)."""
        saved = self.saved_crl()
        if saved is not None and saved[0] > number:
            return
        with self._db:  # numbers may exceed SQLite's 64-bit integers: kept as decimal text
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT OR REPLACE INTO crl (id, number, pem) VALUES (1, ?, ?)",
                (str(number), pem),
            )

    # ---- queues --------------------------------------------------------------------------
    def cursor(self, kind: str, name: str) -> tuple[int, int]:
        """``(last sequence assigned, last sequence acknowledged)`` of a destination."""
        row = self._db.execute(
            "SELECT next_seq, acked FROM destinations WHERE kind = ? AND name = ?", (kind, name)
        ).fetchone()
        return (0, 0) if row is None else (row[0] - 1, row[1])

    def queued_total(self) -> int:
        """Deliveries waiting for acknowledgement, over all destinations (a counter kept in
        memory: no query)."""
        return self._queued

    def pending(self, kind: str, name: str, *, after: int, limit: int) -> list[tuple[int, bytes]]:
        """Queued deliveries after ``after``, as bytes (see :meth:`pending_chunks`)."""
        return [
            (seq, joined(chunks))
            for seq, chunks in self.pending_chunks(kind, name, after=after, limit=limit)
        ]

    def pending_chunks(
        self, kind: str, name: str, *, after: int, limit: int
    ) -> list[tuple[int, list[Chunk]]]:
        """Queued deliveries after ``after``, each as the chunks of bytes it is stored as: the
        ones just queued come from memory (the committed rows hold the same bytes), older ones
        are read back."""
        seqs = [
            seq for (seq,) in self._db.execute(
                "SELECT seq FROM deliveries WHERE kind = ? AND name = ? AND seq > ? "
                "ORDER BY seq LIMIT ?",
                (kind, name, after, limit),
            )
        ]
        out = []
        bodies: dict[int, bytes | StoredBytes] = {}
        for seq in seqs:
            chunks = self._recent.take((kind, name, seq))
            if chunks is None:
                stored, body = self._db.execute(
                    "SELECT payload, body FROM deliveries WHERE kind = ? AND name = ? AND seq = ?",
                    (kind, name, seq),
                ).fetchone()
                chunks = self._stored_chunks(stored, body, bodies)
            out.append((seq, chunks))
        return out

    def ack(self, kind: str, name: str, seq: int) -> None:
        """Drop deliveries up to ``seq`` (never moves the acknowledgement backwards)."""
        self.ack_many({(kind, name): seq})

    def ack_many(self, acks: Mapping[tuple[str, str], int]) -> None:
        """:meth:`ack` each destination ``(kind, name)`` up to its sequence number, all in one
        transaction (one commit for the acknowledgements of many destinations)."""
        self.acked(acks, self._commit_acks(self._db, acks))

    @property
    def acks_aside(self) -> bool:
        """Whether :meth:`commit_acks_aside` may be used (a store in a file: it has a second
        connection)."""
        return self._aside is not None

    def commit_acks_aside(self, acks: Mapping[tuple[str, str], int]) -> int:
        """What :meth:`ack_many` writes, on the store's second connection, for one worker
        thread at a time: SQLite lets go of the interpreter while it works, so the event loop
        goes on meanwhile on the other core. Returns how many deliveries were dropped, for
        :meth:`acked` (on the loop's thread)."""
        assert self._aside is not None, "a store in memory commits acknowledgements in line"
        return self._commit_acks(self._aside, acks)

    def acked(self, acks: Mapping[tuple[str, str], int], dropped: int) -> None:
        """Account for acknowledgements committed (``dropped`` deliveries gone)."""
        self._queued -= dropped
        for (kind, name), seq in acks.items():
            self._recent.discard(kind, name, upto=seq)

    def _commit_acks(self, db: sqlite3.Connection, acks: Mapping[tuple[str, str], int]) -> int:
        """Record ``acks`` and delete what they acknowledge, in one transaction: one statement
        per destination, and the bodies released once at the end (the deliveries of a fan-out
        share one)."""
        dropped, bodies = 0, set()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "UPDATE destinations SET acked = MAX(acked, ?) WHERE kind = ? AND name = ? "
                "AND ? < next_seq",
                [(seq, kind, name, seq) for (kind, name), seq in acks.items()],
            )
            for kind, name in acks:
                for (body,) in db.execute(  # up to the acknowledgement in force
                    "DELETE FROM deliveries WHERE kind = ?1 AND name = ?2 AND seq <= "
                    "(SELECT acked FROM destinations WHERE kind = ?1 AND name = ?2) "
                    "RETURNING body",
                    (kind, name),
                ):
                    dropped += 1
                    if body is not None:
                        bodies.add(body)
            self._release(bodies, db)
        return dropped

    def _drop_deliveries(
        self, where: str, args: tuple[str | int, ...], db: sqlite3.Connection | None = None
    ) -> int:
        """Delete the deliveries ``where`` holds and release their bodies; return how many."""
        db = self._db if db is None else db
        bodies = [b for (b,) in db.execute(
            f"SELECT DISTINCT body FROM deliveries WHERE {where} AND body IS NOT NULL", args
        )]  # fmt: skip
        count = db.execute(f"DELETE FROM deliveries WHERE {where}", args).rowcount
        self._release(bodies, db)
        return int(count)

    def drop_destination(self, kind: str, name: str) -> int:
        """Forget a destination and its queue; return how many deliveries were discarded."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            count = self._drop_deliveries("kind = ? AND name = ?", (kind, name))
            self._db.execute("DELETE FROM destinations WHERE kind = ? AND name = ?", (kind, name))
        self._queued -= count
        self._recent.discard(kind, name)
        return int(count)

    # ---- registrations -------------------------------------------------------------------
    def save_registrations(self, kind: str, owner: str, regs: Iterable[StoredRegistration]) -> None:
        """Replace every registration of (kind, owner) with ``regs``."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "DELETE FROM registrations WHERE kind = ? AND owner = ?", (kind, owner)
            )
            self._db.executemany(
                f"INSERT INTO registrations {_REG_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (kind, owner, r.subscriber, r.certificate, json.dumps(r.grants), r.seen_ms,
                     r.lease)
                    for r in regs
                ],
            )

    def change_registrations(
        self,
        kind: str,
        owner: str,
        *,
        save: Iterable[StoredRegistration] = (),
        delete: Iterable[str] = (),
    ) -> None:
        """Delete the registrations of (kind, owner) named ``delete`` and save (insert or
        replace) ``save``, in one transaction: the rows a delta changes, no other."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany(
                "DELETE FROM registrations WHERE kind = ? AND owner = ? AND subscriber = ?",
                [(kind, owner, name) for name in delete],
            )
            self._db.executemany(
                f"INSERT OR REPLACE INTO registrations {_REG_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (kind, owner, r.subscriber, r.certificate, json.dumps(r.grants), r.seen_ms,
                     r.lease)
                    for r in save
                ],
            )

    def save_registration(self, reg: StoredRegistration) -> None:
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                f"INSERT OR REPLACE INTO registrations {_REG_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?)",
                (reg.kind, reg.owner, reg.subscriber, reg.certificate,
                 json.dumps(reg.grants), reg.seen_ms, reg.lease),
            )

    def change_registration(
        self,
        *,
        save: StoredRegistration,
        delete: tuple[str, str, str] | None = None,
        control: Append | None = None,
    ) -> int:
        """Save a registration, maybe delete another and queue a control delivery, atomically.

        A control delivery (a subscriber's grants changed, its subscription ended) is queued
        even past the queue's bound: it must reach the subscriber, in order.

        Returns:
            The sequence number of the control delivery (0 if none).
        """
        seq = 0
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if delete is not None:
                self._db.execute(
                    "DELETE FROM registrations WHERE kind = ? AND owner = ? AND subscriber = ?",
                    delete,
                )
            self._db.execute(
                f"INSERT OR REPLACE INTO registrations {_REG_COLUMNS} VALUES (?, ?, ?, ?, ?, ?, ?)",
                (save.kind, save.owner, save.subscriber, save.certificate,
                 json.dumps(save.grants), save.seen_ms, save.lease),
            )
            if control is not None:
                dest = (control.kind, control.name)
                self._db.execute(
                    "INSERT OR IGNORE INTO destinations (kind, name) VALUES (?, ?)", dest
                )
                (seq,) = self._db.execute(
                    "SELECT next_seq FROM destinations WHERE kind = ? AND name = ?", dest
                ).fetchone()
                self._db.execute(
                    "INSERT INTO deliveries (kind, name, seq, payload) VALUES (?, ?, ?, ?)",
                    (*dest, seq, control.payload),
                )
                self._db.execute(
                    "UPDATE destinations SET next_seq = ? WHERE kind = ? AND name = ?",
                    (seq + 1, *dest),
                )
        if control is not None:
            self._queued += 1
        return int(seq)

    def delete_registration(self, kind: str, owner: str, subscriber: str) -> None:
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "DELETE FROM registrations WHERE kind = ? AND owner = ? AND subscriber = ?",
                (kind, owner, subscriber),
            )

    def registrations(self) -> list[StoredRegistration]:
        rows = self._db.execute(
            "SELECT kind, owner, subscriber, certificate, grants, seen_ms, lease "
            "FROM registrations ORDER BY kind, owner, subscriber"
        )
        return [
            StoredRegistration(
                kind=k, owner=o, subscriber=s, certificate=bytes(c),
                grants=json.loads(g), seen_ms=t, lease=bytes(lease),
            )
            for k, o, s, c, g, t, lease in rows
        ]
