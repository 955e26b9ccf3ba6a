"""Group keys in the running network: a leaver cannot read what is published after it left."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _keys(network: LocalNetwork, name: str) -> set[tuple[str, str, int]]:
    db = sqlite3.connect(network.workdir / "state" / name / "keyring.sqlite")
    try:
        return {(p, c, e) for p, c, e in db.execute("SELECT publisher, concept, epoch FROM keys")}
    finally:
        db.close()


def test_leave_rekeys_and_the_leaver_gets_no_new_key(network: LocalNetwork) -> None:
    from datetime import UTC, datetime

    issue_party(
        network.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    network.subscribers["carol"] = SubscriberSpec(name="carol", site="d2")
    for name in ("alice", "carol"):
        network.start_subscriber(name)
        network.wait_subscribed(name)
    network.publish("production-dept", [SAMPLE], wait_for=("alice", "carol"))
    assert wait_until(
        lambda: len(network.received("alice")) == 1 and len(network.received("carol")) == 1
    )
    before = _keys(network, "carol")
    assert before == _keys(network, "alice")  # same groups, same epochs

    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address("d2"),
         "--name", "carol", "--certs", str(network.certs)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "unsubscribed at d2" in done.stdout
    assert wait_until(lambda: not network.subscriber_running("carol"))

    out = network.publish("production-dept", [SAMPLE], wait_for=("alice",), extra=("--again",))
    assert "rekeyed: " in out and "rekeyed: none" not in out
    assert wait_until(lambda: len(network.received("alice")) == 2)
    after_alice = _keys(network, "alice") - before
    assert after_alice, "alice holds the keys of the new epochs"
    assert _keys(network, "carol") == before  # carol learned no key of any later epoch
    assert len(network.received("carol")) == 1
