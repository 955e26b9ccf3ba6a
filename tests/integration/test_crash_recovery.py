"""A disseminator killed mid-stream and restarted loses nothing and duplicates nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, wait_until
from xdn.ontology import load_ontology

pytestmark = pytest.mark.integration


def _documents(directory: Path, count: int) -> list[Path]:
    docs = []
    for i in range(count):
        path = directory / f"order-{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", 150_000, out, seed=100 + i)
        docs.append(path)
    return docs


def test_sigkill_mid_stream_then_restart(network: LocalNetwork, tmp_path: Path) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    docs = _documents(tmp_path, 8)
    errors: list[BaseException] = []

    def publish() -> None:
        try:
            for doc in docs:
                network.publish("production-dept", [doc], wait_for=("alice",))
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    publisher = threading.Thread(target=publish)
    publisher.start()
    # Kill d2 (alice's site) as soon as the first documents are flowing through it.
    deadline = time.monotonic() + 60
    while not network.received("alice") and time.monotonic() < deadline:
        time.sleep(0.02)
    network.kill_site("d2")
    assert wait_until(lambda: "connection lost" in network.output("alice"))  # the kill cut it
    network.restart_site("d2")
    publisher.join(timeout=300)
    assert not errors, errors

    # Once a later marker is in, every document due (and any duplicate) has arrived.
    docs.append(network.publish_marker("production-dept", ["alice"], timeout=90))
    expected = expected_deliveries(
        network, load_ontology([ONTOLOGY]), "alice", {"production-dept": docs}
    )
    received, refused = read_received(network.inbox("alice"))
    assert refused == 0
    assert received == expected  # nothing lost, nothing altered
    lines = network.received("alice")
    assert len(lines) == len(expected), "a document reached the application twice"
    assert "connection lost" in network.output("alice")  # the kill really cut the stream
