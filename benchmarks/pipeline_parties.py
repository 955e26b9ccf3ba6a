"""A publisher, a root site and a subscriber in one process, for the pipeline benchmarks.

:class:`PublishRun` does per document what ``xdn publish`` does between reading the file and
handing the wire messages to gRPC (:meth:`publisher.client.Publisher._prepare` and
``_deliver``, without the network and the key service): the publish id (a keyed digest of the
content), :func:`publisher.staging.read_document` (streamed when the mapping allows, as the CLI
does), the encoding into the staging folder, the provenance message originated to the root
site, the framed ``Dissemination`` with the signed checkpoint in its ``PublishRequest``
(:func:`xdn.wire_write.request_framing`), and the bytes gRPC sends: the request whole, or its
``Part`` messages when it is over the part size. The group keys are held already.

:func:`delivered` plays the root site, untimed: the subscriber's copy of the dissemination
(every concept), its provenance relayed one hop to the subscriber, as ``ServerMessage`` bytes,
in parts when over the part size.

:class:`SubscribeRun` does what ``xdn subscribe`` does with those bytes (``subscriber.client``
then :meth:`subscriber.session.Session.on_dissemination`): parse each message, join parts into
the spool, verify the publisher certificate against the CA and the CRL, the manifest and range
proofs, decrypt, rebuild the view, verify the provenance chain, sign the receipt, write the view
(synced) and record the document. Each run gets a fresh session (a new state folder, made
before the clock starts): a session opens a document version once.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from publisher.idempotence import publish_id
from publisher.staging import Staging, read_document
from subscriber.session import Session, SubscriberSetup
from subscriber.spool import SpooledDissemination, read_spooled
from xdn import certs, crypto, provenance
from xdn.codec import ConceptKey, Sequencing, concept_order
from xdn.completeness import Checkpoint, sign_checkpoint
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.parts import DEFAULT_PART_BYTES, ReadableChunk, cut
from xdn.paths import REPO_ROOT
from xdn.span_files import FileSource
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_parts import DeliveryJoiner
from xdn.wire_write import request_framing
from xdn.wireconv import checkpoint_to_pb, leaf_ranges

__all__ = ["MAPPING", "Parties", "PublishRun", "SubscribeRun", "delivered", "parties"]

PUBLISHER, SITE, SUBSCRIBER = "production-dept", "d1", "alice"
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
MAPPING = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", ONTOLOGY)
GROUP_KEYS = {c: crypto.sha256(c.encode()) for c in ONTOLOGY.concepts}
EPOCH = 1


@dataclass(frozen=True, slots=True)
class Parties:
    """Everyone's credentials, issued by one CA, and the CA's CRL."""

    ca_pem: bytes
    crl_pem: bytes
    publisher: tuple[bytes, bytes]  # (certificate, key) PEM
    site: tuple[bytes, bytes]
    subscriber: tuple[bytes, bytes]


def parties(now: datetime) -> Parties:
    """A CA, the three parties' credentials and a fresh CRL revoking no one."""
    ca = certs.create_ca("bench-ca", now=now)
    return Parties(
        ca_pem=ca[0],
        crl_pem=certs.create_crl(*ca, [], now=now, next_update=now + timedelta(days=1)),
        publisher=certs.issue(*ca, name=PUBLISHER, role="publisher", now=now),
        site=certs.issue(
            *ca,
            name=SITE,
            role="site",
            attributes={certs.BLOCK_FIELD: "ProductionProcess"},
            now=now,
        ),
        subscriber=certs.issue(*ca, name=SUBSCRIBER, role="subscriber", now=now),
    )


def _signer(name: str, credential: tuple[bytes, bytes]) -> provenance.Signer:
    return provenance.Signer(
        node_uri=certs.node_uri(name),
        private_key=crypto.load_private_key_pem(credential[1]),
        certificate=credential[0],
    )


class PublishRun:
    """``xdn publish``'s work on one document, file to wire messages (see the module)."""

    def __init__(self, who: Parties, workdir: Path, *, part_bytes: int = DEFAULT_PART_BYTES):
        self._cert = who.publisher[0]
        self._signer = _signer(PUBLISHER, who.publisher)
        self._staging = Staging(workdir / "outgoing")
        self._secret = crypto.random_bytes(32)
        self._order = concept_order(ONTOLOGY)
        self._part_bytes = part_bytes

    def __call__(self, path: Path, *, version: int, now_ms: int) -> list[bytes]:
        """The messages gRPC sends to publish ``path`` as version ``version``."""
        document_id = path.stem
        named = publish_id(self._secret, document_id, path)
        document = read_document(path, MAPPING, self._staging)
        keys = {
            c: ConceptKey(publisher=PUBLISHER, concept=c, epoch=EPOCH, group_key=GROUP_KEYS[c])
            for c in document.concepts
        }
        encoded = document.encode(
            document_id=document_id,
            publisher=PUBLISHER,
            version=version,
            issued_at_ms=now_ms,
            keys=keys,
            signer=self._signer.private_key,
            concept_order=self._order,
            sequencing=Sequencing(sequence=version),
        )
        try:
            node = self._signer.node_uri
            manifest = encoded.signed_manifest.manifest
            message = provenance.originate(
                self._signer,
                message_uri=provenance.message_uri(node, document_id, f"v{version}"),
                recipient_uri=certs.node_uri(SITE),
                content=provenance.ContentFacts(
                    document_id=document_id,
                    publisher=PUBLISHER,
                    manifest_root=manifest.root,
                    leaf_count=manifest.leaf_count,
                ),
                timestamp_ms=now_ms,
            )
            body = encoded.frame(provenance=message.to_nquads(), publisher_certificate=self._cert)
        finally:
            encoded.discard()
        try:
            checkpoint = Checkpoint(
                publisher=PUBLISHER,
                issued_at_ms=now_ms,
                sequence=version,
                latest=dict.fromkeys(document.concepts, version),
            )
            request = pb.PublishRequest(
                publish_id=named,
                checkpoint=checkpoint_to_pb(
                    sign_checkpoint(checkpoint, self._signer.private_key),
                    publisher_certificate=self._cert,
                ),
            )
            before, after = request_framing(request, len(body))
            chunks: list[bytes | ReadableChunk] = [before, body, after]
            if len(before) + len(body) + len(after) <= self._part_bytes:
                return [before + body.read(0, len(body)) + after]
            return [
                pb.Part(data=p.data, size=p.size, more=p.more).SerializeToString()
                for p in cut(chunks, self._part_bytes)
            ]
        finally:
            body.delete()


