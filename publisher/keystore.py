"""The publisher's document versions and retained documents' keys (SQLite; group key trees
live in :mod:`publisher.lkh_store`).

A document's version is stored once the network accepted it, so the next publication of the
same document gets the next version and subscribers can refuse replays of older ones.

The per-document keys of the last ``retain`` documents (latest version of each) are kept too:
sites retain the same recent documents, and a member that joins a concept's group is granted
those documents' keys for that concept (:mod:`xdn.lkh._grants`) — state at subscribe time.

The publisher's signed sequence (:mod:`xdn.completeness`): every new document version gets the
next sequence number, reserved durably before the document is signed (:meth:`KeyStore.
reserve_sequence`), so a number is never signed twice even if a publication fails or the
publisher crashes. Once the network accepted a document, the newest sequence number of each of
its concepts is stored with its version (:meth:`KeyStore.commit`): the back pointers of the
next document and the publisher's checkpoints are read from there. The concepts of every
version are kept too (:meth:`KeyStore.version_concepts`): who should have received a version is
read from them (``xdn provenance receipts``).

Idempotent publishing (:mod:`publisher.idempotence`): the secret that keys publication ids
(:meth:`KeyStore.publish_secret`, made once) and each attempt to publish a version, recorded
before it is sent (:meth:`KeyStore.record_attempt`) and dropped when a version of its document is
committed: a version the root routed before the publisher could commit it is committed later
with the document keys it was encrypted with (:meth:`KeyStore.attempt`). A version attempted and
not committed is never given to other content (:meth:`KeyStore.attempted_version`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from xdn.sqlitedb import open_db

__all__ = ["DocumentKey", "Entitled", "KeyStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (
    document_id TEXT PRIMARY KEY,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS retained (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    document_id TEXT NOT NULL UNIQUE,
    version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS sequence (
    id INTEGER PRIMARY KEY CHECK (id = 0),
    last INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS concept_sequence (
    concept TEXT PRIMARY KEY,
    latest INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS version_concepts (
    document_id TEXT NOT NULL, version INTEGER NOT NULL, concept TEXT NOT NULL,
    PRIMARY KEY (document_id, version, concept)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS version_sequence (
    sequence INTEGER PRIMARY KEY, document_id TEXT NOT NULL, version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entitled (
    member TEXT PRIMARY KEY, certificate TEXT NOT NULL, policy_version INTEGER NOT NULL,
    concepts TEXT NOT NULL, notice BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS attempts (
    document_id TEXT NOT NULL, sequence INTEGER NOT NULL, version INTEGER NOT NULL,
    keys TEXT NOT NULL,
    PRIMARY KEY (document_id, sequence)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS retained_keys (
    seq INTEGER NOT NULL, concept TEXT NOT NULL, epoch INTEGER NOT NULL,
    key_name TEXT NOT NULL, key BLOB NOT NULL,
    PRIMARY KEY (seq, concept)
);
"""

# (concept, epoch, key name, 32-byte per-document key)
DocumentKey = tuple[str, int, str, bytes]


@dataclass(frozen=True, slots=True, kw_only=True)
class Entitled:
    """The last entitlement signed for a member: what a policy change is measured against.

    Attributes:
        certificate: the fingerprint of the certificate it was evaluated for.
        policy_version: the policy version evaluated.
        concepts: what it granted (whatever the sites observe).
        notice: the policy-change notice signed with it (canonical N-Quads; empty: none).
    """

    certificate: str
    policy_version: int
    concepts: frozenset[str]
    notice: bytes = b""


