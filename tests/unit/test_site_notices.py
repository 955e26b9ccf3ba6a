"""Subscribers' failure notices at a site: the one check, the inbox kind, the road upstream.

Notices are signed with real certificates (one CA, :mod:`tests.unit.receipt_fixtures`); the
sites are real :class:`SiteNode` values on SQLite stores (d1 the root, d2 with alice and carol
registered, as in ``test_site_receipts``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from disseminator.limits import Limits
from disseminator.node import SiteNode
from disseminator.notices import NOTICES_PER_SUBSCRIBER, SiteNotices
from disseminator.notifications import InboxFull, StoredNotification
from disseminator.routing import Registration
from disseminator.server import DisseminatorService
from tests.unit.receipt_fixtures import DOC, NOW, PUBLISHER, Pki, chain, make_pki
from tests.unit.test_publish_parts import _Context
from tests.unit.test_site_receipts import _sites
from xdn import certs, provenance
from xdn.errors import ForeignNoticeError, NoticeError, ProvenanceError, SignatureError
from xdn.notices import is_notice, read_notice
from xdn.provenance._vocab import HAS_MESSAGE_TYPE, REFUSAL
from xdn.rdf import Literal, Quad
from xdn.wire.v1 import dissemination_pb2 as pb

NOW_MS = int(NOW.timestamp() * 1000)


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


@pytest.fixture
def sites(pki: Pki, tmp_path: Path) -> Iterator[dict[str, SiteNode]]:
    nodes = _sites(pki, tmp_path)
    yield nodes
    for node in nodes.values():
        node.store.close()


def notice(
    pki: Pki, who: str = "alice", *, site: str | None = "d2", version: int = 1,
    publisher: str = PUBLISHER, at_ms: int = NOW_MS - 500, reason: str = "the manifest "
    "signature does not verify", hop: str = "1",
) -> bytes:
    """``who``'s failure notice refusing version ``version`` of DOC that came from ``site``."""
    signer = pki.signer(who)
    return provenance.failure_notice(
        signer, message_uri=provenance.notice_uri(signer.node_uri, f"{at_ms}-{hop}"),
        refusal=provenance.RefusalFacts(
            kind="document", reason=reason, publisher=publisher, document_id=DOC,
            version=version, received_from=None if site is None else certs.node_uri(site),
        ),
        timestamp_ms=at_ms,
    ).to_nquads()


def _credential(pki: Pki, name: str) -> certs.Credential:
    return certs.credential_from_pem(pki.parties[name][0])


def _desk(node: SiteNode, *, inbox: bool = True) -> SiteNotices:
    return SiteNotices(node, Limits(), wake=asyncio.Event(), inbox=inbox)


# ------------------------------------------------------------------------------ the checks


def test_a_subscribers_notice_is_logged_listed_and_queued_once(
    pki: Pki, sites: dict[str, SiteNode], tmp_path: Path
) -> None:
    node = sites["d2"]
    wake = asyncio.Event()
    desk = SiteNotices(node, Limits(), wake=wake, inbox=True)
    data = notice(pki)
    assert is_notice(data) and not is_notice(chain(pki, "d1", "d2"))
    assert desk.from_subscriber(_credential(pki, "alice"), data) is True
    assert wake.is_set()
    assert desk.from_subscriber(_credential(pki, "alice"), data) is False  # a duplicate
    (queued,) = node.store.queued_receipts(limit=10)
    assert (queued.publisher, queued.data) == (PUBLISHER, data)
    logged = (tmp_path / "d2.nq").read_bytes()
    assert logged.count(b"#notice> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type>") == 1
    read = read_notice(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**5)
    assert node.store.notifications.ids() == [read.notification_id]
    stored = node.store.notifications.get(read.notification_id)
    assert stored is not None and stored.refusal and not stored.receipt
    assert (stored.sender, stored.nquads) == ("alice", data)
    # read by its subscriber and the publisher it concerns (the site and auditors read all)
    assert stored.readers == {certs.node_uri("alice"), certs.node_uri(PUBLISHER)}
    assert node.metrics.notices.labels(source="subscriber")._value.get() == 1


