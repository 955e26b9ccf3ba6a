"""A subscriber through site restarts and an unsubscription, with real processes (issue #18).

* Finding 6: a site restarted while its uplink is down does not know where to send a
  subscriber it cannot serve; it says ``UNAVAILABLE`` (not serving yet) and ``xdn subscribe``
  retries until the uplink is back, instead of taking a ``PERMISSION_DENIED`` for final.

Every wait polls for its condition with a deadline.
"""

from __future__ import annotations

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
