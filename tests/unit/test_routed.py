"""The site's routed window (issue #15): bounded, and a pruned version is still refused.

Against the real SQLite store (in memory or in a temp folder); one test drives a real
:class:`SiteNode` through its housekeeping and its routing.
"""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disseminator.node import SiteIdentity, SiteNode
from disseminator.store import Store, Window
from tests.unit.bounded_checks import assert_keeps_something
from tests.unit.receipt_fixtures import BLOCKS, NOW, PUBLISHER, Pki, make_pki
from xdn import provenance
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import PolicyEngine, PolicySet
from xdn.publication import Reach
from xdn.wire.v1 import dissemination_pb2 as pb

DAY_MS = 86_400_000


def _route(store: Store, publisher: str, document: str, *, sequence: int, at_ms: int) -> None:
    store.commit_routing(
        document=(publisher, document, 1), appends=[], sequence=sequence, at_ms=at_ms
    )


def test_entries_older_than_the_retention_are_pruned_and_still_refused() -> None:
    store = Store(":memory:", routed_window=Window(retention_days=7))
    for n in range(1, 6):
        _route(store, "p", f"old-{n}", sequence=n, at_ms=0)
    for n in range(6, 9):
        _route(store, "p", f"new-{n}", sequence=n, at_ms=8 * DAY_MS)
    assert store.prune_routed(8 * DAY_MS) == 5
    assert store.routed.entries() == 3
    assert store.routed.floor("p") == 5
    for n in range(1, 6):  # the pruned versions, sent again: still taken as routed
        assert store.is_routed("p", f"old-{n}", 1, n)
    assert store.is_routed("p", "new-7", 1, 7)  # kept entries answer as before
    assert store.is_routed("p", "anything", 1, 4)  # any number at or below the floor: a replay
    assert not store.is_routed("p", "next", 1, 9)  # a new document
    assert not store.is_routed("q", "old-1", 1, 1)  # the floor is the publisher's own
    assert store.prune_routed(8 * DAY_MS) == 0  # nothing more to prune


def test_no_publisher_keeps_more_than_its_share() -> None:
    store = Store(":memory:", routed_window=Window(per_publisher=3))
    for n in range(1, 11):
        _route(store, "p", f"d{n}", sequence=n, at_ms=n)
        _route(store, "q", f"d{n}", sequence=100 + n, at_ms=n)
    assert store.prune_routed(20) == 14
    assert store.routed.entries() == 6
    assert (store.routed.floor("p"), store.routed.floor("q")) == (7, 107)
    assert all(store.is_routed("p", f"d{n}", 1, n) for n in range(1, 11))
    assert not store.is_routed("p", "d11", 1, 11)


