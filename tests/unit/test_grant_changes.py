"""A live subscriber's grants change in queue order; an ended subscription drains first.

The site node runs on a real store file, real certificates and real policies (no network):
a policy update narrows, widens or ends alice's grants while deliveries are queued for her.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.network import ONTOLOGY
from deploy.pki import Party, ensure_ca, issue_party
from disseminator.grant_changes import end_of_queue, grants_changed, subscription_ended
from disseminator.node import SiteIdentity, SiteNode
from disseminator.planning import DocumentPlan
from disseminator.routing import Destination, Registration
from disseminator.store import Append, Store, StoredRegistration
from xdn import certs, crypto, provenance
from xdn.grpc_tls import TlsFiles
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet, parse_policy
from xdn.wire.v1 import dissemination_pb2 as pb

POLICY = (REPO_ROOT / "policies" / "production-dept.toml").read_text()
ALICE = Destination("subscriber", "alice")
DENY_MACHINE_SETTINGS = """
[[rule]]
id = "N1"
effect = "deny"
concept = "MachineSetting"
when = { subject = { OU = "Cred1" } }
"""


@dataclass
class _Site:
    tmp: Path
    ontology: Ontology

    def policies(self, text: str, version: int) -> PolicySet:
        text = re.sub(r"^version = \d+$", f"version = {version}", text, flags=re.M)
        return PolicySet.of(self.ontology, [parse_policy(text.encode(), self.ontology)])

    def node(self, policies: PolicySet) -> SiteNode:
        """A site node for d2 (WorkOrder) on the store in ``tmp`` (kept across calls)."""
        tls = TlsFiles.from_dir(self.tmp / "certs", "d2")
        signer = provenance.Signer(  # as the daemon makes it: carrying its certificate
            node_uri=certs.node_uri("d2"), private_key=crypto.load_private_key_pem(tls.key_pem),
            certificate=tls.cert_pem,
        )
        return SiteNode(
            site=SiteIdentity(name="d2", block="WorkOrder", uplink=None, tls=tls, signer=signer),
            ontology=self.ontology,
            engine=PolicyEngine(policies),
            store=Store(self.tmp / "site.sqlite"),
            log_sink=provenance.ProvenanceLog(
                self.tmp / "d2.nq", node_uri=signer.node_uri, cert_pem=tls.cert_pem
            ),
            clock=lambda: datetime.now(UTC),
        )

    def alice(self) -> bytes:
        return (self.tmp / "certs" / "alice.pem").read_bytes()


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([ONTOLOGY])


@pytest.fixture
def site(tmp_path: Path, ontology: Ontology) -> Iterator[_Site]:
    now = datetime.now(UTC)
    ensure_ca(tmp_path / "certs", now=now)
    issue_party(tmp_path / "certs", Party(
        name="d2", role="site", hosts=("localhost",), attributes={certs.BLOCK_FIELD: "WorkOrder"},
    ), now=now)
    issue_party(tmp_path / "certs", Party(
        name="alice", role="subscriber", attributes={"OU": "Cred1"}
    ), now=now)
    yield _Site(tmp_path, ontology)


def _subscribed(site: _Site, node: SiteNode) -> Registration:
    pem = site.alice()
    registration = Registration(subscriber="alice", certificate=pem, grants=node.grants(pem))
    node.register_local(registration, frozenset())
    return registration


def _queue(node: SiteNode) -> list[tuple[int, pb.Delivery]]:
    pending = node.store.pending("subscriber", "alice", after=0, limit=100)
    return [(seq, pb.Delivery.FromString(payload)) for seq, payload in pending]


def _deliver_all(node: SiteNode) -> None:
    """alice's stream sends and acknowledges everything queued for her."""
    cursor = node.connect(ALICE, 0, 1024)
    for seq, _ in _queue(node):
        cursor.on_sent(seq)
        node.on_ack(ALICE, cursor, seq)


def _grants(grants: list[pb.Grant]) -> dict[str, set[str]]:
    return {g.publisher: set(g.concepts) for g in grants}


def test_a_narrowed_grant_is_queued_after_what_was_routed_before(site: _Site) -> None:
    node = site.node(site.policies(POLICY, 1))
    before = _subscribed(site, node)
    node.store.commit_routing(  # a document routed under the old grants, not yet delivered
        document=None, appends=[Append(kind="subscriber", name="alice", payload=b"")]
    )
    done = node.reload_policies(site.policies(POLICY + DENY_MACHINE_SETTINGS, 2))
    assert done == [f"grants of alice changed to {sorted(node.table.local['alice'].concepts())}"]
    [(first, _), (second, change)] = _queue(node)
    assert second == first + 1 and change.WhichOneof("body") == "grants_changed"
    assert _grants(change.grants_changed.previous) == before.grants
    now = _grants(change.grants_changed.grants)["production-dept"]
    assert now == set(before.grants["production-dept"]) - {"MachineSetting"}
    assert node.table.local["alice"].grants["production-dept"] == now  # routing follows at once
    stored = {r.subscriber: r for r in node.store.registrations() if r.kind == "subscriber"}
    assert set(stored["alice"].grants["production-dept"]) == now


def test_an_unchanged_grant_queues_nothing(site: _Site) -> None:
    node = site.node(site.policies(POLICY, 1))
    _subscribed(site, node)
    assert node.reload_policies(site.policies(POLICY, 2)) == []
    assert _queue(node) == []


