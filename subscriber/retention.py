"""What a subscriber's keyring keeps, and the pruning that bounds it.

Theory of operation. Three tables of the keyring (:class:`subscriber.store.Keyring`) would
otherwise grow with every document and every rekey:

* ``documents``: the last version accepted of each (publisher, document), which makes a
  redelivery a duplicate and an older version a replay. Per publisher, the entries accepted
  longer ago than :attr:`Retention.days`, and those numbered more than
  :attr:`Retention.documents` below the newest number accepted, are pruned — after the
  publisher's **floor** (``floors``) is raised to the highest signed sequence number pruned.
  A document with no entry whose number is at or below the floor is refused as a replay
  (:meth:`~subscriber.store.Keyring.floor`): every new document version gets its publisher's
  next number, so neither a pruned version nor an older version of one can pass again. Entries
  of unsequenced documents (sequence 0), and those written before entries carried their number,
  have nothing a floor could compare and are kept.
* ``keys``: the group key of every epoch of every group. Only the newest
  :attr:`Retention.epochs` of each group are kept, plus any epoch a held document still needs:
  a held document (:mod:`subscriber.holding`) records the keys it needs (``held_keys``) when it
  is held, so that the keys it already has are there when the last one it waits for arrives.
* ``document_keys``: the per-document keys granted for retained documents; those stored longer
  ago than :attr:`Retention.days` go, unless a held document needs them (those stored by an
  older version, with no time, stay).

A document held by an older version of the subscriber has no ``held_keys``; while one is held,
its publisher's group keys, and every per-document key, are kept. Pruning runs at start-up and
then every :attr:`Retention.every_s` (:meth:`subscriber.session.Session.housekeeping`); it reads
two indexes per publisher and group, and writes nothing when there is nothing to prune.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

__all__ = ["Pruned", "Retention", "prune"]

_DAY_MS = 86_400_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """How much of its history a subscriber keeps (``xdn subscribe --retention-days`` ...).

    Attributes:
        days: accepted-document entries and per-document keys older than this are pruned.
        documents: entries numbered more than this below their publisher's newest are pruned.
        epochs: group keys kept per group (the newest), besides those held documents need.
        every_s: how often pruning runs while subscribed (it also runs at start-up).
    """

    days: float = 30.0
    documents: int = 100_000
    epochs: int = 32
    every_s: float = 600.0

    def __post_init__(self) -> None:
        if not self.days > 0 or not self.every_s > 0:
            raise ValueError("the retention period and the pruning interval must be positive")
        if self.documents < 1 or self.epochs < 1:
            raise ValueError("at least one document entry and one epoch per group must be kept")


@dataclass(frozen=True, slots=True, kw_only=True)
class Pruned:
    """What one pruning pass dropped."""

    documents: int = 0
    keys: int = 0
    document_keys: int = 0

    def __bool__(self) -> bool:
        return bool(self.documents or self.keys or self.document_keys)


def _skip_scan(db: sqlite3.Connection, sql: str) -> list[str]:
    """The distinct publishers ``sql`` (``SELECT MIN(publisher) ... AND publisher > ?``) finds,
    one index look-up each."""
    out: list[str] = []
    (publisher,) = db.execute(sql, ("",)).fetchone()
    while publisher is not None:
        out.append(str(publisher))
        (publisher,) = db.execute(sql, (publisher,)).fetchone()
    return out


def _document_cuts(db: sqlite3.Connection, now_ms: int, retention: Retention) -> dict[str, int]:
    """publisher → the highest sequence number to prune (only publishers with something)."""
    cutoff = now_ms - int(retention.days * _DAY_MS)
    cuts: dict[str, int] = dict(db.execute(
        "SELECT publisher, MAX(sequence) FROM documents INDEXED BY documents_by_time "
        "WHERE sequence > 0 AND accepted_ms < ? GROUP BY publisher",
        (cutoff,),
    ).fetchall())  # fmt: skip
    publishers = _skip_scan(
        db, "SELECT MIN(publisher) FROM documents WHERE sequence > 0 AND publisher > ?"
    )
    for publisher in publishers:
        (newest,) = db.execute(
            "SELECT MAX(sequence) FROM documents WHERE publisher = ? AND sequence > 0",
            (publisher,),
        ).fetchone()
        cut = int(newest) - retention.documents
        if cut > 0 and cut > cuts.get(publisher, 0):
            cuts[publisher] = cut
    # (an entry at or below a floor cannot exist: it was pruned, or refused when it came)
    floors = dict(db.execute("SELECT publisher, sequence FROM floors").fetchall())
    return {p: c for p, c in cuts.items() if c > floors.get(p, 0)}


def _key_cuts(db: sqlite3.Connection, retention: Retention) -> list[tuple[str, str, int]]:
    """(publisher, concept, newest epoch past the kept ones) of each group with keys past
    the newest ``epochs``."""
    unknown = {p for (p,) in db.execute(
        "SELECT DISTINCT publisher FROM held_documents h "
        "WHERE NOT EXISTS (SELECT 1 FROM held_keys k WHERE k.held = h.id)"
    )}  # fmt: skip
    cuts = []
    groups = db.execute("SELECT DISTINCT publisher, concept FROM keys").fetchall()
    for publisher, concept in groups:  # (the groups we are in, and those we left)
        if publisher in unknown:
            continue
        row = db.execute(
            "SELECT epoch FROM keys WHERE publisher = ? AND concept = ? "
            "ORDER BY epoch DESC LIMIT 1 OFFSET ?",
            (publisher, concept, retention.epochs),
        ).fetchone()
        if row is not None:
            cuts.append((publisher, concept, int(row[0])))
    return cuts


def prune(db: sqlite3.Connection, now_ms: int, retention: Retention) -> Pruned:
    """Prune the keyring's tables on ``db`` (see the module docstring), in one transaction."""
    documents = _document_cuts(db, now_ms, retention)
    keys = _key_cuts(db, retention)
    legacy_held = db.execute(
        "SELECT 1 FROM held_documents h WHERE NOT EXISTS "
        "(SELECT 1 FROM held_keys k WHERE k.held = h.id) LIMIT 1"
    ).fetchone()
    cutoff = now_ms - int(retention.days * _DAY_MS)
    old_document_keys = legacy_held is None and db.execute(
        "SELECT 1 FROM document_keys WHERE stored_ms BETWEEN 1 AND ? LIMIT 1", (cutoff - 1,)
    ).fetchone()
    if not documents and not keys and not old_document_keys:
        return Pruned()
    dropped = {"documents": 0, "keys": 0, "document_keys": 0}
    with db:
        db.execute("BEGIN IMMEDIATE")
        for publisher, cut in sorted(documents.items()):
            db.execute(
                "INSERT INTO floors VALUES (?, ?) ON CONFLICT (publisher) DO UPDATE "
                "SET sequence = MAX(sequence, excluded.sequence)",
                (publisher, cut),
            )
            dropped["documents"] += db.execute(
                "DELETE FROM documents WHERE publisher = ? AND sequence > 0 AND sequence <= ?",
                (publisher, cut),
            ).rowcount
        for publisher, concept, past in keys:
            dropped["keys"] += db.execute(
                "DELETE FROM keys WHERE publisher = ?1 AND concept = ?2 AND epoch <= ?3 AND "
                "epoch NOT IN (SELECT epoch FROM held_keys WHERE publisher = ?1 AND concept = ?2)",
                (publisher, concept, past),
            ).rowcount
        if old_document_keys:
            dropped["document_keys"] += db.execute(
                "DELETE FROM document_keys WHERE stored_ms BETWEEN 1 AND ? AND "
                "name NOT IN (SELECT name FROM held_keys)",
                (cutoff - 1,),
            ).rowcount
    return Pruned(**dropped)
