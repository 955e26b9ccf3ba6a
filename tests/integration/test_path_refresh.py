"""A subscriber that missed a rekey asks for a path refresh, through its site and the uplink,
and the key service's refresh lets it open what it was holding."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.network import LocalNetwork, SubscriberSpec
from deploy.pki import Party, issue_party
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _records(network: LocalNetwork, name: str) -> list[dict[str, object]]:
    path = network.inbox(name) / "received.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _wait(condition, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


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
    _wait(lambda: len(_records(network, "alice")) == 1)
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
    _wait(lambda: len(_records(network, "alice")) == 2)
    network.stop_subscriber("alice")
    # ...but then her key store loses that epoch, as if its rekey had never arrived.
    db = _keyring(network, "alice")
    with db:
        db.executemany("INSERT OR REPLACE INTO groups VALUES (?, ?, ?)", old_paths)
        db.execute("DELETE FROM keys WHERE epoch > ?", (first_epoch,))
    db.close()

    network.start_subscriber("alice")
    done = subprocess.run(
        [sys.executable, "-m", "xdn.cli", "unsubscribe", "--connect", network.address("d2"),
         "--name", "carol", "--certs", str(network.certs)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = network.publish("production-dept", [_copy(tmp_path, "order-3")], wait_for=("alice",))
    assert "rekeyed: none" not in out  # carol's leave: the epoch after the one alice lost
    _wait(lambda: "holding production-dept/order-3" in network.output("alice"))
    assert [r["document"] for r in _records(network, "alice")] == ["order-1", "order-2"]

    out = network.publish("production-dept", [])  # the key service answers the request
    assert "keys synchronised" in out and "0 key messages" not in out
    _wait(lambda: len(_records(network, "alice")) == 3)
    assert _records(network, "alice")[-1]["document"] == "order-3"
    db = _keyring(network, "alice")
    assert db.execute("SELECT COUNT(*) FROM stale").fetchone() == (0,)
    assert db.execute("SELECT COUNT(*) FROM held").fetchone() == (0,)
    db.close()
    # Answered requests are cleared all the way up: the next sync sends no refresh.
    _wait(lambda: "keys synchronised: rekeyed none, 0 key messages"
          in network.publish("production-dept", []), timeout=20)
