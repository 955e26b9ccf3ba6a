"""What a site queues for whom: the deliveries (and signed provenance hops) of one routing step.

Theory of operation. A :class:`Planner` turns what a site received into :class:`Append` values
for its durable queues, without touching the store:

* a group rekey goes wherever a fragment of its concept would go (:meth:`Planner.rekey`);
* an enrolment, a document-key grant or a member's entitlement goes to its one subscriber
  (:meth:`Planner.addressed`);
* a document goes, per destination, as the fragments that destination was granted, with one
  provenance hop signed by this site (:meth:`Planner.document`); the plan also says which
  concepts reached which local subscriber, for the policy engine;
* a retained document goes to one new subscriber, restricted to its grants
  (:meth:`Planner.retained`);
* a publisher's signed checkpoint goes to every destination granted any of its concepts
  (:meth:`Planner.checkpoint`).

Fragments are checked against the document they claim and the ontology; anything else is a
:class:`~xdn.errors.ProtocolError`. Nothing here can read content: only cleartext headers are
used.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from disseminator.routing import Destination, RoutingTable
from disseminator.store import Append
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Planner:
    """Plans deliveries from one site's routing table."""

    table: RoutingTable
    ontology: Ontology
    signer: provenance.Signer
    now_ms: Callable[[], int]

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
        return [Append(kind=d.kind, name=d.name, payload=payload) for d in plan]

    def checkpoint(self, checkpoint: pb.Checkpoint) -> list[Append]:
        """A publisher's checkpoint goes wherever anything of the publisher may go."""
        publisher = checkpoint.publisher
        payload = pb.Delivery(checkpoint=checkpoint).SerializeToString()
        out = [
            Append(kind="subscriber", name=name, payload=payload)
            for name, reg in self.table.local.items()
            if reg.grants.get(publisher)
        ]
        out += [
            Append(kind="link", name=site, payload=payload)
            for site, regs in self.table.links.items()
            if any(r.grants.get(publisher) for r in regs.values())
        ]
        return out

    def document(self, diss: pb.Dissemination) -> DocumentPlan:
        """One relayed message (and signed provenance hop) per destination of a document."""
        manifest = diss.manifest
        identity = (manifest.publisher, manifest.document_id, manifest.version)
        fragments = list(diss.fragments)  # each access to the repeated field builds a wrapper
        pairs = [self._checked(f, identity) for f in fragments]
        message = _incoming(diss)
        if message is not None:
            provenance.check_extendable(
                message, document_id=manifest.document_id, fragment_ids=[i for i, _ in pairs]
            )
        concepts = frozenset(c for _, c in pairs)
        plan = DocumentPlan(
            identity=identity, fragments=len(pairs), concepts=concepts,
            subscribers=self.table.reach(manifest.publisher, concepts),
        )
        for destination, ids in self.table.plan(manifest.publisher, pairs).items():
            wanted = set(ids)
            chosen = [f for f, (i, _) in zip(fragments, pairs, strict=True) if i in wanted]
            if destination.kind == "subscriber":
                plan.delivered[destination.name] = {c for i, c in pairs if i in wanted}
            append, graph = self._relay(
                message, manifest, destination, chosen, wanted,
                hop=f"{destination.kind}-{destination.name}",
            )
            plan.appends.append(append)
            if graph:  # (none with provenance switched off, for a benchmark)
                plan.graphs.append(graph)
        return plan

    def retained(
        self, diss: pb.Dissemination, subscriber: str, granted: Collection[str]
    ) -> tuple[Append, bytes] | None:
        """A retained document for a new local subscriber: its granted concepts, or nothing."""
        chosen = [f for f in diss.fragments if f.concept in granted]
        if not chosen:
            return None
        return self._relay(
            _incoming(diss), diss.manifest,
            Destination("subscriber", subscriber), chosen, {f.fragment_id for f in chosen},
            hop=f"retained-{subscriber}-{self.now_ms()}",
        )

    def _relay(
        self,
        message: provenance.Message | None,
        manifest: pb.Manifest,
        destination: Destination,
        fragments: Sequence[pb.Fragment],
        fragment_ids: Collection[str],
        *,
        hop: str,
    ) -> tuple[Append, bytes]:
        """The delivery of ``fragments`` (with ids ``fragment_ids``) to ``destination``, and
        its signed provenance hop (none if ``message`` is: provenance switched off)."""
        if message is None:
            out = pb.Dissemination(manifest=manifest, fragments=fragments)
            payload = pb.Delivery(dissemination=out).SerializeToString()
            return Append(kind=destination.kind, name=destination.name, payload=payload), b""
        relayed = provenance.relay(
            message,
            self.signer,
            message_uri=provenance.message_uri(
                self.signer.node_uri, manifest.document_id, f"v{manifest.version}", hop
            ),
            recipient_uri=certs.node_uri(identity.person(destination.name)),
            fragment_ids=fragment_ids,
            timestamp_ms=self.now_ms(),
        )
        out = pb.Dissemination(
            manifest=manifest, fragments=fragments, provenance=relayed.to_nquads()
        )
        payload = pb.Delivery(dissemination=out).SerializeToString()
        append = Append(kind=destination.kind, name=destination.name, payload=payload)
        return append, relayed.latest_graphs_nquads()

    def _checked(self, fragment: pb.Fragment, identity: tuple[str, str, int]) -> tuple[str, str]:
        """(id, concept) of a fragment of the document being routed, or a ProtocolError."""
        if (fragment.publisher, fragment.document_id) != identity[:2]:
            raise ProtocolError(f"fragment {fragment.fragment_id!r} is not of this document")
        if fragment.concept not in self.ontology.concepts:
            raise ProtocolError(
                f"fragment {fragment.fragment_id!r}: unknown concept {fragment.concept!r}"
            )
        return fragment.fragment_id, fragment.concept


def _incoming(diss: pb.Dissemination) -> provenance.Message | None:
    """The provenance ``diss`` carries; ``None`` if it has none and provenance is switched off
    (:func:`xdn.provenance.enabled`, a benchmark's switch): relayed without, nothing signed."""
    if not diss.provenance and not provenance.enabled():
        return None
    return provenance.Message.from_nquads(diss.provenance)
