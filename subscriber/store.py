"""A subscriber's durable state (SQLite) and what it received (files).

The state database holds the keyring (group keys by publisher, concept and epoch, this
member's key-tree path in each group, :mod:`xdn.lkh`, and the per-document keys granted for
retained documents), the documents held until their keys arrive (indexed by the groups whose
keys each waits for, so a key message reads only the documents it may open; each with the
serial of the publisher certificate that signed it and its size, for the per-publisher cap and
for a newly revoked publisher), the CRL in force with its CRL number, the last
delivery sequence applied from each site, and the last version accepted of each document —
updated in one transaction per delivery, so after a crash of either side the subscriber resumes
right after what it applied: a redelivered document is recognised and not handed to the
application twice, an older version (a replay) is refused. Accepted-document entries and old
keys are pruned behind a floor per publisher (:mod:`subscriber.retention`), so the database
stays bounded and a pruned document is still refused.

Output layout under ``OUT`` (the application's view of what arrived)::

    subscription.json                 grants reported by the disseminator at registration
    views/PUBLISHER/DOCUMENT.vN.xml   each verified, reassembled view (names escaped by
                                      xdn.ids.file_stem: no separators, no leading dot)
    received.jsonl                    one line per accepted document version (append-only):
                                      fragment id → concept
    refused.jsonl                     one line per refusal, with its kind and reason: a
                                      document refused ("document"), a forged or unverifiable
                                      one ("unverified"), a revoked publisher's ("revoked"), a
                                      held one dropped past the cap ("overflow"), a CRL ("crl"),
                                      a publisher's checkpoint or entitlement statement
                                      ("checkpoint", "entitlement"), a key message (with
                                      "key_message": rekey, enrolment or document-keys)

``received.jsonl`` is an append-only export (every version ever accepted stays): the database
keeps only the lines accepted since the file was last synced, and at start-up the file's tail
after that point is read and the lines a crash lost are appended (:mod:`subscriber.export`).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from subscriber.retention import Pruned, Retention, prune
from xdn import ids
from xdn.sqlitedb import open_db

__all__ = ["CRL_WAIT", "ExportMark", "Held", "HeldEntry", "Inbox", "Keyring"]

CRL_WAIT = ("", "")
"""The ``waits`` entry of a document held until a fresh CRL arrives."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Held:
    """A held document: its row id and serialised dissemination."""

    id: int
    payload: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldEntry:
    """A held document's index entry (what it is, whose certificate signed it, its size)."""

    id: int
    publisher: str
    document: str
    version: int
    serial: int
    size: int


def _entry(row: tuple[Any, ...]) -> HeldEntry:
    held, publisher, document, version, serial, size = row
    return HeldEntry(
        id=int(held), publisher=str(publisher), document=str(document), version=int(version),
        serial=int(serial, 16), size=int(size),
    )

_SCHEMA = """
CREATE TABLE IF NOT EXISTS keys (
    publisher TEXT, concept TEXT, epoch INTEGER, key BLOB NOT NULL,
    PRIMARY KEY (publisher, concept, epoch)
);
CREATE TABLE IF NOT EXISTS groups (
    publisher TEXT, concept TEXT, state BLOB NOT NULL, PRIMARY KEY (publisher, concept)
);
CREATE TABLE IF NOT EXISTS cursors (address TEXT PRIMARY KEY, applied INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS grants (address TEXT PRIMARY KEY, grants TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY, publisher TEXT NOT NULL, document TEXT NOT NULL,
    version INTEGER NOT NULL, sequence INTEGER NOT NULL DEFAULT 0,
    accepted_ms INTEGER NOT NULL DEFAULT 0, UNIQUE (publisher, document)
);
CREATE TABLE IF NOT EXISTS floors (publisher TEXT PRIMARY KEY, sequence INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS received_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, record TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS document_keys (
    name TEXT PRIMARY KEY, key BLOB NOT NULL, stored_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS held_keys (
    held INTEGER NOT NULL, publisher TEXT NOT NULL, concept TEXT NOT NULL,
    epoch INTEGER NOT NULL, name TEXT NOT NULL, PRIMARY KEY (held, publisher, concept, epoch)
);
CREATE INDEX IF NOT EXISTS held_keys_by_group ON held_keys (publisher, concept, epoch);
CREATE INDEX IF NOT EXISTS held_keys_by_name ON held_keys (name);
CREATE TABLE IF NOT EXISTS held_documents (
    id INTEGER PRIMARY KEY, publisher TEXT NOT NULL, document TEXT NOT NULL,
    version INTEGER NOT NULL, serial TEXT NOT NULL, size INTEGER NOT NULL,
    payload BLOB NOT NULL, UNIQUE (publisher, document, version)
);
CREATE INDEX IF NOT EXISTS held_by_publisher ON held_documents (publisher, id);
CREATE TABLE IF NOT EXISTS held_waits (
    held INTEGER NOT NULL, publisher TEXT NOT NULL, concept TEXT NOT NULL,
    PRIMARY KEY (publisher, concept, held)
);
CREATE TABLE IF NOT EXISTS crl (
    id INTEGER PRIMARY KEY CHECK (id = 1), number TEXT NOT NULL, pem BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stale (
    publisher TEXT, concept TEXT, PRIMARY KEY (publisher, concept)
);
"""


