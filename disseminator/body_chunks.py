"""A large document's bytes in the store: written in chunks as its parts arrive, read a span
at a time (issue #15).

Theory of operation. A message that comes in parts (a ``PublishParts`` call, a delivery from
the uplink) can be larger than memory and larger than one SQLite blob (10^9 bytes at most). So
a site never joins it: :class:`Staging` (a :class:`~xdn.parts.Sink`) appends its parts to a
row of ``bodies`` (kept empty, ``chunked_size`` set) as rows of ``body_chunks`` of
:data:`CHUNK_BYTES` each, holding at most one chunk in memory; :class:`StoredBytes` reads any
span of them back through SQLite's incremental blob I/O (``blobopen``), never a whole chunk
more than asked. The finished body is the document's one :class:`~disseminator.store.Body`:
what routing scans (:mod:`disseminator.document_scan`), what every delivery and the retained
copy refer to by spans, what a stream cuts its outgoing parts from.

Crash safety. The body row is committed when staging starts and each chunk as it fills, so a
site that dies mid-way leaves a body no delivery refers to; the store deletes such bodies when
it opens (:func:`drop_unreferenced`), and a staging that fails (parts that do not follow, a
document refused) deletes its body at once. A trigger deletes a body's chunks with it, however
the body goes (released by an acknowledgement on either connection, replaced, trimmed).
"""

from __future__ import annotations

import sqlite3

__all__ = ["CHUNK_BYTES", "SCHEMA", "Staging", "StoredBytes", "StoredSpan", "drop_unreferenced"]

CHUNK_BYTES = 4 * 1024 * 1024

SCHEMA = """
CREATE TABLE IF NOT EXISTS body_chunks (
    body INTEGER NOT NULL, idx INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (body, idx)
);
CREATE TRIGGER IF NOT EXISTS body_chunks_go_with_their_body AFTER DELETE ON bodies
BEGIN DELETE FROM body_chunks WHERE body = old.id; END;
"""


class StoredBytes:
    """The bytes of a body kept in chunks (a :class:`~xdn.parts.ReadableChunk`).

    Args:
        db: the store's connection (read on the thread that uses it).
        row: the body's row id.
        size: its length in bytes.
        chunk_bytes: the length of each chunk but the last (``None``: that of the first).
    """

    def __init__(
        self, db: sqlite3.Connection, row: int, size: int, chunk_bytes: int | None = None
    ) -> None:
        self._db = db
        self.row = row
        self._size = size
        self._chunk_bytes = chunk_bytes
        self._rowids: dict[int, int] = {}  # chunk index → its rowid in body_chunks

    def __len__(self) -> int:
        return self._size

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``.

        Raises:
            ValueError: the span is not within the body.
            LookupError: a chunk is gone (the body was released meanwhile).
        """
        if not 0 <= start <= end <= self._size:
            raise ValueError(f"span {start}-{end} is not within a body of {self._size} bytes")
        out = []
        at = start
        chunk_bytes = self._chunk_bytes or (self._first_chunk_bytes() if start < end else 1)
        while at < end:
            index, offset = divmod(at, chunk_bytes)
            length = min(end - at, chunk_bytes - offset)
            with self._db.blobopen(
                "body_chunks", "data", self._rowid(index), readonly=True
            ) as blob:
                blob.seek(offset)
                out.append(blob.read(length))
            at += length
        return out[0] if len(out) == 1 else b"".join(out)

    def span(self, start: int, end: int) -> StoredSpan:
        """Bytes ``[start, end)``, to be read when needed."""
        return StoredSpan(self, start, end)

    def _first_chunk_bytes(self) -> int:
        """The length of every chunk but the last: the first one's (or the whole body's)."""
        row = self._db.execute(
            "SELECT length(data) FROM body_chunks WHERE body = ? AND idx = 0", (self.row,)
        ).fetchone()
        if row is None:
            raise LookupError(f"chunk 0 of body {self.row} is not in the store")
        self._chunk_bytes = max(1, int(row[0]))
        return self._chunk_bytes

    def _rowid(self, index: int) -> int:
        rowid = self._rowids.get(index)
        if rowid is None:
            row = self._db.execute(
                "SELECT rowid FROM body_chunks WHERE body = ? AND idx = ?", (self.row, index)
            ).fetchone()
            if row is None:
                raise LookupError(f"chunk {index} of body {self.row} is not in the store")
            rowid = self._rowids[index] = int(row[0])
        return rowid


class StoredSpan:
    """A span of :class:`StoredBytes`, itself readable (a :class:`~xdn.parts.ReadableChunk`)."""

    __slots__ = ("_bytes", "_end", "_start")

    def __init__(self, stored: StoredBytes, start: int, end: int) -> None:
        self._bytes, self._start, self._end = stored, start, end

    def __len__(self) -> int:
        return self._end - self._start

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the span."""
        if not 0 <= start <= end <= len(self):
            raise ValueError(f"span {start}-{end} is not within {len(self)} bytes")
        return self._bytes.read(self._start + start, self._start + end)


