"""Receipts at a site: the checks before one is logged and queued, the durable queue, the sender.

Chains are built with real certificates (one CA): publisher → d1 (root) → d2 → a subscriber,
who receipts; the sites are real :class:`SiteNode` values on SQLite stores in a temp folder.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest

from disseminator.limits import Limits
from disseminator.node import SiteIdentity, SiteNode
from disseminator.receipts import ReceiptSender, SiteReceipts
from disseminator.routing import Registration
from disseminator.server import DisseminatorService
from disseminator.store import Store
from tests.unit.receipt_fixtures import (
    BLOCKS,
    DOC,
    NOW,
    PUBLISHER,
    T0,
    Pki,
    chain,
    make_pki,
    published,
    receipted,
    relay,
)
from xdn import certs, crypto, provenance
from xdn.errors import ProvenanceError, ReceiptError, SignatureError
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet
from xdn.rdf import Literal, Quad
from xdn.receipts import read_receipt
from xdn.wire.v1 import dissemination_pb2 as pb

ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture
def sites(pki: Pki, tmp_path: Path) -> Iterator[dict[str, SiteNode]]:
    nodes = _sites(pki, tmp_path)
    yield nodes
    for node in nodes.values():
        node.store.close()


def _sites(pki: Pki, tmp_path: Path, *, keep_messages: bool = False) -> dict[str, SiteNode]:
    """d1 (the root) and d2 (alice and carol registered), with stores in ``tmp_path``."""
    nodes = {}
    for name in ("d1", "d2"):
        tls = pki.tls(name)
        signer = pki.signer(name)
        nodes[name] = SiteNode(
            site=SiteIdentity(
                name=name, block=BLOCKS[name], uplink=None if name == "d1" else "d1", tls=tls,
                signer=signer,
            ),
            ontology=ONTOLOGY,
            engine=PolicyEngine(PolicySet.of(ONTOLOGY, [])),
            store=Store(tmp_path / f"{name}.sqlite",
                        messages_of=certs.node_uri(name) if keep_messages else None),
            log_sink=provenance.ProvenanceLog(
                tmp_path / f"{name}.nq", node_uri=signer.node_uri, cert_pem=tls.cert_pem
            ),
            clock=lambda: NOW,
        )
    for subscriber in ("alice", "carol"):
        credential = certs.credential_from_pem(pki.parties[subscriber][0])
        nodes["d2"].table.local[credential.member_id] = Registration(
            subscriber=credential.member_id, certificate=pki.parties[subscriber][0],
            grants={PUBLISHER: frozenset({"WorkOrder"})},
        )
    return nodes


def _member(pki: Pki, name: str) -> str:
    return certs.credential_from_pem(pki.parties[name][0]).member_id


def _at(node: SiteNode) -> SiteReceipts:
    return SiteReceipts(node, Limits())


# ------------------------------------------------------------------------------ the checks


def test_a_subscribers_receipt_of_this_sites_hop_is_logged_and_queued_once(
    pki: Pki, sites: dict[str, SiteNode], tmp_path: Path
) -> None:
    desk = _at(sites["d2"])
    data = chain(pki, "d1", "d2")
    assert desk.from_subscriber(_member(pki, "alice"), data) is True
    assert desk.queued.is_set()
    assert desk.from_subscriber(_member(pki, "alice"), data) is False  # a duplicate
    (queued,) = sites["d2"].store.queued_receipts(limit=10)
    assert (queued.publisher, queued.data) == (PUBLISHER, data)
    logged = (tmp_path / "d2.nq").read_bytes()
    envelope_type = b"received#e4> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
    assert logged.count(envelope_type) == 1  # logged once
    assert sites["d2"].metrics.receipts.labels(source="subscriber")._value.get() == 1


def test_a_chain_that_ends_in_a_relay_is_not_a_receipt(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    relayed = relay(pki, relay(pki, published(pki), "d1", "d2"), "d2", "alice")
    with pytest.raises(ReceiptError, match="not a receipt: its outermost envelope is a relay"):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), relayed.to_nquads())


def test_a_receipt_sent_on_another_subscribers_stream_is_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    with pytest.raises(ReceiptError, match="not by the certificate registered as 'carol@"):
        _at(sites["d2"]).from_subscriber(_member(pki, "carol"), chain(pki, "d1", "d2"))


def test_a_namesakes_receipt_is_not_the_registered_certificates(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    # alice-2 has alice's name, so her node URI: the chain is well-formed and verifies.
    data = chain(pki, "d1", "d2", signer="alice-2")
    with pytest.raises(ReceiptError, match="not by the certificate registered"):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), data)


def test_a_receipt_of_another_sites_hop_is_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    data = chain(pki, "d1", "d3")  # d3 served alice, not d2
    with pytest.raises(ReceiptError, match="wraps a relay signed by 'd3', not a hop of this site"):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), data)


def test_a_receipt_signed_with_another_key_is_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    # d2 forges alice's receipt: alice's certificate, d2's key.
    message = relay(pki, relay(pki, published(pki), "d1", "d2"), "d2", "alice")
    forger = dataclasses.replace(
        pki.signer("alice"), private_key=crypto.load_private_key_pem(pki.parties["d2"][1])
    )
    forged = provenance.receipt(
        message, forger,
        message_uri=provenance.message_uri(certs.node_uri("alice"), DOC, "v1", "received"),
        timestamp_ms=T0 + 200,
    )
    with pytest.raises(SignatureError, match=r"does not verify graph <[^>]*received#e4>"):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), forged.to_nquads())


def test_an_altered_receipt_is_refused(pki: Pki, sites: dict[str, SiteNode]) -> None:
    message = provenance.Message.from_nquads(chain(pki, "d1", "d2"))
    stamp = next(q for q in message.quads if q.p.value.endswith("hasReceivedTimestamp"))
    altered = (message.quads - {stamp}) | {
        Quad(stamp.s, stamp.p, Literal("1201", stamp.o.datatype), stamp.g)  # type: ignore[union-attr]
    }
    data = provenance.Message(quads=frozenset(altered)).to_nquads()
    with pytest.raises(SignatureError, match="does not verify"):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), data)


@pytest.mark.parametrize("data", [b"", b"<a> <b> <c> .\n", b"\xff"])
def test_what_is_not_a_provenance_chain_is_refused(
    pki: Pki, sites: dict[str, SiteNode], data: bytes
) -> None:
    with pytest.raises(ProvenanceError):
        _at(sites["d2"]).from_subscriber(_member(pki, "alice"), data)


def test_an_oversized_receipt_is_refused_before_it_is_parsed(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    desk = SiteReceipts(sites["d2"], Limits(receipt_bytes=1000))
    with pytest.raises(ReceiptError, match="over the limit of 1000"):
        desk.from_subscriber(_member(pki, "alice"), b"#" * 1001)


def test_a_receipt_from_someone_not_registered_is_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    with pytest.raises(ReceiptError, match="not registered here"):
        _at(sites["d2"]).from_subscriber("mallory@" + "0" * 32, chain(pki, "d1", "d2"))


def test_an_uplink_accepts_a_chain_only_through_the_calling_downlink(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    desk = _at(sites["d1"])
    d2, d3 = (certs.credential_from_pem(pki.parties[s][0]) for s in ("d2", "d3"))
    data = chain(pki, "d1", "d2")
    with pytest.raises(ReceiptError, match="no hop of 'd3' right after one of this site 'd1'"):
        desk.from_downlink(d3, data)
    assert desk.from_downlink(d2, data) is True
    assert desk.from_downlink(d2, data) is False
    # a chain that did not come from this site at all
    with pytest.raises(ReceiptError, match="no hop of 'd2'"):
        _at(sites["d2"]).from_downlink(d2, data)


def test_a_refused_receipt_is_counted_and_never_fails_the_ack(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    service = DisseminatorService(sites["d2"])

    async def acks() -> None:
        await service._on_receipt(_member(pki, "carol"), chain(pki, "d1", "d2"))
        await service._on_receipt(_member(pki, "alice"), b"not n-quads")

    asyncio.run(acks())
    refused = sites["d2"].metrics.refused_receipts
    assert refused.labels(source="subscriber", reason="ReceiptError")._value.get() == 1
    assert refused.labels(source="subscriber", reason="ProvenanceError")._value.get() == 1
    assert sites["d2"].store.queued_receipts(limit=10) == []


def test_what_a_receipt_says(pki: Pki) -> None:
    receipt = read_receipt(
        chain(pki, "d1", "d2"), provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6
    )
    assert (receipt.document_id, receipt.version, receipt.fragments) == (DOC, 1, 10)
    assert receipt.sites == ("d1", "d2")
    assert [h.kind for h in receipt.hops] == ["publication", "relay", "relay", "receipt"]
    assert receipt.member_id == certs.credential_from_pem(pki.parties["alice"][0]).member_id
    assert receipt.publisher.name == PUBLISHER and receipt.received_ms == T0 + 200
    assert len(bytes.fromhex(receipt.id)) == 32  # SHA-256 of the canonical chain


# ---------------------------------------------------------------------------- the queues


def test_queued_receipts_survive_a_restart_and_go_once_acknowledged(tmp_path: Path) -> None:
    store = Store(tmp_path / "site.sqlite")
    for n in range(5):
        publisher = PUBLISHER if n % 2 == 0 else "qa-company"
        assert store.accept_receipt(
            receipt_id=f"id{n}", publisher=publisher, data=b"r%d" % n, log_graphs=b"g%d" % n,
            at_ms=1000,
        )
    assert not store.accept_receipt(
        receipt_id="id1", publisher="qa-company", data=b"r1", log_graphs=b"g1", at_ms=1000
    )
    assert [d for _, d in store.take_log_outbox()] == [b"g%d" % n for n in range(5)]
    store.close()

    store = Store(tmp_path / "site.sqlite")  # a restart
    assert [r.data for r in store.queued_receipts(limit=3)] == [b"r0", b"r1", b"r2"]
    store.drop_receipts([1, 2])
    assert [r.data for r in store.queued_receipts(limit=10)] == [b"r2", b"r3", b"r4"]
    mine = store.queued_receipts(limit=10, publisher=PUBLISHER)
    assert [(r.seq, r.data) for r in mine] == [(3, b"r2"), (5, b"r4")]
    assert store.drop_receipts_of(PUBLISHER, upto=3) == 1
    assert [r.data for r in store.queued_receipts(limit=10, publisher=PUBLISHER)] == [b"r4"]
    assert store.receipts_queued() == 2
    # an id once seen stays known after its receipt went upstream: a retry is a duplicate
    assert not store.accept_receipt(receipt_id="id0", publisher=PUBLISHER, data=b"r0",
                                    log_graphs=b"g0", at_ms=2000)
    store.close()


def test_a_publisher_gets_its_receipts_in_bounded_pages_and_acknowledges_them(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    store = sites["d1"].store
    for n in range(7):
        store.accept_receipt(receipt_id=f"{n}", publisher=PUBLISHER, data=b"x" * 100,
                             log_graphs=b"", at_ms=1000)
    desk = SiteReceipts(sites["d1"], Limits(receipts_per_call=3))
    assert desk.root and not _at(sites["d2"]).root
    page, more = desk.for_publisher(PUBLISHER, after=0, limit=0)
    assert [r.seq for r in page] == [1, 2, 3] and more
    page, more = desk.for_publisher(PUBLISHER, after=3, limit=2)
    assert [r.seq for r in page] == [4, 5] and more
    assert store.receipts_queued() == 4  # 1 to 3 acknowledged: deleted
    page, more = desk.for_publisher(PUBLISHER, after=5, limit=10)
    assert [r.seq for r in page] == [6, 7] and not more
    assert desk.for_publisher("qa-company", after=0, limit=0) == ([], False)


class _Stub:
    """A ``Receipts`` endpoint that fails ``failures`` times, then acknowledges."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: list[list[bytes]] = []
        self.done = asyncio.Event()

    async def Receipts(self, request: pb.ReceiptBatch, timeout: float) -> Any:
        self.calls.append(list(request.receipts))
        if self.failures:
            self.failures -= 1
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "down"
            )
        if b"2" in request.receipts:
            self.done.set()
        return pb.ReceiptBatchAck(accepted=len(request.receipts))