def _joined(messages: list[bytes]) -> pb.PublishRequest:
    if len(messages) == 1:
        data = messages[0]
    else:
        data = b"".join(pb.Part.FromString(m).data for m in messages)
    request = pb.PublishRequest()
    request.ParseFromString(data)
    return request


def delivered(
    who: Parties, published: list[bytes], *, now_ms: int, part_bytes: int = DEFAULT_PART_BYTES
) -> list[bytes]:
    """The root site's delivery of a published document to the subscriber (every concept),
    as the ``ServerMessage`` bytes it sends: whole, or in parts."""
    dissemination = _joined(published).dissemination
    received = provenance.Message.from_nquads(dissemination.provenance)
    document_id = dissemination.manifest.document_id
    relayed = provenance.relay(
        received,
        _signer(SITE, who.site),
        message_uri=provenance.message_uri(certs.node_uri(SITE), document_id, SUBSCRIBER),
        recipient_uri=certs.node_uri(SUBSCRIBER),
        leaves=leaf_ranges(dissemination.fragments),
        timestamp_ms=now_ms,
    )
    dissemination.provenance = relayed.to_nquads()
    delivery = pb.Delivery(sequence=1, dissemination=dissemination).SerializeToString()
    if len(delivery) <= part_bytes:
        return [pb.ServerMessage(delivery=pb.Delivery.FromString(delivery)).SerializeToString()]
    return [
        pb.ServerMessage(
            delivery=pb.Delivery(sequence=1, part=pb.Part(data=p.data, size=p.size, more=p.more))
        ).SerializeToString()
        for p in cut([delivery], part_bytes)
    ]


class SubscribeRun:
    """``xdn subscribe``'s work on one delivered document, wire messages to the view on disk
    (see the module). :meth:`prepare` (untimed) makes a fresh session; calling the run takes
    the messages through it."""

    def __init__(self, who: Parties, workdir: Path, *, clock: Callable[[], datetime]):
        self._who = who
        self._workdir = workdir
        self._clock = clock
        self._session: Session | None = None
        self._runs = 0

    def prepare(self) -> None:
        """A new session holding the group keys (the previous one's files deleted)."""
        self.close()
        self._runs += 1
        root = self._workdir / f"subscriber-{self._runs}"
        cert, key = self._who.subscriber
        setup = SubscriberSetup(
            name=SUBSCRIBER,
            tls=TlsFiles(cert_pem=cert, key_pem=key, ca_pem=self._who.ca_pem),
            connect=f"{SITE}:0",
            out_dir=root / "out",
            state_dir=root / "state",
            provenance_log=root / "provenance.nq",
            local_crl=self._who.crl_pem,
            max_document_bytes=1 << 31,
        )
        with contextlib.redirect_stdout(io.StringIO()):  # (it says which CRL is in force)
            session = Session(setup, clock=self._clock)
        for concept, group_key in GROUP_KEYS.items():
            session.keyring.put(PUBLISHER, concept, EPOCH, group_key)
        self._session = session

    def __call__(self, messages: list[bytes]) -> Path:
        """Open the delivered document; return the view's path."""
        session = self._session
        if session is None:
            raise RuntimeError("prepare() first")
        parts: DeliveryJoiner[FileSource] = DeliveryJoiner(
            session.setup.max_document_bytes, f"site {SITE}", session.spool.open_sink
        )
        whole: pb.Delivery | SpooledDissemination | None = None
        for data in messages:
            delivery = pb.ServerMessage.FromString(data).delivery
            if delivery.WhichOneof("body") == "part":
                whole = parts.add(delivery, lambda spooled: read_spooled(spooled, "bench", 1))
            else:
                whole = delivery
        if isinstance(whole, SpooledDissemination):
            try:
                receipt = session.on_dissemination(whole.message, whole.sequence, stored=whole)
            finally:
                whole.delete()
        elif whole is not None:
            receipt = session.on_dissemination(whole.dissemination, whole.sequence)
        else:
            raise RuntimeError("the messages make no delivery")
        if not receipt:
            raise RuntimeError(f"the subscriber refused the document: {session.report}")
        (view,) = (session.setup.out_dir / "views").rglob("*.xml")
        return view

    def close(self) -> None:
        """Close the session and delete its files."""
        if self._session is not None:
            self._session.close()
            shutil.rmtree(self._workdir / f"subscriber-{self._runs}", ignore_errors=True)
            self._session = None


def utc_now() -> datetime:
    return datetime.now(UTC)