_ADDED_COLUMNS = {  # columns a store written by an older version lacks
    "documents": ("sequence", "accepted_ms"),
    "document_keys": ("stored_ms",),
}

_INDEXES = """
CREATE INDEX IF NOT EXISTS documents_by_sequence ON documents (publisher, sequence)
    WHERE sequence > 0;
CREATE INDEX IF NOT EXISTS documents_by_time ON documents (accepted_ms) WHERE sequence > 0;
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportMark:
    """How far ``received.jsonl`` is known to be written and synced: the records up to
    ``seq`` of ``received_log``, in its first ``offset`` bytes."""

    seq: int = 0
    offset: int = 0


class Keyring:
    """Keys, delivery cursors and accepted document versions of one subscriber."""

    def __init__(self, path: Path) -> None:
        self._db = open_db(path, _SCHEMA)
        for table, added in _ADDED_COLUMNS.items():
            columns = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            for column in added:
                if column not in columns:
                    self._db.execute(
                        f"ALTER TABLE {table} ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0"
                    )
        self._db.executescript(f"BEGIN;\n{_INDEXES}\nCOMMIT;")  # (one commit, when new)

    def close(self) -> None:
        self._db.close()

    def put(self, publisher: str, concept: str, epoch: int, key: bytes) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?)", (publisher, concept, epoch, key)
        )

    def get(self, publisher: str, concept: str, epoch: int) -> bytes | None:
        row = self._db.execute(
            "SELECT key FROM keys WHERE publisher = ? AND concept = ? AND epoch = ?",
            (publisher, concept, epoch),
        ).fetchone()
        return None if row is None else bytes(row[0])

    def put_document_keys(self, keys: Mapping[str, bytes], *, at_ms: int) -> None:
        """Keep granted per-document keys (by XML Encryption key name), received at ``at_ms``."""
        self._db.executemany(
            "INSERT OR REPLACE INTO document_keys (name, key, stored_ms) VALUES (?, ?, ?)",
            [(name, key, at_ms) for name, key in sorted(keys.items())],
        )

    def document_key(self, name: str) -> bytes | None:
        row = self._db.execute("SELECT key FROM document_keys WHERE name = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    # ---- documents held until their keys (or a fresh CRL) arrive --------------------------
    def hold(
        self,
        *,
        publisher: str,
        document: str,
        version: int,
        serial: int,
        payload: bytes,
        waits: Iterable[tuple[str, str]],
        needs: Iterable[tuple[str, str, int, str]] = (),
    ) -> bool:
        """Hold a checked document until what it ``waits`` for arrives; False if held already.

        ``waits`` are the (publisher, concept) groups whose keys it lacks, and
        :data:`CRL_WAIT` while the CRL in force is stale; ``needs`` every key it needs
        (publisher, concept, epoch, per-document key name), kept while it is held
        (:mod:`subscriber.retention`).
        """
        with self._db:
            self._db.execute("BEGIN")
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO held_documents "
                "(publisher, document, version, serial, size, payload) VALUES (?, ?, ?, ?, ?, ?)",
                (publisher, document, version, f"{serial:x}", len(payload), payload),
            )
            if cursor.rowcount != 1:
                return False
            held = int(cursor.lastrowid or 0)
            self._set_waits(held, waits)
            self._db.executemany(
                "INSERT OR IGNORE INTO held_keys VALUES (?, ?, ?, ?, ?)",
                [(held, *need) for need in sorted(set(needs))],
            )
        return True

    def _set_waits(self, held: int, waits: Iterable[tuple[str, str]]) -> None:
        self._db.execute("DELETE FROM held_waits WHERE held = ?", (held,))
        self._db.executemany(
            "INSERT OR IGNORE INTO held_waits VALUES (?, ?, ?)",
            [(held, publisher, concept) for publisher, concept in waits],
        )

    def set_waits(self, held: int, waits: Iterable[tuple[str, str]]) -> None:
        """What a held document waits for now (some keys came, not all)."""
        with self._db:
            self._db.execute("BEGIN")
            self._set_waits(held, waits)

    def waiting(self, publisher: str | None = None, concept: str | None = None) -> list[Held]:
        """The held documents waiting for a group's keys (or all of a publisher's), oldest first.

        Only the rows asked for are read: a key message costs the documents it may open.
        """
        if publisher is None:
            rows = self._db.execute("SELECT id, payload FROM held_documents ORDER BY id")
        elif concept is None:
            rows = self._db.execute(
                "SELECT id, payload FROM held_documents WHERE publisher = ? ORDER BY id",
                (publisher,),
            )
        else:
            rows = self._db.execute(
                "SELECT h.id, h.payload FROM held_waits w JOIN held_documents h ON h.id = w.held "
                "WHERE w.publisher = ? AND w.concept = ? ORDER BY h.id",
                (publisher, concept),
            )
        return [Held(id=int(i), payload=bytes(p)) for i, p in rows]

    def held_usage(self, publisher: str) -> tuple[int, int]:
        """(documents, bytes) held for ``publisher``."""
        count, size = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM held_documents WHERE publisher = ?",
            (publisher,),
        ).fetchone()
        return int(count), int(size)

    def oldest_held(self, publisher: str) -> HeldEntry | None:
        """The document held longest for ``publisher``, if any."""
        row = self._db.execute(
            "SELECT id, publisher, document, version, serial, size FROM held_documents "
            "WHERE publisher = ? ORDER BY id LIMIT 1",
            (publisher,),
        ).fetchone()
        return None if row is None else _entry(row)

    def held_entries(self) -> list[HeldEntry]:
        """Every held document's index entry (no payload), oldest first."""
        rows = self._db.execute(
            "SELECT id, publisher, document, version, serial, size FROM held_documents ORDER BY id"
        )
        return [_entry(row) for row in rows]

    def drop_held(self, held: int) -> None:
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM held_waits WHERE held = ?", (held,))
            self._db.execute("DELETE FROM held_keys WHERE held = ?", (held,))
            self._db.execute("DELETE FROM held_documents WHERE id = ?", (held,))

    def held(self) -> list[bytes]:
        """The held documents' serialised disseminations, oldest first."""
        return [h.payload for h in self.waiting()]

    def held_count(self) -> int:
        (count,) = self._db.execute("SELECT COUNT(*) FROM held_documents").fetchone()
        return int(count)

    def take_legacy_held(self) -> list[bytes]:
        """Documents held by an older version (unchecked, unindexed); the table is emptied."""
        exists = self._db.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'held'"
        ).fetchone()
        if exists is None:
            return []
        payloads = [bytes(p) for (p,) in self._db.execute("SELECT payload FROM held ORDER BY id")]
        self._db.execute("DROP TABLE held")
        return payloads

    # ---- the CRL in force ----------------------------------------------------------------
    def crl(self) -> tuple[int, bytes] | None:
        """(CRL number, PEM) of the CRL in force, if one was ever accepted."""
        row = self._db.execute("SELECT number, pem FROM crl WHERE id = 1").fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def set_crl(self, number: int, pem: bytes) -> None:
        """Keep a CRL in force (the caller has checked that its number is not lower)."""
        self._db.execute("INSERT OR REPLACE INTO crl VALUES (1, ?, ?)", (str(number), pem))

    # ---- groups whose epochs we missed (a path refresh is asked for) ----------------------
    def mark_stale(self, publisher: str, concept: str) -> bool:
        """Record that we missed epochs of a group; return whether that is news."""
        cursor = self._db.execute("INSERT OR IGNORE INTO stale VALUES (?, ?)", (publisher, concept))
        return cursor.rowcount == 1

    def clear_stale(self, publisher: str, concept: str) -> None:
        self._db.execute(
            "DELETE FROM stale WHERE publisher = ? AND concept = ?", (publisher, concept)
        )

    def stale(self) -> list[tuple[str, str]]:
        """Groups still waiting for a path refresh."""
        return [(p, c) for p, c in self._db.execute("SELECT publisher, concept FROM stale")]

    # ---- when this subscription started --------------------------------------------------
    def subscribed_since_ms(self, now_ms: int) -> int:
        """When this subscription began: its first registration, or the first after a rejoin
        (``now_ms`` is stored if there was none)."""
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('subscribed_at_ms', ?)", (now_ms,))
        row = self._db.execute("SELECT value FROM meta WHERE key = 'subscribed_at_ms'").fetchone()
        return int(row[0])

    # ---- whether this subscriber left (xdn unsubscribe) -----------------------------------
    def record_leave(self, at_ms: int) -> None:
        """Record that the subscriber left at ``at_ms`` (``xdn unsubscribe``): no run and no
        reconnect registers it again until it rejoins (:meth:`clear_leave`)."""
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('left_at_ms', ?)", (at_ms,))

    def left_at_ms(self) -> int | None:
        """When the subscriber left, if it did and has not rejoined since."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'left_at_ms'").fetchone()
        return None if row is None else int(row[0])

    def clear_leave(self) -> None:
        """The subscriber subscribes again (``xdn subscribe --rejoin``): a new subscription,
        whose registration time :meth:`subscribed_since_ms` records anew."""
        self._db.execute("DELETE FROM meta WHERE key IN ('left_at_ms', 'subscribed_at_ms')")

    # ---- key-tree state per group ---------------------------------------------------------
    def group_state(self, publisher: str, concept: str) -> bytes | None:
        """This member's serialised key-tree state in a (publisher, concept) group."""
        row = self._db.execute(
            "SELECT state FROM groups WHERE publisher = ? AND concept = ?", (publisher, concept)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def set_group(
        self, publisher: str, concept: str, state: bytes | None, *, epoch: int, key: bytes | None
    ) -> None:
        """Store a group's new state and the group key of its epoch, atomically."""
        with self._db:
            self._db.execute("BEGIN")
            if state is None:
                self._db.execute(
                    "DELETE FROM groups WHERE publisher = ? AND concept = ?", (publisher, concept)
                )
            else:
                self._db.execute(
                    "INSERT OR REPLACE INTO groups VALUES (?, ?, ?)", (publisher, concept, state)
                )
            if key is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO keys VALUES (?, ?, ?, ?)",
                    (publisher, concept, epoch, key),
                )

    # ---- delivery cursors ----------------------------------------------------------------
    def applied(self, address: str) -> int:
        """The last delivery sequence applied from the site at ``address`` (0: none)."""
        row = self._db.execute(
            "SELECT applied FROM cursors WHERE address = ?", (address,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def set_applied(self, address: str, sequence: int) -> None:
        self._db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?)", (address, sequence))

    # ---- grants in force at the applied cursor ------------------------------------------
    def grants(self, address: str) -> dict[str, list[str]] | None:
        """The grants the deliveries after our cursor at ``address`` were routed by, if known."""
        row = self._db.execute("SELECT grants FROM grants WHERE address = ?", (address,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def set_grants(
        self, address: str, grants: Mapping[str, list[str]], *, applied: int | None = None
    ) -> None:
        """Store the grants in force (and, atomically, the delivery that changed them)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT OR REPLACE INTO grants VALUES (?, ?)",
                (address, json.dumps(dict(grants), sort_keys=True)),
            )
            if applied is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO cursors VALUES (?, ?)", (address, applied)
                )

    # ---- accepted documents --------------------------------------------------------------
    def version(self, publisher: str, document: str) -> int | None:
        """The last version of a document accepted, if any."""
        row = self._db.execute(
            "SELECT version FROM documents WHERE publisher = ? AND document = ?",
            (publisher, document),
        ).fetchone()
        return None if row is None else int(row[0])

    def floor(self, publisher: str) -> int:
        """The highest sequence number of ``publisher`` pruned from the accepted documents (0:
        none): a document without an entry numbered at or below it is a replay."""
        row = self._db.execute(
            "SELECT sequence FROM floors WHERE publisher = ?", (publisher,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def accept(
        self,
        record: Mapping[str, Any],
        *,
        address: str,
        sequence: int,
        publisher_sequence: int = 0,
        at_ms: int = 0,
    ) -> None:
        """Record an accepted document (its number in its publisher's signed sequence, when it
        was accepted) and the delivery that carried it, and queue its ``received.jsonl`` line,
        atomically."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO documents (publisher, document, version, sequence, accepted_ms) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (publisher, document) DO UPDATE SET "
                "version = excluded.version, sequence = excluded.sequence, "
                "accepted_ms = excluded.accepted_ms",
                (record["publisher"], record["document"], record["version"],
                 publisher_sequence, at_ms),
            )  # fmt: skip
            self._db.execute(
                "INSERT INTO received_log (record) VALUES (?)",
                (json.dumps(record, sort_keys=True),),
            )
            self._db.execute(
                "INSERT OR REPLACE INTO cursors VALUES (?, ?)", (address, sequence)
            )

    def prune(self, now_ms: int, retention: Retention) -> Pruned:
        """Drop what can no longer be needed (see :mod:`subscriber.retention`)."""
        return prune(self._db, now_ms, retention)

    # ---- the export (received.jsonl), see subscriber.export --------------------------------
    def export_mark(self) -> ExportMark:
        """How far ``received.jsonl`` is known to be written and synced."""
        rows = dict(self._db.execute(
            "SELECT key, value FROM meta WHERE key IN ('exported_seq', 'exported_bytes')"
        ).fetchall())  # fmt: skip
        return ExportMark(seq=rows.get("exported_seq", 0), offset=rows.get("exported_bytes", 0))

    def export_tail(self) -> list[tuple[int, str]]:
        """The records accepted after the export mark: ``(seq, line)``, oldest first."""
        mark = self.export_mark()
        return [
            (int(seq), str(record)) for seq, record in self._db.execute(
                "SELECT seq, record FROM received_log WHERE seq > ? ORDER BY seq", (mark.seq,)
            )
        ]  # fmt: skip

    def mark_exported(self, seq: int, offset: int) -> None:
        """The records up to ``seq`` are synced in the first ``offset`` bytes of the export:
        forget them here."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [("exported_seq", seq), ("exported_bytes", offset)],
            )
            self._db.execute("DELETE FROM received_log WHERE seq <= ?", (seq,))

    def legacy_records(self) -> list[str] | None:
        """The records kept in ``documents`` by an older version (one per document, oldest
        first), or None for a store that keeps them in ``received_log``."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(documents)")}
        if "record" not in columns:
            return None
        return [str(r) for (r,) in self._db.execute("SELECT record FROM documents ORDER BY id")]

    def drop_legacy_records(self, offset: int) -> None:
        """The legacy records are in the first ``offset`` bytes of the synced export: drop
        them (and the column) and mark the export."""
        seq = max([s for s, _ in self.export_tail()], default=0)
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("ALTER TABLE documents DROP COLUMN record")
        self.mark_exported(seq, offset)


