"""Group rekeying: the logical key hierarchy against naive per-member wrapping, same run.

For n = 1,000, 10,000 and 100,000 members (``--quick``: the first two) a balanced tree is
built in bulk (no HPKE: each member's enrolment is sealed when it needs one, timed apart as
``rekey_enrolment_seal_ms``), then:

* ``rekey_leave_{n}_wraps`` — wrapped keys for one leave, the most over 101 leaves of random
  members. Baseline: naive wrapping, ``n - 1`` (the new group key for every other member).
  Goal ≤ 2⌈log2 n⌉ (34 at 100k).
* ``rekey_leave_{n}_ms`` — median time of one leave at the key service (plan: fresh keys,
  HKDF + AES key wrap per wrapped key, rekey message; apply to the in-memory tree), over the
  same 101 leaves. Baseline: naive wrapping of one new key for the ``n - 1`` others with the
  same primitive, timed in the same run. Goal ≤ 10 ms.
* ``rekey_vs_naive_{n}`` — naive wraps ÷ LKH wraps for one leave (the worst observed). Goal
  ≥ 1000 at 100k.
* ``rekey_leave_{n}_bytes`` / ``rekey_join_{n}_bytes`` — encoded rekey message (plus, for a
  join, the joiner's enrolment) against the naive message.
* ``rekey_join_{n}_wraps`` / ``rekey_join_{n}_ms`` — one join (the worst / median of 101);
  naive: the new key wrapped for the ``n`` existing members. The joiner's HPKE enrolment is
  not in the time (``rekey_enrolment_seal_ms``).
* ``rekey_batch_{n}_wraps`` — 100 leaves and 100 joins in one epoch against the same 200
  changes as 200 epochs.
* ``rekey_leave_{n}_commit_ms`` — the durable commit of one leave epoch (SQLite, WAL,
  ``synchronous=FULL``) against the in-memory leave.
"""

from __future__ import annotations

import gc
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.harness import Result, best_of, ratio_result
from publisher.lkh_store import LkhStore
from xdn import certs, crypto
from xdn.lkh import GroupController, KeySigner, MemberPath, ceil_log2, seal_path
from xdn.lkh._messages import wrap

__all__ = ["run"]

PUB, CONCEPT = "bench-publisher", "http://bench.example/onto#Order"
SAMPLES = 101
_RECIPIENT = crypto.generate_private_key()


def _label(n: int) -> str:
    return f"{n // 1000}k"


def _build(n: int, seed: int) -> tuple[GroupController, float]:
    rng = random.Random(seed)
    start = time.perf_counter()
    group = GroupController.bulk(
        publisher=PUB, concept=CONCEPT, members=[f"m{i}" for i in range(n)], rand=rng.randbytes
    )
    return group, time.perf_counter() - start


def _timed(step: Callable[[], int], samples: int) -> tuple[list[float], list[int]]:
    """Run ``step`` ``samples`` times with the collector off: (seconds each, its results)."""
    times, values = [], []
    gc.collect()
    gc.disable()
    try:
        for _ in range(samples):
            start = time.perf_counter()
            values.append(step())
            times.append(time.perf_counter() - start)
    finally:
        gc.enable()
    return times, values


def _naive_wrap_all(keys: list[bytes]) -> Callable[[], int]:
    """Naive rekey: one fresh group key wrapped under every member's own key."""

    def rekey() -> int:
        new = crypto.random_bytes(crypto.KEY_BYTES)
        for i, key in enumerate(keys, start=1):
            wrap(new, under=key, publisher=PUB, concept=CONCEPT, epoch=2, node=1, child=i)
        return len(keys)

    return rekey


def _naive_bytes(count: int) -> int:
    return 64 + count * (8 + crypto.WRAPPED_KEY_BYTES)  # header + (member id, wrapped key)