def test_an_ended_subscription_keeps_its_queue_until_the_end_is_acknowledged(
    site: _Site,
) -> None:
    node = site.node(site.policies(POLICY, 1))
    registration = _subscribed(site, node)
    node.store.commit_routing(
        document=None, appends=[Append(kind="subscriber", name="alice", payload=b"")]
    )
    node.reload_policies(site.policies(POLICY.replace('"Cred1"', '"Cred9"'), 2))
    assert "alice" not in node.table.local  # nothing more is routed to her
    assert node.ending("alice") == registration  # she may still connect, with her old grants
    [_, (_, last)] = _queue(node)
    assert last.ended.reason == "no policy grants it anything any more"
    assert node.ended("alice") is None
    _deliver_all(node)
    assert node.ended("alice") == "no policy grants it anything any more"
    assert node.ending("alice") is None
    assert node.store.cursor("subscriber", "alice") == (0, 0)  # queue and cursor dropped
    assert [r for r in node.store.registrations() if r.subscriber == "alice"] == []


def test_an_ending_survives_a_restart_of_the_site(site: _Site) -> None:
    ended = site.policies(POLICY.replace('"Cred1"', '"Cred9"'), 2)
    node = site.node(site.policies(POLICY, 1))
    registration = _subscribed(site, node)
    node.reload_policies(ended)
    node.store.close()

    again = site.node(ended)  # the same store file
    assert again.ending("alice") == registration
    assert "alice" not in again.table.local
    _deliver_all(again)
    assert again.ended("alice") == "no policy grants it anything any more"


def test_control_deliveries_pass_a_full_queue(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite", max_queue=1)
    store.commit_routing(document=None, appends=[Append(kind="subscriber", name="a", payload=b"")])
    _, full = store.commit_routing(
        document=None, appends=[Append(kind="subscriber", name="a", payload=b"")]
    )
    assert full == [("subscriber", "a")]
    seq = store.change_registration(
        save=StoredRegistration(
            kind="subscriber", owner="", subscriber="a", certificate=b"", grants={}, seen_ms=0
        ),
        control=Append(kind="subscriber", name="a", payload=subscription_ended("why")),
    )
    assert seq == 2
    assert end_of_queue(store.pending("subscriber", "a", after=0, limit=10)) == (2, "why")


def test_grant_change_messages_round_trip() -> None:
    payload = grants_changed({"p": {"B", "A"}}, {"p": {"A"}}, "the policy changed")
    change = pb.Delivery.FromString(payload).grants_changed
    assert _grants(change.previous) == {"p": {"A", "B"}}
    assert _grants(change.grants) == {"p": {"A"}}
    assert change.reason == "the policy changed"
    assert end_of_queue([(1, payload)]) is None


def test_history_is_kept_per_certificate_with_the_routing(tmp_path: Path) -> None:
    from disseminator.store import History

    store = Store(tmp_path / "s.sqlite")
    for concepts in ({"A", "B"}, {"A"}):
        store.commit_routing(
            document=None, appends=[],
            history=History(
                publisher="p", concepts=frozenset(concepts) | {"C"},
                instances={"fp-alice": frozenset(concepts)},
            ),
        )
    store.close()
    again = Store(tmp_path / "s.sqlite")
    assert again.disseminated() == {("p", "A"), ("p", "B"), ("p", "C")}
    assert again.instances("fp-alice") == {"p": {"A": 2, "B": 1}}
    assert again.instances("fp-bob") == {}


def test_a_new_registration_keeps_what_the_certificate_received(site: _Site) -> None:
    """A max_instances budget spent under one registration stays spent under the next."""
    budget = POLICY.replace('id = "R1"', 'id = "R1"\nmax_instances = 1')
    node = site.node(site.policies(budget, 1))
    _subscribed(site, node)
    routed = DocumentPlan(  # as routing a document with one WorkOrder instance for alice does
        identity=("production-dept", "d", 1), fragments=1, concepts=frozenset({"WorkOrder"}),
        delivered={"alice": {"WorkOrder"}},
    )
    node.store.commit_routing(document=None, appends=[], history=node._history(routed))
    node.unregister_local("alice")

    pem = site.alice()
    decided = Registration(subscriber="alice", certificate=pem, grants=node.grants(pem))
    kept = node.register_local(decided, frozenset())
    assert "WorkOrder" in decided.grants["production-dept"]  # the policy alone would grant it
    assert "WorkOrder" not in kept.grants.get("production-dept", frozenset())
    assert node.table.local["alice"] == kept


def test_acknowledgements_are_committed_together_after_a_short_window(site: _Site) -> None:
    """The stream may send more at once; the store drops what was acknowledged a moment later,
    every acknowledgement of the window in one commit (on the acknowledgement thread's
    connection)."""
    import asyncio

    node = site.node(site.policies(POLICY, 1))
    _subscribed(site, node)
    node.store.commit_routing(document=None, appends=[
        Append(kind="subscriber", name="alice", payload=b""),
        Append(kind="subscriber", name="alice", payload=b""),
    ])  # fmt: skip
    commits: list[str] = []

    flushed = asyncio.Event()
    acked = node.store.acked

    def accounted(acks: Mapping[tuple[str, str], int], dropped: int) -> None:
        acked(acks, dropped)  # (after the window's one commit)
        flushed.set()

    async def acknowledge() -> None:
        cursor = node.connect(ALICE, 0, 1024)
        node.store.acked = accounted  # type: ignore[method-assign]
        for db in (node.store._db, node.store._aside):
            assert db is not None
            db.set_trace_callback(
                lambda sql: commits.append(sql) if sql.strip().upper() == "COMMIT" else None
            )
        for seq, _ in _queue(node):
            cursor.on_sent(seq)
            node.on_ack(ALICE, cursor, seq)
        assert cursor.room == 1024 and len(_queue(node)) == 2  # room at once, rows later
        await asyncio.wait_for(flushed.wait(), 30)  # the window's timer commits them

    asyncio.run(acknowledge())
    assert _queue(node) == [] and node.store.cursor("subscriber", "alice")[1] == 2
    assert len(commits) == 1
