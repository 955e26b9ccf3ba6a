"""What a subscriber does with each delivery: open keys, verify and decrypt documents, store.

Theory of operation. Deliveries arrive in order (:mod:`subscriber.client` runs the stream):

* a key message is opened with the subscriber's private key (HPKE) and kept in the keyring;
* a dissemination is checked end to end: the publisher certificate against the CA, then the
  codec verifies the manifest signature, every inclusion proof and every GCM tag before the
  view is rebuilt. Anything that fails is refused — recorded with the reason, never written
  as a view — and the stream goes on;
* a dissemination whose keys have not arrived yet is held (durably) and opened as soon as a
  key message brings them;
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

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from subscriber.gaps import Completeness
from subscriber.store import Inbox, Keyring
from xdn import certs, crypto, provenance
from xdn.codec import View, decode, fragment_concepts, key_name
from xdn.errors import DecryptError, PeerError, ProtocolError
from xdn.grpc_tls import TlsFiles
from xdn.lkh import EpochGapError, MemberKeys, open_document_keys
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import (
    delivery_from_pb,
    document_keys_from_pb,
    enrolment_from_pb,
    rekey_from_pb,
)

__all__ = ["Session", "SubscriberSetup", "SubscriptionReport", "open_dissemination"]

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
    heartbeat_s: float = 5.0
    # Past this age of a publisher's newest signed checkpoint, we cannot vouch that none of its
    # newest documents was withheld.
    checkpoint_max_age_s: float = 3600.0


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
) -> View:
    """Verify and decrypt one received dissemination; raise a PeerError if anything is wrong.

    ``concepts`` are the concepts granted from this publisher (each must arrive whole; default:
    those a key is held for); ``seen`` the last version accepted per (publisher, document);
    ``document_keys`` per-document keys by key name (granted for retained documents).
    """
    manifest = message.manifest
    publisher = certs.verify_certificate(
        manifest.publisher_certificate, ca_pem, at=at, role="publisher"
    )
    if publisher.name != manifest.publisher:
        raise ProtocolError(
            f"manifest names publisher {manifest.publisher!r} but is signed by {publisher.name!r}"
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


class Session:
    """One subscriber's handling of what arrives: keys, documents, held documents, receipts."""

    def __init__(self, setup: SubscriberSetup, clock: Callable[[], datetime]) -> None:
        self.setup = setup
        self.clock = clock
        self.private_key = crypto.load_private_key_pem(setup.tls.key_pem)
        self.signer = provenance.Signer(
            node_uri=certs.node_uri(setup.name), private_key=self.private_key
        )
        self.keyring = Keyring(setup.state_dir / "keyring.sqlite")
        self.inbox = Inbox(setup.out_dir)
        self.inbox.reconcile(self.keyring.records())
        self.address = setup.connect
        setup.provenance_log.parent.mkdir(parents=True, exist_ok=True)
        self.log = provenance.ProvenanceLog(
            setup.provenance_log, node_uri=self.signer.node_uri, cert_pem=setup.tls.cert_pem
        )
        self.report = SubscriptionReport()
        self.subscribed_at_ms: int | None = None  # set when asking for retained documents
        self.refresh_requests: list[pb.PathRefresh] = []  # to send to the site
        self.completeness = Completeness(
            setup.state_dir / "completeness.sqlite", setup.out_dir, name=setup.name
        )
        self.credential = certs.credential_from_pem(setup.tls.cert_pem)

    def close(self) -> None:
        self.keyring.close()
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

    def on_enrolment(self, message: pb.KeyMessage) -> None:
        """Join a group (or catch up): open our key-tree path sealed to our certificate."""
        enrolment = enrolment_from_pb(message)
        if enrolment.member != self.setup.name:
            raise ProtocolError(f"key message for {enrolment.member!r} delivered to us")
        stored = self.keyring.group_state(enrolment.publisher, enrolment.concept)
        state = (
            MemberKeys.enrol(enrolment, self.private_key)
            if stored is None
            else MemberKeys.from_bytes(stored).apply_enrolment(enrolment, self.private_key)
        )
        self._keep(enrolment.publisher, enrolment.concept, state)
        self.keyring.clear_stale(enrolment.publisher, enrolment.concept)

    def ask_refresh(self, publisher: str, concept: str, *, again: bool = False) -> None:
        """Ask the key service (through the site) for our current path in a group."""
        if self.keyring.mark_stale(publisher, concept) or again:
            self.refresh_requests.append(pb.PathRefresh(publisher=publisher, concept=concept))

    def on_rekey(self, message: pb.GroupRekey) -> None:
        """Apply a group's rekey broadcast to our path, if we are a member."""
        rekey = rekey_from_pb(message)
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
        except DecryptError:
            log.info("no longer a member of %s/%s", rekey.publisher, rekey.concept)
            self.keyring.set_group(rekey.publisher, rekey.concept, None, epoch=0, key=None)
            return
        self._keep(rekey.publisher, rekey.concept, state)

    def on_document_keys(self, message: pb.DocumentKeys) -> None:
        """Keep the keys of retained documents granted to us with an enrolment."""
        grant = document_keys_from_pb(message)
        if grant.member != self.setup.name:
            raise ProtocolError(f"document keys for {grant.member!r} delivered to us")
        self.keyring.put_document_keys(open_document_keys(grant, self.private_key))
        self.report.keys += 1

    def _keep(self, publisher: str, concept: str, state: MemberKeys) -> None:
        self.keyring.set_group(
            publisher, concept, state.to_bytes(), epoch=state.epoch, key=state.group_key
        )
        self.report.keys += 1

    def _missing_keys(self, message: pb.Dissemination) -> list[str]:
        """Names of the keys the delivered fragments need that we do not hold (yet)."""
        needed = {(f.publisher, f.concept, f.epoch, f.document_id) for f in message.fragments}
        return sorted(
            key_name(*n)
            for n in needed
            if self.keyring.get(*n[:3]) is None and self.keyring.document_key(key_name(*n)) is None
        )

    # ---- completeness --------------------------------------------------------------------
    def on_checkpoint(self, message: pb.Checkpoint, sequence: int) -> None:
        """A publisher's signed checkpoint: check our chains against it (refused if forged)."""
        try:
            self.completeness.on_checkpoint(
                message, ca_pem=self.setup.tls.ca_pem, at=self.clock()
            )
        except PeerError as exc:
            print(f"{self.setup.name}: refused checkpoint of {message.publisher}: {exc}",
                  flush=True)
            self.inbox.refuse(
                publisher=message.publisher, document_id="(checkpoint)", reason=str(exc)
            )
        self.report.missing = self.completeness.detected
        self.keyring.set_applied(self.address, sequence)

    def on_entitlement(self, message: pb.Entitlement, sequence: int) -> None:
        """A publisher's signed entitlement for our certificate (refused if not genuine)."""
        try:
            kept = self.completeness.on_entitlement(
                message, ca_pem=self.setup.tls.ca_pem, at=self.clock(), me=self.credential
            )
        except PeerError as exc:
            print(f"{self.setup.name}: refused entitlement from {message.publisher}: {exc}",
                  flush=True)
            self.inbox.refuse(
                publisher=message.publisher, document_id="(entitlement)", reason=str(exc)
            )
        else:
            if kept:
                self._check_grants()
        self.keyring.set_applied(self.address, sequence)

    def _now_ms(self) -> int:
        return int(self.clock().timestamp() * 1000)

    def _check_grants(self) -> None:
        """Follow what the site grants us and what our entitlements grant; flag the difference."""
        self.completeness.check_grants(
            self.report.grants, requested=self.setup.concepts, now_ms=self._now_ms()
        )
        self.report.withheld = self.completeness.flagged

    def on_unavailable(self, message: pb.Missing, sequence: int) -> None:
        """The site cannot replay documents we found missing: they are gaps."""
        gaps = self.completeness.on_unavailable(message)
        self.report.gaps += len({g.sequence for g in gaps})
        self.keyring.set_applied(self.address, sequence)


    def _before_subscribing(self, manifest: pb.Manifest) -> bool:
        """Is this a retained document from before our subscription (state at subscribe time)?"""
        return self.subscribed_at_ms is not None and manifest.issued_at_ms < self.subscribed_at_ms

    def on_dissemination(self, message: pb.Dissemination, sequence: int = 0) -> bytes:
        """Handle one document; return the receipt to send back (empty if refused or held)."""
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
        missing = self._missing_keys(message)
        if missing:
            self.keyring.hold(
                manifest.publisher, manifest.document_id, manifest.version,
                message.SerializeToString(),
            )
            self.keyring.set_applied(self.address, sequence)
            print(
                f"{self.setup.name}: holding {manifest.publisher}/{manifest.document_id} "
                f"v{manifest.version} until its keys arrive ({', '.join(missing)})",
                flush=True,
            )
            return b""
        return self._open(message, sequence, last)

    def release_held(self, sequence: int) -> None:
        """Open the held documents whose keys have arrived (``sequence``: the key delivery)."""
        for payload in self.keyring.held():
            message = pb.Dissemination.FromString(payload)
            m = message.manifest
            last = self.keyring.version(m.publisher, m.document_id)
            if last is None or last < m.version:
                if self._missing_keys(message):
                    continue
                self._open(message, sequence, last)
            self.keyring.release(m.publisher, m.document_id, m.version)

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

    def _open(self, message: pb.Dissemination, sequence: int, last: int | None) -> bytes:
        manifest = message.manifest
        concepts, absent = self._expected(manifest, {f.concept for f in message.fragments})
        try:
            view = open_dissemination(
                message,
                ca_pem=self.setup.tls.ca_pem,
                keys=self.keyring.get,
                document_keys=self.keyring.document_key,
                at=self.clock(),
                concepts=(
                    concepts if concepts or manifest.publisher in self.report.grants else None
                ),
                seen={} if last is None else {(manifest.publisher, manifest.document_id): last},
            )
            received = provenance.Message.from_nquads(message.provenance)
        except PeerError as exc:
            self.report.refused += 1
            print(
                f"{self.setup.name}: refused {manifest.publisher}/{manifest.document_id}: {exc}",
                flush=True,
            )
            self.inbox.refuse(
                publisher=manifest.publisher, document_id=manifest.document_id, reason=str(exc)
            )
            self.keyring.set_applied(self.address, sequence)
            return b""
        receipt = provenance.receipt(
            received,
            self.signer,
            message_uri=provenance.message_uri(
                self.signer.node_uri, manifest.document_id, f"v{manifest.version}", "received"
            ),
            timestamp_ms=int(self.clock().timestamp() * 1000),
        )
        self.log.append(receipt)
        self.inbox.write_view(
            publisher=view.publisher,
            document_id=view.document_id,
            version=view.version,
            view_xml=view.to_bytes(),
        )
        record = {
            "publisher": view.publisher,
            "document": view.document_id,
            "version": view.version,
            "fragments": fragment_concepts(view),
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
        self.keyring.accept(record, address=self.address, sequence=sequence)
        self.inbox.record(record)
        self.report.accepted += 1
        return receipt.latest_graphs_nquads()
