"""Failure detection by heartbeats, and graceful drains, with real processes.

Peers "go silent" by SIGSTOP (the process freezes, its sockets stay open: only heartbeats can
tell). Sites run with a 0.5 s heartbeat, so a silent peer is due to be dropped after 1.5 s;
the bounds below are generous for a loaded machine, and every wait polls for its condition.
"""

from __future__ import annotations

import contextlib
import re
import signal
import sqlite3
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, SubscriberSpec
from deploy.pki import Party, issue_party
from xdn.ontology import load_ontology

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)

HEARTBEAT = 0.5
DETECTED_WITHIN = 20.0  # seconds; three intervals are 1.5 s


@pytest.fixture
def net(tmp_path: Path) -> Iterator[LocalNetwork]:
    network = LocalNetwork(
        tmp_path / "net", site_settings={"heartbeat_seconds": HEARTBEAT, "drain_seconds": 30}
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    try:
        network.start_sites()
        yield network
    finally:
        for name in network.sites:  # never leave a frozen process behind
            with contextlib.suppress(KeyError, ProcessLookupError):
                network.signal_site(name, signal.SIGCONT)
        for name in network.subscribers:
            with contextlib.suppress(KeyError, ProcessLookupError):
                network.signal_subscriber(name, signal.SIGCONT)
        network.stop()


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def _documents(directory: Path, first: int, count: int) -> list[Path]:
    docs = []
    for i in range(first, first + count):
        path = directory / f"order-{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", 20_000, out, seed=500 + i)
        docs.append(path)
    return docs


def _dead_peers(network: LocalNetwork, site: str, kind: str) -> float:
    return network.metric(site, "xdn_dead_peers_total", kind=kind)


def _assert_received_exactly_once(
    network: LocalNetwork, docs: list[Path], name: str = "alice", within: float = 90,
    *, site_running: bool = True,
) -> None:
    """``name`` holds exactly the views of ``docs`` (and of the markers), each applied once.

    With its site running, a marker published after ``docs`` shows that nothing else is due.
    A site stopped after a full drain (every delivery acknowledged, and a subscriber records a
    document before acknowledging it) leaves a final view: no marker is needed, or possible.
    """
    if site_running:
        network.publish_marker("production-dept", [name], timeout=within)
    published = [*docs, *network.markers("production-dept")]  # she was a member all along
    expected = expected_deliveries(
        network, load_ontology([ONTOLOGY]), name, {"production-dept": published}
    )
    _wait(
        lambda: len(read_received(network.inbox(name))[0]) >= len(expected), within,
        f"{name} received every document",
    )
    received, refused = read_received(network.inbox(name))
    assert refused == 0
    assert received == expected
    assert len(network.received(name)) == len(expected), "a document was applied twice"


def _queued(network: LocalNetwork, site: str) -> int:
    """Deliveries still queued in a (stopped) site's database."""
    db = sqlite3.connect(network.workdir / "state" / site / "site.sqlite")
    try:
        (count,) = db.execute("SELECT COUNT(*) FROM deliveries").fetchone()
    finally:
        db.close()
    return int(count)


def _subscribed(
    network: LocalNetwork, tmp_path: Path, *, heartbeat: float = HEARTBEAT
) -> list[Path]:
    """alice subscribed at d2 with one document received."""
    network.start_subscriber("alice", extra=("--heartbeat", str(heartbeat)))
    network.wait_subscribed("alice")
    docs = _documents(tmp_path, 0, 1)
    network.publish("production-dept", docs, wait_for=("alice",))
    _wait(lambda: len(network.received("alice")) == 1, 60, "alice received the first document")
    return docs


# ---- failure detection ---------------------------------------------------------------------
def test_a_frozen_subscriber_is_dropped_and_catches_up_exactly_once(
    net: LocalNetwork, tmp_path: Path
) -> None:
    docs = _subscribed(net, tmp_path)
    assert _dead_peers(net, "d2", "subscriber") == 0  # idle but heartbeating: alive
    net.signal_subscriber("alice", signal.SIGSTOP)
    try:
        _wait(lambda: _dead_peers(net, "d2", "subscriber") >= 1, DETECTED_WITHIN, "d2 drops alice")
        assert "subscriber alice (alice@" in net.output("d2")
        assert "taken for dead" in net.output("d2")
        meanwhile = _documents(tmp_path, 1, 2)
        net.publish("production-dept", meanwhile, wait_for=("alice",))  # still registered
    finally:
        net.signal_subscriber("alice", signal.SIGCONT)
    _assert_received_exactly_once(net, docs + meanwhile)
    assert "connection lost" in net.output("alice")  # it came back by reconnecting