def test_the_sender_retries_until_acknowledged_then_deletes(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    desk = SiteReceipts(node, Limits(receipts_per_call=2))
    for n in range(3):
        node.store.accept_receipt(receipt_id=f"{n}", publisher=PUBLISHER, data=b"%d" % n,
                                  log_graphs=b"", at_ms=1000)
    stub = _Stub(failures=1)

    emptied = asyncio.Event()
    drop = node.store.drop_receipts

    def dropping(seqs: Iterable[int]) -> None:  # the sender deletes a batch after its ack
        drop(seqs)
        if not node.store.receipts_queued():
            emptied.set()

    async def scenario() -> None:
        task = asyncio.ensure_future(ReceiptSender(desk, node).run(stub))
        await asyncio.wait_for(stub.done.wait(), 10)
        await asyncio.wait_for(emptied.wait(), 10)
        task.cancel()

    node.store.drop_receipts = dropping  # type: ignore[method-assign]

    asyncio.run(scenario())
    # batches of two; the failed one is sent again (nothing deleted before its ack)
    assert stub.calls == [[b"0", b"1"], [b"0", b"1"], [b"2"]]
    assert node.store.receipts_queued() == 0


def test_receipts_that_come_while_the_sender_lingers_go_in_one_call(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    desk = SiteReceipts(node, Limits())
    stub = _Stub(failures=0)
    lingering, release = asyncio.Event(), asyncio.Event()

    async def linger() -> None:
        lingering.set()
        await release.wait()

    def accept(n: int) -> None:
        node.store.accept_receipt(receipt_id=f"{n}", publisher=PUBLISHER, data=b"%d" % n,
                                  log_graphs=b"", at_ms=1000)
        desk.queued.set()

    idle = asyncio.Event()
    batch = desk.batch

    def batching() -> Any:  # the sender found nothing to send: it waits to be woken
        found = batch()
        if not found:
            idle.set()
        return found

    desk.batch = batching  # type: ignore[method-assign]

    async def scenario() -> None:
        task = asyncio.ensure_future(ReceiptSender(desk, node, linger=linger).run(stub))
        await asyncio.wait_for(idle.wait(), 10)
        accept(0)  # the first recipient's receipt wakes the sender, which lingers...
        await asyncio.wait_for(lingering.wait(), 10)
        accept(1)  # ... while the others' come
        accept(2)
        release.set()
        await asyncio.wait_for(stub.done.wait(), 10)
        task.cancel()

    asyncio.run(scenario())
    assert stub.calls == [[b"0", b"1", b"2"]]


# ------------------------------------------------------------- seen ids, bounded in time


def test_receipt_ids_are_forgotten_after_the_retention_and_older_receipts_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    desk = _at(node)
    data = chain(pki, "d1", "d2")
    assert desk.from_subscriber(_member(pki, "alice"), data) is True
    day = 86_400_000
    retention = node.store.routed.window.retention_ms
    assert node.store.prune_receipts_seen(T0 - day) == 0  # accepted now: kept
    assert desk.from_subscriber(_member(pki, "alice"), data) is False  # still a duplicate
    # Past the retention the id goes; by then the receipt is stale, so it cannot come back.
    later = datetime.fromtimestamp((T0 + retention + day) / 1000, UTC)
    node._clock = lambda: later
    assert node.store.prune_receipts_seen(node.now_ms() - retention) == 1
    with pytest.raises(ReceiptError, match=r"signed 8\.0 days ago, longer than its routed "
                       r"retention \(7 days\): stale"):
        desk.from_subscriber(_member(pki, "alice"), data)
    assert node.store.queued_receipts(limit=10)[0].data == data  # the first one only


def test_housekeeping_forgets_receipt_ids_past_the_retention(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    store = node.store
    retention = store.routed.window.retention_ms
    now_ms = node.now_ms()
    store.accept_receipt(receipt_id="old", publisher=PUBLISHER, data=b"o", log_graphs=b"",
                         at_ms=now_ms - retention - 1)
    store.accept_receipt(receipt_id="new", publisher=PUBLISHER, data=b"n", log_graphs=b"",
                         at_ms=now_ms - retention + 1)
    node.housekeeping()
    assert store.accept_receipt(receipt_id="old", publisher=PUBLISHER, data=b"o", log_graphs=b"",
                                at_ms=now_ms)  # forgotten
    assert not store.accept_receipt(receipt_id="new", publisher=PUBLISHER, data=b"n",
                                    log_graphs=b"", at_ms=now_ms)  # still known


def test_a_store_that_kept_receipt_ids_for_good_gets_them_pruned(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "old.sqlite"
    Store(path).close()
    db = sqlite3.connect(path)  # as an older site wrote it: ids only
    db.executescript(
        "DROP TABLE receipts_seen; "
        "CREATE TABLE receipts_seen (id TEXT PRIMARY KEY) WITHOUT ROWID; "
        "INSERT INTO receipts_seen VALUES ('ancient');"
    )
    db.close()
    store = Store(path)
    assert not store.accept_receipt(receipt_id="ancient", publisher=PUBLISHER, data=b"a",
                                    log_graphs=b"", at_ms=5)
    assert store.prune_receipts_seen(1) == 1
    assert store.accept_receipt(receipt_id="ancient", publisher=PUBLISHER, data=b"a",
                                log_graphs=b"", at_ms=5)
    store.close()


# ------------------------------------------------------------------- receipts in the inbox


def _other_receipt_of_the_same_version(pki: Pki) -> bytes:
    """alice's receipt of the same hop, signed a moment later: another chain, same version."""
    hop = relay(pki, relay(pki, published(pki), "d1", "d2"), "d2", "alice")
    signer = pki.signer("alice")
    return provenance.receipt(
        hop, signer, message_uri=provenance.message_uri(signer.node_uri, DOC, "v1", "received"),
        timestamp_ms=T0 + 300,
    ).to_nquads()


def test_an_accepted_receipt_is_listed_in_the_inbox_once_as_sent(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    d1, d2 = sites["d1"], sites["d2"]
    data = chain(pki, "d1", "d2")
    receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
    desk = SiteReceipts(d2, Limits(), inbox=True)
    assert desk.from_subscriber(_member(pki, "alice"), data) is True
    assert desk.from_subscriber(_member(pki, "alice"), data) is False  # a duplicate
    # another receipt of the same version goes upstream, but adds no second notification
    assert desk.from_subscriber(_member(pki, "alice"), _other_receipt_of_the_same_version(pki))
    assert len(d2.store.queued_receipts(limit=10)) == 2
    assert d2.store.notifications.ids() == [receipt.notification_id]
    stored = d2.store.notifications.get(receipt.notification_id)
    assert stored is not None and stored.receipt and stored.nquads == data
    alice = certs.credential_from_pem(pki.parties["alice"][0])
    assert (stored.sender, stored.sender_fingerprint) == ("alice", alice.fingerprint)
    assert stored.media_type == "application/n-quads"
    # upstream, the root lists it as sent by the downlink, under the same id
    d2_cert = certs.credential_from_pem(pki.parties["d2"][0])
    assert SiteReceipts(d1, Limits(), inbox=True).from_downlink(d2_cert, data)
    at_root = d1.store.notifications.get(receipt.notification_id)
    assert at_root is not None and at_root.sender == "d2" and at_root.nquads == data


def test_receipts_are_not_counted_against_the_inbox_and_go_with_their_retention(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    from disseminator.notifications import InboxFull, StoredNotification

    store = sites["d2"].store
    note = StoredNotification(id="n1", received_ms=1, sender="bob", sender_fingerprint="00",
                              media_type="text/turtle", nquads=b"<a:a> <a:b> <a:c> .\n")
    store.notifications.add(note, capacity=1)  # the inbox is full of parties' notifications
    assert SiteReceipts(sites["d2"], Limits(), inbox=True).from_subscriber(
        _member(pki, "alice"), chain(pki, "d1", "d2")
    )
    assert store.notifications.count(receipts=True) == 1  # a receipt still lands
    with pytest.raises(InboxFull, match="holds 1 notifications"):  # and is not counted
        store.notifications.add(dataclasses.replace(note, id="n2"), capacity=1)
    store.notifications.add(dataclasses.replace(note, id="n2"), capacity=2)
    now_ms = int(NOW.timestamp() * 1000)
    assert store.prune_receipts_seen(now_ms) == 0  # not yet past the retention
    assert store.prune_receipts_seen(now_ms + 1) == 1
    assert store.notifications.ids() == ["n1", "n2"]  # the receipt's notification went with it
    assert store.notifications.count(receipts=True) == 0


def test_a_site_without_an_inbox_lists_no_receipt(pki: Pki, sites: dict[str, SiteNode]) -> None:
    assert _at(sites["d2"]).from_subscriber(_member(pki, "alice"), chain(pki, "d1", "d2"))
    assert sites["d2"].store.notifications.count() == 0
    assert sites["d2"].store.receipts_queued() == 1



def test_where_messages_are_kept_receipts_are_listed_by_reference(
    pki: Pki, tmp_path: Path
) -> None:
    from disseminator.receipt_refs import rejoin
    from disseminator.web._messages import read_kept
    from tests.unit.test_message_archive import route_and_flush

    sites = _sites(pki, tmp_path, keep_messages=True)
    try:
        publication = published(pki)  # (signatures are randomised: build each message once)
        to_d2 = relay(pki, publication, "d1", "d2")
        to_alice = relay(pki, to_d2, "d2", "alice")
        route_and_flush(sites["d1"].store, tmp_path / "d1.nq", publication, to_d2)
        route_and_flush(sites["d2"].store, tmp_path / "d2.nq", to_d2, to_alice)
        data = receipted(pki, to_alice, "alice").to_nquads()
        receipt = read_receipt(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**6)
        d2_cert = certs.credential_from_pem(pki.parties["d2"][0])
        assert SiteReceipts(sites["d2"], Limits(), inbox=True).from_subscriber(
            _member(pki, "alice"), data)
        assert SiteReceipts(sites["d1"], Limits(), inbox=True).from_downlink(d2_cert, data)
        for name, own in (("d2", to_alice), ("d1", to_d2)):
            store = sites[name].store
            stored = store.notifications.get(receipt.notification_id)
            assert stored is not None and (stored.via, stored.digest) == (own.uri, receipt.id)
            assert store.messages is not None
            kept = read_kept(store.messages, tmp_path / f"{name}.nq", own.uri)
            assert kept is not None and rejoin(kept, stored.nquads, receipt.id) == data
            assert len(stored.nquads) < len(data) // 2  # ~5 KB a hop after this site
        # a downlink's receipt keeps the downlink's hop: d1 stores more than d2
        at_d1, at_d2 = (sites[n].store.notifications.get(receipt.notification_id)
                        for n in ("d1", "d2"))
        assert at_d1 is not None and at_d2 is not None
        assert len(at_d1.nquads) > len(at_d2.nquads)
    finally:
        for node in sites.values():
            node.store.close()