class Staging:
    """Writes one message's parts into a new body, a chunk at a time (a
    :class:`~xdn.parts.Sink` of :class:`StoredBytes`).

    Args:
        db: the store's connection.
        size: the message's announced size (checked against the receiver's limit before).
        chunk_bytes: the length of each chunk but the last.
    """

    def __init__(
        self, db: sqlite3.Connection, size: int, chunk_bytes: int = CHUNK_BYTES
    ) -> None:
        self._db = db
        self._size = size
        self._chunk_bytes = chunk_bytes
        self._pending = bytearray()
        self._written = 0
        self._chunks = 0
        with db:
            db.execute("BEGIN IMMEDIATE")
            self.row = int(
                db.execute(
                    "INSERT INTO bodies (data, chunked_size) VALUES (x'', ?)", (size,)
                ).lastrowid
                or 0
            )

    def write(self, data: bytes) -> None:
        """Keep the next part's bytes (a full chunk goes to the store at once).

        Raises:
            ValueError: more bytes than announced (the joiner checks that first).
        """
        if self._written + len(self._pending) + len(data) > self._size:
            raise ValueError("more bytes than the staged body announced")
        self._pending += data
        while len(self._pending) >= self._chunk_bytes:
            self._flush(self._chunk_bytes)

    def finish(self) -> StoredBytes:
        """All parts came: the stored bytes.

        Raises:
            ValueError: fewer bytes than announced.
        """
        if self._pending:
            self._flush(len(self._pending))
        if self._written != self._size:
            raise ValueError(f"{self._written} of the {self._size} bytes announced were staged")
        return StoredBytes(self._db, self.row, self._size, self._chunk_bytes)

    def abort(self) -> None:
        """Delete what was staged (its chunks go with the body)."""
        self._pending = bytearray()
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute("DELETE FROM bodies WHERE id = ?", (self.row,))

    def _flush(self, length: int) -> None:
        chunk = bytes(memoryview(self._pending)[:length])
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO body_chunks (body, idx, data) VALUES (?, ?, ?)",
                (self.row, self._chunks, chunk),
            )
        del self._pending[:length]
        self._chunks += 1
        self._written += length


def drop_unreferenced(db: sqlite3.Connection) -> int:
    """Delete the chunked bodies no delivery or retained document refers to (staged by a
    site that stopped before routing them); return how many (inside the caller's
    transaction)."""
    return int(
        db.execute(
            "DELETE FROM bodies WHERE chunked_size IS NOT NULL "
            "AND NOT EXISTS (SELECT 1 FROM deliveries WHERE body = bodies.id) "
            "AND NOT EXISTS (SELECT 1 FROM retained WHERE body = bodies.id)"
        ).rowcount
    )