def test_a_stalled_subscriber_does_not_slow_its_sibling(
    net: LocalNetwork, tmp_path: Path
) -> None:
    """alice stops reading (frozen, announcing a 60 s heartbeat, so she is not dropped): carol,
    at the same site, still gets every document while alice's stream stays blocked."""
    issue_party(
        net.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    net.subscribers["carol"] = SubscriberSpec(name="carol", site="d2")
    net.start_subscriber("carol")
    net.wait_subscribed("carol")
    docs = _subscribed(net, tmp_path, heartbeat=60)
    net.signal_subscriber("alice", signal.SIGSTOP)
    try:
        meanwhile = _documents(tmp_path, 1, 8)
        net.publish("production-dept", meanwhile, wait_for=("alice", "carol"))
        _assert_received_exactly_once(net, docs + meanwhile, name="carol", within=60)
        assert len(net.received("alice")) == 1  # truly stalled all along
        assert _dead_peers(net, "d2", "subscriber") == 0
    finally:
        net.signal_subscriber("alice", signal.SIGCONT)
    _assert_received_exactly_once(net, docs + meanwhile)


def test_a_frozen_site_is_noticed_by_its_subscriber_and_its_uplink(
    net: LocalNetwork, tmp_path: Path
) -> None:
    docs = _subscribed(net, tmp_path)
    net.signal_site("d2", signal.SIGSTOP)
    try:
        _wait(
            lambda: "peer silent" in net.output("alice"), DETECTED_WITHIN,
            "alice notices that d2 went silent",
        )
        _wait(lambda: _dead_peers(net, "d1", "link") >= 1, DETECTED_WITHIN, "d1 drops link d2")
        assert "downlink d2 taken for dead" in net.output("d1")
    finally:
        net.signal_site("d2", signal.SIGCONT)
    later = _documents(tmp_path, 1, 1)
    net.publish("production-dept", later, wait_for=("alice",))
    _assert_received_exactly_once(net, docs + later)


def test_a_frozen_uplink_is_noticed_by_its_downlink(net: LocalNetwork, tmp_path: Path) -> None:
    docs = _subscribed(net, tmp_path)
    net.signal_site("d1", signal.SIGSTOP)
    try:
        _wait(
            lambda: "peer silent" in net.output("d2"), DETECTED_WITHIN,
            "d2 notices that its uplink went silent",
        )
    finally:
        net.signal_site("d1", signal.SIGCONT)
    later = _documents(tmp_path, 1, 1)
    net.publish("production-dept", later, wait_for=("alice",))
    _assert_received_exactly_once(net, docs + later)


# ---- graceful drain ------------------------------------------------------------------------
def test_sigterm_waits_until_a_connected_subscriber_acknowledged_everything(
    net: LocalNetwork, tmp_path: Path
) -> None:
    # alice announces a long heartbeat interval: frozen for a few seconds, she is slow, not dead.
    docs = _subscribed(net, tmp_path, heartbeat=30)
    sent_before = net.metric("d2", "xdn_deliveries_sent_total", kind="subscriber")
    net.signal_subscriber("alice", signal.SIGSTOP)  # acknowledges nothing for now
    try:
        backlog = _documents(tmp_path, 1, 3)
        net.publish("production-dept", backlog, wait_for=("alice",))
        _wait(
            lambda: net.metric("d2", "xdn_deliveries_sent_total", kind="subscriber")
            >= sent_before + len(backlog),
            30, "d2 sent the backlog to alice's stream",
        )
        net.signal_site("d2", signal.SIGTERM)
        _wait(  # d2 is draining now, waiting for alice's acknowledgements
            lambda: "site d2 stopping: no new work; draining" in net.output("d2"), 30,
            "d2 began to drain",
        )
    finally:
        net.signal_subscriber("alice", signal.SIGCONT)
    assert net.wait_site("d2", timeout=60) == 0
    output = net.output("d2")
    drained = re.search(r"stopped; drained (\d+) deliveries", output)
    assert drained is not None, output
    assert int(drained.group(1)) >= len(backlog)  # it waited for alice's acknowledgements
    assert "0 stay queued on disk" in output, output
    assert "taken for dead" not in output
    assert _queued(net, "d2") == 0
    _assert_received_exactly_once(net, docs + backlog, site_running=False)


def test_sigterm_with_a_disconnected_subscriber_keeps_its_queue_for_the_next_start(
    net: LocalNetwork, tmp_path: Path
) -> None:
    docs = _subscribed(net, tmp_path)
    net.stop_subscriber("alice")
    routed_before = net.metric("d2", "xdn_documents_routed_total")
    backlog = _documents(tmp_path, 1, 2)
    net.publish("production-dept", backlog, wait_for=("alice",))
    _wait(
        lambda: net.metric("d2", "xdn_documents_routed_total")
        >= routed_before + len(backlog),
        30, "d2 queued the backlog for alice",
    )
    stopping = time.monotonic()
    net.signal_site("d2", signal.SIGTERM)
    assert net.wait_site("d2", timeout=60) == 0
    assert time.monotonic() - stopping < 30  # within the drain timeout: nothing to wait for
    assert _queued(net, "d2") >= len(backlog)
    assert f"{_queued(net, 'd2')} stay queued on disk" in net.output("d2")

    net.restart_site("d2")
    net.start_subscriber("alice", extra=("--heartbeat", str(HEARTBEAT)))
    _assert_received_exactly_once(net, docs + backlog)
