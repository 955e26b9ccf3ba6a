"""A site whose disk fills refuses new work, keeps serving what it has, and recovers by itself.

d2 (alice's site) keeps its state on a small tmpfs mounted for the test (we run as root; a
machine where mounting is not permitted fails the test, saying so). A filler file takes the
space: d2 then refuses deliveries from d1 (no acknowledgement: d1 keeps them queued) and a new
subscriber (``RESOURCE_EXHAUSTED``, which the subscriber retries), while alice still gets what
d2 had queued for her. Once the filler is removed, d2 takes the held deliveries on its next
link and alice has every document exactly once.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import (
    DEFAULT_SUBSCRIBERS,
    ONTOLOGY,
    LocalNetwork,
    SubscriberSpec,
    wait_until,
)
from disseminator.storage import free_bytes
from xdn.ontology import load_ontology

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)

_MIB = 1024 * 1024
_SIZE = 24 * _MIB  # d2's whole filesystem
_FLOOR = 4 * _MIB  # [limits] min_free_bytes of the sites


@contextlib.contextmanager
def _small_filesystem(directory: Path, size: int) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(
            "this test needs to mount a size-limited tmpfs (run as root, or with CAP_SYS_ADMIN "
            f"in a mount namespace): {' '.join(mount)} failed: {done.stderr.strip()}"
        )
    try:
        yield directory
    finally:
        if subprocess.run(["umount", str(directory)], check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(directory)], check=False)


def _fill(directory: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free."""
    filler = directory / "filler"
    with open(filler, "wb") as out:
        while (free := free_bytes(directory)) > leave:
            try:
                out.write(b"\0" * min(_MIB, free - leave))
                out.flush()
            except OSError:
                break
    return filler


def _state_of(network: LocalNetwork, directory: Path) -> str:
    """What a failure message shows: d2's state files, the space left and d2's output."""
    files = {path.name: path.stat().st_size for path in directory.iterdir()}
    return f"{files}; {free_bytes(directory)} bytes free; d2: {network.output('d2')}"


def _documents(directory: Path, first: int, count: int) -> list[Path]:
    docs = []
    for i in range(first, first + count):
        path = directory / f"order-{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", 100_000, out, seed=300 + i)
        docs.append(path)
    return docs


def _has(network: LocalNetwork, name: str, doc: Path) -> bool:
    return any(r["document"] == doc.stem for r in network.received(name))


def test_a_full_site_refuses_new_work_serves_what_it_has_and_recovers(tmp_path: Path) -> None:
    carol = SubscriberSpec(name="carol", site="d2", attributes={"OU": "Cred1"})
    network = LocalNetwork(
        tmp_path / "net", subscribers=(*DEFAULT_SUBSCRIBERS, carol),
        limits={"min_free_bytes": _FLOOR},
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    with _small_filesystem(network.workdir / "state" / "d2", _SIZE) as d2_state:
        try:
            network.start_sites()
            network.start_subscriber("alice")
            assert network.wait_subscribed("alice")["served_by"] == "d2"
            early = _documents(tmp_path, 0, 2)
            network.publish("production-dept", early[:1], wait_for=("alice",))

            # d2 queues one for alice while she is away, then its disk fills.
            network.stop_subscriber("alice")
            network.publish("production-dept", early[1:])
            assert wait_until(lambda: network.metric(
                "d2", "xdn_deliveries_sent_total", kind="subscriber") >= 1)
            filler = _fill(d2_state, leave=_FLOOR // 2)
            assert free_bytes(d2_state) < _FLOOR

            # New work is refused: deliveries from d1 (held there), a new subscriber.
            held = _documents(tmp_path, 2, 3)
            network.publish("production-dept", held)  # d1 stores them and says so
            assert wait_until(lambda: network.metric(
                "d2", "xdn_storage_full_total", operation="delivery") >= 1), network.output("d2")
            assert "is full" in network.output("d2")
            network.start_subscriber("carol")
            assert wait_until(lambda: "RESOURCE_EXHAUSTED" in network.output("carol")), \
                network.output("carol")
            assert "min_free_bytes" in network.output("carol")
            assert not (network.inbox("carol") / "subscription.json").exists()

            # What d2 has still goes out: alice comes back and gets the queued document.
            network.start_subscriber("alice")
            assert wait_until(lambda: _has(network, "alice", early[1]), 60), \
                network.output("alice")
            assert not any(_has(network, "alice", doc) for doc in held)
            assert network._site_procs["d2"].poll() is None  # not crashed

            # Space returns: d2 takes what d1 held, carol is registered.
            os.unlink(filler)
            assert free_bytes(d2_state) > _FLOOR
            assert wait_until(lambda: all(_has(network, "alice", d) for d in held), 90), \
                _state_of(network, d2_state)
            assert network.wait_subscribed("carol", timeout=60)["served_by"] == "d2"
            marker = network.publish_marker("production-dept", ["alice", "carol"], timeout=90)
            docs = [*early, *held, marker]
            expected = expected_deliveries(
                network, load_ontology([ONTOLOGY]), "alice", {"production-dept": docs}
            )
            received, refused = read_received(network.inbox("alice"))
            assert refused == 0
            assert received == expected  # nothing lost, nothing altered
            assert len(network.received("alice")) == len(expected), "delivered twice"
        finally:
            network.stop()


def test_a_disk_full_to_the_last_page_loses_nothing(tmp_path: Path) -> None:
    """The backstop under the floor: with a floor of one page (4 KiB), a delivery that does
    not fit fails in SQLite (SQLITE_FULL: rolled back) or finds the floor reached; either way
    it is not acknowledged, d2 stays up (acknowledgements it cannot commit are kept and tried
    again each second), and it takes what d1 held once space returns."""
    network = LocalNetwork(tmp_path / "net", limits={"min_free_bytes": 4096})
    network.workdir.mkdir(parents=True)
    network.prepare()
    with _small_filesystem(network.workdir / "state" / "d2", _SIZE) as d2_state:
        try:
            network.start_sites()
            network.start_subscriber("alice")
            assert network.wait_subscribed("alice")["served_by"] == "d2"
            first = _documents(tmp_path, 0, 1)
            network.publish("production-dept", first, wait_for=("alice",))
            filler = _fill(d2_state, leave=64 * 1024)
            held = _documents(tmp_path, 1, 3)
            network.publish("production-dept", held)
            assert wait_until(lambda: network.metric(
                "d2", "xdn_storage_full_total", operation="delivery") >= 1, 60), \
                _state_of(network, d2_state)  # (some of them may have fitted)
            assert network._site_procs["d2"].poll() is None  # not crashed
            os.unlink(filler)
            assert wait_until(lambda: all(_has(network, "alice", d) for d in held), 90), \
                _state_of(network, d2_state)
            marker = network.publish_marker("production-dept", ["alice"], timeout=90)
            expected = expected_deliveries(
                network, load_ontology([ONTOLOGY]), "alice",
                {"production-dept": [*first, *held, marker]},
            )
            received, refused = read_received(network.inbox("alice"))
            assert refused == 0
            assert received == expected
            assert len(network.received("alice")) == len(expected), "delivered twice"
        finally:
            network.stop()