def test_a_forged_notice_is_refused(pki: Pki, sites: dict[str, SiteNode]) -> None:
    desk = _desk(sites["d2"])
    message = provenance.Message.from_nquads(notice(pki))
    reason = next(q for q in message.quads if q.p.value.endswith("#reason"))
    altered = provenance.Message(quads=frozenset((message.quads - {reason}) | {
        Quad(reason.s, reason.p, Literal("nothing wrong"), reason.g)
    }))
    with pytest.raises(SignatureError):
        desk.from_subscriber(_credential(pki, "alice"), altered.to_nquads())
    # signed with carol's key but carrying alice's certificate
    signer = pki.signer("carol", cert_of="alice")
    forged = provenance.failure_notice(
        dataclasses.replace(signer, node_uri=certs.node_uri("alice")),
        message_uri=provenance.notice_uri(certs.node_uri("alice"), "x"),
        refusal=provenance.RefusalFacts(kind="crl", reason="stale"), timestamp_ms=NOW_MS,
    )
    with pytest.raises(SignatureError):
        desk.from_subscriber(_credential(pki, "alice"), forged.to_nquads())
    with pytest.raises(ProvenanceError):
        desk.from_subscriber(_credential(pki, "alice"), b"<a:a> <a:b> <a:c> .\n")
    assert sites["d2"].store.queued_receipts(limit=10) == []


