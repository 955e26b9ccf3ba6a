"""The key service's durable key trees: an epoch is stored whole or not at all."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from publisher.lkh_store import LkhStore
from xdn import certs, crypto
from xdn.errors import UsageError
from xdn.lkh import EpochChange, GroupController, KeySigner, MemberKeys, verify_key_message

PUB, CONCEPT = "pub", "urn:c#Order"
MEMBER_KEY = crypto.generate_private_key()
NOW = datetime.now(UTC)
CA = certs.create_ca("test-ca", now=NOW)


def signer_for(name: str) -> KeySigner:
    cert_pem, key_pem = certs.issue(*CA, name=name, role="publisher", now=NOW)
    return KeySigner(
        publisher=name, private_key=crypto.load_private_key_pem(key_pem), certificate=cert_pem
    )


SIGNER = signer_for(PUB)


def batch_for(group: GroupController, epoch: int) -> tuple[list[str], list[str]]:
    """The deterministic batch that starts ``epoch`` (shared by the test and its child)."""
    rng = random.Random(f"batch/{epoch}")
    leaves = rng.sample(sorted(group.members()), rng.randint(1, 3))
    joins = [f"j{epoch}.{i}" for i in range(rng.randint(0, 3))]
    return joins, leaves


def plan_next(group: GroupController) -> EpochChange:
    joins, leaves = batch_for(group, group.epoch + 1)
    return group.plan(
        joins=joins, leaves=leaves, rand=random.Random(f"keys/{group.epoch + 1}").randbytes
    )


def initial_group() -> GroupController:
    return GroupController.bulk(
        publisher=PUB,
        concept=CONCEPT,
        members=[f"m{i}" for i in range(200)],
        rand=random.Random("keys/1").randbytes,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LkhStore]:
    s = LkhStore(tmp_path / "keys.sqlite", publisher=PUB)
    try:
        yield s
    finally:
        s.close()


def test_commit_and_reload_round_trip(store: LkhStore) -> None:
    group = initial_group()
    store.create(group)
    assert store.concepts() == [CONCEPT]
    for _ in range(3):
        change = plan_next(group)
        enrolments = change.enrolments({m: MEMBER_KEY.public_key() for m in change.joined})
        store.commit([change], signer=SIGNER, enrolments=enrolments)
        group.apply(change)
    loaded = store.load(CONCEPT)
    assert loaded is not None and loaded.to_bytes() == group.to_bytes()
    pending = store.pending()
    assert [p.epoch for p in pending] == [2, 3, 4]
    for p in pending:  # what a restarted service resends is signed, and still opens
        assert verify_key_message(p.message, ca_pem=CA[0], at=NOW).epoch == p.epoch
        for e in p.enrolments:
            enrolment = verify_key_message(e, ca_pem=CA[0], at=NOW)
            assert MemberKeys.enrol(enrolment, MEMBER_KEY).epoch == p.epoch
    store.delivered(CONCEPT, 3)
    assert [p.epoch for p in store.pending()] == [4]
    assert store.load("nothing") is None


def test_a_group_can_start_empty_and_grow_by_commits(store: LkhStore) -> None:
    group = GroupController(publisher=PUB, concept="empty")
    change = group.plan(joins=["a", "b"])
    store.commit([change], signer=SIGNER)
    group.apply(change)
    loaded = store.load("empty")
    assert loaded is not None and loaded.group_key == group.group_key


def test_stale_or_foreign_changes_are_refused(store: LkhStore) -> None:
    group = initial_group()
    store.create(group)
    with pytest.raises(UsageError, match="already exists"):
        store.create(group)
    change = plan_next(group)
    store.commit([change], signer=SIGNER)
    with pytest.raises(UsageError, match="from epoch 1"):
        store.commit([change], signer=SIGNER)
    stray = GroupController(publisher=PUB, concept="x").plan(joins=["a"])
    enrolment = stray.enrolments({"a": MEMBER_KEY.public_key()})[0]
    with pytest.raises(UsageError, match="matches no change"):
        store.commit(
            [plan_next(GroupController.from_bytes(group.to_bytes()))],
            signer=SIGNER,
            enrolments=[enrolment],
        )
    foreign = GroupController(publisher="other", concept="y").plan(joins=["a"])
    with pytest.raises(UsageError, match="store of"):
        store.commit([foreign], signer=SIGNER)
    with pytest.raises(UsageError, match="store of"):  # another publisher's signer
        store.commit([plan_next(group)], signer=signer_for("other"))
    assert [p.epoch for p in store.pending()] == [2]


def test_a_failure_mid_commit_rolls_everything_back(tmp_path: Path) -> None:
    path = tmp_path / "keys.sqlite"
    store = LkhStore(path, publisher=PUB)
    group = initial_group()
    store.create(group)
    store.close()
    writes = 0

    def explode() -> None:
        nonlocal writes
        writes += 1
        if writes == 10:
            raise RuntimeError("disk on fire")

    store = LkhStore(path, publisher=PUB, between_writes=explode)
    with pytest.raises(RuntimeError):
        store.commit([plan_next(group)], signer=SIGNER)
    loaded = store.load(CONCEPT)
    assert loaded is not None and loaded.to_bytes() == group.to_bytes()
    assert store.pending() == []
    store.close()


CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from test_lkh_store import plan_next, PUB, CONCEPT, SIGNER
from publisher.lkh_store import LkhStore
from xdn import crypto

def tick():
    print("W", flush=True)
    time.sleep(0.002)

key = crypto.load_public_key_pem(Path(sys.argv[3]).read_bytes())
store = LkhStore(Path(sys.argv[1]), publisher=PUB, between_writes=tick)
group = store.load(CONCEPT)
while True:
    change = plan_next(group)
    print("BEGIN", change.epoch, flush=True)
    store.commit([change], signer=SIGNER,
                 enrolments=change.enrolments({m: key for m in change.joined}))
    print("DONE", change.epoch, flush=True)
    group.apply(change)
"""