class KeyStore:
    """The last version of each of one publisher's documents, and the retained ones' keys."""

    def __init__(self, path: Path, *, publisher: str, retain: int = 0) -> None:
        self._publisher = publisher
        self._retain = retain
        self._db = open_db(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def next_version(self, document_id: str) -> int:
        """The version the next publication of ``document_id`` gets."""
        row = self._db.execute(
            "SELECT version FROM documents WHERE document_id = ?", (document_id,)
        ).fetchone()
        return 1 if row is None else int(row[0]) + 1

    def attempted_version(self, document_id: str) -> int:
        """The newest version of ``document_id`` an attempt was recorded for and no commit
        settled (0: none). The root may have routed it before the publisher died: it is
        never used again for other content (a site ignores a version it routed, so the
        sequence number given to the other content would be named by the chain and never
        delivered — a gap no site can fill)."""
        row = self._db.execute(
            "SELECT MAX(version) FROM attempts WHERE document_id = ?", (document_id,)
        ).fetchone()
        return 0 if row is None or row[0] is None else int(row[0])

    def reserve_sequence(self) -> int:
        """The next sequence number, durably reserved: it is never returned again."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT INTO sequence (id, last) VALUES (0, 1) "
                "ON CONFLICT (id) DO UPDATE SET last = last + 1"
            )
            row = self._db.execute("SELECT last FROM sequence WHERE id = 0").fetchone()
        return int(row[0])

    def last_sequence(self) -> int:
        """The newest sequence number reserved (0: none yet)."""
        row = self._db.execute("SELECT last FROM sequence WHERE id = 0").fetchone()
        return 0 if row is None else int(row[0])

    def concept_sequences(self) -> dict[str, int]:
        """Concept → sequence number of the newest accepted document holding it."""
        rows = self._db.execute("SELECT concept, latest FROM concept_sequence ORDER BY concept")
        return {concept: int(latest) for concept, latest in rows}

    def commit(
        self,
        document_id: str,
        version: int,
        keys: Iterable[DocumentKey] = (),
        *,
        sequence: int = 0,
        concepts: Iterable[str] = (),
    ) -> None:
        """Record that ``version`` of ``document_id`` was published, with its document keys and
        (when sequenced) its sequence number as the newest of each of its ``concepts``."""
        concepts = sorted(set(concepts))
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(
                "INSERT OR REPLACE INTO documents (document_id, version) VALUES (?, ?)",
                (document_id, version),
            )
            self._db.executemany(
                "INSERT OR IGNORE INTO version_concepts VALUES (?, ?, ?)",
                [(document_id, version, concept) for concept in concepts],
            )
            if sequence:
                self._db.execute(
                    "INSERT OR REPLACE INTO version_sequence VALUES (?, ?, ?)",
                    (sequence, document_id, version),
                )
                self._db.executemany(
                    "INSERT INTO concept_sequence (concept, latest) VALUES (?, ?) "
                    "ON CONFLICT (concept) DO UPDATE SET latest = MAX(latest, excluded.latest)",
                    [(concept, sequence) for concept in concepts],
                )
            if self._retain > 0:
                self._retain_keys(document_id, version, keys)
            self._db.execute(
                "DELETE FROM attempts WHERE document_id = ? AND version <= ?",
                (document_id, version),
            )

    def publish_secret(self) -> bytes:
        """The secret that keys this publisher's publication ids (made on first use, kept)."""
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "INSERT OR IGNORE INTO secrets VALUES ('publish_id', ?)",
                (secrets.token_bytes(32),),
            )
            row = self._db.execute("SELECT value FROM secrets WHERE name = 'publish_id'").fetchone()
        return bytes(row[0])

    def record_attempt(
        self, document_id: str, version: int, keys: Iterable[DocumentKey], *, sequence: int
    ) -> None:
        """Remember, durably and before it is sent, an attempt to publish ``version`` numbered
        ``sequence``: the document keys it is encrypted with."""
        data = json.dumps([[c, e, n, k.hex()] for c, e, n, k in keys])
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO attempts VALUES (?, ?, ?, ?)",
                (document_id, sequence, version, data),
            )

    def drop_attempt(self, document_id: str, *, sequence: int) -> None:
        """Forget the attempt numbered ``sequence``: the root answered that it did not route it
        (it refused it, or had routed the same content before)."""
        with self._db:
            self._db.execute(
                "DELETE FROM attempts WHERE document_id = ? AND sequence = ?",
                (document_id, sequence),
            )

    def attempt(self, document_id: str, *, sequence: int) -> tuple[int, list[DocumentKey]] | None:
        """(version, document keys) of the attempt numbered ``sequence`` (``None``: none kept)."""
        row = self._db.execute(
            "SELECT version, keys FROM attempts WHERE document_id = ? AND sequence = ?",
            (document_id, sequence),
        ).fetchone()
        if row is None:
            return None
        keys = [(str(c), int(e), str(n), bytes.fromhex(k)) for c, e, n, k in json.loads(row[1])]
        return int(row[0]), keys

    def version_concepts(self, document_id: str) -> dict[int, frozenset[str]]:
        """Version → the concepts it held, of every version of ``document_id`` published
        since versions' concepts are recorded."""
        out: dict[int, set[str]] = {}
        rows = self._db.execute(
            "SELECT version, concept FROM version_concepts WHERE document_id = ?", (document_id,)
        )
        for version, concept in rows:
            out.setdefault(int(version), set()).add(concept)
        return {version: frozenset(c) for version, c in sorted(out.items())}

    def version_sequences(self, document_id: str) -> dict[int, int]:
        """Sequence number → version, of every version of ``document_id`` published in the
        signed sequence since their numbers are recorded (a subscriber's gap names one)."""
        rows = self._db.execute(
            "SELECT sequence, version FROM version_sequence WHERE document_id = ?",
            (document_id,),
        )
        return {int(sequence): int(version) for sequence, version in rows}

    def _retain_keys(self, document_id: str, version: int, keys: Iterable[DocumentKey]) -> None:
        self._db.execute(
            "DELETE FROM retained_keys WHERE seq IN "
            "(SELECT seq FROM retained WHERE document_id = ?)",
            (document_id,),
        )
        self._db.execute("DELETE FROM retained WHERE document_id = ?", (document_id,))
        seq = self._db.execute(
            "INSERT INTO retained (document_id, version) VALUES (?, ?)", (document_id, version)
        ).lastrowid
        self._db.executemany(
            "INSERT INTO retained_keys VALUES (?, ?, ?, ?, ?)",
            [(seq, concept, epoch, name, key) for concept, epoch, name, key in keys],
        )
        kept = "SELECT seq FROM retained ORDER BY seq DESC LIMIT ?"
        self._db.execute(
            f"DELETE FROM retained_keys WHERE seq NOT IN ({kept})", (self._retain,)
        )
        self._db.execute(f"DELETE FROM retained WHERE seq NOT IN ({kept})", (self._retain,))

    def retained_keys(self, concept: str, *, before_epoch: int) -> dict[str, bytes]:
        """Key name → document key of the retained documents' ``concept`` fragments that were
        encrypted in an epoch before ``before_epoch`` (a joiner's own epochs it reads anyway)."""
        rows = self._db.execute(
            "SELECT key_name, key FROM retained_keys WHERE concept = ? AND epoch < ?",
            (concept, before_epoch),
        )
        return {name: bytes(key) for name, key in rows}

    def entitled(self, member: str) -> Entitled | None:
        """The last entitlement recorded for ``member`` (see :meth:`record_entitled`)."""
        row = self._db.execute(
            "SELECT certificate, policy_version, concepts, notice FROM entitled WHERE member = ?",
            (member,),
        ).fetchone()
        if row is None:
            return None
        return Entitled(
            certificate=str(row[0]), policy_version=int(row[1]),
            concepts=frozenset(json.loads(row[2])), notice=bytes(row[3]),
        )

    def record_entitled(self, member: str, entitled: Entitled) -> None:
        """Remember the entitlement just signed for ``member`` (and its notice), durably: the
        next policy version's is compared with it, whatever process signs that one."""
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO entitled (member, certificate, policy_version, concepts, "
                "notice) VALUES (?, ?, ?, ?, ?)",
                (member, entitled.certificate, entitled.policy_version,
                 json.dumps(sorted(entitled.concepts)), entitled.notice),
            )
