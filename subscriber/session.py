"""What a subscriber does with each delivery: open keys, verify and decrypt documents, store.

Theory of operation. Deliveries arrive in order (:mod:`subscriber.client` runs the stream):

* a key message (rekey, enrolment, document-key grant) is first authenticated: the publisher
  certificate it carries against the CA (role publisher, the message's publisher), then the
  key service's signature over the whole message (:func:`xdn.lkh.verify_key_message`). One
  that fails is refused — recorded in ``refused.jsonl``, raised as a PeerError — and leaves
  the keyring as it was; so a site can drop a key message but cannot make us drop a group
  (only a verified rekey we cannot follow removes us) or adopt a path the publisher never sent;
* a verified key message is opened with the subscriber's private key (HPKE) and kept in the
  keyring;
* a dissemination is checked end to end: the publisher certificate against the CA and the CRL
  in force, then the codec verifies the manifest signature, every inclusion proof and every
  GCM tag before the view is rebuilt. Anything that fails is refused — recorded with the
  reason, never written as a view — and the stream goes on;
* a dissemination whose keys have not arrived yet is checked as far as it can be without them
  and held (durably, capped per publisher, :mod:`subscriber.holding`); a key message opens the
  documents held for its group. A forged one is refused, never held;
* the CRL the site relays (or the operator's ``--crl``) is kept if it is the CA's and newer
  than the one in force (:mod:`subscriber.revocation`); while it is stale past its grace, new
  documents are held until a fresh one arrives, and a newly revoked publisher's held documents
  are dropped;
* every refusal — a document, a forged or revoked publisher's one, a held one dropped past the
  cap, a bad or older CRL, a key message — is printed, recorded in ``refused.jsonl``,
  counted in the :class:`SubscriptionReport` (:meth:`Session.refuse`) and signed as a failure
  notice in the provenance log, so that it reaches the audit (:mod:`subscriber.notices`), and
  queued for the site, which passes it on to the publisher (:mod:`subscriber.outbox`);
* a rekey more than one epoch ahead (we missed one) makes us ask the site for a path refresh
  of that group, repeated on every new stream until the key service's enrolment arrives.

State at subscribe time: a new subscriber may ask its site for the retained recent documents
(``retained``). Their keys come as document-key grants with the publisher's enrolment. The
site holds only the concepts that were flowing to it, so for documents issued before the
subscription began each concept that arrived must be whole, and concepts granted but absent are
recorded as ``missing``; for every later document, every granted concept must arrive whole.

Each accepted document gets a signed receipt envelope (the RECEIVED stage), appended to the
subscriber's provenance log and sent back with the acknowledgement.

Completeness (:mod:`subscriber.gaps`): every document whose manifest verifies counts in its
publisher's signed sequence, and the publisher's signed checkpoints name each concept's newest
document; a document of a granted concept that never came is asked of the site and, if it
cannot replay it, reported as a gap. What we are granted is not only the site's word: each
publisher's signed entitlement names what its policy grants our certificate whatever the sites
observe; those concepts are followed and must arrive whole too, and a site that reports fewer
grants, or delivers a document without one of them, is flagged.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import cast

from subscriber import export
from subscriber.gaps import Completeness
from subscriber.holding import Holding, vouch
from subscriber.messages import accepted_line
from subscriber.notices import sign_notice
from subscriber.outbox import NoticeOutbox
from subscriber.policy_notices import POLICY_NOTICES, read_notice, shown
from subscriber.retention import Retention
from subscriber.revocation import (
    DEFAULT_GRACE,
    Crl,
    RevokedError,
    check_publisher,
    choose,
    read_crl,
    stale_reason,
)
from subscriber.spool import Spool, SpooledDissemination
from subscriber.store import CRL_WAIT, Held, Inbox, Keyring
from xdn import certs, crypto, lease, provenance
from xdn.codec import HeldFragment, View, decode, decode_stored
from xdn.errors import CertificateError, DecryptError, PeerError, ProtocolError
from xdn.grpc_tls import TlsFiles
from xdn.lkh import EpochGapError, MemberKeys, open_document_keys, verify_key_message
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import (
    delivery_from_pb,
    document_keys_from_pb,
    enrolment_from_pb,
    leaf_ranges,
    rekey_from_pb,
)

__all__ = [
    "Session",
    "SubscriberSetup",
    "SubscriptionReport",
    "open_dissemination",
    "open_stored",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberSetup:
    """Everything one subscriber needs."""

    name: str
    tls: TlsFiles
    connect: str
    out_dir: Path
    state_dir: Path
    provenance_log: Path
    concepts: tuple[str, ...] = ()
    max_documents: int | None = None
    retained: bool = False  # ask for the retained recent documents when first registering
    rejoin: bool = False  # subscribe again after an `xdn unsubscribe` recorded in the state
    heartbeat_s: float = 5.0
    max_held_documents: int = 256  # per publisher: documents held until their keys arrive
    max_held_bytes: int = 64 * 1024 * 1024  # per publisher, likewise
    local_crl: bytes | None = None  # a CRL given by the operator (PEM); the newer one is used
    crl_grace: timedelta = DEFAULT_GRACE  # how long past its nextUpdate a CRL still counts
    lease_s: float = 3600.0  # membership lease period; renewed at a third of it
    max_document_bytes: int = 1024 * 1024 * 1024  # one delivery sent in parts, all together
    # Past this age of a publisher's newest signed checkpoint, we cannot vouch that none of its
    # newest documents was withheld.
    checkpoint_max_age_s: float = 3600.0
    # What the keyring keeps of accepted documents and old keys (subscriber.retention).
    retention: Retention = field(default_factory=Retention)

    def __post_init__(self) -> None:
        if self.max_held_documents < 1 or self.max_held_bytes < 1:
            raise ValueError("the held store's caps must be positive")
        if self.crl_grace < timedelta(0):
            raise ValueError("the CRL grace must not be negative")


@dataclass(slots=True)
class SubscriptionReport:
    """What a subscription run saw."""

    served_by: str = ""
    grants: dict[str, list[str]] = field(default_factory=dict)
    accepted: int = 0
    refused: int = 0
    keys: int = 0
    held: int = 0  # documents waiting for their keys
    retained: int = 0  # retained documents the site queued at registration
    keys_refused: int = 0  # key messages refused (unauthenticated, not ours, not opening)
    refusals: dict[str, int] = field(default_factory=dict)  # by kind (see subscriber.store)
    missing: int = 0  # documents found missing in a publisher's signed sequence (asked for)
    gaps: int = 0  # missing documents the site could not replay
    withheld: int = 0  # grants or documents' concepts withheld against our signed entitlement
    unvouched: dict[str, str] = field(default_factory=dict)  # publisher → why not


def open_dissemination(
    message: pb.Dissemination,
    *,
    ca_pem: bytes,
    keys: Callable[[str, str, int], bytes | None],
    at: datetime,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    document_keys: Callable[[str], bytes | None] | None = None,
    crl: Crl | None = None,
) -> View:
    """Verify and decrypt one received dissemination; raise a PeerError if anything is wrong.

    ``concepts`` are the concepts granted from this publisher (each must arrive whole; default:
    those a key is held for); ``seen`` the last version accepted per (publisher, document);
    ``document_keys`` per-document keys by key name (granted for retained documents); ``crl``
    the CRL in force (a publisher it revokes is refused with :class:`RevokedError`).
    """
    manifest = message.manifest
    check_publisher(
        manifest.publisher_certificate, manifest.publisher, ca_pem=ca_pem, at=at, crl=crl
    )
    delivery = delivery_from_pb(message)
    return decode(
        delivery,
        publisher_key=certs.public_key_of(manifest.publisher_certificate),
        keys=keys,
        document_keys=document_keys,
        concepts=concepts,
        seen=seen,
    )


def open_stored(
    stored: SpooledDissemination,
    write: Callable[[bytes], object],
    *,
    workdir: Path,
    ca_pem: bytes,
    keys: Callable[[str, str, int], bytes | None],
    at: datetime,
    concepts: Iterable[str] | None = None,
    seen: Mapping[tuple[str, str], int] | None = None,
    document_keys: Callable[[str], bytes | None] | None = None,
    crl: Crl | None = None,
) -> tuple[HeldFragment, ...]:
    """:func:`open_dissemination` of a spooled dissemination: every check it makes, the
    ciphertexts read from the spool a span at a time, the canonical view (what
    ``View.to_bytes()`` gives) written to ``write`` and the plaintexts kept in ``workdir``
    meanwhile (:func:`xdn.codec.decode_stored`). What was written is to be thrown away if this
    raises (a PeerError).
    """
    manifest = stored.message.manifest
    check_publisher(
        manifest.publisher_certificate, manifest.publisher, ca_pem=ca_pem, at=at, crl=crl
    )
    return decode_stored(
        delivery_from_pb(stored.message),
        stored.ciphertexts,
        write,
        workdir=workdir,
        publisher_key=certs.public_key_of(manifest.publisher_certificate),
        keys=keys,
        document_keys=document_keys,
        concepts=concepts,
        seen=seen,
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a document is opened: that allocates a few
    objects per fragment, none in a cycle, and a collection meanwhile walks them again and
    again (measured: a seventh of the time of a 7,500-fragment document). It runs after."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class Session:
    """One subscriber's handling of what arrives: keys, documents, held documents, receipts."""

    def __init__(self, setup: SubscriberSetup, clock: Callable[[], datetime]) -> None:
        self.setup = setup
        self.clock = clock
        self.private_key = crypto.load_private_key_pem(setup.tls.key_pem)
        # Who we are to sites and key services: our certificate, not our common name.
        self.member_id = certs.credential_from_pem(setup.tls.cert_pem).member_id
        self.signer = provenance.Signer(
            node_uri=certs.node_uri(setup.name),
            private_key=self.private_key,
            certificate=setup.tls.cert_pem,
        )
        # Algorithm 2 on every chain received, keys from the certificates it carries.
        self.chains = provenance.ChainVerifier(
            setup.tls.ca_pem,
            revoked=lambda: frozenset() if self.crl is None else self.crl.serials,
        )
        self.keyring = Keyring(setup.state_dir / "keyring.sqlite")
        self.spool = Spool(setup.state_dir / "spool")  # deliveries in parts (subscriber.spool)
        self.spool.clear()  # what a crash left behind
        self.inbox = Inbox(setup.out_dir)
        export.reconcile(self.keyring, self.inbox)  # the tail a crash may have left behind
        self._housekeeping_due = 0.0  # (a timestamp: pruning runs at start-up)
        self.address = setup.connect
        setup.provenance_log.parent.mkdir(parents=True, exist_ok=True)
        self.log = provenance.ProvenanceLog(
            setup.provenance_log, node_uri=self.signer.node_uri, cert_pem=setup.tls.cert_pem
        )
        self.report = SubscriptionReport()
        self.subscribed_at_ms: int | None = None  # set when asking for retained documents
        self.refresh_requests: list[pb.PathRefresh] = []  # to send to the site
        # receipts of held documents opened since: their acks went without one (sent with the
        # acknowledgement of the delivery that released them)
        self.released_receipts: list[bytes] = []
        # failure notices to hand to the site (subscriber.outbox), and a wake-up for the sender
        self.notices = NoticeOutbox(setup.state_dir / "notices.sqlite")
        self.notice_ready = asyncio.Event()
        self.lease_site: tuple[str, str] | None = None  # (name, block) of the site, once known
        self.completeness = Completeness(
            setup.state_dir / "completeness.sqlite", setup.out_dir, name=setup.name
        )
        self.credential = certs.credential_from_pem(setup.tls.cert_pem)
        # policy notices shown, this run or before: (publisher, version)
        self._noticed: set[tuple[str, int]] = shown(setup.out_dir / POLICY_NOTICES)
        self.holding = Holding(
            self.keyring,
            max_documents=setup.max_held_documents,
            max_bytes=setup.max_held_bytes,
            refuse=self.refuse,
        )
        self.crl: Crl | None = None  # the CRL in force
        stored = self.keyring.crl()
        if stored is not None:
            self.crl = read_crl(stored[1], setup.tls.ca_pem, at=clock())
        if setup.local_crl is not None:
            self.on_crl(setup.local_crl, self.keyring.applied(self.address), source="--crl file")
        if self.crl is None:
            print(
                f"{setup.name}: no CRL yet: publishers cannot be checked for revocation until "
                "the site relays one (or give --crl)",
                flush=True,
            )
        for payload in self.keyring.take_legacy_held():  # held unchecked by an older version
            self._receive(pb.Dissemination.FromString(payload), self.keyring.applied(self.address))
        self.housekeeping()

    def lease(self) -> bytes:
        """A fresh signed membership lease for the site we are registered at (see
        :mod:`xdn.lease`); empty while we do not know that site yet."""
        if self.lease_site is None:
            return b""
        made = lease.issue(
            member=self.member_id, site=self.lease_site[0], block=self.lease_site[1],
            concepts=self.setup.concepts, now_ms=lease.millis(self.clock()),
            period_ms=int(self.setup.lease_s * 1000),
        )
        return lease.sign(made, self.private_key).to_bytes()

    def close(self) -> None:
        export.checkpoint(self.keyring, self.inbox)
        self.keyring.close()
        self.notices.close()
        self.log.close()
        self.completeness.close()

    # ---- grants --------------------------------------------------------------------------
    def grants_at_resume(self, subscribed: pb.Subscribed) -> dict[str, list[str]]:
        """The grants the deliveries after the resume point were routed by.

        The site's registration already reflects every grant change it queued, even those
        still ahead in our queue; so when the site resumes our queue where we left it, the
        grants we stored as we applied its deliveries are the ones in force.
        """
        applied = self.keyring.applied(self.address)
        stored = self.keyring.grants(self.address)
        if stored is not None and applied > 0 and subscribed.resumed_after == applied:
            grants = stored
        else:
            grants = {g.publisher: sorted(g.concepts) for g in subscribed.grants}
            self.keyring.set_grants(self.address, grants)
        self.report.grants = grants
        self._check_grants()
        return grants

    def on_grants_changed(self, change: pb.GrantsChanged, sequence: int) -> None:
        """The site changed our grants (a policy update): later deliveries follow the new ones."""
        grants = {g.publisher: sorted(g.concepts) for g in change.grants}
        self.keyring.set_grants(self.address, grants, applied=sequence)
        self.report.grants = grants
        self._check_grants()  # a concept newly granted starts fresh
        for publisher, concept in self.keyring.stale():  # nothing to catch up on any more
            if concept not in grants.get(publisher, ()):
                self.keyring.clear_stale(publisher, concept)
        self.inbox.write_subscription(
            {"subscriber": self.setup.name, "served_by": self.report.served_by, "grants": grants}
        )
        print(f"{self.setup.name}: grants changed ({change.reason}): {grants}", flush=True)

    # ---- key messages --------------------------------------------------------------------
    @contextmanager
    def _refusing(self, kind: str, publisher: str, concept: str, epoch: int) -> Iterator[None]:
        """Record a key message that fails inside the block as refused, then re-raise."""
        try:
            yield
        except PeerError as exc:
            self.report.keys_refused += 1
            self.report.refusals["key"] = self.report.refusals.get("key", 0) + 1
            self.inbox.refuse_key(
                kind=kind, publisher=publisher, concept=concept, epoch=epoch, reason=str(exc)
            )
            self._log_notice(
                sign_notice(
                    self.signer, at=self.clock(), kind="key", reason=str(exc),
                    served_by=self.report.served_by, publisher=publisher, key_message=kind,
                    concept=concept, epoch=epoch,
                )
            )
            raise

    def on_enrolment(self, message: pb.KeyMessage) -> None:
        """Join a group (or catch up): open our key-tree path sealed to our certificate.

        Raises:
            PeerError: the enrolment is not the publisher's, not ours, or does not open; the
                keyring is unchanged.
        """
        with self._refusing("enrolment", message.publisher, message.concept, message.epoch):
            enrolment = verify_key_message(
                enrolment_from_pb(message), ca_pem=self.setup.tls.ca_pem, at=self.clock()
            )
            if enrolment.member != self.member_id:
                raise ProtocolError(f"key message for {enrolment.member!r} delivered to us")
            stored = self.keyring.group_state(enrolment.publisher, enrolment.concept)
            current = None if stored is None else MemberKeys.from_bytes(stored)
            if current is not None and current.member != self.member_id:
                current = None  # kept under an earlier certificate of ours: start afresh
            if current is not None and enrolment.epoch < current.epoch:
                log.info("enrolment of %s/%s for epoch %d: we are at %d; ignored",
                         enrolment.publisher, enrolment.concept, enrolment.epoch, current.epoch)
                return
            state = (
                MemberKeys.enrol(enrolment, self.private_key)
                if current is None
                else current.apply_enrolment(enrolment, self.private_key)
            )
        self._keep(enrolment.publisher, enrolment.concept, state)
        self.keyring.clear_stale(enrolment.publisher, enrolment.concept)

    def ask_refresh(self, publisher: str, concept: str, *, again: bool = False) -> None:
        """Ask the key service (through the site) for our current path in a group."""
        if self.keyring.mark_stale(publisher, concept) or again:
            self.refresh_requests.append(pb.PathRefresh(publisher=publisher, concept=concept))

    def on_rekey(self, message: pb.GroupRekey) -> None:
        """Apply a group's rekey broadcast to our path, if we are a member.

        Only a rekey the publisher signed counts: if we cannot follow it, we were removed and
        drop the group; if it is ahead of us by more than one epoch, we ask for a path refresh.

        Raises:
            PeerError: the rekey is not the publisher's (the keyring is unchanged).
        """
        with self._refusing("rekey", message.publisher, message.concept, message.epoch):
            rekey = verify_key_message(
                rekey_from_pb(message), ca_pem=self.setup.tls.ca_pem, at=self.clock()
            )
        stored = self.keyring.group_state(rekey.publisher, rekey.concept)
        if stored is None:
            return  # not (yet) a member: our enrolment carries the keys we need
        try:
            state = MemberKeys.from_bytes(stored).apply_rekey(rekey)
        except EpochGapError:
            log.warning("missed epochs of %s/%s; asking for a path refresh",
                        rekey.publisher, rekey.concept)
            self.ask_refresh(rekey.publisher, rekey.concept)
            return
        except DecryptError:  # authenticated: the publisher's own rekey leaves us out
            log.info("no longer a member of %s/%s", rekey.publisher, rekey.concept)
            self.keyring.set_group(rekey.publisher, rekey.concept, None, epoch=0, key=None)
            return
        self._keep(rekey.publisher, rekey.concept, state)

    def on_document_keys(self, message: pb.DocumentKeys) -> None:
        """Keep the keys of retained documents granted to us with an enrolment.

        The grant must be the publisher's, addressed to us, and for a group we are a member of
        (its enrolment comes first, in the same request).

        Raises:
            PeerError: otherwise (the keyring is unchanged).
        """
        with self._refusing("document-keys", message.publisher, message.concept, 0):
            grant = verify_key_message(
                document_keys_from_pb(message), ca_pem=self.setup.tls.ca_pem, at=self.clock()
            )
            if grant.member != self.member_id:
                raise ProtocolError(f"document keys for {grant.member!r} delivered to us")
            if self.keyring.group_state(grant.publisher, grant.concept) is None:
                raise ProtocolError(
                    f"document keys of {grant.publisher}/{grant.concept}, a group we are not in"
                )
            keys = open_document_keys(grant, self.private_key)
        self.keyring.put_document_keys(keys, at_ms=self._now_ms())
        self.report.keys += 1

    def _keep(self, publisher: str, concept: str, state: MemberKeys) -> None:
        self.keyring.set_group(
            publisher, concept, state.to_bytes(), epoch=state.epoch, key=state.group_key
        )
        self.report.keys += 1

    # ---- refusals ------------------------------------------------------------------------
    def refuse(
        self,
        kind: str,
        reason: str,
        *,
        manifest: pb.Manifest | None = None,
        publisher: str = "",
        document: str = "",
        version: int | None = None,
    ) -> None:
        """Make a refusal visible: printed, recorded in the inbox, counted in the report and
        signed as a failure notice in our provenance log.

        ``kind`` says what was refused (see :mod:`subscriber.store`); every kind but ``crl``,
        ``checkpoint`` and ``entitlement`` is a document not accepted.
        """
        if manifest is not None:
            publisher, document, version = (
                manifest.publisher, manifest.document_id, manifest.version
            )
        statement = kind in ("crl", "checkpoint", "entitlement")
        if not statement:
            self.report.refused += 1
        self.report.refusals[kind] = self.report.refusals.get(kind, 0) + 1
        if kind == "crl":
            what = "CRL"
        elif statement:
            what = f"{kind} of {publisher}"
        else:
            what = f"{publisher}/{document}" + (f" v{version}" if version is not None else "")
        print(f"{self.setup.name}: refused {what}: {reason}", flush=True)
        self.inbox.refuse(
            publisher=publisher, document_id=document, reason=reason, kind=kind, version=version
        )
        self._log_notice(
            sign_notice(
                self.signer, at=self.clock(), kind=kind, reason=reason,
                served_by=self.report.served_by, publisher=publisher, document=document,
                version=version, manifest_root=b"" if manifest is None else manifest.root,
            )
        )

    def _log_notice(self, notice: provenance.Message | None) -> None:
        """Append a refusal's signed failure notice to our provenance log (issue #13), and
        queue it for our site, which passes it on to the publisher (:mod:`subscriber.outbox`)."""
        if notice is not None:
            self.log.append(notice)
            self.notices.put(notice.to_nquads())
            self.notice_ready.set()

    # ---- the CRL in force ----------------------------------------------------------------
    def on_crl(self, pem: bytes, sequence: int, *, source: str = "the site") -> None:
        """A CRL arrived (relayed by the site, or the operator's file): keep it if newer.

        A newer CRL is kept durably; held documents of a publisher it revokes are refused, and
        those held while the CRL was stale are looked at again. A bad or older CRL is refused
        and the one in force stays.
        """
        try:
            offered = read_crl(pem, self.setup.tls.ca_pem, at=self.clock())
            chosen = choose(self.crl, offered, at=self.clock())
        except CertificateError as exc:
            self.refuse("crl", f"CRL from {source}: {exc}")
            return
        if chosen is self.crl:
            return
        self.keyring.set_crl(chosen.number, chosen.pem)
        self.crl = chosen
        print(
            f"{self.setup.name}: CRL number {chosen.number} from {source} in force "
            f"({len(chosen.serials)} certificates revoked, next update "
            f"{chosen.next_update.isoformat()})",
            flush=True,
        )
        for entry in self.keyring.held_entries():
            if entry.serial in chosen.serials:
                self.keyring.drop_held(entry.id)
                self.refuse(
                    "revoked",
                    f"held document dropped: its publisher certificate (serial {entry.serial:x}) "
                    f"is revoked by CRL number {chosen.number}",
                    publisher=entry.publisher, document=entry.document, version=entry.version,
                )
        self._release(self.keyring.waiting(*CRL_WAIT), sequence)

    def _revocation_unknown(self) -> str | None:
        return stale_reason(self.crl, at=self.clock(), grace=self.setup.crl_grace)

    # ---- completeness --------------------------------------------------------------------
    def on_checkpoint(self, message: pb.Checkpoint, sequence: int) -> None:
        """A publisher's signed checkpoint: check our chains against it (refused if forged)."""
        try:
            self.completeness.on_checkpoint(
                message, ca_pem=self.setup.tls.ca_pem, at=self.clock()
            )
        except PeerError as exc:
            self.refuse("checkpoint", str(exc), publisher=message.publisher)
        self.report.missing = self.completeness.detected
        self.keyring.set_applied(self.address, sequence)

    def on_entitlement(self, message: pb.Entitlement, sequence: int) -> None:
        """A publisher's signed entitlement for our certificate (refused if not genuine)."""
        try:
            kept = self.completeness.on_entitlement(
                message, ca_pem=self.setup.tls.ca_pem, at=self.clock(), me=self.credential
            )
        except PeerError as exc:
            self.refuse("entitlement", str(exc), publisher=message.publisher)
        else:
            if kept:
                self._check_grants()
            if message.notice:
                self._policy_notice(message)
        self.keyring.set_applied(self.address, sequence)

    def _policy_notice(self, message: pb.Entitlement) -> None:
        """The publisher's policy-change notice beside our verified entitlement: checked,
        shown once per policy version, kept; refused if it does not hold
        (:mod:`subscriber.policy_notices`)."""
        key = (message.publisher, message.policy_version)
        if key in self._noticed:
            return
        try:
            notice = read_notice(message, self.chains, me=self.credential, at=self.clock())
        except PeerError as exc:
            self.refuse("entitlement", f"policy-change notice: {exc}", publisher=message.publisher)
            return
        self._noticed.add(key)
        print(f"{self.setup.name}: {notice.summary()}", flush=True)
        # kept whole beside our output (our provenance log holds our own hops only; the
        # publisher's log holds the notice for the audit)
        with (self.setup.out_dir / POLICY_NOTICES).open("a+b") as kept:
            if kept.tell() and (kept.seek(-1, os.SEEK_END) or kept.read(1) != b"\n"):
                kept.write(b"\n")  # (after a line a crash cut short: read back, it is skipped)
            kept.write(notice.to_nquads())

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def _check_grants(self) -> None:
        """Follow what the site grants us and what our entitlements grant; flag the difference."""
        self.completeness.check_grants(
            self.report.grants, requested=self.setup.concepts, now_ms=self._now_ms()
        )
        self.report.withheld = self.completeness.flagged

    def on_unavailable(self, message: pb.Missing, sequence: int) -> None:
        """The site cannot replay documents we found missing: they are gaps, each signed as a
        failure notice (kind ``gap``) that goes to the publisher like every refusal."""
        gaps = self.completeness.on_unavailable(message)
        self.report.gaps += len({g.sequence for g in gaps})
        for number in sorted({g.sequence for g in gaps}):  # the publisher hears of each gap
            concepts = ", ".join(sorted(g.concept for g in gaps if g.sequence == number))
            self._log_notice(
                sign_notice(
                    self.signer, at=self.clock(), kind="gap", served_by=self.report.served_by,
                    publisher=message.publisher, sequence=number,
                    reason=f"document #{number} of {message.publisher} ({concepts}) was "
                    "withheld: the site did not deliver it and cannot replay it",
                )
            )
        self.keyring.set_applied(self.address, sequence)

    # ---- documents -----------------------------------------------------------------------
    def _before_subscribing(self, manifest: pb.Manifest) -> bool:
        """Is this a retained document from before our subscription (state at subscribe time)?"""
        return self.subscribed_at_ms is not None and manifest.issued_at_ms < self.subscribed_at_ms

    def on_dissemination(
        self,
        message: pb.Dissemination,
        sequence: int = 0,
        *,
        stored: SpooledDissemination | None = None,
    ) -> bytes:
        """Handle one document; return the receipt to send back (empty if refused or held).

        A document spooled (``stored``; ``message`` is then ``stored.message``, its ciphertexts
        empty) is opened from the spool; the caller deletes the spool afterwards.
        """
        manifest = message.manifest
        self.completeness.count(  # in the publisher's signed sequence
            manifest, ca_pem=self.setup.tls.ca_pem, at=self.clock(),
            state=self._before_subscribing(manifest),
        )
        self.report.missing = self.completeness.detected
        last = self.keyring.version(manifest.publisher, manifest.document_id)
        if last == manifest.version:
            log.info("%s v%d delivered again; already applied", manifest.document_id,
                     manifest.version)
            self.keyring.set_applied(self.address, sequence)
            return b""
        with _collector_paused():
            return self._receive(message, sequence, stored)

    def _receive(
        self, message: pb.Dissemination, sequence: int, stored: SpooledDissemination | None = None
    ) -> bytes:
        """Open a document, or check and hold it while its keys or a fresh CRL are missing."""
        manifest = message.manifest
        last = self.keyring.version(manifest.publisher, manifest.document_id)
        if last is None and self._below_floor(manifest):
            self.keyring.set_applied(self.address, sequence)
            return b""
        waits = self._waits(message)
        if not waits:
            return self._open(message, sequence, last, stored)
        if stored is not None and stored.size <= self.setup.max_held_bytes:
            message, stored = stored.load(), None  # (held whole: within the held store's cap)
        try:
            serial = vouch(
                message, ca_pem=self.setup.tls.ca_pem, at=self.clock(), crl=self.crl, last=last,
                cipher_digests=None if stored is None else stored.cipher_digests(),
            )
        except PeerError as exc:
            kind = "revoked" if isinstance(exc, RevokedError) else "unverified"
            self.refuse(kind, f"not held: {exc}", manifest=manifest)
            self.keyring.set_applied(self.address, sequence)
            return b""
        if stored is None:
            self._hold(message, serial, waits)
        else:
            self.holding.refuse_oversize(manifest, stored.size)
        self._catch_up(manifest, waits)
        self.keyring.set_applied(self.address, sequence)
        return b""

    def _catch_up(self, manifest: pb.Manifest, waits: list[tuple[str, str]]) -> None:
        """Ask for a path refresh of each group we are in whose signed epoch is ahead of ours.

        The rekey that should have brought us there was lost or refused (a site may drop or
        alter one); the publisher-signed range table says which epoch the document needs.
        """
        needed = {(manifest.publisher, r.concept): r.epoch for r in manifest.ranges}
        for publisher, concept in waits:
            stored = self.keyring.group_state(publisher, concept)
            if stored is None or (publisher, concept) not in needed:
                continue
            if MemberKeys.from_bytes(stored).epoch < needed[(publisher, concept)]:
                log.warning("%s/%s is at a later epoch than our keys; asking for a path "
                            "refresh", publisher, concept)
                self.ask_refresh(publisher, concept)

    def _waits(self, message: pb.Dissemination) -> list[tuple[str, str]]:
        stale = self._revocation_unknown() is not None
        return self.holding.waits(message, crl_stale=stale)

    def _hold(self, message: pb.Dissemination, serial: int, waits: list[tuple[str, str]]) -> None:
        if self.holding.hold(message, serial, waits):
            concepts = [c for p, c in waits if (p, c) != CRL_WAIT]
            missing = [f"the keys of {', '.join(concepts)} arrive"] if concepts else []
            if CRL_WAIT in waits:
                missing.append(f"a fresh CRL arrives ({self._revocation_unknown()})")
            m = message.manifest
            print(
                f"{self.setup.name}: holding {m.publisher}/{m.document_id} v{m.version} until "
                + " and ".join(missing),
                flush=True,
            )

    def release_held(
        self, sequence: int, *, publisher: str | None = None, concept: str | None = None
    ) -> None:
        """Open the held documents a key delivery (``sequence``) may have unlocked.

        Only the documents waiting for the (``publisher``, ``concept``) group are read; with no
        concept, every one of the publisher's (per-document key grants); with neither, all.
        """
        self._release(self.keyring.waiting(publisher, concept), sequence)

    def _release(self, held: list[Held], sequence: int) -> None:
        for entry in held:
            message = pb.Dissemination.FromString(entry.payload)
            m = message.manifest
            last = self.keyring.version(m.publisher, m.document_id)
            fresh = last is not None or not self._below_floor(m)  # (else refused: held too long)
            if fresh and (last is None or last < m.version):
                waits = self._waits(message)
                if waits:
                    self.keyring.set_waits(entry.id, waits)
                    continue
                if receipt := self._open(message, sequence, last):
                    self.released_receipts.append(receipt)
            self.keyring.drop_held(entry.id)

    def _below_floor(self, manifest: pb.Manifest) -> bool:
        """Refuse (and say so) a document numbered at or below what our record of accepted
        documents pruned (:mod:`subscriber.retention`): a replay, or one that came too late."""
        floor = self.keyring.floor(manifest.publisher)
        if not 0 < manifest.sequence <= floor:
            return False
        self.refuse(
            "document",
            f"sequence number {manifest.sequence} is at or below {floor}, the newest this "
            "subscriber no longer keeps a record of: a replay, or older than its retention",
            manifest=manifest,
        )
        return True

    def housekeeping(self) -> None:
        """Prune what the keyring no longer needs and sync ``received.jsonl`` (see
        :mod:`subscriber.retention`, :mod:`subscriber.export`); runs at start-up and then
        every ``retention.every_s`` as documents are accepted."""
        now = self.clock().timestamp()
        pruned = self.keyring.prune(int(now * 1000), self.setup.retention)
        if pruned:
            log.info("%s: pruned %s", self.setup.name, pruned)
        export.checkpoint(self.keyring, self.inbox)
        self._housekeeping_due = now + self.setup.retention.every_s

    def _expected(self, manifest: pb.Manifest, delivered: set[str]) -> tuple[list[str], list[str]]:
        """(concepts that must arrive whole, granted concepts the site did not retain)."""
        granted = self.report.grants.get(manifest.publisher, [])
        if not self._before_subscribing(manifest):
            entitled = self.completeness.entitled(
                manifest.publisher, self._now_ms(), self.setup.concepts
            )
            return sorted(set(granted) | entitled & delivered), []
        in_document = {r.concept for r in manifest.ranges}
        absent = sorted(set(granted) & in_document - delivered)
        return sorted(set(granted) & delivered), absent

    def _open(
        self,
        message: pb.Dissemination,
        sequence: int,
        last: int | None,
        stored: SpooledDissemination | None = None,
    ) -> bytes:
        manifest = message.manifest
        concepts, absent = self._expected(manifest, {f.concept for f in message.fragments})
        expected = concepts if concepts or manifest.publisher in self.report.grants else None
        seen = {} if last is None else {(manifest.publisher, manifest.document_id): last}
        view: View | None = None
        view_file = None if stored is None else self.spool.new_path(".view")
        try:
            if stored is None:
                view = open_dissemination(
                    message, ca_pem=self.setup.tls.ca_pem, keys=self.keyring.get,
                    document_keys=self.keyring.document_key, at=self.clock(),
                    concepts=expected, seen=seen, crl=self.crl,
                )  # fmt: skip
                held = view.fragments
            else:
                assert view_file is not None
                with open(view_file, "wb") as out:
                    held = open_stored(
                        stored, out.write, workdir=self.spool.folder,
                        ca_pem=self.setup.tls.ca_pem, keys=self.keyring.get,
                        document_keys=self.keyring.document_key, at=self.clock(),
                        concepts=expected, seen=seen, crl=self.crl,
                    )  # fmt: skip
            receipt_uri = provenance.message_uri(
                self.signer.node_uri, manifest.document_id, f"v{manifest.version}", "received"
            )
            received = None  # stays so only with provenance switched off (a benchmark)
            if message.provenance or provenance.enabled():
                received = provenance.Message.from_nquads(
                    message.provenance, max_bytes=provenance.MAX_CHAIN_BYTES
                )
                leaves = leaf_ranges(message.fragments)
                provenance.check_extendable(
                    received, document_id=manifest.document_id,
                    leaves=leaves, message_uri=receipt_uri,
                )
                self._check_chain(received, manifest)
        except PeerError as exc:
            if view_file is not None:
                view_file.unlink(missing_ok=True)
            kind = "revoked" if isinstance(exc, RevokedError) else "document"
            self.refuse(kind, str(exc), manifest=manifest)
            self.keyring.set_applied(self.address, sequence)
            return b""
        except BaseException:
            if view_file is not None:
                view_file.unlink(missing_ok=True)
            raise
        receipt = None if received is None else provenance.receipt(
            received,
            self.signer,
            message_uri=receipt_uri,
            timestamp_ms=int(self.clock().timestamp() * 1000),
            leaves=leaves,  # what came, which a dishonest site may have cut short
        )
        if receipt is not None:
            self.log.append(receipt)
        view_xml = view.to_bytes() if view is not None else cast(Path, view_file)
        size = len(view_xml) if isinstance(view_xml, bytes) else view_xml.stat().st_size
        self.inbox.write_view(
            publisher=manifest.publisher,
            document_id=manifest.document_id,
            version=manifest.version,
            view_xml=view_xml,
        )
        record = {
            "publisher": manifest.publisher,
            "document": manifest.document_id,
            "version": manifest.version,
            "fragments": {h.fragment_id: h.concept for h in held},
            "issued_at_ms": manifest.issued_at_ms,
            "received_at_ms": int(self.clock().timestamp() * 1000),
        }
        if absent:
            record["missing"] = absent  # retained state: concepts this site did not hold
        if not self._before_subscribing(manifest) and (  # (retained: what their site held)
            withheld := self.completeness.withheld(
                manifest, {f.concept for f in message.fragments},
                requested=self.setup.concepts, now_ms=self._now_ms(),
            )
        ):
            record["withheld"] = withheld  # granted by our signed entitlement, not delivered
            self.report.withheld = self.completeness.flagged
        self.keyring.accept(
            record, address=self.address, sequence=sequence,
            publisher_sequence=manifest.sequence, at_ms=self._now_ms(),
        )
        self.inbox.record(record)
        self.report.accepted += 1
        log.info(accepted_line(
            self.setup.name, publisher=manifest.publisher, document=manifest.document_id,
            version=manifest.version, fragments=len(held),
            size=size,
        ))
        if self.clock().timestamp() >= self._housekeeping_due:
            self.housekeeping()
        return b"" if receipt is None else receipt.to_nquads()

    def _check_chain(self, received: provenance.Message, manifest: pb.Manifest) -> None:
        """Algorithm 2 over the whole chain, then: the publisher who signed it is the one who
        signed the manifest, and its last hop is addressed to us.

        Raises:
            SignatureError, ProvenanceError: it does not hold (a PeerError: refused).
        """
        self.chains.verify_received(
            received,
            at=self.clock(),
            publisher_certificate=manifest.publisher_certificate,
            recipient=self.signer.node_uri,
        )
