"""What a subscriber acknowledged is in its state when it is killed right after (issue #18).

The subscriber is SIGKILLed as soon as its site records an acknowledgement from it (the site's
``destinations.acked``, read from the site's database). Its state is then read as the killed
process left it: every delivery the site saw acknowledged is applied in the keyring (its
cursor), and every document the keyring accepted has its view file, whole. Restarted, the
subscriber reaches the application with every document due, each exactly once.

What this proves: *crash* durability — nothing acknowledged is lost when the process dies,
because the commit (and the view's rename) come before the acknowledgement. What it does not
prove: durability across a *power loss*, where what the kernel had not written to the device is
lost too. That rests on the syncs (``synchronous=FULL`` on the commits that precede an
acknowledgement, the view synced before its rename and its folder after), which
``tests/unit/test_durable_writes.py`` checks are made, in order, and
``tests/integration/test_power_loss.py`` simulates for the SQLite stores. See
docs/operations.md, "What survives a power loss".

Every wait polls for its condition with a deadline.
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, wait_until
from xdn import ids
from xdn.ontology import load_ontology

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)


def _site_acked(net: LocalNetwork, site: str) -> int:
    """The highest delivery sequence a subscriber of ``site`` acknowledged, as the site has
    it (0 while none is)."""
    db = sqlite3.connect(net.workdir / "state" / site / "site.sqlite", timeout=10)
    try:
        row = db.execute(
            "SELECT COALESCE(MAX(acked), 0) FROM destinations WHERE kind = 'subscriber'"
        ).fetchone()
    finally:
        db.close()
    return int(row[0])


def test_acknowledged_deliveries_survive_a_kill_right_after(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    baseline = _site_acked(network, "d2")
    docs = []
    for i in range(12):
        path = tmp_path / f"order-{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", 40_000, out, seed=300 + i)
        docs.append(path)
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            for doc in docs:
                network.publish("production-dept", [doc])
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        # Kill alice the moment d2 has an acknowledgement of a document from her.
        acked = 0
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            acked = _site_acked(network, "d2")
            if acked > baseline and network.received("alice"):
                break
            time.sleep(0.005)
        network.signal_subscriber("alice", signal.SIGKILL)
        assert acked > baseline, "no acknowledgement came from alice"
        assert network.subscriber_exit("alice") == -signal.SIGKILL
    finally:
        publisher.join(timeout=300)
    assert not errors, errors

    # The state as the killed process left it: everything acknowledged is applied ...
    keyring = sqlite3.connect(network.workdir / "state" / "alice" / "keyring.sqlite")
    try:
        (applied,) = keyring.execute("SELECT COALESCE(MAX(applied), 0) FROM cursors").fetchone()
        accepted = keyring.execute("SELECT publisher, document, version FROM documents").fetchall()
    finally:
        keyring.close()
    assert applied >= acked, f"site has {acked} acknowledged, alice applied only {applied}"
    assert accepted, "alice acknowledged a document she has no record of"
    # ... and every accepted document's view is there, whole (no temporary file in its place).
    views = network.inbox("alice") / "views"
    for publisher, document, version in accepted:
        view = views / ids.file_stem(publisher) / f"{ids.file_stem(document)}.v{version}.xml"
        assert view.is_file() and view.stat().st_size > 0, (document, version)

    # Restarted: every document due reaches the application, exactly once.
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    docs.append(network.publish_marker("production-dept", ["alice"], timeout=90))
    expected = expected_deliveries(
        network, load_ontology([ONTOLOGY]), "alice", {"production-dept": docs}
    )
    assert wait_until(lambda: read_received(network.inbox("alice"))[0] == expected, 60)
    received, refused = read_received(network.inbox("alice"))
    assert refused == 0
    assert received == expected  # nothing acknowledged lost, nothing altered
    assert len(network.received("alice")) == len(expected), "a document came twice"
