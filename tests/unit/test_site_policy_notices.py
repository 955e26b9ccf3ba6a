"""Policy-change notices at a site (disseminator.policy_notices via SiteNode.route): verified
before the entitlement they travel with is routed, kept once in the inbox with their readers;
forged, someone else's or inconsistent ones dropped (counted) while the entitlement goes on."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from disseminator.node import SiteIdentity, SiteNode
from disseminator.routing import Registration
from disseminator.store import Store
from tests.unit.receipt_fixtures import BLOCKS, NOW, PUBLISHER, Pki, make_pki
from xdn import certs, crypto, provenance
from xdn.completeness import Entitlement, sign_entitlement
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet
from xdn.policy_notices import policy_change, sign_policy_notice
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import entitlement_to_pb

ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
T = int(NOW.timestamp() * 1000)


@functools.cache
def pki() -> Pki:
    return make_pki()


def credential(name: str) -> certs.Credential:
    return certs.credential_from_pem(pki().parties[name][0])


def d2(tmp_path: Path, *, inbox: bool = True) -> SiteNode:
    tls, signer = pki().tls("d2"), pki().signer("d2")
    node = SiteNode(
        site=SiteIdentity(name="d2", block=BLOCKS["d2"], uplink="d1", tls=tls, signer=signer),
        ontology=ONTOLOGY,
        engine=PolicyEngine(PolicySet.of(ONTOLOGY, [])),
        store=Store(tmp_path / "d2.sqlite", messages_of=certs.node_uri("d2") if inbox else None),
        log_sink=provenance.ProvenanceLog(
            tmp_path / "d2.nq", node_uri=signer.node_uri, cert_pem=tls.cert_pem
        ),
        clock=lambda: NOW,
    )
    for subscriber in ("alice", "carol"):
        member = credential(subscriber).member_id
        node.table.local[member] = Registration(
            subscriber=member, certificate=pki().parties[subscriber][0],
            grants={PUBLISHER: frozenset({"WorkOrder"})},
        )
    return node


@pytest.fixture
def site(tmp_path: Path) -> Iterator[SiteNode]:
    node = d2(tmp_path)
    yield node
    node.store.close()


def notice(*, for_: str = "alice", by: str = PUBLISHER, version: int = 2,
           current: frozenset[str] = frozenset({"WorkOrder"})) -> bytes:
    change = policy_change(
        publisher=PUBLISHER, subscriber=for_, certificate=credential(for_).fingerprint,
        previous_version=version - 1, previous={"WorkOrder", "MachineSetting"},
        version=version, current=current, at_ms=T,
    )
    assert change is not None
    return sign_policy_notice(pki().signer(by), change, timestamp_ms=T).to_nquads()


def _tampered() -> bytes:
    data = notice()
    assert b'"MachineSetting"' in data
    return data.replace(b'"MachineSetting"', b'"Quality"')


def entitlement(data: bytes, *, version: int = 2,
                concepts: frozenset[str] = frozenset({"WorkOrder"})) -> pb.Entitlement:
    who = credential("alice")
    signed = sign_entitlement(
        Entitlement(publisher=PUBLISHER, subscriber=who.member_id, certificate=who.fingerprint,
                    policy_version=version, issued_at_ms=T, valid_until_ms=T + 86_400_000,
                    concepts=concepts),
        crypto.load_private_key_pem(pki().parties[PUBLISHER][1]),
    )
    message = entitlement_to_pb(signed, publisher_certificate=pki().parties[PUBLISHER][0])
    message.notice = data
    return message


def routed(node: SiteNode) -> list[pb.Entitlement]:
    rows = node.store.pending("subscriber", credential("alice").member_id, after=0, limit=10)
    return [pb.Delivery.FromString(payload).entitlement for _, payload in rows]


def refusals(node: SiteNode) -> float:
    samples = node.metrics.refused_policy_notices.collect()[0].samples
    return sum(s.value for s in samples if s.name.endswith("_total"))


def test_a_good_notice_goes_on_with_its_entitlement_and_is_kept_once_in_the_inbox(
    site: SiteNode,
) -> None:
    data = notice()
    site.route(entitlements=[entitlement(data)], came_from="d1")
    site.route(entitlements=[entitlement(data)], came_from="d1")  # re-sent: listed once
    assert [e.notice for e in routed(site)] == [data, data]
    inbox = site.store.notifications
    (only,) = inbox.ids()
    stored = inbox.get(only)
    assert stored is not None and stored.policy and not stored.receipt
    assert stored.id.startswith("policy-") and stored.nquads == data
    assert (stored.sender, stored.sender_fingerprint) == (
        PUBLISHER, credential(PUBLISHER).fingerprint
    )
    assert stored.readers == {certs.node_uri(n) for n in ("alice", PUBLISHER, "d1", "d2")}
    assert inbox.count(receipts=False) == 0  # not counted against the inbox's limit
    assert inbox.page(after=0, limit=10, reader=certs.node_uri("alice"))[0]
    assert not inbox.page(after=0, limit=10, reader=certs.node_uri("carol"))[0]
    assert inbox.prune_receipts(T + 1) == 1  # goes with the routed retention
    assert refusals(site) == 0


@pytest.mark.parametrize(
    ("data", "version"),
    [
        (lambda: notice(by="d1"), 2),  # a site forging the publisher's notice
        (lambda: _tampered(), 2),  # a loss renamed after signing
        (lambda: notice(for_="carol"), 2),  # someone else's
        (lambda: notice(version=3), 2),  # of another policy version than the entitlement
        (lambda: notice(current=frozenset({"WorkOrder", "Quality"})), 2),  # gains not granted
        (lambda: b"not n-quads", 2),
    ],
    ids=["forged", "tampered", "someone-else", "other-version", "inconsistent", "garbage"],
)
def test_a_bad_notice_is_dropped_and_counted_and_the_entitlement_still_goes(
    site: SiteNode, data: object, version: int, caplog: pytest.LogCaptureFixture
) -> None:
    site.route(entitlements=[entitlement(data(), version=version)])  # type: ignore[operator]
    (delivered,) = routed(site)
    assert delivered.notice == b"" and delivered.policy_version == version
    assert site.store.notifications.ids() == []
    assert refusals(site) == 1
    assert "refused the policy-change notice" in caplog.text


def test_without_an_endpoint_a_good_notice_is_checked_and_passed_on_not_stored(
    tmp_path: Path,
) -> None:
    node = d2(tmp_path, inbox=False)
    try:
        data = notice()
        node.route(entitlements=[entitlement(data)])
        assert [e.notice for e in routed(node)] == [data]
        assert node.store.notifications.ids() == []
    finally:
        node.store.close()


def _everything() -> bytes:
    who = credential("alice")
    change = policy_change(
        publisher=PUBLISHER, subscriber="alice", certificate=who.fingerprint,
        previous_version=1, previous={"WorkOrder", "MachineSetting"}, version=2, current=(),
        at_ms=T, everything=True,
    )
    assert change is not None
    return sign_policy_notice(pki().signer(PUBLISHER), change, timestamp_ms=T).to_nquads()


def test_a_notice_that_alice_loses_everything_goes_to_her_with_an_entitlement_of_nothing(
    site: SiteNode,
) -> None:
    """The key service tells her while d2 still serves her by the older version: routed to
    her, listed once, with her and the publisher among its readers."""
    data = _everything()
    site.route(entitlements=[entitlement(data, concepts=frozenset())], came_from="d1")
    (delivered,) = routed(site)
    assert delivered.notice == data and list(delivered.concepts) == []
    (only,) = site.store.notifications.ids()
    stored = site.store.notifications.get(only)
    assert stored is not None and stored.policy and stored.nquads == data
    assert stored.readers == {certs.node_uri(n) for n in ("alice", PUBLISHER, "d1", "d2")}
    assert refusals(site) == 0


def test_a_notice_that_alice_loses_everything_beside_a_grant_is_dropped(site: SiteNode) -> None:
    site.route(entitlements=[entitlement(_everything(), concepts=frozenset({"Quality"}))])
    (delivered,) = routed(site)
    assert delivered.notice == b"" and list(delivered.concepts) == ["Quality"]
    assert site.store.notifications.ids() == [] and refusals(site) == 1
