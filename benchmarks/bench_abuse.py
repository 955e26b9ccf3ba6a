"""An abusive caller slows honest subscribers by less than 10 % (issue #13).

One network (d1 root, d2 and d3 below it; alice subscribed at d2), measured in the same run:

* baseline: the honest workload alone — small documents published at a steady pace, the
  latency of each from its issue (the manifest's timestamp) to alice's acceptance;
* abused: the same workload while an abuser process (carol, a subscriber certificate of the
  same CA) hammers d2 and d1 in a loop with what used to stall a site: oversized Subscribe
  requests (a million-odd concepts), Subscribes naming more concepts than the ontology has, and
  streams that never send their first message, past the per-certificate limit.

``abuse_p50_latency_vs_honest`` = p50 latency with the abuser ÷ p50 without it (goal ≤ 1.10).
The baseline is measured twice, before and after the abused run, and pooled, so that drift of
the shared machine over the run does not count against either side.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc

from benchmarks.harness import Result, ratio_result
from deploy.network import LocalNetwork, SubscriberSpec
from deploy.pki import Party, issue_party
from xdn.docgen import generate
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

ABUSER = "carol"


# ---- the abuser (run as its own process) ------------------------------------------------------
async def _refused(stub: pb_grpc.DisseminatorStub, message: pb.ClientMessage) -> None:
    async def requests() -> AsyncIterator[pb.ClientMessage]:
        yield message
        await asyncio.sleep(30)

    call = stub.Subscribe(requests(), timeout=20)
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError:
        pass


async def _silent(stub: pb_grpc.DisseminatorStub, method: str) -> None:
    async def never() -> AsyncIterator[Any]:
        await asyncio.sleep(3600)
        yield pb.ClientMessage()

    call = getattr(stub, method)(never(), timeout=20)
    try:
        async for _ in call:
            pass
    except grpc.aio.AioRpcError:
        pass


async def _abuse_loop(address: str, tls: TlsFiles) -> None:
    huge = pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=["WorkOrder"] * 120_000))
    many = pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=["WorkOrder"] * 500))
    async with grpc.aio.secure_channel(
        address, channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        stub = pb_grpc.DisseminatorStub(channel)
        while True:
            await asyncio.gather(
                _refused(stub, huge), _refused(stub, many),
                *(_silent(stub, "Subscribe") for _ in range(8)),
                *(_silent(stub, "Link") for _ in range(8)),
            )


async def _abuse(addresses: list[str], certs: Path) -> None:
    tls = TlsFiles.from_dir(certs, ABUSER)
    await asyncio.gather(*(_abuse_loop(a, tls) for a in addresses for _ in range(2)))


# ---- the honest workload ----------------------------------------------------------------------
def _documents(workdir: Path, count: int, prefix: str) -> list[Path]:
    docs = []
    for i in range(count):
        path = workdir / f"{prefix}{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", 5_000, out, seed=i)
        docs.append(path)
    return docs


def _latencies(net: LocalNetwork, docs: list[Path], rate: float) -> list[int]:
    before = len(net.received("alice"))
    net.publish("production-dept", docs, site="d1", timeout=600, rate=rate)
    deadline = time.monotonic() + 120
    while len(records := net.received("alice")) < before + len(docs):
        if time.monotonic() > deadline:
            raise RuntimeError("alice did not receive every document")
        time.sleep(0.05)
    return [
        int(r["received_at_ms"]) - int(r["issued_at_ms"])  # type: ignore[call-overload]
        for r in records[before:]
    ]


def run(quick: bool) -> list[Result]:
    count, rate = (10, 5.0) if quick else (30, 10.0)
    with tempfile.TemporaryDirectory(prefix="xdn-bench-abuse-") as tmp:
        workdir = Path(tmp)
        subscriber = SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"})
        net = LocalNetwork(workdir / "net", subscribers=(subscriber,))
        net.workdir.mkdir(parents=True)
        net.prepare()
        issue_party(net.certs, Party(name=ABUSER, role="subscriber", attributes={"OU": "Cred1"}),
                    now=datetime.now(UTC))
        with net:
            net.start_sites()
            net.start_subscriber("alice")
            net.wait_subscribed("alice")
            _latencies(net, _documents(workdir, 3, "warm"), rate)  # warm up
            honest = _latencies(net, _documents(workdir, count, "a"), rate)
            abuser = subprocess.Popen([
                sys.executable, "-m", "benchmarks.bench_abuse", "--certs", str(net.certs),
                net.address("d2"), net.address("d1"),
            ])
            try:
                time.sleep(2)  # the abuse is under way
                abused = _latencies(net, _documents(workdir, count, "b"), rate)
            finally:
                abuser.terminate()
                abuser.wait()
            honest += _latencies(net, _documents(workdir, count, "c"), rate)
            refused = net.metric("d2", "xdn_refused_calls_total", reason="LimitExceeded")
    with_abuse, without = statistics.median(abused), statistics.median(honest)
    return [
        ratio_result(
            name="abuse_p50_latency_vs_honest",
            value=with_abuse,
            unit="ms",
            baseline="p50 latency of the same workload without the abuser",
            baseline_value=without,
            goal="<= 1.10",
            note=f"{count} documents (~5 KB) at {rate:g}/s to alice at d2 while carol sends "
            "oversized and over-limit Subscribes and silent Subscribe / Link streams to d2 and "
            f"d1 in a loop; d2 refused {refused:.0f} calls past a limit",
        )
    ]


def main() -> None:
    """The abuser process: ``python -m benchmarks.bench_abuse --certs DIR ADDRESS...``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("addresses", nargs="+")
    args = parser.parse_args()
    asyncio.run(_abuse(args.addresses, args.certs))


if __name__ == "__main__":
    main()
