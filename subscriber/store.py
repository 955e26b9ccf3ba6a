"""A subscriber's durable state: its keyring (SQLite) and what it received (files).

Output layout under ``OUT``::

    subscription.json                 grants reported by the disseminator at registration
    views/PUBLISHER/DOCUMENT.vN.xml   each verified, reassembled view
    received.jsonl                    one line per accepted document: fragment id → concept
    refused.jsonl                     one line per refused document, with the reason
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Inbox", "Keyring"]


class Keyring:
    """Group keys this subscriber holds, by (publisher, concept, epoch)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS keys (publisher TEXT, concept TEXT, epoch INTEGER, "
            "key BLOB NOT NULL, PRIMARY KEY (publisher, concept, epoch))"
        )

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


class Inbox:
    """Where verified views and the record of what arrived are written."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        (out_dir / "views").mkdir(parents=True, exist_ok=True)

    def _append(self, name: str, record: Mapping[str, Any]) -> None:
        with open(self.out_dir / name, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")
            out.flush()
            os.fsync(out.fileno())

    def write_subscription(self, record: Mapping[str, Any]) -> None:
        (self.out_dir / "subscription.json").write_text(json.dumps(record, indent=2) + "\n")

    def accept(
        self, *, publisher: str, document_id: str, version: int, view_xml: bytes,
        fragments: Mapping[str, str],
    ) -> Path:
        folder = self.out_dir / "views" / publisher
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{document_id}.v{version}.xml"
        path.write_bytes(view_xml)
        self._append(
            "received.jsonl",
            {"publisher": publisher, "document": document_id, "version": version,
             "fragments": dict(fragments)},
        )
        return path

    def refuse(self, *, publisher: str, document_id: str, reason: str) -> None:
        self._append(
            "refused.jsonl", {"publisher": publisher, "document": document_id, "reason": reason}
        )
