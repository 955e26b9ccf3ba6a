"""Publishing: map, rekey, encrypt, sign and push documents to the root disseminator.

Theory of operation, per document:

1. Ask the root disseminator who is registered (``GetMembership``). The publisher trusts none
   of it blindly: each member's certificate is checked against the CA and the publisher
   evaluates *its own signed* policy for it, so a disseminator cannot get keys sealed to
   anyone the policy does not authorise. What the policy grants also depends on what only the
   sites see — which concepts were disseminated (``after`` rules), how many instances a
   subscriber received (``max_instances``), which concepts it asked for — so a member holds a
   group exactly when the policy *could* grant it the concept and its site grants it now: a
   site can narrow a member's groups, never widen them (:func:`member_concepts`). The reply
   also says where the site stands: publishing stops (a UsageError, before anything is rekeyed
   or encrypted) at a site that is not a root, that does not know this publisher, or that
   enforces a newer version of its policy (:func:`xdn.publication.check_standing`).
2. Find the concepts the document holds — streaming it once, keeping nothing, when the
   mapping's XPaths are simple paths; else parsing and mapping it in memory
   (:mod:`publisher.staging`); for each concept present, compare the
   group's members with who must hold its key now and start a new epoch where they differ —
   a logical key hierarchy per (publisher, concept) (:mod:`xdn.lkh`): one broadcast rekey
   message of O(log n) wrapped keys, plus an HPKE enrolment for each joiner. New epochs and
   their messages are committed to the key store *before* sending (an outbox), and resent
   until the network has accepted them.
3. Encode: encrypt each fragment under its concept's per-document key, build and sign the
   Merkle manifest; originate the signed provenance message. Streamed, each fragment goes to
   a file of the state directory as it is encrypted, and the serialized ``Dissemination`` is
   written to another once sealed (:mod:`xdn.wire_write`); parsed, it is serialized in memory.
4. Send the rekeys, enrolments and fragments in one ``Publish``; once acknowledged, mark the
   outbox delivered, store the document version and append provenance to the log. The
   acknowledgement says what the document reached (:class:`xdn.publication.Reach`). A request
   larger than the publisher's part size (:attr:`PublisherSetup.part_bytes`) goes in parts of
   that size on one ``PublishParts`` call instead (:mod:`xdn.parts`), acknowledged alike. The
   request is framed by hand around the document's bytes (:func:`xdn.wire_write.request_framing`:
   the same bytes ``SerializeToString`` gives), and the parts are read from its file one at a
   time, so a document of any size costs the publisher a part or two of memory. Its files are
   deleted once the site acknowledged or refused it, and at start-up (what a crash left).

Several documents are pipelined (:meth:`Publisher.publish_each`): steps 1 to 3 of the next run
while the network takes the previous one. Only one ``Publish`` is in flight, and its request
takes the outbox when it is sent, so order and outbox semantics are those of a serial loop.
Each document is reported as soon as it is recorded, while the next one is being prepared:
a failure preparing the next (its ``GetMembership`` refused, say) no longer hides it.

Publishing is idempotent per content (:mod:`publisher.idempotence`): each request names its
publication (``publish_id``: a keyed digest of document id and content), each attempt is
recorded in the key store before it is sent, and a root that routed the same publication as the
document's newest version answers so instead of routing it again. The publisher then records
that version (with the attempt's document keys), logs the provenance message the root routed
(checked to be its own) and reports "already published": publishing again after a crash or a
lost acknowledgement never makes the same content a new version, nor logs a message no hop
references. ``PublisherSetup.republish`` publishes the same content as a new version anyway.
A version attempted and neither recorded nor refused outright (the publisher died, or the call
failed, after the root may have routed it) is never given to other content: a site ignores a
version it routed, so the other content's sequence number, recorded as its concepts' newest,
would be named by later back pointers and checkpoints and reported as withheld by every
subscriber. That version number may then go unused (a gap in versions, never in the chains).

State at subscribe time: sites retain the last few documents. The key service keeps the same
documents' per-document keys and, with each enrolment of a joiner, sends it a sealed grant of
those keys for the concept it joined (never a group key of an earlier epoch), so the joiner can
open what its site replays. :meth:`Publisher.sync_keys` runs the same membership check without
a document, so joiners need not wait for the next publication.

Completeness (:mod:`xdn.completeness`): each document gets the next number of the publisher's
signed sequence (reserved durably in the key store before it is signed) and, per concept, a
signed back pointer to the previous document holding it — a document still in flight counts
(:meth:`Publisher._sequencing`). Every ``Publish`` and key synchronisation carries a signed
checkpoint naming each concept's newest document, which sites relay to subscribers. With it
go the members' signed entitlements (what our policy grants each certificate whatever the sites
observe, :func:`xdn.completeness.entitlement_of`), new or changed ones with a document and all
of them on a key synchronisation — only while the site enforces the policy version we evaluate.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import grpc

from publisher.idempotence import own_message, publish_id
from publisher.keystore import DocumentKey, Entitled, KeyStore
from publisher.leases import LeaseBook
from publisher.lkh_store import LkhStore, Outgoing
from publisher.membership import Judged, MemberView
from publisher.revocation import CrlFile
from publisher.split import split_request
from publisher.staging import Body, Staging, read_document
from xdn import certs, crypto, identity, ids, provenance
from xdn.codec import ConceptKey, Sequencing, SignedManifest, concept_order
from xdn.completeness import (
    Checkpoint,
    Entitlement,
    entitlement_of,
    sign_checkpoint,
    sign_entitlement,
    stateful_concepts,
)
from xdn.errors import CertificateError, ProtocolError, UsageError
from xdn.grpc_tls import CHANNEL_OPTIONS, MAX_MESSAGE_BYTES, TlsFiles, channel_credentials
from xdn.lkh import (
    DocumentKeyGrant,
    Enrolment,
    EpochChange,
    GroupController,
    KeySigner,
    Signed,
    seal_document_keys,
)
from xdn.mapping import Mapping
from xdn.ontology import Ontology
from xdn.parts import DEFAULT_PART_BYTES, MIN_PART_BYTES, ReadableChunk, cut
from xdn.policy import Policy, auth_list
from xdn.policy_notices import policy_change, sign_policy_notice
from xdn.publication import PublishedBefore, Reach, check_standing, describe_reach
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wire_write import request_framing
from xdn.wireconv import (
    checkpoint_to_pb,
    document_keys_to_pb,
    enrolment_to_pb,
    entitlement_to_pb,
    reach_from_pb,
    rekey_to_pb,
    standing_from_pb,
)

__all__ = ["PublishResult", "Publisher", "PublisherSetup", "call_failure"]

log = logging.getLogger(__name__)

#: Key messages per request at most: a site routes each request in one step of its loop.
KEY_MESSAGES_PER_REQUEST = 1_000
#: Seconds a site has to take and acknowledge one publish request (whole or in parts).
PUBLISH_TIMEOUT_S = 120
#: The largest part size: a part with its framing must fit one gRPC message.
MAX_PART_BYTES = MAX_MESSAGE_BYTES // 2
_PUBLISH = f"/{pb.DESCRIPTOR.services_by_name['Disseminator'].full_name}/Publish"

_Reply = TypeVar("_Reply")

#: A site's answers that refuse a request outright: nothing of it was routed. Any other failure
#: (unavailable, deadline, cancelled, internal) may come after the site routed it.
# grpc.aio replaces the status of a call the site ended while parts were still being written
# with this one (grpc/grpc#36066): the site's reason is lost, so say what happened instead.
_STATUS_LOST = "Internal error from Core"
_STATUS_LOST_SAYS = (
    "the site ended the call while parts were still being sent, and gRPC lost its reason "
    "(grpc/grpc#36066): the site's log says why; publishing the document again is safe"
)
_REFUSALS = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNIMPLEMENTED,
})


class _Refused(UsageError):
    """The site refused the request outright (see :data:`_REFUSALS`)."""


def call_failure(what: str, site: str, exc: grpc.aio.AioRpcError) -> UsageError:
    """What to raise for a failed call to ``site``: the site's own words, a refusal (the
    document was not routed) as :class:`_Refused`."""
    code = exc.code().name if exc.code() is not None else "UNKNOWN"
    error = _Refused if exc.code() in _REFUSALS else UsageError
    details = exc.details()
    if exc.code() == grpc.StatusCode.INTERNAL and details == _STATUS_LOST:
        details = _STATUS_LOST_SAYS
    return error(f"{what} at {site} failed ({code}): {details}")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSetup:
    """Everything one publisher needs."""

    name: str
    tls: TlsFiles
    ontology: Ontology
    mapping: Mapping
    policy: Policy
    state_dir: Path
    provenance_log: Path
    connect: str
    retain: int = 10  # recent documents whose keys a joiner is granted (0: none)
    allow_older_policy: bool = False  # publish even if the site enforces a newer policy
    crl: Path | None = None  # the CA's CRL: never seal a key to a revoked member
    part_bytes: int = DEFAULT_PART_BYTES  # largest message sent; larger requests go in parts
    republish: bool = False  # content published as its document's newest: a new version anyway

    def __post_init__(self) -> None:
        if isinstance(self.part_bytes, bool) or not isinstance(self.part_bytes, int):
            raise TypeError(f"part_bytes must be an int, got {self.part_bytes!r}")
        if not MIN_PART_BYTES <= self.part_bytes <= MAX_PART_BYTES:
            raise ValueError(
                f"part_bytes must be within [{MIN_PART_BYTES}, {MAX_PART_BYTES}], "
                f"got {self.part_bytes}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishResult:
    """What happened to one document."""

    document_id: str
    version: int
    fragments: int
    concepts: frozenset[str]
    rekeyed: frozenset[str]
    key_messages: int
    site: str
    reach: Reach  # what the document reached at the site
    sequence: int = 0  # in the publisher's signed sequence
    published_before: bool = False  # the site had routed this content as ``version`` already

    def describe(self) -> str:
        """Who the document reached, in words (see :func:`xdn.publication.describe_reach`)."""
        return describe_reach(self.reach, self.site)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Prepared:
    """A document encrypted and signed, not yet sent."""

    document_id: str
    version: int
    site: str
    dissemination: Body  # serialized, in a file of the state directory or in memory
    message: provenance.Message | None  # None: provenance switched off (a benchmark)
    fragments: int
    concepts: frozenset[str]
    rekeyed: frozenset[str]
    public_keys: dict[str, crypto.PublicKey]  # of the members, for retained-document keys
    refreshes: list[Signed[Enrolment]]  # path refreshes members asked for
    document_keys: list[DocumentKey]
    sequence: int  # in the publisher's signed sequence
    checkpoint: pb.Checkpoint  # signed, naming this document as its concepts' newest
    entitlements: list[pb.Entitlement]  # new or changed since last sent
    publish_id: bytes  # names the publication (b"": none, a new version whatever the content)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Member:
    name: str  # member id: the certificate, not its common name (see xdn.identity)
    public_key: crypto.PublicKey
    concepts: frozenset[str]
    refresh: frozenset[str] = frozenset()  # groups whose epochs it missed (it asks its path)
    credential: certs.Credential | None = None  # verified; its entitlement is evaluated for it


def member_concepts(
    credential: certs.Credential, member: pb.Member, policy: Policy, ontology: Ontology,
    *, at: datetime,
) -> frozenset[str]:
    """The concepts whose group keys ``member`` must hold now.

    The policy is evaluated as if every ``after`` precondition were met and no
    ``max_instances`` budget spent (the most it could grant); the member's site, which sees the
    disseminations and deliveries, narrows that to what it grants the member now.
    """
    preconditions = {(a.publisher, a.concept) for rule in policy.rules for a in rule.after}
    most = auth_list(
        credential, policy, ontology, at=at, disseminated=preconditions, explain=False
    ).concepts
    reported = {c for g in member.grants if g.publisher == policy.publisher for c in g.concepts}
    return frozenset(most) & reported


def _split(request: pb.PublishRequest) -> list[pb.PublishRequest]:
    """``request`` as requests of at most :data:`KEY_MESSAGES_PER_REQUEST` key messages, which
    fit one gRPC message, the document in the last (see :mod:`publisher.split`)."""
    try:
        return split_request(request, MAX_MESSAGE_BYTES // 2, KEY_MESSAGES_PER_REQUEST)
    except ValueError as exc:
        raise UsageError(f"cannot send this publication: {exc}") from None


def _millis(at: datetime) -> int:
    return int(at.timestamp() * 1000)


async def _abandon(preparing: asyncio.Future[_Prepared]) -> None:
    """Stop preparing a document that will not be sent; delete its file if it was made."""
    preparing.cancel()  # (no-op when it is done)
    (outcome,) = await asyncio.gather(preparing, return_exceptions=True)
    if isinstance(outcome, _Prepared):
        outcome.dissemination.delete()


def _document_id(path: Path, document_id: str | None) -> str:
    """The id of a document: ``document_id`` if given, else the file's stem; checked early."""
    chosen = path.stem if document_id is None else document_id
    try:
        return ids.check_id(chosen)
    except ValueError as exc:
        raise UsageError(f"{path}: {exc}; choose another id (--id)") from None