def _expected_states(upto: int) -> dict[int, GroupController]:
    group, states = initial_group(), {}
    states[1] = GroupController.from_bytes(group.to_bytes())
    while group.epoch < upto:
        group.apply(plan_next(group))
        states[group.epoch] = GroupController.from_bytes(group.to_bytes())
    return states


def _run_child_and_kill(path: Path, key_file: Path, rng: random.Random) -> tuple[int, int, bool]:
    """Start the child, SIGKILL it at a random moment; return (last BEGIN, last DONE, torn)."""
    errors = path.with_suffix(".stderr")
    with open(errors, "wb") as err:
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), str(Path(__file__).parent), str(key_file)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    assert child.stdout is not None
    begun = done = 0
    writes_since_begin = 0
    deadline = rng.randint(3, 120)  # row writes to let through before the kill
    seen = 0
    killed = False
    try:
        for line in child.stdout:
            word, *rest = line.split()
            if word == "BEGIN":
                begun, writes_since_begin = int(rest[0]), 0
            elif word == "DONE":
                done = int(rest[0])
            else:
                writes_since_begin += 1
                seen += 1
                if seen >= deadline:
                    time.sleep(rng.random() * 0.002)
                    os.kill(child.pid, signal.SIGKILL)
                    killed = True
                    break
    finally:
        child.kill()
        child.wait(timeout=30)
        child.stdout.close()
    assert killed, errors.read_text()
    torn = begun > done and writes_since_begin > 0
    return begun, done, torn


@pytest.mark.integration
def test_a_killed_key_service_restarts_with_a_whole_epoch(tmp_path: Path) -> None:
    path, key_file = tmp_path / "keys.sqlite", tmp_path / "member.pem"
    key_file.write_bytes(crypto.public_key_to_pem(MEMBER_KEY.public_key()))
    store = LkhStore(path, publisher=PUB)
    store.create(initial_group())
    store.close()
    expected = _expected_states(60)
    rng = random.Random(0)
    torn_kills = 0
    for _ in range(12):
        begun, done, torn = _run_child_and_kill(path, key_file, rng)
        store = LkhStore(path, publisher=PUB)
        try:
            group = store.load(CONCEPT)
            assert group is not None
            # the stored epoch is the one before the epoch under way, or that epoch if its
            # COMMIT landed before the kill — and then exactly that epoch, rows and outbox
            assert group.epoch in (begun - 1, begun) and group.epoch >= done
            assert group.to_bytes() == expected[group.epoch].to_bytes()
            outbox = store.pending()
            assert [p.epoch for p in outbox] == list(range(2, group.epoch + 1))
            for p in outbox:
                assert p.message.message == plan_next(expected[p.epoch - 1]).message
                assert len(p.enrolments) == len(batch_for(expected[p.epoch - 1], p.epoch)[0])
        finally:
            store.close()
        torn_kills += torn and group.epoch == begun - 1
        if group.epoch >= 50:
            break
    assert torn_kills >= 1, "no kill landed inside a transaction"


def test_load_all(store: LkhStore) -> None:
    store.create(initial_group())
    other = GroupController(publisher=PUB, concept="other")
    store.commit([other.plan(joins=["a"])], signer=SIGNER)
    assert sorted(store.load_all()) == sorted([CONCEPT, "other"])
