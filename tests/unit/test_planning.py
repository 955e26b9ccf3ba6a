"""Planning what a site queues: per destination, only granted fragments, one signed hop each,
all the hops of a document under one batch signature, and only for a chain that verifies."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from disseminator.planning import Planner
from disseminator.routing import Registration, RoutingTable
from tests.unit.chain_fixtures import issue_site, relayed, signer_of
from xdn import certs, provenance
from xdn.errors import ProtocolError, SignatureError
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.provenance import _vocab as v
from xdn.rdf import Literal, Quad, parse_nquads, serialise
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import leaf_ranges

PUBLISHER = "production-dept"
SITE = "d1"  # the site of the shared ``pki`` fixture (conftest.py): the planner here
NOW = datetime.now(UTC)
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])

Pki = dict[str, tuple[bytes, bytes]]
Published = tuple[pb.Dissemination, dict[str, bytes]]


def _planner(table: RoutingTable, pki: Pki) -> Planner:
    return Planner(
        table=table, ontology=ONTOLOGY, signer=signer_of(SITE, pki[SITE]),
        now_ms=lambda: int(NOW.timestamp() * 1000),
        chains=provenance.ChainVerifier(pki["ca"][0]),
    )


def _member(name: str, concepts: set[str]) -> Registration:
    return Registration(subscriber=name, certificate=b"", grants={PUBLISHER: frozenset(concepts)})


def _payload_fragments(payload: bytes) -> list[str]:
    delivery = pb.Delivery.FromString(payload)
    return [f.concept for f in delivery.dissemination.fragments]


def _fan_out_table(diss: pb.Dissemination) -> RoutingTable:
    """alice (local) granted the first concept, downlinks d2 and d3 a few others each."""
    concepts = sorted({f.concept for f in diss.fragments})
    table = RoutingTable()
    table.local["alice"] = _member("alice", {concepts[0]})
    table.set_link_members("d2", [_member("bob", set(concepts[1:3]))])
    table.set_link_members("d3", [_member("dave", set(concepts[3:5]))])
    return table


def _with_provenance(diss: pb.Dissemination, message: provenance.Message) -> pb.Dissemination:
    out = pb.Dissemination()
    out.CopyFrom(diss)
    out.provenance = message.to_nquads()
    return out


def test_each_destination_gets_only_its_granted_fragments_with_its_own_hop(
    pki: Pki, published: Published
) -> None:
    diss, _ = published
    concepts = sorted({f.concept for f in diss.fragments})
    table = RoutingTable()
    table.local["alice"] = _member("alice", {concepts[0]})
    table.set_link_members("d2", [_member("bob", set(concepts[1:3]))])
    plan = _planner(table, pki).document(diss)

    by_destination = {(a.kind, a.name): a.delivery() for a in plan.appends}
    assert set(by_destination) == {("subscriber", "alice"), ("link", "d2")}
    assert set(_payload_fragments(by_destination["subscriber", "alice"])) == {concepts[0]}
    assert set(_payload_fragments(by_destination["link", "d2"])) == set(concepts[1:3])
    assert plan.delivered == {"alice": {concepts[0]}}
    assert len(plan.graphs) == 2  # one signed provenance hop per destination
    assert plan.fragments == len(diss.fragments) and plan.concepts == set(concepts)


def test_each_hop_names_the_leaves_it_forwards_and_verifies_for_its_recipient(
    pki: Pki, published: Published
) -> None:
    diss, _ = published
    plan = _planner(_fan_out_table(diss), pki).document(diss)
    verifier = provenance.ChainVerifier(pki["ca"][0])
    ranges = {(r.concept): (r.first, r.first + r.count) for r in diss.manifest.ranges}
    for append in plan.appends:
        sent = pb.Delivery.FromString(append.delivery()).dissemination
        message = provenance.Message.from_nquads(sent.provenance)
        expected = provenance.LeafRanges.of(ranges[c] for c in {f.concept for f in sent.fragments})
        assert message.leaves() == expected
        chain = verifier.verify(message, at=NOW)
        assert [c.name for c in chain.signers] == [PUBLISHER, SITE]
        assert message.recipient == certs.node_uri(append.name)


def test_all_hops_of_one_document_share_one_batch_signature(
    pki: Pki, published: Published
) -> None:
    diss, _ = published
    plan = _planner(_fan_out_table(diss), pki).document(diss)
    assert len(plan.graphs) == 3
    values, methods, positions = set(), set(), set()
    for graph in plan.graphs:
        quads = parse_nquads(graph)
        values |= {q.o.value for q in quads if q.p == v.HAS_SIGNATURE_VALUE
                   and q.g is not None and q.g.value.endswith("#e2s")}
        methods |= {q.o.value for q in quads if q.p == v.HAS_GRAPH_SIGNING_METHOD}
        positions |= {q.o.value for q in quads if q.p == v.BATCH_INDEX}
    assert len(values) == 1, "one ECDSA signature for the whole fan-out"
    assert methods == {v.BATCH_SIGNING_METHOD.value}
    assert positions == {"0", "1", "2"}
    base64.b64decode(values.pop(), validate=True)


def test_nobody_granted_means_nothing_queued(pki: Pki, published: Published) -> None:
    plan = _planner(RoutingTable(), pki).document(published[0])
    assert plan.appends == [] and plan.graphs == []


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [("document_id", "another-doc", "not of this document"),
     ("concept", "NoSuchConcept", "unknown concept")],
)
def test_a_run_that_does_not_belong_is_refused(
    pki: Pki, published: Published, field: str, value: str, message: str
) -> None:
    """A site reads the fragment that opens each run (the others travel unread, for the
    subscriber to check against the Merkle root)."""
    tampered = pb.Dissemination()
    tampered.CopyFrom(published[0])
    head = next(i for i, f in enumerate(tampered.fragments) if i and f.HasField("range_proof"))
    setattr(tampered.fragments[head], field, value)
    with pytest.raises(ProtocolError, match=message):
        _planner(RoutingTable(), pki).document(tampered)


# ---- the chain a site receives must verify, be the manifest publisher's and be addressed to it


def _reissued(
    pki: Pki, diss: pb.Dissemination, *, signer: str, publisher: str = PUBLISHER,
    recipient: str = SITE,
) -> pb.Dissemination:
    """``diss`` with its provenance replaced by a publication signed by ``signer``."""
    message = provenance.originate(
        signer_of(signer, pki[signer]),
        message_uri=provenance.message_uri(certs.node_uri(signer), "order-1", "v1"),
        recipient_uri=certs.node_uri(recipient),
        content=provenance.ContentFacts(
            document_id="order-1", publisher=publisher, manifest_root=diss.manifest.root,
            leaf_count=diss.manifest.leaf_count,
        ),
        timestamp_ms=1_000,
    )
    return _with_provenance(diss, message)


def test_a_chain_addressed_to_another_site_is_refused(pki: Pki, published: Published) -> None:
    diss = _reissued(pki, published[0], signer=PUBLISHER, recipient="d9")
    table = _fan_out_table(diss)
    with pytest.raises(SignatureError, match=r"addressed to <https://d9\.xdn\.example/>"):
        _planner(table, pki).document(diss)


def test_a_chain_signed_by_another_publisher_than_the_manifests_is_refused(
    pki: Pki, published: Published
) -> None:
    other = dict(pki)
    other["qa-company"] = certs.issue(*pki["ca"], name="qa-company", role="publisher", now=NOW)
    diss = _reissued(other, published[0], signer="qa-company", publisher="qa-company")
    with pytest.raises(SignatureError, match="not signed by the publisher who signed the manifest"):
        _planner(_fan_out_table(diss), pki).document(diss)


def test_a_forged_relay_hop_is_refused_naming_its_graph(pki: Pki, published: Published) -> None:
    """An upstream site d0 whose hop was re-signed by an impostor holding d0's certificate but
    another key: the hop's signature does not verify under the carried certificate."""
    ca = pki["ca"]
    d0 = issue_site(ca, "d0", now=NOW)
    upstream = _reissued({**pki, "d0": d0}, published[0], signer=PUBLISHER, recipient="d0")
    genuine = relayed(upstream, signer_of("d0", d0), recipient=SITE)
    impostor = issue_site(ca, "d0", now=NOW)  # same CA, same name, another key
    forged_signer = provenance.Signer(
        node_uri=certs.node_uri("d0"), private_key=signer_of("d0", impostor).private_key,
        certificate=d0[0],
    )
    forged = relayed(upstream, forged_signer, recipient=SITE)
    planner = _planner(_fan_out_table(genuine), pki)
    assert planner.document(genuine).appends  # the honest two-site chain is routed
    hop = "https://d0.xdn.example/msg/order-1/v1/to-d1#e2"
    with pytest.raises(SignatureError, match=rf"<{hop}s> does not verify graph <{hop}>"):
        planner.document(forged)


