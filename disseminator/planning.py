"""What a site queues for whom: the deliveries (and signed provenance hops) of one routing step.

Theory of operation. A :class:`Planner` turns what a site received into :class:`Append` values
for its durable queues, without touching the store:

* a group rekey goes wherever a fragment of its concept would go (:meth:`Planner.rekey`);
* an enrolment, a document-key grant or a member's entitlement goes to its one subscriber
  (:meth:`Planner.addressed`);
* a document goes, per destination, as the fragments that destination was granted, with one
  provenance hop signed by this site (:meth:`Planner.document`), all the hops of one document
  under one batch signature; the plan also says which concepts reached which local
  subscriber, for the policy engine;
* a retained document goes to one new subscriber, restricted to its grants
  (:meth:`Planner.retained`);
* a publisher's signed checkpoint goes to every destination granted any of its concepts
  (:meth:`Planner.checkpoint`).

Fragments are checked against the document they claim and the ontology; anything else is a
:class:`~xdn.errors.ProtocolError`. A document's provenance chain is verified before anything
is routed or signed (Algorithm 2 under the certificates it carries, checked against the CA and
the CRL in force: :class:`~xdn.provenance.ChainVerifier`): it must be signed by the publisher
who signed the manifest, name every manifest leaf that came with it and be addressed
to this site; otherwise a :class:`~xdn.errors.SignatureError` or
:class:`~xdn.errors.ProvenanceError` names the graph at fault. Nothing here can read content:
only cleartext headers are used.

Work per document grows with its runs of fragments (:class:`~disseminator.payloads.DocumentParts`
reads the first fragment of each and the sizes of the others' records) and with destinations
times concepts: routing chooses whole concepts, and each destination's delivery is assembled
from the serialized runs. A document staged in the store as its parts came
(:class:`~disseminator.stored_documents.StoredDocument`) is read from its framing instead
(:func:`~disseminator.stored_documents.scan`), and planned the same way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from disseminator.payloads import DocumentLayout, DocumentParts, Segment, records_of
from disseminator.routing import Destination, RoutingTable
from disseminator.store import Append, Body, Piece
from disseminator.stored_documents import StoredDocument, scan
from xdn import certs, identity, provenance
from xdn.errors import ProtocolError
from xdn.ontology import Ontology
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["DocumentPlan", "Planner"]

log = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class DocumentPlan:
    """What routing one document queues, logs and tells the policy engine."""

    identity: tuple[str, str, int]  # (publisher, document, version)
    fragments: int
    concepts: frozenset[str]
    appends: list[Append] = field(default_factory=list)
    graphs: list[bytes] = field(default_factory=list)  # the provenance hops signed here
    delivered: dict[str, set[str]] = field(default_factory=dict)  # local subscriber → concepts
    subscribers: int = 0  # registered here or behind downlinks, granted some fragment
    body: Body | None = None  # the document's bytes its deliveries (and retained copy) share
    retained: tuple[Piece, ...] = ()  # pieces of the document as received, for new subscribers
    chain: tuple[str, bytes] | None = None  # the chain it came with: (outermost URI, N-Quads)


#: Retained documents kept read for replay (a site retains a few per publisher).
_REPLAYS_KEPT = 64

#: A document as routing receives it: a parsed message (read as records) or staged bytes.
Received = pb.Dissemination | pb.DisseminationRecords | StoredDocument


@dataclass(frozen=True, slots=True, kw_only=True)
class Planner:
    """Plans deliveries from one site's routing table."""

    table: RoutingTable
    ontology: Ontology
    signer: provenance.Signer
    now_ms: Callable[[], int]
    chains: provenance.ChainVerifier
    _replays: dict[tuple[str, str, int], tuple[DocumentLayout, provenance.Message | None]] = (
        field(default_factory=dict, init=False, repr=False)
    )

    def addressed(
        self, key: pb.KeyMessage | pb.DocumentKeys | pb.Entitlement
    ) -> Append | None:
        """An enrolment, a document-key grant or an entitlement goes to its one subscriber."""
        destination = self.table.route_key(key.subscriber)
        if destination is None:
            log.warning("no route for key message to %s; dropped", key.subscriber)
            return None
        if isinstance(key, pb.KeyMessage):
            delivery = pb.Delivery(key=key)
        elif isinstance(key, pb.Entitlement):
            delivery = pb.Delivery(entitlement=key)
        else:
            delivery = pb.Delivery(document_keys=key)
        payload = delivery.SerializeToString()
        return Append(kind=destination.kind, name=destination.name, payload=payload)

    def rekey(self, rekey: pb.GroupRekey) -> list[Append]:
        """A group rekey goes wherever a fragment of its concept would go."""
        if rekey.concept not in self.ontology.concepts:
            raise ProtocolError(f"rekey of unknown concept {rekey.concept!r}")
        payload = pb.Delivery(rekey=rekey).SerializeToString()
        plan = self.table.plan(rekey.publisher, [("rekey", rekey.concept)])
        return _shared(payload, [(d.kind, d.name) for d in plan])

    def checkpoint(self, checkpoint: pb.Checkpoint) -> list[Append]:
        """A publisher's checkpoint goes wherever anything of the publisher may go."""
        publisher = checkpoint.publisher
        payload = pb.Delivery(checkpoint=checkpoint).SerializeToString()
        destinations = [
            ("subscriber", name)
            for name, reg in self.table.local.items()
            if reg.grants.get(publisher)
        ]
        destinations += [
            ("link", site)
            for site, regs in self.table.links.items()
            if any(r.grants.get(publisher) for r in regs.values())
        ]
        return _shared(payload, destinations)

    def document(self, received: Received, wire: bytes | memoryview | None = None) -> DocumentPlan:
        """One relayed message (and signed provenance hop) per destination of a document
        (read as records, from ``wire`` if at hand: see
        :class:`~disseminator.payloads.DocumentParts`; or scanned, if staged)."""
        manifest = received.manifest
        identity = (manifest.publisher, manifest.document_id, manifest.version)
        parts, chain = self._read(received, wire)
        message = None if _switched_off(chain) else self.verified(manifest, chain, parts.leaves)
        plan = DocumentPlan(
            identity=identity, fragments=parts.count, concepts=parts.concepts,
            subscribers=self.table.reach(manifest.publisher, parts.concepts),
            body=parts.body, retained=parts.dissemination(parts.received_provenance),
            chain=None if message is None else (message.uri, bytes(chain)),
        )
        routes = []
        chosen: dict[frozenset[str], Sequence[Segment]] = {}  # (destinations share grants)
        for destination, concepts in self.table.granted(
            manifest.publisher, parts.concepts
        ).items():
            if destination.kind == "subscriber":
                plan.delivered[destination.name] = set(concepts)
            segments = chosen.get(concepts)
            if segments is None:
                segments = chosen[concepts] = parts.chosen(concepts)
            routes.append((destination, segments, f"{destination.kind}-{destination.name}"))
        for append, graph in self._relay(message, manifest, parts, routes):
            plan.appends.append(append)
            if graph:  # (none with provenance switched off, for a benchmark)
                plan.graphs.append(graph)
        return plan

    def _read(
        self, received: Received, wire: bytes | memoryview | None = None
    ) -> tuple[DocumentLayout, bytes]:
        """The document's layout and its provenance chain as received."""
        if isinstance(received, StoredDocument):
            return scan(received, self.ontology.concepts)
        diss = records_of(received)
        manifest = diss.manifest
        identity = (manifest.publisher, manifest.document_id)
        return DocumentParts(diss, identity, self.ontology.concepts, wire), diss.provenance

    def verified(
        self, manifest: pb.Manifest, chain: bytes, leaves: provenance.LeafRanges
    ) -> provenance.Message:
        """The dissemination's provenance ``chain``, verified and checked to be extendable
        here with the manifest ``leaves`` that came with it.

        Raises:
            PeerError: naming what does not hold (and, for the chain, the graph at fault).
        """
        message = provenance.Message.from_nquads(chain, max_bytes=provenance.MAX_CHAIN_BYTES)
        provenance.check_extendable(message, document_id=manifest.document_id, leaves=leaves)
        self.chains.verify_received(
            message,
            at=datetime.fromtimestamp(self.now_ms() / 1000, UTC),
            publisher_certificate=manifest.publisher_certificate,
            recipient=self.signer.node_uri,
        )
        return message

    def retained(
        self, received: Received, subscriber: str, granted: Collection[str]
    ) -> tuple[Append, bytes] | None:
        """A retained document for a new local subscriber: its granted concepts, or nothing.

        Its chain was verified when it was routed; what is kept is what this site received.
        """
        manifest = received.manifest
        parts, message = self._replayable(received)
        chosen = parts.chosen(frozenset(granted))
        if not chosen:
            return None
        hop = f"retained-{subscriber}-{self.now_ms()}"
        routes = [(Destination("subscriber", subscriber), chosen, hop)]
        return self._relay(message, manifest, parts, routes)[0]

    def _replayable(
        self, received: Received
    ) -> tuple[DocumentLayout, provenance.Message | None]:
        """A retained document read for replay, once for all the subscribers joining (a
        document version never changes; a few are retained at a time)."""
        manifest = received.manifest
        key = (manifest.publisher, manifest.document_id, manifest.version)
        found = self._replays.get(key)
        if found is None:
            if len(self._replays) >= _REPLAYS_KEPT:
                self._replays.clear()
            parts, chain = self._read(received)
            message = None if _switched_off(chain) else provenance.Message.from_nquads(chain)
            found = self._replays[key] = (parts, message)
        return found

    def _relay(
        self,
        message: provenance.Message | None,
        manifest: pb.Manifest,
        parts: DocumentLayout,
        routes: Sequence[tuple[Destination, Sequence[Segment], str]],
    ) -> list[tuple[Append, bytes]]:
        """The delivery of each route's segments to its destination, with its signed
        provenance hop (the hop's graphs, for the log): all the hops signed as one batch.
        Without ``message`` (provenance switched off, a benchmark) nothing is signed."""
        if message is None:
            return [
                (Append(kind=d.kind, name=d.name, body=parts.body,
                        pieces=parts.delivery(segments, ())), b"")
                for d, segments, _ in routes
            ]
        leaves: dict[int, provenance.LeafRanges] = {}  # by segments (shared by grants)
        hops = []
        for destination, segments, hop_id in routes:
            carried = leaves.get(id(segments))
            if carried is None:
                carried = leaves[id(segments)] = parts.leaves_of(segments)
            hops.append(provenance.Hop(
                message_uri=provenance.message_uri(
                    self.signer.node_uri, manifest.document_id, f"v{manifest.version}", hop_id
                ),
                recipient_uri=certs.node_uri(identity.person(destination.name)),
                leaves=carried,
            ))
        relayed = provenance.relay_fanout(message, self.signer, hops, timestamp_ms=self.now_ms())
        now = datetime.fromtimestamp(self.now_ms() / 1000, UTC)
        for head in relayed.batch_heads:  # one signature per batch
            self.chains.remember(head, at=now)  # the receipts will carry it back
        out = []
        for (destination, segments, _), hop in zip(routes, relayed.graphs, strict=True):
            pieces = parts.delivery(segments, (*parts.received_provenance, hop))
            append = Append(
                kind=destination.kind, name=destination.name, body=parts.body, pieces=pieces
            )
            out.append((append, hop))
        return out


def _switched_off(chain: bytes) -> bool:
    """Whether a document comes without provenance (``chain``) because provenance is switched
    off (:func:`xdn.provenance.enabled`, a benchmark's switch): relayed without, nothing
    signed. With the switch on, empty provenance is refused like any malformed chain."""
    return not chain and not provenance.enabled()


def _shared(payload: bytes, destinations: Sequence[tuple[str, str]]) -> list[Append]:
    """The same ``payload`` for each of ``destinations``: stored once, as a body their queues
    refer to, when there are several (a checkpoint or a rekey: ~1 KB each, to every member)."""
    if len(destinations) < 2:
        return [Append(kind=kind, name=name, payload=payload) for kind, name in destinations]
    body, whole = Body(payload), ((0, len(payload)),)
    return [Append(kind=kind, name=name, body=body, pieces=whole) for kind, name in destinations]