class Publisher:
    """A connected publisher and its key service state."""

    def __init__(
        self,
        setup: PublisherSetup,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        warn: Callable[[str], None] = log.warning,
        streaming: bool | None = None,
    ) -> None:
        """``streaming``: ``None`` streams documents through files when the mapping allows
        (:mod:`publisher.staging`), ``False`` parses them in memory (tests compare the two)."""
        self._setup = setup
        self._streaming = streaming
        self._staging = Staging(setup.state_dir / "outgoing")
        self._staging.clear()  # (what a crash left)
        self._clock = clock
        self._warn = warn
        self._warned: set[str] = set()
        self._crl = None if setup.crl is None else CrlFile(
            setup.crl, setup.tls.ca_pem, warn=warn, kept=setup.state_dir / "crl-in-force.pem"
        )
        self._signer_key = crypto.load_private_key_pem(setup.tls.key_pem)
        self._signer = provenance.Signer(
            node_uri=certs.node_uri(setup.name),
            private_key=self._signer_key,
            certificate=setup.tls.cert_pem,
        )
        # The key service signs every key message with the same key (checked against the cert).
        self._key_signer = KeySigner(
            publisher=setup.name, private_key=self._signer_key, certificate=setup.tls.cert_pem
        )
        self._keys = KeyStore(
            setup.state_dir / "keys.sqlite", publisher=setup.name, retain=setup.retain
        )
        self._lkh = LkhStore(setup.state_dir / "keys.sqlite", publisher=setup.name)
        self._leases = LeaseBook(
            setup.state_dir / "keys.sqlite", ca_pem=setup.tls.ca_pem, ontology=setup.ontology
        )
        self._groups = self._lkh.load_all()
        self._publish_secret = self._keys.publish_secret()
        setup.provenance_log.parent.mkdir(parents=True, exist_ok=True)
        self._log = provenance.ProvenanceLog(
            setup.provenance_log, node_uri=self._signer.node_uri, cert_pem=setup.tls.cert_pem
        )
        self._channel = grpc.aio.secure_channel(
            setup.connect, channel_credentials(setup.tls), options=CHANNEL_OPTIONS
        )
        self._stub = pb_grpc.DisseminatorStub(self._channel)
        self._publish_serialized = self._channel.unary_unary(  # Publish, of bytes at hand
            _PUBLISH, request_serializer=bytes, response_deserializer=pb.PublishAck.FromString
        )
        self._concept_order = concept_order(setup.ontology)  # ~15 ms: once, not per document
        self._unsent: dict[str, int] = {}  # versions prepared but not yet acknowledged
        self._inflight: dict[str, int] = {}  # concept → sequence prepared, not acknowledged
        self._stateful = stateful_concepts(setup.policy, setup.ontology)
        self._entitled: dict[str, pb.Entitlement] = {}  # member → the last one signed
        self._site_policy = 0  # the policy version the site enforces, from its standing
        self._view: MemberView[_Member] = MemberView()
        self._planned_at: dict[str, int] = {}  # concept → holders' generation its group has
        self._judged_by: tuple[int, frozenset[int]] | None = None  # (policy version, CRL)
        self._unentitled: set[str] = set()  # members changed since entitlements were looked at
        self._entitled_version = 0  # the policy version entitlements were last looked at for
        # listed by the site, in force, but granted nothing by our policy: told so ahead of
        # the sites (see _farewells)
        self._departing: dict[str, certs.Credential] = {}

    async def close(self) -> None:
        await self._channel.close()
        self._keys.close()
        self._lkh.close()
        self._leases.close()
        self._log.close()

    async def _call(self, what: str, call: Awaitable[_Reply]) -> _Reply:
        """Await one RPC; a refusal or failure becomes a UsageError saying what the site said."""
        try:
            return await call
        except grpc.aio.AioRpcError as exc:
            raise call_failure(what, self._setup.connect, exc) from None

    async def _publish(self, what: str, request: pb.PublishRequest) -> pb.PublishAck:
        """Send one request, serialized once: whole (``Publish``) when it fits the part size,
        else in parts (``PublishParts``); return the site's acknowledgement.

        Raises:
            UsageError: the site refused the request, or the call failed (see :meth:`_call`).
        """
        return await self._publish_chunks(what, [request.SerializeToString()])

    async def _publish_chunks(
        self, what: str, chunks: Sequence[bytes | ReadableChunk]
    ) -> pb.PublishAck:
        """Send a serialized request given as consecutive chunks (a document's read from its
        file a part at a time), as :meth:`_publish` does."""
        size = sum(len(c) for c in chunks)
        part_bytes = self._setup.part_bytes
        if size <= part_bytes:
            data = b"".join(c if isinstance(c, bytes) else c.read(0, len(c)) for c in chunks)
            ack: pb.PublishAck = await self._call(
                what, self._publish_serialized(data, timeout=PUBLISH_TIMEOUT_S)
            )
            return ack
        log.info("%s: %d bytes, in parts of at most %d", what, size, part_bytes)
        parts = (
            pb.Part(data=p.data, size=p.size, more=p.more) for p in cut(chunks, part_bytes)
        )
        return await self._call(what, self._stub.PublishParts(parts, timeout=PUBLISH_TIMEOUT_S))

    def _check_site(self, reply: pb.Membership) -> None:
        """Refuse to go on at a site that would drop what we send; warn once per finding."""
        self._site_policy = reply.standing.policy_version if reply.HasField("standing") else 0
        if not reply.HasField("standing"):
            warnings: tuple[str, ...] = (
                f"site {reply.site or self._setup.connect} does not report where it stands "
                "(an older version): cannot check that it is a root enforcing our policy",
            )
        else:
            warnings = check_standing(
                standing_from_pb(reply.site, reply.standing),
                publisher=self._setup.name,
                policy_version=self._setup.policy.version,
                allow_older_policy=self._setup.allow_older_policy,
            )
        for warning in warnings:
            if warning not in self._warned:
                self._warned.add(warning)
                self._warn(warning)

    async def _members(self) -> str:
        """Who must hold which keys now: the site's membership changes since we last asked,
        each entry judged here (see :mod:`publisher.membership`)."""
        now = self._clock()
        revoked = self._crl.revoked(now) if self._crl is not None else frozenset()
        basis = (self._setup.policy.version, revoked)
        if basis != self._judged_by:  # what entries are judged by changed: judge all again
            self._view.forget()
            self._judged_by = basis
        reply = await self._call(
            "asking who is registered",
            self._stub.GetMembership(self._view.request(self._setup.name), timeout=30),
        )
        self._check_site(reply)
        self._view.apply(reply, lambda member: self._judge(member, now, revoked))
        self._view.current(_millis(now))  # lapsed leases out before any group is planned
        site: str = reply.site
        return site

    def _judge(
        self, member: pb.Member, now: datetime, revoked: frozenset[int]
    ) -> Judged[_Member] | None:
        """``member``'s entry judged: its certificate, its lease, what our policy grants it
        (``None``: not a member of any group now)."""
        self._departing.pop(member.subscriber, None)
        try:  # a revoked member is not a member: it gets no key, and is rekeyed out
            credential = certs.verify_certificate(
                member.certificate, self._setup.tls.ca_pem, at=now, role="subscriber",
                revoked=revoked,
            )
        except CertificateError as exc:
            log.warning("ignoring member %s: %s", member.subscriber, exc)
            return None
        if member.subscriber != credential.member_id:
            log.warning(
                "ignoring member %r: its certificate is %r's", member.subscriber,
                credential.member_id,
            )
            return None
        bound = self._leases.bound(
            credential.member_id, member.certificate, member.lease, at=now, revoked=revoked
        )  # None: no current lease of its own (lapsed, a leave, forged): not a member
        held = self._leases.held(credential.member_id)
        if bound is None or held is None:
            return None
        concepts = member_concepts(
            credential, member, self._setup.policy, self._setup.ontology, at=now
        )
        if not concepts:  # our policy grants it nothing: tell it so ahead of the sites
            self._departing[credential.member_id] = credential
            return None
        if bound:  # the concepts it asked for, each with its maximum conceptual block
            ontology = self._setup.ontology
            concepts &= frozenset().union(
                *(ontology.block(c) for c in bound if c in ontology.concepts)
            )
        if not concepts:
            return None
        judged = _Member(
            name=credential.member_id,
            public_key=certs.public_key_of(member.certificate),
            concepts=concepts,
            refresh=frozenset(
                c for g in member.refresh if g.publisher == self._setup.name for c in g.concepts
            ),
            credential=credential,
        )
        return Judged(judged, min(held.expires_at, _millis(credential.not_after)))

    async def members(self) -> list[str]:
        """The ids of the members that hold some group key of ours now (asking the site)."""
        await self._members()
        return sorted(self._view.current(_millis(self._clock())))

    async def wait_for_members(self, names: Sequence[str], *, timeout: float) -> None:
        """Wait until every subscriber in ``names`` is registered for some of our concepts.

        A name is a member id or a common name (then any certificate with that name counts).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            members = await self.members()
            known = set(members) | {identity.person(name) for name in members}
            missing = set(names) - known
            if not missing:
                return
            if loop.time() > deadline:
                raise UsageError(
                    f"subscribers {sorted(missing)} did not register within {timeout:.0f}s"
                )
            await asyncio.sleep(0.1)

    async def publish(self, path: Path, *, document_id: str | None = None) -> PublishResult:
        """Publish one document file."""
        return await self._send(await self._prepare(path, document_id=document_id))

    async def publish_each(
        self,
        paths: Sequence[Path],
        *,
        pace: Callable[[int], Awaitable[None]] | None = None,
        document_ids: Sequence[str] | None = None,
        stop: asyncio.Event | None = None,
    ) -> AsyncIterator[PublishResult]:
        """Publish documents in order, encoding each while the network takes the previous one.

        One ``Publish`` is in flight at a time and each request takes the key outbox as the
        previous acknowledgement left it, so the network receives what a serial loop sends, in
        the same order. ``pace(i)`` is awaited before document ``i`` is prepared.
        ``document_ids`` names the documents (default: each file's stem).

        Each result is yielded as soon as the site acknowledged it and it is recorded, while
        the next document is being prepared: if preparing that one fails (its ``GetMembership``
        refused, say), what was published before is reported all the same.

        Once ``stop`` is set (a SIGTERM) no further document is sent: the one in flight is
        acknowledged and recorded, one being prepared is abandoned (its sequence number, never
        sent, is named by no chain nor checkpoint), and the iteration ends.
        """
        if document_ids is not None and len(document_ids) != len(paths):
            raise UsageError(f"{len(document_ids)} document ids for {len(paths)} documents")
        sending: asyncio.Task[PublishResult] | None = None
        try:
            for index, path in enumerate(paths):
                if stop is not None and stop.is_set():
                    break
                named = None if document_ids is None else document_ids[index]
                preparing = asyncio.ensure_future(self._paced(index, path, named, pace))
                try:
                    if sending is not None:
                        previous, sending = sending, None
                        yield await previous  # reported while the next one is prepared
                    prepared = await preparing
                except BaseException:  # (the previous one refused, or the caller stopped)
                    await _abandon(preparing)
                    raise
                if stop is not None and stop.is_set():  # (stopped while it was prepared)
                    self._drop_unsent(prepared)
                    break
                sending = self._send(prepared)
            if sending is not None:
                previous, sending = sending, None
                yield await previous
        finally:
            if sending is not None:  # preparing the next one failed: finish this one's bookkeeping
                await sending

    async def _paced(
        self, index: int, path: Path, document_id: str | None,
        pace: Callable[[int], Awaitable[None]] | None,
    ) -> _Prepared:
        """Document ``index`` prepared once ``pace(index)`` allows it."""
        if pace is not None:
            await pace(index)
        return await self._prepare(path, document_id=document_id)

    async def _prepare(self, path: Path, *, document_id: str | None = None) -> _Prepared:
        """Map, rekey where membership changed, encrypt, sign: everything but the sending."""
        setup = self._setup
        document_id = _document_id(path, document_id)
        named = b"" if setup.republish else publish_id(self._publish_secret, document_id, path)
        # Ask first: while waiting, the loop starts sending the previous document.
        site = await self._members()
        document = read_document(path, setup.mapping, self._staging, streaming=self._streaming)
        present = document.concepts
        if not present:
            raise UsageError(f"{path}: no element maps to any concept; nothing to publish")
        if document.unpublished:  # once per document: the mapping leaves this out of every view
            log.warning("%s: %s", path, document.unpublished.describe())
        rekeyed, _ = self._rekey(present)
        keys = {
            c: ConceptKey(
                publisher=setup.name,
                concept=c,
                epoch=self._groups[c].epoch,
                group_key=self._groups[c].group_key,
            )
            for c in present
        }
        version = self._next_version(document_id)
        sequencing = self._sequencing(present)
        now_ms = int(self._clock().timestamp() * 1000)
        encoded = document.encode(
            document_id=document_id,
            publisher=setup.name,
            version=version,
            issued_at_ms=now_ms,
            keys=keys,
            signer=self._signer_key,
            concept_order=self._concept_order,
            sequencing=sequencing,
        )
        try:
            message = self._originate(document_id, version, site, encoded.signed_manifest, now_ms)
            dissemination = encoded.frame(
                provenance=b"" if message is None else message.to_nquads(),
                publisher_certificate=setup.tls.cert_pem,
            )
        finally:
            encoded.discard()  # (framed: nothing left to let go)
        try:
            return _Prepared(
                document_id=document_id,
                version=version,
                site=site,
                dissemination=dissemination,
                message=message,
                fragments=encoded.fragments,
                concepts=present,
                rekeyed=rekeyed,
                public_keys=self._view.public_keys(),
                refreshes=self._path_refreshes(),
                document_keys=[
                    (c, k.epoch, k.name_for(document_id), k.for_document(document_id))
                    for c, k in keys.items()
                ],
                sequence=sequencing.sequence,
                checkpoint=self._checkpoint(now_ms),
                entitlements=self._entitlements(),
                publish_id=named,
            )
        except BaseException:
            dissemination.delete()
            raise

    def _originate(
        self, document_id: str, version: int, site: str, signed: SignedManifest, now_ms: int
    ) -> provenance.Message | None:
        """The signed provenance message publishing ``version`` to ``site`` (``None``:
        provenance is switched off)."""
        if not provenance.enabled():
            return None
        node = self._signer.node_uri
        previous = provenance.message_uri(node, document_id, f"v{version - 1}")
        return provenance.originate(
            self._signer,
            message_uri=provenance.message_uri(node, document_id, f"v{version}"),
            previous_message=previous if version > 1 else None,
            recipient_uri=certs.node_uri(site),
            content=provenance.ContentFacts(
                document_id=document_id,
                publisher=self._setup.name,
                manifest_root=signed.manifest.root,
                leaf_count=signed.manifest.leaf_count,
                version=version,
                concepts=tuple((r.concept, r.first, r.end) for r in signed.manifest.ranges),
            ),
            timestamp_ms=now_ms,
        )

    def _entitlements(self, *, every: bool = False) -> list[pb.Entitlement]:
        """Signed entitlements of the members that have none or a changed one (``every``: all
        of them); none while the site enforces another version of our policy. Only members
        that changed are looked at, unless the policy did."""
        policy = self._setup.policy
        self._unentitled |= self._view.take_changed()
        if self._site_policy != policy.version:
            return self._farewells() if self._site_policy < policy.version else []
        now = self._clock()
        current = self._view.current(_millis(now))
        if every or self._entitled_version != policy.version:
            names: Iterable[str] = current
        else:
            names = self._unentitled & current.keys()
        self._entitled_version, self._unentitled = policy.version, set()
        out = []
        for name in sorted(names):
            member = current[name].member
            if member.credential is None:
                continue
            last = self._entitled.get(member.name)
            if (
                last is None
                or last.certificate != member.credential.fingerprint
                or last.policy_version != policy.version
            ):
                entitlement = entitlement_of(
                    member.credential, policy, self._setup.ontology, at=now,
                    stateful=self._stateful,
                )
                last = entitlement_to_pb(
                    sign_entitlement(entitlement, self._signer_key),
                    publisher_certificate=self._setup.tls.cert_pem,
                )
                last.notice = self._policy_notice(member.name, member.credential, entitlement)
                self._entitled[member.name] = last
            elif not every:
                continue
            out.append(last)
        return out

    def _farewells(self) -> list[pb.Entitlement]:
        """The entitlements, granting nothing, of the members our policy version takes
        everything from, each with its signed notice, while the site enforces an older one.

        Once the sites apply that version such a member is no longer a member: the site ends
        its subscription, and no entitlement (hence no notice) can reach it any more. So it is
        told while it still is one, ahead of the sites: the site, still listing it, routes
        its entitlement to it like any other. Only members we entitled to something before
        (under the same certificate) are told; each such request carries the same notice
        again (sites and the subscriber keep one per version).
        """
        policy, now, out = self._setup.policy, self._clock(), []
        for name, credential in sorted(self._departing.items()):
            known = self._keys.entitled(name)
            if known is None or known.certificate != credential.fingerprint or (
                known.policy_version > policy.version
            ) or (known.policy_version < policy.version and not known.concepts):
                continue
            entitlement = entitlement_of(
                credential, policy, self._setup.ontology, at=now, stateful=self._stateful
            )
            if entitlement.concepts or entitlement.conditional:
                continue  # (something is left, if only conditionally: not a farewell)
            signed = entitlement_to_pb(
                sign_entitlement(entitlement, self._signer_key),
                publisher_certificate=self._setup.tls.cert_pem,
            )
            signed.notice = self._policy_notice(name, credential, entitlement)
            if signed.notice:
                out.append(signed)
        return out

    def _policy_notice(
        self, member: str, credential: certs.Credential, entitlement: Entitlement
    ) -> bytes:
        """The signed policy-change notice to send with ``entitlement`` (empty: none).

        Measured against the last entitlement recorded for ``member`` (in the key store, so a
        later process measures against what an earlier one signed): one notice when the policy
        version moved and the concepts granted changed; the same notice again when the same
        version's entitlement is signed again (sites and subscribers keep one per version).
        """
        known = self._keys.entitled(member)
        if known is not None and known.policy_version == entitlement.policy_version:
            notice = known.notice if known.certificate == entitlement.certificate else b""
        else:
            change = None if known is None or known.certificate != entitlement.certificate else (
                policy_change(
                    publisher=entitlement.publisher, subscriber=credential.name,
                    certificate=entitlement.certificate,
                    previous_version=known.policy_version, previous=known.concepts,
                    version=entitlement.policy_version, current=entitlement.concepts,
                    at_ms=entitlement.issued_at_ms,
                    everything=not (entitlement.concepts or entitlement.conditional),
                )
            )
            notice = b""
            if change is not None:
                message = sign_policy_notice(
                    self._signer, change, timestamp_ms=entitlement.issued_at_ms
                )
                self._log.append(message)  # the signer's log: the audit sees it once
                notice = message.to_nquads()
                log.info("policy v%d changes %s's grants: notice signed",
                         entitlement.policy_version, credential.name)
        self._keys.record_entitled(member, Entitled(
            certificate=entitlement.certificate, policy_version=entitlement.policy_version,
            concepts=entitlement.concepts, notice=notice,
        ))
        return notice

    def _sequencing(self, present: frozenset[str]) -> Sequencing:
        """The next sequence number and each present concept's previous document (one still
        being sent counts: it goes first)."""
        sequence = self._keys.reserve_sequence()
        newest = {**self._keys.concept_sequences(), **self._inflight}
        previous = {c: newest[c] for c in present if c in newest}
        self._inflight.update(dict.fromkeys(present, sequence))
        return Sequencing(sequence=sequence, previous=previous)

    def _checkpoint(self, now_ms: int) -> pb.Checkpoint:
        """Our signed statement of each concept's newest document, as sent so far."""
        checkpoint = Checkpoint(
            publisher=self._setup.name,
            issued_at_ms=now_ms,
            sequence=self._keys.last_sequence(),
            latest={**self._keys.concept_sequences(), **self._inflight},
            policy_version=self._setup.policy.version,
        )
        return checkpoint_to_pb(
            sign_checkpoint(checkpoint, self._signer_key),
            publisher_certificate=self._setup.tls.cert_pem,
        )

    def _next_version(self, document_id: str) -> int:
        """The next version of ``document_id``, counting one still being sent and one an
        earlier process attempted but did not record (interrupted: the root may have routed
        it, and ignores a version it routed)."""
        version = max(
            self._keys.next_version(document_id),
            self._keys.attempted_version(document_id) + 1,
            self._unsent.get(document_id, 0) + 1,
        )
        self._unsent[document_id] = version
        return version

    def _send(self, prepared: _Prepared) -> asyncio.Task[PublishResult]:
        """Start sending a prepared document with the key outbox as it is now."""
        request, outbox = self._key_messages(prepared.public_keys, prepared.refreshes)
        request.dissemination.SetInParent()  # (a place for the document: see _deliver)
        request.checkpoint.CopyFrom(prepared.checkpoint)
        request.entitlements.extend(prepared.entitlements)
        return asyncio.ensure_future(self._deliver(prepared, request, outbox))

    async def _deliver(
        self, prepared: _Prepared, request: pb.PublishRequest, outbox: list[Outgoing]
    ) -> PublishResult:
        """Await the network's acknowledgement, then record what it accepted.

        ``request`` holds an empty dissemination where the document goes: the last request
        :func:`_split` makes carries it, and the document's bytes take its place there.
        """
        try:
            # Before any byte is sent: a version the root routes before we record it is then
            # recorded with the keys it was encrypted with (see _record_before).
            self._keys.record_attempt(
                prepared.document_id, prepared.version, prepared.document_keys,
                sequence=prepared.sequence,
            )
            *keys_first, last = _split(request)
            for part in keys_first:  # (key messages too many for one request)
                await self._publish(
                    f"sending key messages before {prepared.document_id!r}", part
                )
            last.ClearField("dissemination")
            last.publish_id = prepared.publish_id
            before, after = request_framing(last, len(prepared.dissemination))
            ack = await self._publish_chunks(
                f"publishing {prepared.document_id!r}", [before, prepared.dissemination, after]
            )
        except _Refused:  # not routed: its version is free again (see _next_version)
            self._keys.drop_attempt(prepared.document_id, sequence=prepared.sequence)
            raise
        finally:  # accepted: the key store has it below; refused: no document points to it
            self._drop_inflight(prepared)
        try:
            reach = reach_from_pb(ack)
        except ProtocolError as exc:
            raise UsageError(f"publishing {prepared.document_id!r}: {exc}") from None
        for sent in outbox:  # (routed, whether the document was or had been before)
            self._lkh.delivered(sent.concept, sent.epoch)
        if reach.before is not None:
            version, sequence = self._record_before(prepared, reach.before)
        else:
            version, sequence = prepared.version, prepared.sequence
            self._keys.commit(
                prepared.document_id,
                prepared.version,
                prepared.document_keys,
                sequence=prepared.sequence,
                concepts=prepared.concepts,
            )
            if prepared.message is not None:
                self._log.append(prepared.message)
        if self._unsent.get(prepared.document_id) == prepared.version:
            del self._unsent[prepared.document_id]
        return PublishResult(
            document_id=prepared.document_id,
            version=version,
            sequence=sequence,
            published_before=reach.before is not None,
            fragments=prepared.fragments,
            concepts=prepared.concepts,
            rekeyed=prepared.rekeyed,
            key_messages=len(request.keys) + len(request.rekeys) + len(request.document_keys),
            site=prepared.site,
            reach=reach,
        )

    def _drop_inflight(self, prepared: _Prepared) -> None:
        """``prepared`` is no longer in flight: its file goes, no later document points to it
        unless the key store records it."""
        prepared.dissemination.delete()
        for concept in prepared.concepts:
            if self._inflight.get(concept) == prepared.sequence:
                del self._inflight[concept]

    def _drop_unsent(self, prepared: _Prepared) -> None:
        """Abandon ``prepared`` before it was sent: its version and sequence number stay
        unused (nothing sent names them)."""
        self._drop_inflight(prepared)
        if self._unsent.get(prepared.document_id) == prepared.version:
            del self._unsent[prepared.document_id]

    def _record_before(self, prepared: _Prepared, before: PublishedBefore) -> tuple[int, int]:
        """Record a publication the site had routed before ``prepared`` (an attempt of the same
        content): the version and sequence number it routed, with the document keys of the
        attempt it routed, and log the message it routed (checked to be ours) — unless an
        earlier acknowledgement recorded it already. Returns (version, sequence)."""
        document_id = prepared.document_id
        message = None
        if before.provenance:
            try:
                message = own_message(
                    before, node_uri=self._signer.node_uri,
                    public_key=certs.public_key_of(self._setup.tls.cert_pem),
                    document_id=document_id,
                )
            except ProtocolError as exc:
                raise UsageError(
                    f"publishing {document_id!r} at {self._setup.connect}: {exc}"
                ) from None
        self._keys.drop_attempt(document_id, sequence=prepared.sequence)  # (not routed)
        if self._keys.next_version(document_id) > before.version:
            log.info("%s v%d was recorded already", document_id, before.version)
            return before.version, before.sequence
        attempt = self._keys.attempt(document_id, sequence=before.sequence)
        if attempt is None or attempt[0] != before.version:
            self._warn(
                f"{document_id} v{before.version} was routed by an attempt this publisher kept "
                "no record of: joiners are not granted its keys"
            )
            keys: list[DocumentKey] = []
        else:
            keys = attempt[1]
        self._keys.commit(
            document_id, before.version, keys, sequence=before.sequence,
            concepts=prepared.concepts,
        )
        if message is not None:
            self._log.append(message)
        return before.version, before.sequence

    def _path_refreshes(self) -> list[Signed[Enrolment]]:
        """Members that missed epochs get their current path (after any rekey just planned)."""
        return [
            self._key_signer.sign(self._groups[c].path_refresh(m.name, m.public_key))
            for m in self._view.refreshing()
            for c in sorted(m.refresh & m.concepts)
            if c in self._groups and m.name in self._groups[c]
        ]

    def _key_messages(
        self,
        public_keys: dict[str, crypto.PublicKey],
        refreshes: Sequence[Signed[Enrolment]] = (),
    ) -> tuple[pb.PublishRequest, list[Outgoing]]:
        """A request carrying the key outbox (rekeys, enrolments, retained documents' keys) and
        the path refreshes members asked for; every key message signed by the key service."""
        outbox = self._lkh.pending()
        grants: list[Signed[DocumentKeyGrant]] = []
        for enrolment in (e.message for o in outbox for e in o.enrolments):
            keys = self._keys.retained_keys(enrolment.concept, before_epoch=enrolment.epoch)
            if keys and enrolment.member in public_keys:
                grant = seal_document_keys(
                    publisher=self._setup.name,
                    concept=enrolment.concept,
                    member=enrolment.member,
                    keys=keys,
                    public_key=public_keys[enrolment.member],
                )
                grants.append(self._key_signer.sign(grant))
        request = pb.PublishRequest(
            rekeys=[rekey_to_pb(o.message) for o in outbox],
            keys=[
                *(enrolment_to_pb(e) for o in outbox for e in o.enrolments),
                *map(enrolment_to_pb, refreshes),
            ],
            document_keys=[document_keys_to_pb(g) for g in grants],
        )
        return request, outbox

    async def sync_keys(self) -> tuple[frozenset[str], int]:
        """Bring every group up to date without publishing: enrol joiners (granting them the
        retained documents' keys), rekey after leaves. Returns (groups rekeyed, key messages)."""
        await self._members()
        rekeyed, _ = self._rekey(frozenset(self._groups))
        refreshes = self._path_refreshes()
        request, outbox = self._key_messages(self._view.public_keys(), refreshes)
        if self._keys.last_sequence():  # subscribers learn how far our sequence has gone
            request.checkpoint.CopyFrom(self._checkpoint(int(self._clock().timestamp() * 1000)))
        request.entitlements.extend(self._entitlements(every=True))
        if outbox or refreshes or request.HasField("checkpoint") or request.entitlements:
            for part in _split(request):
                await self._publish("sending key messages", part)
            for sent in outbox:
                self._lkh.delivered(sent.concept, sent.epoch)
        return rekeyed, len(request.keys) + len(request.rekeys) + len(request.document_keys)

    def _rekey(self, present: frozenset[str]) -> tuple[frozenset[str], int]:
        """Start new epochs where membership changed; commit them with their messages."""
        public_keys = self._view.public_keys()
        changes: list[EpochChange] = []
        for concept in sorted(present):
            group = self._groups.get(concept)
            if group is None:  # (a group with no members is falsy: it has __len__)
                group = GroupController(publisher=self._setup.name, concept=concept)
            generation = self._view.generation(concept)
            if group.epoch and self._planned_at.get(concept) == generation:
                continue  # its holders did not change since it was last planned
            change = group.plan_members(self._view.holders(concept))
            if change is None:
                self._planned_at[concept] = generation
            if change is None and group.epoch == 0:
                change = group.plan()  # a group nobody may read yet still needs a key
            if change is not None:
                changes.append(change)
            self._groups[concept] = group
        enrolments = [e for c in changes for e in c.enrolments(public_keys)]
        if changes:
            self._lkh.commit(changes, signer=self._key_signer, enrolments=enrolments)
            for change in changes:
                self._groups[change.concept].apply(change)
                self._planned_at[change.concept] = self._view.generation(change.concept)
        return frozenset(c.concept for c in changes), len(enrolments)

    async def publish_all(self, paths: Sequence[Path]) -> list[PublishResult]:
        """Publish several documents in order (pipelined, see :meth:`publish_each`)."""
        return [result async for result in self.publish_each(paths)]