def test_a_relay_hop_altered_after_signing_is_refused(pki: Pki, published: Published) -> None:
    """d0 forwards WorkOrder only and signs that; the leaves are widened afterwards and the
    fragments put back: the envelope no longer verifies."""
    d0 = issue_site(pki["ca"], "d0", now=NOW)
    upstream = _reissued({**pki, "d0": d0}, published[0], signer=PUBLISHER, recipient="d0")
    ids = [f.fragment_id for f in upstream.fragments if f.concept == "WorkOrder"]
    narrow = relayed(upstream, signer_of("d0", d0), recipient=SITE, fragment_ids=ids)
    message = provenance.Message.from_nquads(narrow.provenance)
    (old,) = [q for q in message.quads if q.p == v.CARRIES_LEAVES and q.g is not None
              and q.g.value.endswith("#e2")]
    widened = f"0-{published[0].manifest.leaf_count}"
    quads = (set(message.quads) - {old}) | {Quad(old.s, old.p, Literal(widened), old.g)}
    forged = pb.Dissemination()
    forged.CopyFrom(upstream)  # all fragments again, as the widened leaves claim
    forged.provenance = serialise(sorted(quads, key=repr))
    with pytest.raises(SignatureError, match=r"does not verify graph <.*/to-d1#e2>"):
        _planner(_fan_out_table(upstream), pki).document(forged)


