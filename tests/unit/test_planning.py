"""Planning what a site queues: per destination, only granted fragments, one signed hop each."""

from __future__ import annotations

import pytest

from disseminator.planning import Planner
from disseminator.routing import Registration, RoutingTable
from xdn import certs, crypto, provenance
from xdn.errors import ProtocolError
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb

PUBLISHER = "production-dept"
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])


def _planner(table: RoutingTable) -> Planner:
    signer = provenance.Signer(
        node_uri=certs.node_uri("d1"), private_key=crypto.generate_private_key()
    )
    return Planner(table=table, ontology=ONTOLOGY, signer=signer, now_ms=lambda: 1000)


def _member(name: str, concepts: set[str]) -> Registration:
    return Registration(subscriber=name, certificate=b"", grants={PUBLISHER: frozenset(concepts)})


def _payload_fragments(payload: bytes) -> list[str]:
    delivery = pb.Delivery.FromString(payload)
    return [f.concept for f in delivery.dissemination.fragments]


def test_each_destination_gets_only_its_granted_fragments_with_its_own_hop(
    document: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    diss, _ = document
    concepts = sorted({f.concept for f in diss.fragments})
    table = RoutingTable()
    table.local["alice"] = _member("alice", {concepts[0]})
    table.set_link_members("d2", [_member("bob", set(concepts[1:3]))])
    plan = _planner(table).document(diss)

    by_destination = {(a.kind, a.name): a.payload for a in plan.appends}
    assert set(by_destination) == {("subscriber", "alice"), ("link", "d2")}
    assert set(_payload_fragments(by_destination["subscriber", "alice"])) == {concepts[0]}
    assert set(_payload_fragments(by_destination["link", "d2"])) == set(concepts[1:3])
    assert plan.delivered == {"alice": {concepts[0]}}
    assert len(plan.graphs) == 2  # one signed provenance hop per destination
    assert plan.fragments == len(diss.fragments) and plan.concepts == set(concepts)


def test_nobody_granted_means_nothing_queued(
    document: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    plan = _planner(RoutingTable()).document(document[0])
    assert plan.appends == [] and plan.graphs == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("document_id", "another-doc", "not of this document"),
     ("concept", "NoSuchConcept", "unknown concept")],
)
def test_a_fragment_that_does_not_belong_is_refused(
    document: tuple[pb.Dissemination, dict[str, bytes]], field: str, value: str, message: str
) -> None:
    tampered = pb.Dissemination()
    tampered.CopyFrom(document[0])
    setattr(tampered.fragments[1], field, value)
    with pytest.raises(ProtocolError, match=message):
        _planner(RoutingTable()).document(tampered)


def test_keys_go_to_their_subscriber_only_and_rekeys_where_the_concept_goes() -> None:
    table = RoutingTable()
    table.local["alice"] = _member("alice", {"WorkOrder"})
    table.set_link_members("d3", [_member("bob", {"Machine"})])
    planner = _planner(table)
    grant = planner.addressed(pb.DocumentKeys(publisher=PUBLISHER, subscriber="bob"))
    assert grant is not None and (grant.kind, grant.name) == ("link", "d3")
    assert planner.addressed(pb.KeyMessage(publisher=PUBLISHER, subscriber="nobody")) is None
    rekeys = planner.rekey(pb.GroupRekey(publisher=PUBLISHER, concept="WorkOrder", epoch=2))
    assert [(a.kind, a.name) for a in rekeys] == [("subscriber", "alice")]
    with pytest.raises(ProtocolError, match="unknown concept"):
        planner.rekey(pb.GroupRekey(publisher=PUBLISHER, concept="Nope", epoch=2))


def test_a_retained_document_goes_restricted_to_the_new_subscribers_grants(
    document: tuple[pb.Dissemination, dict[str, bytes]],
) -> None:
    diss, _ = document
    first = sorted({f.concept for f in diss.fragments})[0]
    planner = _planner(RoutingTable())
    planned = planner.retained(diss, "carol", {first})
    assert planned is not None
    append, graph = planned
    assert (append.kind, append.name) == ("subscriber", "carol")
    assert set(_payload_fragments(append.payload)) == {first}
    assert b"retained-carol" in graph
    assert planner.retained(diss, "carol", {"NotInTheDocument"}) is None
