"""Durable state of the publisher's key service: every group's key tree, and an outbox (SQLite).

Theory of operation. A group is a header row (epoch, root, next node id) and one row per node;
an epoch changes O(log n) rows. :meth:`LkhStore.commit` writes a batch of
:class:`~xdn.lkh.EpochChange` values — for each group: the header compared-and-set from the
change's base epoch, the retired rows deleted, the new rows inserted — *and* the messages the
epoch must send (its rekey message and the joiners' enrolments) into an outbox, all in one
SQLite transaction. A crash at any point leaves either the old epochs or the new ones with
their messages, never a mix (SQLite's journal rolls back an unfinished transaction when the
database is next opened). Messages stay in the outbox until :meth:`LkhStore.delivered`, so a
restarted key service resends what it may not have sent. The outbox keeps each message signed
(:class:`~xdn.lkh.Signed`, by the :class:`~xdn.lkh.KeySigner` given to ``commit``), so what is
resent is exactly what was signed once.

The key service's order is therefore: plan → :meth:`LkhStore.commit` → apply in memory →
send the outbox → :meth:`LkhStore.delivered`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xdn.errors import UsageError
from xdn.lkh import (
    Enrolment,
    EpochChange,
    GroupController,
    GroupHeader,
    KeySigner,
    NodeRow,
    RekeyMessage,
    Signed,
)

__all__ = ["LkhStore", "Outgoing"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS lkh_groups (
    concept TEXT PRIMARY KEY,
    epoch INTEGER NOT NULL,
    root INTEGER,
    next_id INTEGER NOT NULL,
    lone_key BLOB
);
CREATE TABLE IF NOT EXISTS lkh_nodes (
    concept TEXT NOT NULL,
    node_id INTEGER NOT NULL,
    key BLOB NOT NULL,
    member TEXT,
    left_id INTEGER NOT NULL,
    right_id INTEGER NOT NULL,
    PRIMARY KEY (concept, node_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS lkh_outbox (
    concept TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (concept, epoch, seq)
);
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """The undelivered messages of one epoch, signed: the broadcast, then the enrolments."""

    concept: str
    epoch: int
    message: Signed[RekeyMessage]
    enrolments: tuple[Signed[Enrolment], ...]


class LkhStore:
    """The key trees of one publisher's groups.

    Args:
        path: the SQLite file (created if missing; may be the key store's file too).
        publisher: the publisher whose groups these are.
        between_writes: test seam, called after every row written inside a commit.
    """

    def __init__(
        self, path: Path, *, publisher: str, between_writes: Callable[[], None] | None = None
    ) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._publisher = publisher
        self._tick = between_writes or (lambda: None)
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def concepts(self) -> list[str]:
        """The concepts that have a group."""
        return [c for (c,) in self._db.execute("SELECT concept FROM lkh_groups ORDER BY concept")]

    def load_all(self) -> dict[str, GroupController]:
        """Every stored group, by concept."""
        groups = {c: self.load(c) for c in self.concepts()}
        return {c: g for c, g in groups.items() if g is not None}

    def load(self, concept: str) -> GroupController | None:
        """The group of ``concept`` as last committed, or ``None``."""
        row = self._db.execute(
            "SELECT epoch, root, next_id, lone_key FROM lkh_groups WHERE concept = ?", (concept,)
        ).fetchone()
        if row is None:
            return None
        epoch, root, next_id, lone = row
        header = GroupHeader(
            publisher=self._publisher,
            concept=concept,
            epoch=epoch,
            root=root,
            next_id=next_id,
            lone_key=None if lone is None else bytes(lone),
        )
        rows = self._db.execute(
            "SELECT node_id, key, member, left_id, right_id FROM lkh_nodes WHERE concept = ?",
            (concept,),
        )
        return GroupController.from_rows(
            header,
            (
                NodeRow(node_id=i, key=bytes(k), member=m, left=left, right=right)
                for i, k, m, left, right in rows
            ),
        )

    def create(self, group: GroupController) -> None:
        """Store a group that has no row yet (for example one built with ``bulk``)."""
        self._check_publisher(group.publisher)
        with self._transaction():
            if self._epoch_of(group.concept) is not None:
                raise UsageError(f"group {group.concept!r} already exists")
            self._write_header(group.header())
            self._db.executemany(
                "INSERT INTO lkh_nodes VALUES (?, ?, ?, ?, ?, ?)",
                [(group.concept, *self._node(r)) for r in group.rows()],
            )

    def commit(
        self,
        changes: Sequence[EpochChange],
        *,
        signer: KeySigner,
        enrolments: Iterable[Enrolment] = (),
    ) -> None:
        """Store new epochs and their messages, signed by ``signer``, in one transaction.

        Raises:
            UsageError: a change was not planned from the stored epoch of its group, two
                changes concern one group, an enrolment belongs to none of the changes, or
                ``signer`` is another publisher's.
        """
        self._check_publisher(signer.publisher)
        epochs = {c.concept: c.epoch for c in changes}
        if len(epochs) != len(changes):
            raise UsageError("one change per group per commit")
        enrolments = list(enrolments)
        for e in enrolments:
            if epochs.get(e.concept) != e.epoch or e.publisher != self._publisher:
                raise UsageError(f"enrolment of {e.member!r} matches no change")
        for change in changes:
            self._check_publisher(change.publisher)
        # Sign before the transaction: ~1 ms each, and nothing to roll back if it fails.
        outgoing = [
            (change, [signer.sign(change.message)]
             + [signer.sign(e) for e in enrolments if e.concept == change.concept])
            for change in changes
        ]
        with self._transaction():
            for change, messages in outgoing:
                self._write_change(change)
                for seq, message in enumerate(messages):
                    self._put(change.concept, change.epoch, seq, message.to_bytes())

    def pending(self) -> list[Outgoing]:
        """Every epoch whose messages are not yet marked delivered, oldest first per group."""
        out: dict[tuple[str, int], list[bytes]] = {}
        for concept, epoch, payload in self._db.execute(
            "SELECT concept, epoch, payload FROM lkh_outbox ORDER BY concept, epoch, seq"
        ):
            out.setdefault((concept, epoch), []).append(bytes(payload))
        return [
            Outgoing(
                concept=concept,
                epoch=epoch,
                message=Signed.from_bytes(payloads[0], RekeyMessage),
                enrolments=tuple(Signed.from_bytes(p, Enrolment) for p in payloads[1:]),
            )
            for (concept, epoch), payloads in out.items()
        ]

    def delivered(self, concept: str, epoch: int) -> None:
        """Forget the outbox of ``concept``'s epochs up to ``epoch``."""
        self._db.execute(
            "DELETE FROM lkh_outbox WHERE concept = ? AND epoch <= ?", (concept, epoch)
        )

    # -- internals -----------------------------------------------------------------------------

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)

    def _check_publisher(self, publisher: str) -> None:
        if publisher != self._publisher:
            raise UsageError(f"group of {publisher!r} in the store of {self._publisher!r}")

    def _epoch_of(self, concept: str) -> int | None:
        row = self._db.execute(
            "SELECT epoch FROM lkh_groups WHERE concept = ?", (concept,)
        ).fetchone()
        return None if row is None else int(row[0])

    @staticmethod
    def _node(row: NodeRow) -> tuple[int, bytes, str | None, int, int]:
        return (row.node_id, row.key, row.member, row.left, row.right)

    def _write_header(self, h: GroupHeader) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO lkh_groups VALUES (?, ?, ?, ?, ?)",
            (h.concept, h.epoch, h.root, h.next_id, h.lone_key),
        )
        self._tick()

    def _write_change(self, change: EpochChange) -> None:
        self._check_publisher(change.publisher)
        stored = self._epoch_of(change.concept)
        if (stored or 0) != change.base_epoch:
            raise UsageError(
                f"change of {change.concept!r} is from epoch {change.base_epoch}, "
                f"store holds {stored}"
            )
        self._write_header(change.header)
        for node_id in change.retired:
            self._db.execute(
                "DELETE FROM lkh_nodes WHERE concept = ? AND node_id = ?",
                (change.concept, node_id),
            )
            self._tick()
        for row in change.added:
            self._db.execute(
                "INSERT INTO lkh_nodes VALUES (?, ?, ?, ?, ?, ?)",
                (change.concept, *self._node(row)),
            )
            self._tick()

    def _put(self, concept: str, epoch: int, seq: int, payload: bytes) -> None:
        self._db.execute(
            "INSERT INTO lkh_outbox VALUES (?, ?, ?, ?)", (concept, epoch, seq, payload)
        )
        self._tick()


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` if the block raises."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self._db.execute("ROLLBACK" if exc_type is not None else "COMMIT")