class Inbox:
    """Where verified views and the record of what arrived are written."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        (out_dir / "views").mkdir(parents=True, exist_ok=True)

    def _append(self, name: str, record: Mapping[str, Any], *, sync: bool) -> None:
        """Append one line; a write that fails (a full disk) leaves no part of it behind."""
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with open(self.out_dir / name, "ab") as out:
            before = out.seek(0, os.SEEK_END)
            try:
                out.write(line)
                out.flush()
                if sync:
                    os.fsync(out.fileno())
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(out.fileno(), before)
                raise

    @property
    def received_path(self) -> Path:
        return self.out_dir / "received.jsonl"

    def received_size(self) -> int:
        """The size of ``received.jsonl`` (0 while there is none)."""
        try:
            return self.received_path.stat().st_size
        except FileNotFoundError:
            return 0

    def received_lines(
        self, offset: int, *, keep: int = 1 << 20
    ) -> Iterator[tuple[int, bytes, bool]]:
        """The lines of ``received.jsonl`` from byte ``offset`` on, one at a time: (offset
        after the line, its first ``keep`` bytes at most, whether it ends with a newline).

        Memory is bounded by ``keep`` however long the file or a line is.
        """
        try:
            export = open(self.received_path, "rb")  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            return
        with export:
            export.seek(offset)
            position = offset
            while chunk := export.readline(keep):
                line, position = chunk, position + len(chunk)
                while not chunk.endswith(b"\n"):  # a long line: skip the rest of it
                    chunk = export.readline(keep)
                    if not chunk:
                        break
                    position += len(chunk)
                yield position, line[:keep], chunk.endswith(b"\n")

    def append_received(self, data: bytes, *, after: int) -> int:
        """Append ``data`` to ``received.jsonl`` at byte ``after`` (only a torn last line lies
        beyond it: it is cut), synced; return the new size."""
        with open(self.received_path, "ab+") as export:
            if export.seek(0, os.SEEK_END) > after:
                export.truncate(after)
            export.write(data)
            export.flush()
            os.fsync(export.fileno())
            return export.seek(0, os.SEEK_END)

    def sync_received(self) -> int:
        """Sync ``received.jsonl`` to disk; return its size."""
        try:
            with open(self.received_path, "rb") as export:
                os.fsync(export.fileno())
                return export.seek(0, os.SEEK_END)
        except FileNotFoundError:
            return 0

    def write_subscription(self, record: Mapping[str, Any]) -> None:
        """Replace ``subscription.json`` atomically: a reader never sees half of it."""
        path, tmp = self.out_dir / "subscription.json", self.out_dir / "subscription.json.tmp"
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        os.replace(tmp, path)

    def write_view(
        self, *, publisher: str, document_id: str, version: int, view_xml: bytes | Path
    ) -> Path:
        """Store a verified view as ``views/PUBLISHER/DOCUMENT.vN.xml``; return its path.

        ``view_xml`` is the view's bytes, or a file holding them (a large view, written
        elsewhere while it was verified: synced and moved into place, copied a MiB at a time
        if it lies on another file system; the file is gone afterwards). Either way the view
        appears whole or not at all (a temporary file renamed). It is on disk when this
        returns (the file synced before the rename, the folder after it), so a view written
        before its delivery is committed and acknowledged survives a power loss.

        Publisher and document id are escaped into single safe path components
        (:func:`xdn.ids.file_stem`): an id like ``../x`` or ``a/b`` stays inside the folder.
        """
        folder = self.out_dir / "views" / ids.file_stem(publisher)
        if not folder.is_dir():
            folder.mkdir(parents=True, exist_ok=True)
            _sync_dir(folder.parent)  # the new folder's entry
        path = folder / f"{ids.file_stem(document_id)}.v{version}.xml"
        tmp = path.with_suffix(".tmp")
        if isinstance(view_xml, Path):
            _move_synced(view_xml, tmp)
        else:
            with open(tmp, "wb") as out:
                out.write(view_xml)
                out.flush()
                os.fsync(out.fileno())
        os.replace(tmp, path)
        _sync_dir(folder)  # the rename: the view is on disk before its delivery is acknowledged
        return path

    def record(self, record: Mapping[str, Any]) -> None:
        # No fsync: the database keeps the lines not yet synced (subscriber.export).
        self._append("received.jsonl", record, sync=False)

    def refuse(
        self,
        *,
        publisher: str = "",
        document_id: str = "",
        reason: str,
        kind: str = "document",
        version: int | None = None,
    ) -> None:
        """Record a refusal (``kind``: see the module docstring) in ``refused.jsonl``."""
        refusal: dict[str, Any] = {
            "publisher": publisher, "document": document_id, "reason": reason, "kind": kind
        }
        if version is not None:
            refusal["version"] = version
        self._append("refused.jsonl", refusal, sync=True)

    def refuse_key(
        self, *, kind: str, publisher: str, concept: str, epoch: int, reason: str
    ) -> None:
        """Record a refused key message (``kind``: rekey, enrolment, document-keys)."""
        refusal = {
            "publisher": publisher, "key_message": kind, "concept": concept, "epoch": epoch,
            "reason": reason,
        }
        self._append("refused.jsonl", refusal, sync=True)


def _sync_dir(folder: Path) -> None:
    """Sync a folder's entries (a file created or renamed in it) to disk."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _move_synced(source: Path, target: Path) -> None:
    """Move ``source`` to ``target`` with its bytes on disk (synced)."""
    with open(source, "rb+") as held:
        os.fsync(held.fileno())
    try:
        os.replace(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    with open(source, "rb") as held, open(target, "wb") as out:
        shutil.copyfileobj(held, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    source.unlink()
