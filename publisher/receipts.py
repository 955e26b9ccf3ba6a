"""Who received which version of a document: the publisher's side of delivery receipts.

Theory of operation. Subscribers sign a receipt of every document they accept; the receipts
travel up to the publisher's root site, which keeps them for the publisher
(``disseminator.receipts``). Here the publisher

1. fetches them (:func:`fetch`: ``GetReceipts`` pages of at most the site's limit, each page
   stored before the next call acknowledges it, so the site deletes only what is stored here:
   a crash in between refetches, and a receipt stored twice is one row, by its content hash);
2. trusts none of them on the site's word: each is verified again (:func:`xdn.receipts.
   read_receipt`: Algorithm 2 under the carried certificates against the CA and the CRL) and
   must be a receipt of a publication signed under this publisher's own certificate;
3. keeps them in ``STATE/NAME/receipts.sqlite`` (:class:`ReceiptArchive`);
4. keeps the failure notices that come with them (a subscriber refused something of ours,
   :mod:`xdn.notices`: verified again, and naming this publisher) beside them;
5. reports per version of a document who received it (subscriber, member id, when, how many
   fragments, the sites on its path) and who has not (:func:`report`): the members the key
   service knows, with a lease in force now, in the group of a concept of that version. The
   concepts of each version are recorded by the key store when the version is published
   (:meth:`publisher.keystore.KeyStore.version_concepts`); group membership and leases are the
   key service's current ones, so a member who joined after a version was published is listed
   as not having received it (sites retain recent documents for joiners: such a member may
   still receive it, and then has a receipt); and who refused it, why (the reason and kind of
   its newest notice of that version), unless it has a receipt of it after all;
6. lists apart the notices that name no document version (:meth:`ReceiptArchive.
   other_refusals`: a key message, a checkpoint, an entitlement refused — who, kind, what,
   why, when), those about a key message only if its group's concept is one asked about.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from publisher.keystore import KeyStore
from publisher.leases import newest_leases
from publisher.lkh_store import LkhStore
from xdn import certs, identity, lease, provenance
from xdn.errors import NoticeError, PeerError, ReceiptError, UsageError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.notices import MAX_NOTICE_BYTES, Notice, is_notice, read_notice
from xdn.receipts import Receipt, read_receipt
from xdn.sqlitedb import open_db
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

__all__ = [
    "FetchResult",
    "Missing",
    "ReceiptArchive",
    "Received",
    "Refused",
    "VersionReport",
    "fetch",
    "key_service_state",
    "members_by_concept",
    "report",
    "version_sequences",
]

log = logging.getLogger(__name__)

#: The largest receipt chain the publisher reads.
MAX_RECEIPT_BYTES = 1024 * 1024

_SCHEMA = """
CREATE TABLE IF NOT EXISTS receipts (
    id TEXT PRIMARY KEY,
    document_id TEXT NOT NULL, version INTEGER,
    member TEXT NOT NULL, name TEXT NOT NULL,
    received_ms INTEGER NOT NULL, fragments INTEGER NOT NULL,
    sites TEXT NOT NULL, data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS receipts_by_document ON receipts (document_id, version);
CREATE TABLE IF NOT EXISTS refusals (
    id TEXT PRIMARY KEY,
    document_id TEXT, version INTEGER,
    member TEXT NOT NULL, name TEXT NOT NULL,
    refused_ms INTEGER NOT NULL, kind TEXT NOT NULL, reason TEXT NOT NULL,
    data BLOB NOT NULL, sequence INTEGER
);
CREATE INDEX IF NOT EXISTS refusals_by_document ON refusals (document_id, version);
CREATE INDEX IF NOT EXISTS refusals_by_sequence ON refusals (sequence) WHERE sequence > 0;
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Received:
    """One subscriber's verified receipt of a version."""

    name: str
    member: str
    received_ms: int
    fragments: int
    sites: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Refused:
    """One subscriber's verified failure notice about a version: it refused it, and why."""

    name: str
    member: str
    refused_ms: int
    kind: str
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class OtherRefusal:
    """A verified failure notice kept here that names no document version (a key message, a
    checkpoint, an entitlement, …): who refused what, why and when."""

    name: str
    member: str
    refused_ms: int
    kind: str
    reason: str
    what: str = ""  # for a key message: "rekey of Machine, epoch 4"
    concept: str | None = None  # the group a refused key message is of

    def to_json(self) -> dict[str, Any]:
        return {
            "subscriber": self.name, "member": self.member, "refused_at_ms": self.refused_ms,
            "refused_at": _iso(self.refused_ms), "kind": self.kind, "what": self.what,
            "reason": self.reason,
        }

    def line(self) -> str:
        what = f"{self.kind} ({self.what})" if self.what else self.kind
        when = _iso(self.refused_ms)
        return f"    {self.name:<12} {self.member}  at {when}  {what}: {self.reason}"


def other_lines(refusals: Iterable[OtherRefusal]) -> list[str]:
    """The report's section of the refusals that name no document version (none: no lines)."""
    shown = list(refusals)
    if not shown:
        return []
    return [f"other refusals ({len(shown)}, naming no document version):",
            *(r.line() for r in shown)]


@dataclass(frozen=True, slots=True, kw_only=True)
class Missing:
    """A member that should have received a version and has sent no receipt of it."""

    name: str
    member: str
    concepts: tuple[str, ...]  # the version's concepts whose group it is in
    site: str  # where its lease says it is registered
    lease_until_ms: int


@dataclass(frozen=True, slots=True, kw_only=True)
class VersionReport:
    """Who received one version of a document, and who has not.

    ``concepts`` is ``None`` for a version whose concepts were not recorded (published before
    this was kept): who has not received it is then unknown.
    """

    document_id: str
    version: int | None
    concepts: tuple[str, ...] | None
    received: tuple[Received, ...]
    missing: tuple[Missing, ...]
    refused: tuple[Refused, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "document": self.document_id,
            "version": self.version,
            "concepts": None if self.concepts is None else list(self.concepts),
            "received": [
                {
                    "subscriber": r.name, "member": r.member, "received_at_ms": r.received_ms,
                    "received_at": _iso(r.received_ms), "fragments": r.fragments,
                    "path": list(r.sites),
                }
                for r in self.received
            ],
            "refused": [
                {
                    "subscriber": r.name, "member": r.member, "refused_at_ms": r.refused_ms,
                    "refused_at": _iso(r.refused_ms), "kind": r.kind, "reason": r.reason,
                }
                for r in self.refused
            ],
            "not_received": None if self.concepts is None else [
                {
                    "subscriber": m.name, "member": m.member, "concepts": list(m.concepts),
                    "site": m.site, "lease_until": _iso(m.lease_until_ms),
                }
                for m in self.missing
            ],
        }

    def lines(self) -> list[str]:
        concepts = "concepts not recorded" if self.concepts is None else (
            "concepts " + ", ".join(self.concepts)
        )
        version = "?" if self.version is None else str(self.version)
        out = [f"{self.document_id} v{version} ({concepts}):"]
        out.append(f"  received ({len(self.received)}):")
        for r in self.received:
            out.append(
                f"    {r.name:<12} {r.member}  at {_iso(r.received_ms)}  {r.fragments} "
                f"fragments  via {' -> '.join(r.sites) or 'no site'}"
            )
        if self.refused:
            out.append(f"  refused ({len(self.refused)}):")
            for f in self.refused:
                out.append(
                    f"    {f.name:<12} {f.member}  at {_iso(f.refused_ms)}  refused: "
                    f"{f.reason} ({f.kind})"
                )
        if self.concepts is None:
            out.append("  not received: unknown (the version's concepts were not recorded)")
            return out
        out.append(f"  not received ({len(self.missing)}):")
        for m in self.missing:
            out.append(
                f"    {m.name:<12} {m.member}  in {', '.join(m.concepts)}; registered at "
                f"{m.site}, lease until {_iso(m.lease_until_ms)}"
            )
        return out


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


class ReceiptArchive:
    """The publisher's verified receipts (SQLite, ``receipts.sqlite`` in its state folder)."""

    def __init__(self, path: Path) -> None:
        self._db = open_db(path, _SCHEMA)

    def close(self) -> None:
        self._db.close()

    def store(self, receipts: Iterable[Receipt]) -> int:
        """Keep ``receipts`` (one transaction); return how many were new."""
        rows = [
            (r.id, r.document_id, r.version, r.member_id, r.subscriber.name, r.received_ms,
             r.fragments, json.dumps(r.sites), r.to_nquads())
            for r in receipts
        ]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO receipts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            return self._db.total_changes - before

    def of(self, document_id: str) -> dict[int | None, list[Received]]:
        """Version → the receipts kept of it, oldest first (one per member)."""
        out: dict[int | None, list[Received]] = {}
        seen: set[tuple[int | None, str]] = set()
        rows = self._db.execute(
            "SELECT version, member, name, received_ms, fragments, sites FROM receipts "
            "WHERE document_id = ? ORDER BY received_ms, member", (document_id,)
        )
        for version, member, name, received_ms, fragments, sites in rows:
            if (version, member) in seen:
                continue
            seen.add((version, member))
            out.setdefault(version, []).append(
                Received(
                    name=name, member=member, received_ms=int(received_ms),
                    fragments=int(fragments), sites=tuple(json.loads(sites)),
                )
            )
        return out


    def store_refusals(self, notices: Iterable[Notice]) -> int:
        """Keep failure notices (one transaction); return how many were new."""
        rows = [
            (n.id, n.facts.document_id, n.facts.version, n.member_id, n.signer.name,
             n.signed_ms, n.facts.kind, n.facts.reason, n.to_nquads(), n.facts.sequence)
            for n in notices
        ]
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            before = self._db.total_changes
            self._db.executemany(
                "INSERT OR IGNORE INTO refusals VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows
            )
            return self._db.total_changes - before

    def refusals_of(
        self, document_id: str, sequences: Mapping[int, int] | None = None
    ) -> dict[int | None, list[Refused]]:
        """Version → the failure notices kept of it, newest first (one per member): those
        naming the document, and the gaps naming the sequence number of one of its versions
        (``sequences``: sequence number → version, :meth:`KeyStore.version_sequences`)."""
        sequences = sequences or {}
        out: dict[int | None, list[Refused]] = {}
        seen: set[tuple[int | None, str]] = set()
        rows = [
            (version, *rest) for sequence, version, *rest in self._db.execute(
                "SELECT sequence, version, member, name, refused_ms, kind, reason FROM refusals "
                "WHERE document_id = ? ORDER BY refused_ms DESC, member", (document_id,)
            )
        ]
        if sequences:
            marks = ", ".join("?" * len(sequences))
            rows += [
                (sequences[int(sequence)], *rest) for sequence, *rest in self._db.execute(
                    "SELECT sequence, member, name, refused_ms, kind, reason FROM refusals "
                    f"WHERE document_id IS NULL AND sequence IN ({marks})", list(sequences)
                )
            ]
            rows.sort(key=lambda row: (-int(row[3]), row[1]))
        for version, member, name, refused_ms, kind, reason in rows:
            if (version, member) in seen:
                continue
            seen.add((version, member))
            out.setdefault(version, []).append(
                Refused(name=name, member=member, refused_ms=int(refused_ms), kind=kind,
                        reason=reason)
            )
        return out


    def other_refusals(self, concepts: frozenset[str] | None = None) -> list[OtherRefusal]:
        """The failure notices kept that name no document version — neither a document nor a
        gap's sequence number — newest first.

        Args:
            concepts: when given, a refused key message is kept only if its group's concept is
                one of these (the concepts of the document, or version, asked about); the
                other kinds name no concept and are always kept.
        """
        out = []
        for member, name, refused_ms, kind, reason, data in self._db.execute(
            "SELECT member, name, refused_ms, kind, reason, data FROM refusals "
            "WHERE document_id IS NULL AND (sequence IS NULL OR sequence <= 0) "
            "ORDER BY refused_ms DESC, member"
        ):
            facts = _facts(bytes(data))
            concept = None if facts is None else facts.concept
            if concepts is not None and concept is not None and concept not in concepts:
                continue
            what = ""
            if facts is not None and facts.key_message:
                what = f"{facts.key_message} of {concept or '?'}" + (
                    "" if facts.epoch is None else f", epoch {facts.epoch}"
                )
            out.append(OtherRefusal(
                name=name, member=member, refused_ms=int(refused_ms), kind=kind,
                reason=reason, what=what, concept=concept,
            ))
        return out


def _facts(data: bytes) -> provenance.RefusalFacts | None:
    """What a kept notice says (it was verified when it was kept; ``None``: unreadable)."""
    try:
        return provenance.Message.from_nquads(data, max_bytes=MAX_NOTICE_BYTES).refusal
    except (PeerError, ValueError) as exc:
        log.warning("a kept failure notice does not read back: %s", exc)
        return None


@dataclass(slots=True)
class FetchResult:
    """What one fetch brought."""

    site: str = ""
    fetched: int = 0
    new: int = 0
    refused: list[str] = field(default_factory=list)
    notices: int = 0  # failure notices among those fetched, new ones


def check_receipt(
    data: bytes, verifier: provenance.ChainVerifier, *, publisher_pem: bytes, at: datetime
) -> Receipt:
    """A receipt the site handed over, verified and checked to be of our own publication.

    Raises:
        ReceiptError, SignatureError, ProvenanceError: it is not.
    """
    receipt = read_receipt(data, verifier, at=at, max_bytes=MAX_RECEIPT_BYTES)
    ours = certs.credential_from_pem(publisher_pem)
    if receipt.publisher.fingerprint != ours.fingerprint:
        raise ReceiptError(
            f"a receipt of {receipt.document_id!r} published by {receipt.publisher.name!r}, "
            "not under our certificate"
        )
    return receipt


def check_notice(
    data: bytes, verifier: provenance.ChainVerifier, *, publisher: str, at: datetime
) -> Notice:
    """A subscriber's failure notice the site handed over, verified and checked to be about
    something of ours (it names us as the publisher).

    Raises:
        NoticeError, SignatureError, ProvenanceError: it is not.
    """
    notice = read_notice(data, verifier, at=at, max_bytes=MAX_NOTICE_BYTES)
    if notice.facts.publisher != publisher:
        raise NoticeError(
            f"a failure notice of {notice.signer.name!r} about publisher "
            f"{notice.facts.publisher!r}, not {publisher!r}"
        )
    return notice


async def fetch(
    *,
    publisher: str,
    tls: TlsFiles,
    connect: str,
    archive: ReceiptArchive,
    verifier: provenance.ChainVerifier,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    progress: Callable[[str], None] = lambda _: None,
    page: int = 256,
) -> FetchResult:
    """Fetch the receipts the root site at ``connect`` keeps for ``publisher``; verify and
    store each page before the next call acknowledges it.

    Raises:
        UsageError: the site cannot be reached or refuses (saying what to do).
    """
    result = FetchResult()
    after = 0
    async with grpc.aio.secure_channel(
        connect, channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        stub = pb_grpc.DisseminatorStub(channel)
        while True:
            request = pb.ReceiptsRequest(publisher=publisher, after=after, limit=page)
            try:
                reply = await stub.GetReceipts(request, timeout=30)
            except grpc.aio.AioRpcError as exc:
                raise _fetch_error(exc, connect) from None
            result.site = reply.site
            kept, notices = [], []
            for stored in reply.receipts:
                try:
                    if is_notice(stored.receipt):  # a subscriber's refusal, kept beside them
                        notices.append(
                            check_notice(
                                stored.receipt, verifier, publisher=publisher, at=clock()
                            )
                        )
                    else:
                        kept.append(
                            check_receipt(
                                stored.receipt, verifier, publisher_pem=tls.cert_pem,
                                at=clock(),
                            )
                        )
                except PeerError as exc:
                    log.warning("receipt %d from site %s refused: %s", stored.id, reply.site, exc)
                    result.refused.append(str(exc))
                after = max(after, stored.id)
            result.new += archive.store(kept)
            result.notices += archive.store_refusals(notices)
            result.fetched += len(reply.receipts)
            if reply.receipts:
                progress(f"fetched {result.fetched} receipts from site {reply.site}…")
            if not reply.receipts:  # that call acknowledged everything stored
                return result


def _fetch_error(exc: grpc.aio.AioRpcError, connect: str) -> UsageError:
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    advice = {
        "UNAVAILABLE": "check that the root site runs and that --connect names it (receipts "
        "fetched before are shown with --no-fetch)",
        "FAILED_PRECONDITION": "receipts are kept at the publisher's root site: --connect to it",
        "UNAUTHENTICATED": "check --name and --certs (the certificate must be this "
        "publisher's, from the network's CA, unrevoked)",
        "PERMISSION_DENIED": "check --name: only a publisher may fetch its own receipts",
        "UNIMPLEMENTED": "the site runs an xdn without receipts: upgrade it",
    }.get(code, "retry later")
    return UsageError(
        f"fetching receipts from {connect} failed ({code}): {exc.details()}; {advice}"
    )


def key_service_state(
    keys: Path, publisher: str, document_id: str
) -> tuple[dict[int, frozenset[str]], dict[str, frozenset[str]], dict[str, lease.Lease]]:
    """From the key service's state file: the concepts of each version of ``document_id``,
    the members of each group (by concept) and each member's newest lease."""
    store = KeyStore(keys, publisher=publisher)
    lkh = LkhStore(keys, publisher=publisher)
    try:
        versions = store.version_concepts(document_id)
        groups = {concept: group.members() for concept, group in lkh.load_all().items()}
    finally:
        lkh.close()
        store.close()
    return versions, groups, newest_leases(keys)


def version_sequences(keys: Path, publisher: str, document_id: str) -> dict[int, int]:
    """From the key service's state file: sequence number → version of ``document_id``."""
    store = KeyStore(keys, publisher=publisher)
    try:
        return store.version_sequences(document_id)
    finally:
        store.close()


def members_by_concept(
    groups: Mapping[str, frozenset[str]],
    leases: Callable[[str], lease.Lease | None],
    *,
    at_ms: int,
) -> dict[str, tuple[frozenset[str], lease.Lease]]:
    """Member → (concepts whose group it is in, its lease) for members whose lease holds."""
    out: dict[str, tuple[frozenset[str], lease.Lease]] = {}
    concepts_of: dict[str, set[str]] = {}
    for concept, members in groups.items():
        for member in members:
            concepts_of.setdefault(member, set()).add(concept)
    for member, concepts in sorted(concepts_of.items()):
        held = leases(member)
        if held is not None and held.active_at(at_ms):
            out[member] = (frozenset(concepts), held)
    return out


def report(
    document_id: str,
    *,
    versions: Mapping[int, frozenset[str]],
    received: Mapping[int | None, list[Received]],
    members: Mapping[str, tuple[frozenset[str], lease.Lease]],
    only: int | None = None,
    refused: Mapping[int | None, list[Refused]] | None = None,
) -> list[VersionReport]:
    """Per version of ``document_id`` (or only version ``only``), who received it, who
    refused it (and has no receipt of it) and which other members (of a group of one of its
    concepts, lease in force) have not received it."""
    refused = refused or {}
    numbers = sorted(
        set(versions) | {v for v in (*received, *refused) if v is not None}
    )
    if None in received or None in refused:
        numbers.append(-1)  # receipts whose version could not be read
    out = []
    for number in numbers:
        version = None if number == -1 else number
        if only is not None and version != only:
            continue
        got = tuple(received.get(version, []))
        have = {r.member for r in got}
        declined = tuple(f for f in refused.get(version, []) if f.member not in have)
        concepts = versions.get(number) if version is not None else None
        missing: tuple[Missing, ...] = ()
        if concepts is not None:
            have |= {f.member for f in declined}
            missing = tuple(
                Missing(
                    name=identity.person(member), member=member,
                    concepts=tuple(sorted(groups & concepts)), site=held.site,
                    lease_until_ms=held.expires_at,
                )
                for member, (groups, held) in sorted(members.items())
                if groups & concepts and member not in have
            )
        out.append(
            VersionReport(
                document_id=document_id, version=version,
                concepts=None if concepts is None else tuple(sorted(concepts)),
                received=got, missing=missing, refused=declined,
            )
        )
    return out