def test_someone_elses_notice_is_refused_as_foreign(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    with pytest.raises(ForeignNoticeError, match=r"signed by 'alice'.*not by 'carol'"):
        _desk(sites["d2"]).from_subscriber(_credential(pki, "carol"), notice(pki, "alice"))


def test_a_notice_naming_another_site_is_refused(pki: Pki, sites: dict[str, SiteNode]) -> None:
    desk = _desk(sites["d2"])
    with pytest.raises(NoticeError, match=r"names <https://d3\.xdn\.example/> .* not this site"):
        desk.from_subscriber(_credential(pki, "alice"), notice(pki, site="d3"))
    assert desk.from_subscriber(_credential(pki, "alice"), notice(pki, site=None))  # none named


def test_a_notice_of_someone_not_registered_here_is_refused(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    # alice's namesake: another certificate with alice's name, so alice's member id differs
    with pytest.raises(NoticeError, match="not registered here"):
        _desk(sites["d2"]).from_subscriber(_credential(pki, "alice-2"), notice(pki, "alice-2"))
    with pytest.raises(NoticeError, match="not registered here"):
        _desk(sites["d1"]).from_subscriber(_credential(pki, "alice"), notice(pki, site="d1"))


def test_only_subscribers_notices_travel(pki: Pki, sites: dict[str, SiteNode]) -> None:
    with pytest.raises(NoticeError, match="holds a site certificate"):
        _desk(sites["d1"]).from_subscriber(_credential(pki, "d2"), notice(pki, "d2", site="d1"))


def test_a_stale_or_future_notice_is_refused(pki: Pki, sites: dict[str, SiteNode]) -> None:
    desk = _desk(sites["d2"])
    retention = sites["d2"].store.routed.window.retention_ms
    with pytest.raises(NoticeError, match="stale"):
        desk.from_subscriber(_credential(pki, "alice"), notice(pki, at_ms=NOW_MS - retention - 1))
    with pytest.raises(NoticeError, match="in the future"):
        desk.from_subscriber(_credential(pki, "alice"), notice(pki, at_ms=NOW_MS + 3_600_000))


def test_a_notice_about_a_publisher_not_granted_is_listed_but_not_queued(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    assert _desk(node).from_subscriber(
        _credential(pki, "alice"), notice(pki, publisher="qa-company")
    )
    assert node.store.queued_receipts(limit=10) == []
    assert node.store.notifications.count() == 1


def test_the_same_refusal_signed_again_goes_upstream_but_is_listed_once(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    desk = _desk(node)
    alice = _credential(pki, "alice")
    assert desk.from_subscriber(alice, notice(pki, hop="1"))
    assert desk.from_subscriber(alice, notice(pki, hop="2", at_ms=NOW_MS - 100))
    assert desk.from_subscriber(alice, notice(pki, version=2))  # another refused thing
    assert len(node.store.queued_receipts(limit=10)) == 3
    assert node.store.notifications.count() == 2


def test_a_subscriber_has_at_most_so_many_notices_here(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    alice = _credential(pki, "alice")
    for i in range(NOTICES_PER_SUBSCRIBER):
        node.store.notifications.add_receipt(StoredNotification(
            id=f"refusal-{i}", received_ms=NOW_MS, sender="alice",
            sender_fingerprint=alice.fingerprint, media_type="application/n-quads",
            nquads=b"", refusal=True,
        ))
    with pytest.raises(NoticeError, match=f"has {NOTICES_PER_SUBSCRIBER} notices here"):
        _desk(node).from_subscriber(alice, notice(pki))
    assert _desk(node).from_subscriber(_credential(pki, "carol"), notice(pki, "carol"))


# ------------------------------------------------------------------------ the inbox kind


def test_notices_are_not_counted_against_the_inbox_and_go_with_the_retention(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    store = sites["d2"].store
    note = StoredNotification(id="n1", received_ms=1, sender="bob", sender_fingerprint="00",
                              media_type="text/turtle", nquads=b"<a:a> <a:b> <a:c> .\n")
    store.notifications.add(note, capacity=1)  # the inbox is full of parties' notifications
    assert _desk(sites["d2"]).from_subscriber(_credential(pki, "alice"), notice(pki))
    with pytest.raises(InboxFull, match="holds 1 notifications"):  # the notice is not counted
        store.notifications.add(dataclasses.replace(note, id="n2"), capacity=1)
    assert store.notifications.count(receipts=True) == 0  # nor a receipt
    assert store.notifications.count() == 2
    assert store.prune_receipts_seen(NOW_MS) == 0  # not yet past the retention
    assert store.prune_receipts_seen(NOW_MS + 1) == 1
    assert store.notifications.ids() == ["n1"]  # the notice's notification went with it


@pytest.mark.parametrize("kinds", [
    {"receipt": True, "refusal": True}, {"receipt": True, "policy": True},
    {"refusal": True, "policy": True},
])
def test_a_notification_is_of_one_kind_at_most(kinds: dict[str, bool]) -> None:
    with pytest.raises(ValueError, match="one kind at most"):
        StoredNotification(id="x", received_ms=1, sender="a", sender_fingerprint="0",
                           media_type="application/n-quads", nquads=b"", **kinds)


def test_a_site_without_an_inbox_lists_no_notice(pki: Pki, sites: dict[str, SiteNode]) -> None:
    assert _desk(sites["d2"], inbox=False).from_subscriber(_credential(pki, "alice"), notice(pki))
    assert sites["d2"].store.notifications.count() == 0
    assert sites["d2"].store.receipts_queued() == 1


# ---------------------------------------------------------------------------- upstream


def _behind(node: SiteNode, pki: Pki, downlink: str, *members: str) -> None:
    node.table.set_link_members(downlink, [
        Registration(subscriber=_credential(pki, m).member_id, certificate=pki.parties[m][0],
                     grants={PUBLISHER: frozenset({"WorkOrder"})})
        for m in members
    ])


def test_an_uplink_accepts_a_notice_only_of_a_member_behind_the_downlink(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    d1 = sites["d1"]
    desk = _desk(d1)
    d2, d3 = _credential(pki, "d2"), _credential(pki, "d3")
    data = notice(pki)
    with pytest.raises(NoticeError, match="not a member behind downlink 'd2'"):
        desk.from_downlink(d2, data)
    _behind(d1, pki, "d2", "alice")
    _behind(d1, pki, "d3", "carol", "alice-2")
    with pytest.raises(NoticeError, match="not a member behind downlink 'd3'"):
        desk.from_downlink(d3, data)  # alice is behind d2; d3 has her namesake only
    assert desk.from_downlink(d2, data) is True
    assert desk.from_downlink(d2, data) is False
    (kept,) = d1.store.queued_receipts(limit=10, publisher=PUBLISHER)  # kept for the publisher
    assert kept.data == data
    read = read_notice(data, provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**5)
    stored = d1.store.notifications.get(read.notification_id)
    assert stored is not None and stored.refusal and stored.sender == "d2"
    assert stored.readers == {certs.node_uri(n) for n in ("alice", "d2", PUBLISHER)}


def test_the_calls_count_refusals_and_never_fail(pki: Pki, sites: dict[str, SiteNode]) -> None:
    d1, d2 = sites["d1"], sites["d2"]
    at_d2 = DisseminatorService(d2)
    at_d1 = DisseminatorService(d1)
    at_d1._link_peers["d2"] = _credential(pki, "d2")
    _behind(d1, pki, "d2", "alice")

    async def calls() -> tuple[pb.ReceiptBatchAck, pb.ReceiptBatchAck]:
        mine = notice(pki)
        sent = await at_d2.Notices(
            pb.NoticeBatch(notices=[mine, mine, notice(pki, "carol"), b"junk"]),
            _Context(pki.parties["alice"][0]),
        )
        # d2 passes up what it queued: alice's notice beside a receipt
        batch = pb.ReceiptBatch(receipts=[r.data for r in d2.store.queued_receipts(limit=10)]
                                + [chain(pki, "d1", "d2")])
        passed = await at_d1.Receipts(batch, _Context(pki.parties["d2"][0]))
        return sent, passed

    sent, passed = asyncio.run(calls())
    assert (sent.accepted, sent.duplicates, sent.refused) == (1, 1, 2)
    refused = d2.metrics.refused_notices
    assert refused.labels(source="subscriber", reason="ForeignNoticeError")._value.get() == 1
    assert refused.labels(source="subscriber", reason="ProvenanceError")._value.get() == 1
    assert (passed.accepted, passed.duplicates, passed.refused) == (2, 0, 0)
    assert d1.metrics.notices.labels(source="downlink")._value.get() == 1
    assert d1.metrics.receipts.labels(source="downlink")._value.get() == 1


def test_a_notice_is_told_from_a_receipt_by_its_message_type_statement(pki: Pki) -> None:
    assert is_notice(notice(pki))
    receipt = chain(pki, "d1", "d2")
    assert not is_notice(receipt)
    # a receipt whose text merely names the type (here in a literal) is still a receipt
    statement = f"<{HAS_MESSAGE_TYPE.value}> <{REFUSAL.value}>".encode()
    assert statement in notice(pki)  # what the check looks for, as notices are written
    assert not is_notice(receipt + b'<urn:a> <urn:b> "' + statement + b'" <urn:g> .\n')
    assert is_notice(receipt + b"<urn:a> " + statement + b" <urn:g> .\n")


def test_what_a_notice_says(pki: Pki) -> None:
    read = read_notice(notice(pki), provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**5)
    assert (read.facts.kind, read.facts.document_id, read.facts.version) == ("document", DOC, 1)
    assert read.member_id == _credential(pki, "alice").member_id
    assert read.signed_ms == NOW_MS - 500
    assert read.notification_id.startswith("refusal-") and len(read.notification_id) == 48
    again = read_notice(notice(pki, hop="2", reason="other words"),
                        provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=10**5)
    assert again.id != read.id and again.notification_id == read.notification_id
    with pytest.raises(NoticeError, match="over the limit"):
        read_notice(notice(pki), provenance.ChainVerifier(pki.ca), at=NOW, max_bytes=100)
    with pytest.raises(NoticeError, match="not a failure notice"):
        read_notice(chain(pki, "d1", "d2"), provenance.ChainVerifier(pki.ca), at=NOW,
                    max_bytes=10**6)
    later = datetime.fromtimestamp(NOW.timestamp() + 20 * 365 * 86400, UTC)
    with pytest.raises(SignatureError):  # the certificate has expired by then
        read_notice(notice(pki), provenance.ChainVerifier(pki.ca), at=later, max_bytes=10**5)


def test_gap_reports_take_the_same_road_one_notification_per_missing_document(
    pki: Pki, sites: dict[str, SiteNode]
) -> None:
    node = sites["d2"]
    signer = pki.signer("alice")

    def gap(sequence: int, hop: str) -> bytes:
        return provenance.failure_notice(
            signer, message_uri=provenance.notice_uri(signer.node_uri, hop),
            refusal=provenance.RefusalFacts(
                kind="gap", reason=f"document #{sequence} was withheld", publisher=PUBLISHER,
                sequence=sequence, received_from=certs.node_uri("d2"),
            ),
            timestamp_ms=NOW_MS - 100,
        ).to_nquads()

    desk = _desk(node)
    alice = _credential(pki, "alice")
    assert desk.from_subscriber(alice, gap(2, "a"))
    assert desk.from_subscriber(alice, gap(3, "b"))
    assert desk.from_subscriber(alice, gap(3, "c"))  # the same gap reported again
    assert [q.publisher for q in node.store.queued_receipts(limit=10)] == [PUBLISHER] * 3
    assert node.store.notifications.count() == 2  # one per missing document
