"""A subscriber's check that nothing of its publishers' signed sequences was withheld.

Theory of operation. The pure :class:`xdn.completeness.GapTracker` follows, per (publisher,
concept) granted, the chain of back pointers in the signed manifests and the chain heads named
by the publishers' signed checkpoints. This module is its edge in the subscriber:

* it keeps the tracker's state and each publisher's newest checkpoint time durably (SQLite in
  the subscriber's state directory), saved after every change, so a restart resumes the check;
* a manifest counts only once verified (the caller checks it) and a checkpoint only once its
  certificate (CA, role publisher, name) and signature verify here;
* what is missing is asked of the site once per stream (:meth:`Completeness.requests`, sent as
  ``Missing`` messages; the site replays what it retains); what the site says it cannot replay
  is a gap: printed, appended to ``gaps.jsonl`` in the inbox and counted;
* :meth:`Completeness.unvouched` names the publishers for which the subscriber cannot vouch
  that nothing newer was withheld: no checkpoint yet, or the newest older than the bound.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from xdn import certs
from xdn.codec import SignedManifest
from xdn.completeness import Gap, GapTracker
from xdn.errors import ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import checkpoint_from_pb

__all__ = ["Completeness"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completeness (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    publisher TEXT PRIMARY KEY, issued_at_ms INTEGER NOT NULL
);
"""


class Completeness:
    """One subscriber's gap tracking, durable, with what it asks and reports."""

    def __init__(self, path: Path, inbox_dir: Path, *, name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._name = name
        self._inbox = inbox_dir
        self._db = sqlite3.connect(path, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)
        row = self._db.execute("SELECT value FROM completeness WHERE key = 'tracker'").fetchone()
        self.tracker = GapTracker() if row is None else GapTracker.from_json(row[0])
        self._asked: set[tuple[str, int]] = set()  # asked on the current stream
        self.detected = 0  # documents found missing (asked for) in this run
        self.reported: list[Gap] = []  # gaps the site could not fill, in this run

    def close(self) -> None:
        self._db.close()

    def _save(self) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO completeness (key, value) VALUES ('tracker', ?)",
            (self.tracker.to_json(),),
        )

    def follow(self, grants: Mapping[str, Sequence[str]]) -> None:
        """Follow exactly the concepts granted (publisher → concepts)."""
        for publisher in self.tracker.publishers() | set(grants):
            self.tracker.follow(publisher, grants.get(publisher, ()))
        self._save()

    def on_manifest(self, signed: SignedManifest, *, state: bool) -> None:
        """A verified manifest arrived (``state``: a document from before we subscribed)."""
        m = signed.manifest
        previous = {r.concept: r.previous for r in m.ranges}
        gaps = self.tracker.receive(m.publisher, m.sequence, previous, chain=not state)
        self._found(gaps)

    def on_checkpoint(self, message: pb.Checkpoint, *, ca_pem: bytes, at: datetime) -> None:
        """Verify a relayed checkpoint, then check the chains against it.

        Raises:
            PeerError: the checkpoint is malformed, its certificate or signature bad.
        """
        signed = checkpoint_from_pb(message)
        publisher = certs.verify_certificate(
            message.publisher_certificate, ca_pem, at=at, role="publisher"
        )
        if publisher.name != signed.checkpoint.publisher:
            raise ProtocolError(
                f"checkpoint names publisher {signed.checkpoint.publisher!r} "
                f"but is signed by {publisher.name!r}"
            )
        signed.verify(certs.public_key_of(message.publisher_certificate))
        c = signed.checkpoint
        self._db.execute(
            "INSERT INTO checkpoints (publisher, issued_at_ms) VALUES (?, ?) ON CONFLICT "
            "(publisher) DO UPDATE SET issued_at_ms = MAX(issued_at_ms, excluded.issued_at_ms)",
            (c.publisher, c.issued_at_ms),
        )
        self._found(self.tracker.checkpoint(c.publisher, c.latest))

    def on_unavailable(self, message: pb.Missing) -> list[Gap]:
        """The site cannot replay these: report the gaps that stay open."""
        gaps = self.tracker.unavailable(message.publisher, message.sequences)
        self._save()
        for sequence in sorted({g.sequence for g in gaps}):
            concepts = sorted(g.concept for g in gaps if g.sequence == sequence)
            record = {
                "publisher": message.publisher,
                "sequence": sequence,
                "concepts": concepts,
                "reason": "withheld: the site did not deliver it and cannot replay it",
            }
            with open(self._inbox / "gaps.jsonl", "a", encoding="utf-8") as out:
                out.write(json.dumps(record, sort_keys=True) + "\n")
            print(
                f"{self._name}: gap: document #{sequence} of {message.publisher} "
                f"({', '.join(concepts)}) was withheld and the site cannot replay it",
                flush=True,
            )
        self.reported += gaps
        return gaps

    def _found(self, gaps: list[Gap]) -> None:
        self._save()
        for sequence, publisher in sorted({(g.sequence, g.publisher) for g in gaps}):
            self.detected += 1
            log.warning("document #%d of %s is missing; asking the site", sequence, publisher)
            print(
                f"{self._name}: missing document #{sequence} of {publisher}; asking the site",
                flush=True,
            )

    def new_stream(self) -> None:
        """A new stream: everything still missing is asked again."""
        self._asked.clear()

    def requests(self) -> list[pb.Missing]:
        """What to ask the site for now (each missing document once per stream)."""
        out = []
        for publisher, sequences in self.tracker.missing().items():
            fresh = [s for s in sequences if (publisher, s) not in self._asked]
            if fresh:
                self._asked.update((publisher, s) for s in fresh)
                out.append(pb.Missing(publisher=publisher, sequences=fresh))
        return out

    def unvouched(self, now_ms: int, max_age_ms: int) -> dict[str, str]:
        """Publisher → why we cannot vouch that none of its newest documents was withheld."""
        newest = dict(self._db.execute("SELECT publisher, issued_at_ms FROM checkpoints"))
        out = {}
        for publisher in sorted(self.tracker.publishers()):
            if not self.tracker.following(publisher):
                continue
            issued = newest.get(publisher)
            if issued is None:
                out[publisher] = "no signed checkpoint received"
            elif now_ms - issued > max_age_ms:
                out[publisher] = (
                    f"newest signed checkpoint is {(now_ms - issued) / 1000:.0f}s old "
                    f"(bound {max_age_ms / 1000:.0f}s)"
                )
        return out
