"""A subscriber that left and rejoins is owed nothing published while it was away (issue #18).

The soak run found false gaps: after ``xdn unsubscribe`` and ``xdn subscribe --rejoin`` on the
same state, the subscriber followed its publishers' chains back into the period it was away,
asked its site for those documents and reported the ones older than the site retains as
withheld. With real processes: alice leaves, more documents than her site retains are
published, she rejoins, and the next document reaches her without anything found missing.

Every wait polls for its condition with a deadline.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from networks import serving_alice

from deploy.network import DEFAULT_SITES, DEFAULT_SUBSCRIBERS, LocalNetwork
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
RETAINED = 2  # documents the site keeps for replay


@pytest.fixture
def net(tmp_path: Path) -> Iterator[LocalNetwork]:
    network = LocalNetwork(
        tmp_path / "net",
        sites=DEFAULT_SITES[:2],
        subscribers=DEFAULT_SUBSCRIBERS[:1],
        site_settings={"retain_documents": RETAINED},
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    with serving_alice(network):
        yield network


def test_documents_published_while_away_are_not_gaps_after_a_rejoin(
    net: LocalNetwork, tmp_path: Path
) -> None:
    net.publish_marker("production-dept", ["alice"], timeout=90)  # her chains start
    net.stop_subscriber("alice")
    done = net.unsubscribe("alice")
    assert done.returncode == 0, done.stdout + done.stderr

    away = tmp_path / "away"
    away.mkdir()
    docs = [Path(shutil.copy(SAMPLE, away / f"away-{n}.xml")) for n in range(RETAINED + 3)]
    net.publish("production-dept", docs)  # more than the site retains

    (net.inbox("alice") / "subscription.json").unlink()
    net.start_subscriber("alice", extra=("--rejoin",))
    net.wait_subscribed("alice", timeout=60)
    net.publish_marker("production-dept", ["alice"], timeout=90)
    # The tracker counts a document before accepting it: had the marker's back pointers been
    # owed, she would have asked for them already.
    output = net.output("alice")
    assert "subscribing again" in output
    assert "missing document" not in output, output
    assert not (net.inbox("alice") / "gaps.jsonl").exists()
    # Still checked after the rejoin: the next document follows on from the marker.
    net.publish_marker("production-dept", ["alice"], timeout=90)
    assert "missing document" not in net.output("alice")
    received = {str(r["document"]) for r in net.received("alice")}
    assert not any(name.startswith("away-") for name in received), received
