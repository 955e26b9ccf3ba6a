"""A subscriber that missed a rekey asks for a path refresh, through its site and the uplink,
and the key service's refresh lets it open what it was holding."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _copy(tmp: Path, name: str) -> Path:
    tmp.mkdir(exist_ok=True)
    return Path(shutil.copy(SAMPLE, tmp / f"{name}.xml"))


def _keyring(network: LocalNetwork, name: str) -> sqlite3.Connection:
    return sqlite3.connect(network.workdir / "state" / name / "keyring.sqlite")


def test_a_member_that_missed_an_epoch_catches_up_by_a_path_refresh(
    network: LocalNetwork, tmp_path: Path
) -> None:
    issue_party(
        network.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    network.subscribers["carol"] = SubscriberSpec(name="carol", site="d2")
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    network.publish("production-dept", [_copy(tmp_path, "order-1")], wait_for=("alice",))
    assert wait_until(lambda: len(network.received("alice")) == 1)
    network.stop_subscriber("alice")
    db = _keyring(network, "alice")
    old_paths = db.execute("SELECT publisher, concept, state FROM groups").fetchall()
    first_epoch = max(e for (e,) in db.execute("SELECT epoch FROM keys"))
    db.close()

    # carol joins: a new epoch, which alice follows...
    network.start_subscriber("alice")
    network.start_subscriber("carol")
    network.wait_subscribed("carol")
    network.publish("production-dept", [_copy(tmp_path, "order-2")], wait_for=("alice", "carol"))
    assert wait_until(lambda: len(network.received("alice")) == 2)
    network.stop_subscriber("alice")
    # ...but then her key store loses that epoch, as if its rekey had never arrived.
    db = _keyring(network, "alice")
    with db:
        db.executemany("INSERT OR REPLACE INTO groups VALUES (?, ?, ?)", old_paths)
        db.execute("DELETE FROM keys WHERE epoch > ?", (first_epoch,))
    db.close()

    network.start_subscriber("alice")
    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address("d2"),
         "--name", "carol", "--certs", str(network.certs)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = network.publish("production-dept", [_copy(tmp_path, "order-3")], wait_for=("alice",))
    assert "rekeyed: none" not in out  # carol's leave: the epoch after the one alice lost
    assert wait_until(lambda: "holding production-dept/order-3" in network.output("alice"))
    assert [r["document"] for r in network.received("alice")] == ["order-1", "order-2"]

    out = network.publish("production-dept", [])  # the key service answers the request
    assert "keys synchronised" in out and "0 key messages" not in out
    assert wait_until(lambda: len(network.received("alice")) == 3)
    assert network.received("alice")[-1]["document"] == "order-3"
    db = _keyring(network, "alice")
    assert db.execute("SELECT COUNT(*) FROM stale").fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM held_documents").fetchone() == (0,)
    db.close()
    # Answered requests are cleared all the way up: the next sync sends no refresh.
    assert wait_until(lambda: "keys synchronised: rekeyed none, 0 key messages"
          in network.publish("production-dept", []), timeout=60)
