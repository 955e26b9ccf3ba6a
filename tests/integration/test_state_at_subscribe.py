"""State at subscribe time in the running network: a new subscriber that asks for them receives
the retained recent documents it may read, opens them with granted document keys, and learns no
group key of any epoch before its join."""

from __future__ import annotations

import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _group_keys(network: LocalNetwork, name: str) -> set[tuple[str, str, int]]:
    db = sqlite3.connect(network.workdir / "state" / name / "keyring.sqlite")
    try:
        return {(p, c, e) for p, c, e in db.execute("SELECT publisher, concept, epoch FROM keys")}
    finally:
        db.close()


def _copies(tmp: Path, *names: str) -> list[Path]:
    tmp.mkdir(exist_ok=True)
    return [Path(shutil.copy(SAMPLE, tmp / f"{name}.xml")) for name in names]


def _late_subscriber(network: LocalNetwork, name: str, *, retained: bool) -> None:
    issue_party(
        network.certs, Party(name=name, role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    network.subscribers[name] = SubscriberSpec(name=name, site="d2")
    network.start_subscriber(name, extra=["--retained"] if retained else [])
    network.wait_subscribed(name)


def test_a_new_subscriber_gets_the_retained_documents_and_no_earlier_group_key(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    docs = _copies(tmp_path / "docs", "order-a", "order-b", "order-c")
    network.publish("production-dept", docs, wait_for=("alice",))
    network.publish("production-dept", docs[:1], extra=("--again",))  # order-a v2: retained
    assert wait_until(lambda: len(network.received("alice")) == 4)
    alice_before = _group_keys(network, "alice")

    _late_subscriber(network, "carol", retained=True)
    _late_subscriber(network, "dan", retained=False)
    # carol holds the replayed documents until the key service grants their keys.
    assert wait_until(lambda: "3 retained documents queued" in network.output("carol"))
    assert wait_until(lambda: "holding production-dept/order-c" in network.output("carol"))
    assert network.received("carol") == []

    out = network.publish("production-dept", [])  # no DOC: enrol joiners, grant retained keys
    assert "keys synchronised" in out
    assert wait_until(lambda: len(network.received("carol")) == 3)

    latest = {(r["document"], r["version"]): r["fragments"] for r in network.received("alice")}
    got = {(r["document"], r["version"]): r["fragments"] for r in network.received("carol")}
    assert set(got) == {("order-a", 2), ("order-b", 1), ("order-c", 1)}
    assert all(got[key] == latest[key] for key in got), "carol sees what alice saw, no more"
    assert all("missing" not in r for r in network.received("carol"))
    # Backward secrecy beyond the retention window: not one group key of an earlier epoch.
    assert _group_keys(network, "carol")
    assert _group_keys(network, "carol").isdisjoint(alice_before)

    # A subscriber that did not ask gets only what is published after it joined.
    assert network.received("dan") == []
    network.publish("production-dept", _copies(tmp_path / "docs", "order-d"))
    for name in ("alice", "carol", "dan"):
        assert wait_until(
            lambda name=name: any(r["document"] == "order-d" for r in network.received(name))
        )
    assert [r["document"] for r in network.received("dan")] == ["order-d"]
