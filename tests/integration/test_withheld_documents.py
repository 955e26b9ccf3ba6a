"""A subscriber finds out by itself that documents were withheld, in the running network.

The dishonest site is simulated at the subscriber's edge (test-only): the session drops the
first delivery of documents #2 and #3 of the publisher's sequence, and the checkpoints that
came with them, as a site withholding them would. The sites retain two documents each.

Document #4 arrives with back pointers naming #3: the subscriber asks its site, which replays #3
from what it retains; #3's back pointers name #2, which the site no longer retains: it says so,
and the subscriber reports the gap (printed, ``gaps.jsonl``, counted) and signs it as a failure
notice (kind ``gap``) that travels to the publisher: both sites list it once, and the
publisher's ``xdn provenance receipts`` names alice as missing #2 (order-b v1).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import subscriber.client
from deploy.network import DEFAULT_SITES, DEFAULT_SUBSCRIBERS, LocalNetwork, wait_until
from subscriber.client import SubscriberSetup, SubscriptionReport, run_subscriber
from subscriber.session import Session
from xdn import provenance
from xdn.grpc_tls import TlsFiles
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb

pytestmark = [pytest.mark.integration, pytest.mark.long]

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
WITHHELD = frozenset({2, 3})


class _Withholding(Session):
    """Drops the first delivery of the withheld documents and of their checkpoints."""

    dropped: set[int] = set()  # noqa: RUF012 (shared with the test thread, by design)

    def on_dissemination(self, message: pb.Dissemination, sequence: int = 0) -> bytes:
        number = message.manifest.sequence
        if number in WITHHELD and number not in self.dropped:
            self.dropped.add(number)
            self.keyring.set_applied(self.address, sequence)
            return b""
        return super().on_dissemination(message, sequence)

    def on_checkpoint(self, message: pb.Checkpoint, sequence: int) -> None:
        if message.sequence in WITHHELD:
            self.keyring.set_applied(self.address, sequence)
            return
        super().on_checkpoint(message, sequence)


@pytest.fixture
def network(tmp_path: Path) -> Iterator[LocalNetwork]:
    net = LocalNetwork(
        tmp_path / "net", sites=DEFAULT_SITES[:2], subscribers=DEFAULT_SUBSCRIBERS[:1],
        site_settings={"retain_documents": 2},
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        yield net
    finally:
        net.stop()


def _copies(folder: Path, *names: str) -> list[Path]:
    folder.mkdir(exist_ok=True)
    return [Path(shutil.copy(SAMPLE, folder / f"{name}.xml")) for name in names]


def test_withheld_documents_are_asked_for_replayed_or_reported(
    network: LocalNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(subscriber.client, "Session", _Withholding)
    _Withholding.dropped = set()
    inbox = network.inbox("alice")
    setup = SubscriberSetup(
        name="alice", tls=TlsFiles.from_dir(network.certs, "alice"),
        connect=network.address("d2"), out_dir=inbox,
        state_dir=network.workdir / "state" / "alice",
        provenance_log=network.workdir / "logs" / "alice.nq", heartbeat_s=1.0,
    )
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    reports: list[SubscriptionReport] = []
    thread = threading.Thread(
        target=lambda: reports.append(loop.run_until_complete(run_subscriber(setup, stop)))
    )
    thread.start()
    try:
        assert wait_until(lambda: (inbox / "subscription.json").exists())
        docs = _copies(tmp_path / "docs", "order-a", "order-b", "order-c", "order-d")
        network.publish("production-dept", docs[:2], wait_for=("alice",))  # #1, #2
        assert wait_until(lambda: 2 in _Withholding.dropped)
        network.publish("production-dept", docs[2:])  # #3 and #4: the site now holds these
        assert wait_until(lambda: (inbox / "gaps.jsonl").exists(), timeout=60)
        assert wait_until(lambda: len(network.received("alice")) == 3)
        # the gap travels as alice's failure notice: d2, then the root d1 lists it
        assert wait_until(lambda: _gap_notices(network, "d1") == [2], timeout=60), (
            network.output("d2"), network.output("d1")
        )
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(60)
        loop.close()
    received = sorted(str(r["document"]) for r in network.received("alice"))
    assert received == ["order-a", "order-c", "order-d"], "#3 was replayed by the site"
    gaps = [json.loads(line) for line in (inbox / "gaps.jsonl").read_text().splitlines()]
    assert [(g["publisher"], g["sequence"]) for g in gaps] == [("production-dept", 2)]
    assert reports and reports[0].gaps == 1 and reports[0].missing == 2
    out = capsys.readouterr().out
    assert "missing document #3 of production-dept; asking the site" in out
    assert "document #2 of production-dept" in out and "cannot replay it" in out
    assert _gap_notices(network, "d2") == [2]  # once at each site
    # the publisher learns who is missing what: #2 is order-b v1, which alice never got
    done = subprocess.run(
        [sys.executable, "-m", "cli", "provenance", "receipts", "order-b", "--json",
         "--connect", network.address("d1"), "--name", "production-dept", "--certs", "certs",
         "--state-dir", "state"],
        cwd=network.workdir, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    (version,) = json.loads(done.stdout)["versions"]
    assert version["version"] == 1 and version["received"] == []
    (refused,) = version["refused"]
    assert (refused["subscriber"], refused["kind"]) == ("alice", "gap")
    assert "document #2 of production-dept" in refused["reason"]


def _gap_notices(network: LocalNetwork, site: str) -> list[int]:
    """The sequence numbers of the gap notices ``site``'s inbox holds (its store, read-only)."""
    path = network.workdir / "state" / site / "site.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT nquads FROM notifications WHERE receipt = 2").fetchall()
    finally:
        db.close()
    facts = [provenance.Message.from_nquads(bytes(n)).refusal for (n,) in rows]
    return sorted(f.sequence for f in facts if f is not None and f.kind == "gap" and f.sequence)
