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
* a publisher's signed entitlement (what its policy grants our certificate whatever the sites
  observe) is kept once verified — for our certificate, newest policy version first —
  (:meth:`Completeness.entitled`); a site reporting fewer grants, or delivering a document
  without an entitled concept it holds, is flagged as a gap (:meth:`Completeness.flag`);
* :meth:`Completeness.unvouched` names the publishers for which the subscriber cannot vouch:
  no checkpoint yet, or the newest older than the bound; no current entitlement.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path

from xdn import certs
from xdn.codec import SignedManifest
from xdn.completeness import Gap, GapTracker, SignedCheckpoint, SignedEntitlement
from xdn.errors import PeerError, ProtocolError
from xdn.sqlitedb import open_db
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import checkpoint_from_pb, entitlement_from_pb, manifest_from_pb

__all__ = ["Completeness"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completeness (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    publisher TEXT PRIMARY KEY, issued_at_ms INTEGER NOT NULL, policy_version INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS entitlements (
    publisher TEXT PRIMARY KEY, policy_version INTEGER NOT NULL, issued_at_ms INTEGER NOT NULL,
    valid_until_ms INTEGER NOT NULL, concepts TEXT NOT NULL
);
"""


def _signed_by_publisher(
    signed: SignedManifest | SignedCheckpoint | SignedEntitlement,
    publisher: str,
    certificate: bytes,
    *,
    ca_pem: bytes,
    at: datetime,
    what: str,
) -> None:
    """Check that ``publisher`` signed ``signed``, with ``certificate``.

    Raises:
        CertificateError: the certificate is not a valid publisher certificate of the CA.
        ProtocolError: it is another publisher's.
        SignatureError: the signature does not verify.
    """
    credential = certs.verify_certificate(certificate, ca_pem, at=at, role="publisher")
    if credential.name != publisher:
        raise ProtocolError(
            f"{what} names publisher {publisher!r} but is signed by {credential.name!r}"
        )
    signed.verify(certs.public_key_of(certificate))


class Completeness:
    """One subscriber's gap tracking, durable, with what it asks and reports."""

    def __init__(self, path: Path, inbox_dir: Path, *, name: str) -> None:
        self._name = name
        self._inbox = inbox_dir
        self._db = open_db(path, _SCHEMA)
        row = self._db.execute("SELECT value FROM completeness WHERE key = 'tracker'").fetchone()
        self.tracker = GapTracker() if row is None else GapTracker.from_json(row[0])
        self._asked: set[tuple[str, int]] = set()  # asked on the current stream
        self.detected = 0  # documents found missing (asked for) in this run
        self.reported: list[Gap] = []  # gaps the site could not fill, in this run
        self.flagged = 0  # grants or concepts withheld against our entitlement, in this run
        self._flags: set[tuple[str, ...]] = set()

    def close(self) -> None:
        self._db.close()

    def _record(self, record: Mapping[str, object]) -> None:
        """Append one finding to ``gaps.jsonl`` in the inbox."""
        with open(self._inbox / "gaps.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(record, sort_keys=True) + "\n")

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

    def count(self, manifest: pb.Manifest, *, ca_pem: bytes, at: datetime, state: bool) -> None:
        """Count a received document in its publisher's sequence if its manifest verifies (a
        forged one counts for nothing: it is refused when opened)."""
        if not manifest.sequence:
            return
        try:
            signed = manifest_from_pb(manifest)
            _signed_by_publisher(
                signed, manifest.publisher, manifest.publisher_certificate, ca_pem=ca_pem, at=at,
                what="manifest",
            )
        except PeerError:
            return
        self.on_manifest(signed, state=state)

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
        _signed_by_publisher(
            signed, signed.checkpoint.publisher, message.publisher_certificate, ca_pem=ca_pem,
            at=at, what="checkpoint",
        )
        c = signed.checkpoint
        self._db.execute(
            "INSERT INTO checkpoints (publisher, issued_at_ms, policy_version) VALUES (?, ?, ?) "
            "ON CONFLICT (publisher) DO UPDATE SET "
            "issued_at_ms = MAX(issued_at_ms, excluded.issued_at_ms), "
            "policy_version = MAX(policy_version, excluded.policy_version)",
            (c.publisher, c.issued_at_ms, c.policy_version),
        )
        self._found(self.tracker.checkpoint(c.publisher, c.latest))

    def on_entitlement(
        self, message: pb.Entitlement, *, ca_pem: bytes, at: datetime, me: certs.Credential
    ) -> bool:
        """Verify our entitlement from a publisher and keep it if it is the newest; return
        whether it was kept.

        Raises:
            PeerError: malformed, not signed by its publisher, or not for our certificate.
        """
        signed = entitlement_from_pb(message)
        e = signed.entitlement
        _signed_by_publisher(
            signed, e.publisher, message.publisher_certificate, ca_pem=ca_pem, at=at,
            what="entitlement",
        )
        if (e.subscriber, e.certificate) != (me.member_id, me.fingerprint):
            raise ProtocolError(f"entitlement for {e.subscriber!r} (another certificate)")
        stored = self._db.execute(
            "SELECT policy_version, issued_at_ms FROM entitlements WHERE publisher = ?",
            (e.publisher,),
        ).fetchone()
        if stored is not None and tuple(stored) >= (e.policy_version, e.issued_at_ms):
            return False
        self._db.execute(
            "INSERT OR REPLACE INTO entitlements VALUES (?, ?, ?, ?, ?)",
            (e.publisher, e.policy_version, e.issued_at_ms, e.valid_until_ms,
             json.dumps(sorted(e.concepts))),
        )
        return True

    def entitled(
        self, publisher: str, now_ms: int, requested: Sequence[str] = ()
    ) -> frozenset[str]:
        """What ``publisher``'s signed entitlement grants us whatever the sites observe, of the
        concepts we ``requested`` (none: all); empty when we hold none, or it expired."""
        row = self._db.execute(
            "SELECT valid_until_ms, concepts FROM entitlements WHERE publisher = ?", (publisher,)
        ).fetchone()
        if row is None or now_ms > row[0]:
            return frozenset()
        entitled = frozenset(json.loads(row[1]))
        return entitled & frozenset(requested) if requested else entitled

    def check_grants(
        self, grants: Mapping[str, Sequence[str]], *, requested: Sequence[str], now_ms: int
    ) -> None:
        """Follow what the site grants us (publisher → concepts) and what our entitlements
        grant; flag what the site leaves out."""
        followed = {}
        for publisher in sorted(set(grants) | self.entitled_publishers()):
            entitled = self.entitled(publisher, now_ms, requested)
            site = set(grants.get(publisher, ()))
            if entitled - site:
                self.flag(publisher, sorted(entitled - site))
            followed[publisher] = sorted(site | entitled)
        self.follow(followed)

    def withheld(
        self, manifest: pb.Manifest, delivered: set[str], *, requested: Sequence[str],
        now_ms: int,
    ) -> list[str]:
        """Concepts of an opened document our entitlement grants that did not arrive (flagged)."""
        in_document = {r.concept for r in manifest.ranges}
        entitled = self.entitled(manifest.publisher, now_ms, requested)
        withheld = sorted(entitled & in_document - delivered)
        if withheld:
            self.flag(
                manifest.publisher, withheld,
                document=f"{manifest.document_id} v{manifest.version}",
            )
        return withheld

    def entitled_publishers(self) -> frozenset[str]:
        """Publishers we hold an entitlement from."""
        return frozenset(p for (p,) in self._db.execute("SELECT publisher FROM entitlements"))

    def flag(self, publisher: str, concepts: Sequence[str], *, document: str = "") -> None:
        """A site withheld ``concepts`` the publisher's signed entitlement grants us: in its
        grants (no ``document``) or from a document; each finding is reported once."""
        key = (publisher, document, *sorted(concepts))
        if key in self._flags:
            return
        self._flags.add(key)
        self.flagged += 1
        where = f"document {document}" if document else "the grants the site reports"
        record = {
            "publisher": publisher,
            "document": document or None,
            "concepts": sorted(concepts),
            "reason": f"withheld from {where}: granted by the publisher's signed entitlement",
        }
        self._record(record)
        print(
            f"{self._name}: {publisher}'s signed policy grants us {', '.join(sorted(concepts))}"
            f" but {where} withholds it",
            flush=True,
        )

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
            self._record(record)
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

    def rejoin(self) -> None:
        """We left (``xdn unsubscribe``) and subscribe again: what our publishers published
        while we were away is not owed (only our own recorded leave says so, never a site)."""
        self.tracker.rejoin()
        self._save()

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
        newest = {
            p: (issued, version)
            for p, issued, version in self._db.execute(
                "SELECT publisher, issued_at_ms, policy_version FROM checkpoints"
            )
        }
        entitlements = {
            p: version
            for p, version, until in self._db.execute(
                "SELECT publisher, policy_version, valid_until_ms FROM entitlements"
            )
            if now_ms <= until
        }
        out = {}
        for publisher in sorted(self.tracker.publishers()):
            if not self.tracker.following(publisher):
                continue
            issued, version = newest.get(publisher, (None, 0))
            held = entitlements.get(publisher)
            if issued is None:
                out[publisher] = "no signed checkpoint received"
            elif now_ms - issued > max_age_ms:
                out[publisher] = (
                    f"newest signed checkpoint is {(now_ms - issued) / 1000:.0f}s old "
                    f"(bound {max_age_ms / 1000:.0f}s)"
                )
            elif held is None:
                out[publisher] = "no current signed entitlement received"
            elif held < version:
                out[publisher] = f"signed entitlement is for policy v{held}, in force: v{version}"
        return out
