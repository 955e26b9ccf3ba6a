"""A subscriber through site restarts and an unsubscription, with real processes (issue #18).

* Finding 6: a site restarted while its uplink is down does not know where to send a
  subscriber it cannot serve; it says ``UNAVAILABLE`` (not serving yet) and ``xdn subscribe``
  retries until the uplink is back, instead of taking a ``PERMISSION_DENIED`` for final.
* Finding 7: ``xdn unsubscribe`` while the subscriber is between reconnects sticks: the
  subscriber's state records that it left, so neither its next reconnect nor a later run
  registers it again, until ``xdn subscribe --rejoin``.

Every wait polls for its condition with a deadline.
"""

from __future__ import annotations

import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.network import LocalNetwork, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture
def net(tmp_path: Path) -> Iterator[LocalNetwork]:
    network = LocalNetwork(tmp_path / "net")
    network.workdir.mkdir(parents=True)
    network.prepare()
    try:
        network.start_sites()
        yield network
    finally:
        network.stop()


def test_a_site_that_does_not_know_its_uplink_yet_is_retried(net: LocalNetwork) -> None:
    # bob's grants reach beyond d3's block: d3 sends him on to its uplink d1. Restarted while
    # d1 is down, d3 cannot find d1 (d3 finds its uplink through the DHT, bootstrapped at d1).
    net.kill_site("d1")
    net.kill_site("d3")
    net.restart_site("d3", joined=False)  # (it cannot join: its bootstrap peer is d1)
    net.start_subscriber("bob")
    assert wait_until(
        lambda: "not serving yet" in net.output("bob") or not net.subscriber_running("bob"),
        60,
    ), net.output("bob")
    assert net.subscriber_running("bob"), f"bob gave up: {net.output('bob')}"
    assert "UNAVAILABLE" in net.output("bob")
    net.restart_site("d1")
    assert net.wait_subscribed("bob", timeout=90)["served_by"] == "d1"
    net.publish_marker("qa-company", ["bob"], timeout=90)  # and he receives


def _registered_at(net: LocalNetwork, site: str) -> list[str]:
    db = sqlite3.connect(net.workdir / "state" / site / "site.sqlite")
    try:
        rows = db.execute("SELECT subscriber FROM registrations WHERE kind = 'subscriber'")
        return [str(name) for (name,) in rows]
    finally:
        db.close()


def test_an_unsubscription_between_reconnects_sticks(net: LocalNetwork) -> None:
    net.start_subscriber("alice")
    assert net.wait_subscribed("alice")["served_by"] == "d2"
    # alice between reconnects: her site is down, and she is frozen in her backoff (so
    # that she cannot reconnect before the unsubscription is done).
    net.kill_site("d2")
    assert wait_until(lambda: "connection lost" in net.output("alice"), 30)
    net.signal_subscriber("alice", signal.SIGSTOP)
    try:
        net.restart_site("d2")
        assert len(_registered_at(net, "d2")) == 1  # her registration outlived the restart
        done = net.unsubscribe("alice")
        assert done.returncode == 0, done.stdout + done.stderr
        assert "unsubscribed at d2" in done.stdout
    finally:
        net.signal_subscriber("alice", signal.SIGCONT)
    # She wakes up, finds that she left, and ends without registering again.
    code = net.subscriber_exit("alice", timeout=60)
    assert code == 0, f"alice did not end ({code}): {net.output('alice')}"
    assert "not registering again" in net.output("alice")
    assert net.output("alice").count("subscribed at d2") == 1
    assert _registered_at(net, "d2") == []  # (she has exited: nobody can register her now)

    # A later run does not register either, until she subscribes again explicitly.
    net.stop_subscriber("alice")
    (net.inbox("alice") / "subscription.json").unlink()
    net.start_subscriber("alice")
    code = net.subscriber_exit("alice", timeout=60)
    assert code not in (0, None), net.output("alice")
    assert "--rejoin" in net.output("alice")
    assert _registered_at(net, "d2") == []
    net.stop_subscriber("alice")
    net.start_subscriber("alice", extra=("--rejoin",))
    assert net.wait_subscribed("alice")["served_by"] == "d2"
    # The site takes a Subscribe after a signed leave for a new subscription: she receives.
    net.publish_marker("production-dept", ["alice"], timeout=90)