def test_a_document_cut_short_upstream_goes_on_naming_only_what_came(
    pki: Pki, published: Published
) -> None:
    diss, _ = published
    kept = sorted({f.concept for f in diss.fragments})[:4]  # alice's, d2's and one of d3's
    fewer = pb.Dissemination()  # whole concepts dropped, each kept run with its own proof
    fewer.CopyFrom(diss)
    del fewer.fragments[:]
    fewer.fragments.extend(f for f in diss.fragments if f.concept in kept)  # the chain: all
    came = leaf_ranges(fewer.fragments)
    plan = _planner(_fan_out_table(diss), pki).document(fewer)
    assert plan.appends
    for append in plan.appends:
        out = pb.Delivery.FromString(append.delivery()).dissemination
        hop = provenance.Message.from_nquads(out.provenance)
        assert hop.leaves() == leaf_ranges(out.fragments)
        assert hop.leaves().issubset(came)  # the shortfall shows in the chain


def test_a_revoked_publisher_certificate_refuses_the_chain(
    pki: Pki, published: Published
) -> None:
    serial = certs.credential_from_pem(pki[PUBLISHER][0]).serial
    planner = Planner(
        table=_fan_out_table(published[0]), ontology=ONTOLOGY, signer=signer_of(SITE, pki[SITE]),
        now_ms=lambda: int(NOW.timestamp() * 1000),
        chains=provenance.ChainVerifier(pki["ca"][0], revoked=lambda: frozenset({serial})),
    )
    with pytest.raises(SignatureError, match=r"signature graph <.*#c1s>: .*revoked"):
        planner.document(published[0])


# ---- keys and retained documents


def test_keys_go_to_their_subscriber_only_and_rekeys_where_the_concept_goes(pki: Pki) -> None:
    table = RoutingTable()
    table.local["alice"] = _member("alice", {"WorkOrder"})
    table.set_link_members("d3", [_member("bob", {"Machine"})])
    planner = _planner(table, pki)
    grant = planner.addressed(pb.DocumentKeys(publisher=PUBLISHER, subscriber="bob"))
    assert grant is not None and (grant.kind, grant.name) == ("link", "d3")
    assert planner.addressed(pb.KeyMessage(publisher=PUBLISHER, subscriber="nobody")) is None
    rekeys = planner.rekey(pb.GroupRekey(publisher=PUBLISHER, concept="WorkOrder", epoch=2))
    assert [(a.kind, a.name) for a in rekeys] == [("subscriber", "alice")]
    with pytest.raises(ProtocolError, match="unknown concept"):
        planner.rekey(pb.GroupRekey(publisher=PUBLISHER, concept="Nope", epoch=2))


def test_a_checkpoint_or_rekey_for_many_destinations_is_stored_once(pki: Pki) -> None:
    table = RoutingTable()
    for name in ("alice", "carol", "erin"):
        table.local[name] = _member(name, {"WorkOrder"})
    table.set_link_members("d3", [_member("bob", {"WorkOrder"})])
    planner = _planner(table, pki)
    checkpoint = pb.Checkpoint(publisher=PUBLISHER, sequence=7)
    rekey = pb.GroupRekey(publisher=PUBLISHER, concept="WorkOrder", epoch=2)
    for appends, expected in (
        (planner.checkpoint(checkpoint), pb.Delivery(checkpoint=checkpoint)),
        (planner.rekey(rekey), pb.Delivery(rekey=rekey)),
    ):
        assert {(a.kind, a.name) for a in appends} == {
            ("subscriber", "alice"), ("subscriber", "carol"), ("subscriber", "erin"),
            ("link", "d3"),
        }
        assert len({id(a.body) for a in appends}) == 1 and appends[0].body is not None
        assert all(a.delivery() == expected.SerializeToString() for a in appends)
    alone = RoutingTable()
    alone.local["alice"] = _member("alice", {"WorkOrder"})
    (only,) = _planner(alone, pki).checkpoint(checkpoint)  # one destination: no body row
    assert only.body is None and only.delivery() == pb.Delivery(
        checkpoint=checkpoint
    ).SerializeToString()


def test_a_retained_document_goes_restricted_to_the_new_subscribers_grants(
    pki: Pki, published: Published
) -> None:
    diss, _ = published
    first = sorted({f.concept for f in diss.fragments})[0]
    planner = _planner(RoutingTable(), pki)
    planned = planner.retained(diss, "carol", {first})
    assert planned is not None
    append, graph = planned
    assert (append.kind, append.name) == ("subscriber", "carol")
    assert set(_payload_fragments(append.delivery())) == {first}
    assert b"retained-carol" in graph
    sent = pb.Delivery.FromString(append.delivery()).dissemination
    message = provenance.Message.from_nquads(sent.provenance)
    provenance.ChainVerifier(pki["ca"][0]).verify(message, at=NOW)
    (run,) = [(r.first, r.first + r.count) for r in diss.manifest.ranges if r.concept == first]
    assert message.leaves() == provenance.LeafRanges((run,))
    assert planner.retained(diss, "carol", {"NotInTheDocument"}) is None