def _one_size(n: int) -> list[Result]:
    label, bound = _label(n), 2 * ceil_log2(n)
    group, build_s = _build(n, seed=n)
    rng = random.Random(1)
    leavers = rng.sample(sorted(group.members()), SAMPLES)
    deepest = max(leavers, key=group.depth_of)  # lead with a deepest member of the sample
    leavers.remove(deepest)
    leavers.insert(0, deepest)
    pending = iter(leavers)
    last: dict[str, int] = {}

    def leave() -> int:
        change = group.plan(leaves=[next(pending)])
        group.apply(change)
        last["bytes"] = len(change.message.to_bytes())
        return change.wrapped_keys

    leave_times, leave_wraps = _timed(leave, SAMPLES)
    leave_bytes = last["bytes"]
    joiners = iter(f"j{i}" for i in range(SAMPLES))
    join_paths: list[MemberPath] = []

    def join() -> int:
        change = group.plan(joins=[next(joiners)])
        group.apply(change)
        last["bytes"] = len(change.message.to_bytes())
        join_paths.append(change.paths[0])
        return change.wrapped_keys

    join_times, join_wraps = _timed(join, SAMPLES)
    longest = max(join_paths, key=lambda p: len(p.keys))
    enrol_bytes = len(seal_path(longest, _RECIPIENT.public_key()).to_bytes())
    member_keys = [crypto.random_bytes(crypto.KEY_BYTES) for _ in range(n - 1)]
    naive_s = best_of(_naive_wrap_all(member_keys), repeat=2 if n >= 100_000 else 3, min_time=0)
    del member_keys
    lkh_wraps, lkh_ms = max(leave_wraps), statistics.median(leave_times) * 1e3
    join_ms = statistics.median(join_times) * 1e3
    build_note = f"bulk build of {n} members {build_s:.2f}s; height {group.height}"
    results = [
        ratio_result(
            name=f"rekey_leave_{label}_wraps",
            value=lkh_wraps,
            unit="wraps",
            baseline="naive per-member wraps (n-1)",
            baseline_value=n - 1,
            goal=f"<= {bound} (2*ceil(log2 n))",
            note=f"worst of {SAMPLES} leaves (mean {statistics.mean(leave_wraps):.1f}); "
            + build_note,
        ),
        ratio_result(
            name=f"rekey_leave_{label}_ms",
            value=lkh_ms,
            unit="ms",
            baseline="naive per-member wrapping, same primitive (ms)",
            baseline_value=naive_s * 1e3,
            goal="<= 10 ms",
            note=f"median of {SAMPLES} leaves, plan + apply in memory; "
            f"p90 {statistics.quantiles(leave_times, n=10)[-1] * 1e3:.2f} ms",
        ),
        Result(
            name=f"rekey_vs_naive_{label}",
            value=(n - 1) / lkh_wraps,
            unit="x",
            baseline=f"rekey_leave_{label}_wraps (LKH wraps)",
            baseline_value=lkh_wraps,
            ratio=(n - 1) / lkh_wraps,
            goal=">= 1000" if n >= 100_000 else "",
            note="naive wraps / LKH wraps for one leave (worst observed LKH leave)",
        ),
        ratio_result(
            name=f"rekey_leave_{label}_bytes",
            value=leave_bytes,
            unit="bytes",
            baseline="naive rekey message (id + wrapped key per member)",
            baseline_value=_naive_bytes(n - 1),
        ),
        ratio_result(
            name=f"rekey_join_{label}_wraps",
            value=max(join_wraps),
            unit="wraps",
            baseline="naive per-member wraps (n)",
            baseline_value=n,
            goal=f"<= {bound + 1} (2*ceil(log2 n)+1)",
            note=f"worst of {SAMPLES} joins (mean {statistics.mean(join_wraps):.1f}) "
            "+ one HPKE enrolment per joiner",
        ),
        ratio_result(
            name=f"rekey_join_{label}_ms",
            value=join_ms,
            unit="ms",
            baseline="naive per-member wrapping, same primitive (ms)",
            baseline_value=naive_s * 1e3,
            note="median, plan + apply; excludes the joiner's HPKE seal (rekey_enrolment_seal_ms)",
        ),
        ratio_result(
            name=f"rekey_join_{label}_bytes",
            value=last["bytes"] + enrol_bytes,
            unit="bytes",
            baseline="naive rekey message + one sealed key",
            baseline_value=_naive_bytes(n) + 200,
            note=f"rekey message {last['bytes']} B + enrolment ~{enrol_bytes} B",
        ),
    ]
    results += [_batch(group, label), _commit(group, label, lkh_ms)]
    return results