def test_out_of_order_arrivals_above_the_floor_still_pass() -> None:
    """Pipelined publishing may deliver number 10 before 9: only pruning moves the floor."""
    store = Store(":memory:", routed_window=Window(retention_days=1))
    _route(store, "p", "ten", sequence=10, at_ms=0)
    assert not store.is_routed("p", "nine", 1, 9)
    store.prune_routed(DAY_MS // 2)  # nothing old enough yet
    assert not store.is_routed("p", "nine", 1, 9)
    store.prune_routed(2 * DAY_MS)
    assert store.is_routed("p", "nine", 1, 9)  # more than a day late: taken for a replay


def test_unsequenced_entries_are_kept() -> None:
    """A v2 manifest has no number a floor could compare: its entry is never pruned."""
    store = Store(":memory:", routed_window=Window(retention_days=1, per_publisher=1))
    _route(store, "p", "legacy", sequence=0, at_ms=0)
    _route(store, "p", "a", sequence=1, at_ms=0)
    _route(store, "p", "b", sequence=2, at_ms=0)
    assert store.prune_routed(5 * DAY_MS) == 2
    assert store.routed.entries() == 1
    assert store.is_routed("p", "legacy", 1)
    assert not store.is_routed("p", "legacy", 2)


def test_the_floor_survives_a_restart_and_an_older_store_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "site.sqlite"
    old = sqlite3.connect(path)  # the routed table as stores before the window wrote it
    old.executescript(
        "CREATE TABLE routed (publisher TEXT NOT NULL, document TEXT NOT NULL, "
        "version INTEGER NOT NULL, PRIMARY KEY (publisher, document, version)) WITHOUT ROWID;"
        "INSERT INTO routed VALUES ('p', 'before', 3);"
    )
    old.close()
    store = Store(path, routed_window=Window(retention_days=1))
    assert store.is_routed("p", "before", 3)
    _route(store, "p", "a", sequence=4, at_ms=0)
    assert store.prune_routed(2 * DAY_MS) == 1
    store.close()
    again = Store(path)
    try:
        assert again.is_routed("p", "a", 1, 4)
        assert again.is_routed("p", "before", 3)  # unsequenced (unknown): kept
        assert again.routed.floor("p") == 4
    finally:
        again.close()


def test_a_window_must_keep_something() -> None:
    assert_keeps_something(Window, periods=("retention_days",), counts=("per_publisher",))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["p", "q"]),
            st.integers(1, 40),  # the document's signed sequence number
            st.integers(0, 3),  # days since the start
            st.booleans(),  # prune afterwards
        ),
        max_size=40,
    ),
    st.integers(1, 5),
)
def test_whatever_was_routed_is_refused_and_the_window_stays_bounded(
    steps: list[tuple[str, int, int, bool]], per_publisher: int
) -> None:
    """After any interleaving of routing and pruning: every version ever routed is still
    refused, a number above everything routed is not, and each publisher keeps at most its
    share once pruned."""
    store = Store(":memory:", routed_window=Window(retention_days=1, per_publisher=per_publisher))
    routed: set[tuple[str, int]] = set()
    now = 0
    for publisher, sequence, day, prune in steps:
        now = max(now, day * DAY_MS)
        if not store.is_routed(publisher, f"d{sequence}", 1, sequence):
            _route(store, publisher, f"d{sequence}", sequence=sequence, at_ms=now)
        routed.add((publisher, sequence))
        if prune:
            store.prune_routed(now)
            for p in ("p", "q"):
                (kept,) = store._db.execute(
                    "SELECT COUNT(*) FROM routed WHERE publisher = ?", (p,)
                ).fetchone()
                assert kept <= per_publisher
        for p, n in routed:
            assert store.is_routed(p, f"d{n}", 1, n)
        assert not store.is_routed(publisher, "fresh", 1, 41)


# ---- the node: housekeeping prunes, routing refuses a pruned version -----------------------


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


def test_housekeeping_prunes_and_a_pruned_document_is_not_routed_again(
    pki: Pki, tmp_path: Path
) -> None:
    now = [NOW]
    signer = pki.signer("d1")
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    node = SiteNode(
        site=SiteIdentity(
            name="d1", block=BLOCKS["d1"], uplink=None, tls=pki.tls("d1"), signer=signer
        ),
        ontology=ontology,
        engine=PolicyEngine(PolicySet.of(ontology, [])),
        store=Store(tmp_path / "d1.sqlite", routed_window=Window(retention_days=1)),
        log_sink=provenance.ProvenanceLog(
            tmp_path / "d1.nq", node_uri=signer.node_uri, cert_pem=pki.tls("d1").cert_pem
        ),
        clock=lambda: now[0],
    )
    try:
        node.store.commit_routing(
            document=(PUBLISHER, "order 7", 2), appends=[], sequence=12, at_ms=node.now_ms()
        )
        now[0] += timedelta(days=2)
        node.housekeeping()
        assert node.store.routed.entries() == 0
        # The same version (or an older one) again: ignored before anything is checked (a
        # new document without a signed chain would be refused with an error instead).
        for version, sequence in ((2, 12), (1, 5)):
            replayed = pb.Dissemination(manifest=pb.Manifest(
                publisher=PUBLISHER, document_id="order 7", version=version, sequence=sequence,
            ))  # fmt: skip
            assert node.route(dissemination=replayed) == Reach()
        assert node.store.queued_total() == 0
    finally:
        node.store.close()
