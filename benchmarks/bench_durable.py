"""``ack_durable_cost``: what durable acknowledgements cost a site (issue #18).

A site acknowledges a delivery (to its uplink, or a publisher) after the commit that queues
it for its destinations. With ``[site] durability = "full"`` (the default) that commit runs
with SQLite ``synchronous=FULL`` — in WAL mode the WAL is synced at every commit, so what was
acknowledged survives a power loss; ``"normal"`` syncs only at checkpoints. This benchmark
measures deliveries per second through the site's store in both modes, in the same run, doing
the same work: each round routes documents one commit at a time (each to ``FANOUT``
subscriber queues, with the uplink's resume counter, as applying an uplink delivery does),
and the subscribers' acknowledgements are committed every ``ACK_EVERY`` documents on the
store's second connection, as the site does. Rounds alternate between the modes and the best
of each is kept; the store lives under ``build/bench`` (the disk a site's state would use, not
a tmpfs where a sync costs nothing).

What it leaves out: gRPC, TLS, decryption and the subscriber — the ratio is the cost at the
store, an upper bound of the cost through a whole network, where the rest dilutes it.

Result: ``ack_durable_cost`` = deliveries/s with FULL ÷ with NORMAL (1.0: free; lower: dearer).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.harness import Result, ratio_result
from disseminator.store import Append, Store

FANOUT = 4
ACK_EVERY = 16
PAYLOAD = bytes(4096)  # one delivery (an encrypted view of a small document)
ROOT = Path("build/bench")


def _round(folder: Path, *, durable: bool, documents: int) -> float:
    """Deliveries per second, routing ``documents`` one commit at a time."""
    store = Store(folder / f"site-{'full' if durable else 'normal'}.sqlite", durable=durable)
    try:
        names = [f"s{i}" for i in range(FANOUT)]
        started = time.perf_counter()
        for n in range(1, documents + 1):
            store.commit_routing(
                document=("p", f"doc-{n}", 1),
                appends=[Append(kind="subscriber", name=name, payload=PAYLOAD) for name in names],
                counter=("uplink", n), sequence=n, at_ms=n, refuse_full=True,
            )
            if n % ACK_EVERY == 0:
                acks = {("subscriber", name): n for name in names}
                store.acked(acks, store.commit_acks_aside(acks))
        elapsed = time.perf_counter() - started
    finally:
        store.close()
    return documents * FANOUT / elapsed


def run(quick: bool) -> list[Result]:
    """Measure (see the module docstring)."""
    documents, rounds = (200, 2) if quick else (2000, 5)
    best = {True: 0.0, False: 0.0}
    ROOT.mkdir(parents=True, exist_ok=True)
    for _ in range(rounds):
        for durable in (False, True):  # alternating: a noisy moment hits both
            with tempfile.TemporaryDirectory(dir=ROOT) as folder:
                best[durable] = max(
                    best[durable], _round(Path(folder), durable=durable, documents=documents)
                )
    return [
        ratio_result(
            name="ack_durable_cost", value=best[True], unit="deliveries/s",
            baseline="synchronous=NORMAL", baseline_value=best[False],
            goal="stated, not bounded (durability first)",
            note=(
                f"site store only: {documents} documents x {FANOUT} queues, one commit each, "
                f"acks every {ACK_EVERY}; best of {rounds} alternating rounds"
            ),
        )
    ]
