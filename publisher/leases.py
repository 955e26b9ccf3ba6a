"""The key service's memory of membership leases: the newest statement of each member.

Theory of operation. The root site's ``GetMembership`` reply lists members, each with the lease
its subscriber signed (:mod:`xdn.lease`). The key service keeps a member only while its lease
holds: authentic (the member's own certificate, from the CA, unrevoked, matching the entry's
member id), unexpired, not a leave. A site can replay an old lease; so :class:`LeaseBook`
remembers, durably, the newest statement seen per member (in the key service's SQLite file)
and judges by that one (:func:`xdn.lease.newest`): after a signed leave, or a renewal, an
older lease counts for nothing. The newest lease's concepts, when it names any, bound the
member's groups (a subscriber that asked for some concepts holds only their blocks' keys).

The bound this gives: a dishonest site (the root included) can keep a departed subscriber in
the groups for at most the rest of her last lease, never longer (``docs/group-keys.md``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from xdn import lease
from xdn.errors import PeerError
from xdn.ontology import Ontology
from xdn.sqlitedb import open_db

__all__ = ["LeaseBook", "newest_leases"]

log = logging.getLogger(__name__)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS member_leases (
    member TEXT PRIMARY KEY,
    statement BLOB NOT NULL
);
"""


class LeaseBook:
    """The newest lease statement seen per member, kept in ``path`` (SQLite)."""

    def __init__(self, path: Path, *, ca_pem: bytes, ontology: Ontology) -> None:
        self._ca_pem = ca_pem
        self._ontology = ontology
        self._db = open_db(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def held(self, member: str) -> lease.Lease | None:
        """The newest statement of ``member`` seen so far."""
        row = self._db.execute(
            "SELECT statement FROM member_leases WHERE member = ?", (member,)
        ).fetchone()
        return None if row is None else lease.Lease.from_bytes(bytes(row[0]))

    def _remember(self, statement: lease.Lease) -> lease.Lease:
        held = self.held(statement.member)
        chosen = lease.newest(held, statement)
        if chosen != held:
            with self._db:
                self._db.execute("BEGIN")
                self._db.execute(
                    "INSERT OR REPLACE INTO member_leases VALUES (?, ?)",
                    (chosen.member, chosen.to_bytes()),
                )
        return chosen

    def bound(
        self,
        member: str,
        certificate_pem: bytes,
        data: bytes,
        *,
        at: datetime,
        revoked: frozenset[int] = frozenset(),
    ) -> frozenset[str] | None:
        """Whether ``member`` is a member at ``at`` by its lease, and within which concepts.

        Args:
            member: the member id the site's entry names.
            certificate_pem: the certificate the entry carries.
            data: the signed lease the entry carries (empty: none).

        Returns:
            ``None``: not a member now (no lease, a forged or lapsed one, a leave); otherwise
            the concepts its newest lease allows, or an empty set when it names none (every
            concept its grants allow).
        """
        if not data:
            log.info("member %s has no lease: left out", member)
            return None
        try:
            offered = lease.open_lease(
                data, certificate_pem=certificate_pem, ca_pem=self._ca_pem, at=at,
                revoked=revoked, member=member,
            )
        except PeerError as exc:
            log.warning("member %s left out: %s", member, exc)
            return None
        current = self._remember(offered)
        if not current.active_at(lease.millis(at)):
            log.info("member %s left out: its lease %s", member,
                     "is a leave" if current.leave else "has lapsed")
            return None
        allowed: frozenset[str] = frozenset()
        for concept in current.concepts:
            if concept in self._ontology.concepts:
                allowed |= self._ontology.block(concept)
        if current.concepts and not allowed:
            return None
        return allowed


def newest_leases(path: Path) -> dict[str, lease.Lease]:
    """Member → the newest statement the lease book in ``path`` kept (nothing checked again:
    each was authentic when kept)."""
    db = open_db(path, _SCHEMA)
    try:
        rows = db.execute("SELECT member, statement FROM member_leases").fetchall()
    finally:
        db.close()
    return {member: lease.Lease.from_bytes(bytes(statement)) for member, statement in rows}
