"""Pipelined publishing: the next document is encoded while the network takes the previous one,
yet versions, order and the key outbox are exactly those of one document at a time."""

from __future__ import annotations

import json
import re
import time

import pytest

from deploy.network import LocalNetwork
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def test_one_run_publishing_a_document_thrice_again_sends_three_versions_in_order(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    out = network.publish(
        "production-dept", [SAMPLE] * 3, wait_for=("alice",), extra=("--again",)
    )
    published = re.findall(r"published \S+ v(\d+): .* (\d+) key messages", out)
    versions = [int(v) for v, _ in published]
    keys = [int(k) for _, k in published]
    assert versions == [1, 2, 3]
    assert keys[0] > 0 and keys[1:] == [0, 0]  # the outbox went out once, with the first
    inbox = network.inbox("alice") / "received.jsonl"
    deadline = time.monotonic() + 30
    while not inbox.exists() or len(inbox.read_text().splitlines()) < 3:
        assert time.monotonic() < deadline, "alice did not receive all three versions"
        time.sleep(0.1)
    records = [json.loads(line) for line in inbox.read_text().splitlines()]
    assert [r["version"] for r in records] == [1, 2, 3]


def test_one_run_publishing_the_same_content_thrice_publishes_it_once(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    out = network.publish("production-dept", [SAMPLE] * 3, wait_for=("alice",))
    lines = out.splitlines()
    assert lines[0].startswith("published production-dept-order v1:"), out
    assert [line.split(":")[0] for line in lines[1:]] == [
        "already published production-dept-order v1"
    ] * 2, out
    network.publish_marker("production-dept", ["alice"])
    versions = [
        r["version"] for r in network.received("alice") if r["document"] == SAMPLE.stem
    ]
    assert versions == [1]