def _batch(group: GroupController, label: str) -> Result:
    rng = random.Random(2)
    leaves = rng.sample(sorted(group.members()), 100)
    joins = [f"b{i}" for i in range(100)]
    one_epoch = group.plan(joins=joins, leaves=leaves).wrapped_keys
    copy = GroupController.from_bytes(group.to_bytes())
    separate = sum(copy.rekey(leaves=[m]).wrapped_keys for m in leaves)
    separate += sum(copy.rekey(joins=[m]).wrapped_keys for m in joins)
    return ratio_result(
        name=f"rekey_batch_{label}_wraps",
        value=one_epoch,
        unit="wraps",
        baseline="the same 100 leaves + 100 joins as 200 epochs",
        baseline_value=separate,
        note="one epoch refreshes the union of the affected paths once",
    )


def _signer() -> KeySigner:
    now = datetime.now(UTC)
    cert_pem, key_pem = certs.issue(
        *certs.create_ca("bench-ca", now=now), name=PUB, role="publisher", now=now
    )
    return KeySigner(
        publisher=PUB, private_key=crypto.load_private_key_pem(key_pem), certificate=cert_pem
    )


def _commit(group: GroupController, label: str, leave_ms: float) -> Result:
    with tempfile.TemporaryDirectory() as tmp:
        store = LkhStore(Path(tmp) / "keys.sqlite", publisher=PUB)
        signer = _signer()  # the outbox keeps signed messages: the commit includes signing
        try:
            store.create(group)
            members = iter(random.Random(3).sample(sorted(group.members()), 21))

            def commit() -> int:
                change = group.plan(leaves=[next(members)])
                store.commit([change], signer=signer)
                group.apply(change)
                return 0

            times, _ = _timed(commit, 21)
        finally:
            store.close()
    return ratio_result(
        name=f"rekey_leave_{label}_commit_ms",
        value=statistics.median(times) * 1e3,
        unit="ms",
        baseline=f"rekey_leave_{label}_ms (in memory)",
        baseline_value=leave_ms,
        note="plan + sign + one SQLite transaction (rows, header, outbox) + apply; median of 21",
    )


def _enrolment(n: int) -> Result:
    group, _ = _build(n, seed=5)
    key = _RECIPIENT.public_key()
    path = max(
        (group.member_path(f"m{i}") for i in range(0, n, n // 64)), key=lambda p: len(p.keys)
    )
    seal_s = best_of(lambda: seal_path(path, key))
    group_key = bytes(32)
    naive_s = best_of(lambda: crypto.hpke_seal(key, group_key, info=b"xdn/bench/naive-seal"))
    return ratio_result(
        name="rekey_enrolment_seal_ms",
        value=seal_s * 1e3,
        unit="ms",
        baseline="HPKE seal of one 32-byte group key (the naive scheme: per member per epoch)",
        baseline_value=naive_s * 1e3,
        note=f"HPKE seal of a {len(path.keys)}-key path (n = {n}); once per joiner or path refresh",
    )


def run(quick: bool) -> list[Result]:
    """Measure rekeying at 1k, 10k and (unless ``quick``) 100k members."""
    sizes = (1_000, 10_000) if quick else (1_000, 10_000, 100_000)
    results = [r for n in sizes for r in _one_size(n)]
    results.append(_enrolment(sizes[-1]))
    return results
