"""A subscriber's durable state (SQLite) and what it received (files).

The state database holds the keyring (group keys by publisher, concept and epoch, this
member's key-tree path in each group, :mod:`xdn.lkh`, and the per-document keys granted for
retained documents), the documents held until their keys arrive, the last
delivery sequence applied from each site, and the last version accepted of each document —
updated in one transaction per delivery, so after a crash of either side the subscriber resumes
right after what it applied: a redelivered document is recognised and not handed to the
application twice, an older version (a replay) is refused.

Output layout under ``OUT`` (the application's view of what arrived)::

    subscription.json                 grants reported by the disseminator at registration
    views/PUBLISHER/DOCUMENT.vN.xml   each verified, reassembled view (names escaped by
                                      xdn.ids.file_stem: no separators, no leading dot)
    received.jsonl                    one line per accepted document: fragment id → concept
    refused.jsonl                     one line per refused document (or key message, with
                                      "key_message": its kind), with the reason

``received.jsonl`` is an export of the database: at start-up it is rewritten from the database
if a crash left the two apart.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from xdn import ids

__all__ = ["Inbox", "Keyring"]

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
    version INTEGER NOT NULL, record TEXT NOT NULL, UNIQUE (publisher, document)
);
CREATE TABLE IF NOT EXISTS document_keys (name TEXT PRIMARY KEY, key BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS held (
    id INTEGER PRIMARY KEY, publisher TEXT NOT NULL, document TEXT NOT NULL,
    version INTEGER NOT NULL, payload BLOB NOT NULL, UNIQUE (publisher, document, version)
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stale (
    publisher TEXT, concept TEXT, PRIMARY KEY (publisher, concept)
);
"""


class Keyring:
    """Keys, delivery cursors and accepted document versions of one subscriber."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

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

    def put_document_keys(self, keys: Mapping[str, bytes]) -> None:
        """Keep granted per-document keys (by XML Encryption key name)."""
        self._db.executemany(
            "INSERT OR REPLACE INTO document_keys VALUES (?, ?)", sorted(keys.items())
        )

    def document_key(self, name: str) -> bytes | None:
        row = self._db.execute("SELECT key FROM document_keys WHERE name = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    # ---- documents held until their keys arrive ------------------------------------------
    def hold(self, publisher: str, document: str, version: int, payload: bytes) -> None:
        self._db.execute(
            "INSERT OR IGNORE INTO held (publisher, document, version, payload) "
            "VALUES (?, ?, ?, ?)",
            (publisher, document, version, payload),
        )

    def held(self) -> list[bytes]:
        """The held documents' serialised disseminations, oldest first."""
        return [bytes(p) for (p,) in self._db.execute("SELECT payload FROM held ORDER BY id")]

    def release(self, publisher: str, document: str, version: int) -> None:
        self._db.execute(
            "DELETE FROM held WHERE publisher = ? AND document = ? AND version = ?",
            (publisher, document, version),
        )

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
        """The time of the first registration (``now_ms`` is stored if there was none)."""
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('subscribed_at_ms', ?)", (now_ms,))
        row = self._db.execute("SELECT value FROM meta WHERE key = 'subscribed_at_ms'").fetchone()
        return int(row[0])

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

    def accept(
        self, record: Mapping[str, Any], *, address: str, sequence: int
    ) -> None:
        """Record an accepted document and the delivery that carried it, atomically."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT INTO documents (publisher, document, version, record) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (publisher, document) DO UPDATE SET "
                "version = excluded.version, record = excluded.record",
                (record["publisher"], record["document"], record["version"],
                 json.dumps(record, sort_keys=True)),
            )
            self._db.execute(
                "INSERT OR REPLACE INTO cursors VALUES (?, ?)", (address, sequence)
            )

    def records(self) -> list[str]:
        """Every accepted document's record, oldest first (the ``received.jsonl`` lines)."""
        return [r for (r,) in self._db.execute("SELECT record FROM documents ORDER BY id")]


class Inbox:
    """Where verified views and the record of what arrived are written."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        (out_dir / "views").mkdir(parents=True, exist_ok=True)

    def _append(self, name: str, record: Mapping[str, Any], *, sync: bool) -> None:
        with open(self.out_dir / name, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()
            if sync:
                os.fsync(out.fileno())

    def reconcile(self, records: list[str]) -> None:
        """Rewrite ``received.jsonl`` from the database if a crash left them apart."""
        path = self.out_dir / "received.jsonl"
        current = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if current != records:
            tmp = path.with_suffix(".tmp")
            tmp.write_text("".join(line + "\n" for line in records), encoding="utf-8")
            os.replace(tmp, path)

    def write_subscription(self, record: Mapping[str, Any]) -> None:
        (self.out_dir / "subscription.json").write_text(json.dumps(record, indent=2) + "\n")

    def write_view(
        self, *, publisher: str, document_id: str, version: int, view_xml: bytes
    ) -> Path:
        """Store a verified view as ``views/PUBLISHER/DOCUMENT.vN.xml``; return its path.

        Publisher and document id are escaped into single safe path components
        (:func:`xdn.ids.file_stem`): an id like ``../x`` or ``a/b`` stays inside the folder.
        """
        folder = self.out_dir / "views" / ids.file_stem(publisher)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{ids.file_stem(document_id)}.v{version}.xml"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(view_xml)
        os.replace(tmp, path)
        return path

    def record(self, record: Mapping[str, Any]) -> None:
        # No fsync: the database is the record; reconcile() rewrites this export after a crash.
        self._append("received.jsonl", record, sync=False)

    def refuse(self, *, publisher: str, document_id: str, reason: str) -> None:
        refusal = {"publisher": publisher, "document": document_id, "reason": reason}
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
