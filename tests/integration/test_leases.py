"""Membership leases in the running network: a silent subscriber leaves the groups once its
lease lapses, an unsubscribing one at once, whatever the site keeps registered."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn import identity
from xdn.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
LEASE_S = 3.0


def _group_members(network: LocalNetwork) -> set[str]:
    """People holding a leaf of any production-dept group now (the key service's trees)."""
    db = sqlite3.connect(network.workdir / "state" / "production-dept" / "keys.sqlite")
    try:
        rows = db.execute("SELECT DISTINCT member FROM lkh_nodes WHERE member IS NOT NULL")
        return {identity.person(member) for (member,) in rows}
    finally:
        db.close()


def test_a_silent_subscriber_is_rekeyed_out_when_its_lease_lapses_a_leaver_at_once(
    network: LocalNetwork,
) -> None:
    now = datetime.now(UTC)
    for name in ("carol", "dave"):
        issue_party(
            network.certs, Party(name=name, role="subscriber", attributes={"OU": "Cred1"}),
            now=now,
        )
        network.subscribers[name] = SubscriberSpec(name=name, site="d2")
    network.start_subscriber("alice")
    network.start_subscriber("carol")
    network.start_subscriber("dave", extra=("--lease", str(LEASE_S)))
    for name in ("alice", "carol", "dave"):
        network.wait_subscribed(name)
    network.publish("production-dept", [SAMPLE], wait_for=("alice", "carol", "dave"))
    assert wait_until(lambda: all(len(network.received(n)) == 1 for n in ("alice", "dave")))
    assert {"alice", "carol", "dave"} <= _group_members(network)

    # dave vanishes without a word: his site keeps him registered (and his queue) for a day,
    # but his last lease lapses within LEASE_S of now, and with it his membership.
    network.signal_subscriber("dave", signal.SIGKILL)
    lapsed_at = time.monotonic() + LEASE_S
    # carol unsubscribes (with a signed leave), though her hour-long lease has not lapsed.
    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address("d2"),
         "--name", "carol", "--certs", str(network.certs)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    out = network.publish("production-dept", [SAMPLE], wait_for=("alice",), extra=("--again",))
    assert "rekeyed: none" not in out
    members = _group_members(network)
    assert "carol" not in members, "an unsubscribed member is rekeyed out at once"
    assert "alice" in members
    if "dave" in members:  # his last lease had not lapsed when the key service looked
        assert wait_until(lambda: time.monotonic() >= lapsed_at, timeout=LEASE_S + 1)
        out = network.publish("production-dept", [SAMPLE], wait_for=("alice",), extra=("--again",))
        assert "rekeyed: none" not in out
    assert "dave" not in _group_members(network), "a lapsed lease is rekeyed out"
    assert wait_until(lambda: len(network.received("alice")) >= 2)
