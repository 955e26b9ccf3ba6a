"""Throughput and latency of a three-disseminator chain against a bare gRPC relay chain.

Both chains run as separate processes on loopback, measured in the same run:

* baseline: :mod:`benchmarks.bare_relay` — three relays and a sink, no TLS, no crypto, no
  persistence, one 300-byte message per gRPC message;
* xdn: publisher → d1 (ProductionProcess) → d2 (WorkOrder) → d3 (Production) → subscriber,
  with mutual TLS, AES-GCM encryption, signed manifests, a signed provenance hop per link and
  durable SQLite queues, the subscriber verifying and reassembling every document.

``relay3_fragments_vs_bare`` = fragments/s delivered end to end ÷ the bare chain's messages/s
(batching fragments per document is the lever). ``p99_latency_ms_3hops`` = p99 of per-document
latency (manifest issue time → subscriber accepted it) while publishing at half the measured
maximum document rate; its baseline is the bare chain's per-message latency at the same
message rate.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.bare_relay import drive
from benchmarks.harness import Result, ratio_result
from deploy.network import LocalNetwork, SiteSpec, SubscriberSpec
from xdn.docgen import generate


def _bare_chain(workdir: Path, messages: int) -> float:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        next_address: str | None = None
        for hop in ("sink", "r3", "r2", "r1"):
            port_file = workdir / f"{hop}.port"
            args = [sys.executable, "-m", "benchmarks.bare_relay", "--port-file", str(port_file)]
            if next_address:
                args += ["--next", next_address]
            procs.append(subprocess.Popen(args))
            deadline = time.monotonic() + 30
            while not port_file.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"bare relay {hop} did not start")
                time.sleep(0.05)
            next_address = f"127.0.0.1:{port_file.read_text()}"
        assert next_address is not None
        asyncio.run(drive(next_address, 1000))  # warm up connections
        count, seconds = asyncio.run(drive(next_address, messages))
        if count != messages:
            raise RuntimeError(f"bare chain lost messages: {count}/{messages}")
        return messages / seconds
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()


def _records(inbox: Path) -> list[dict[str, object]]:
    path = inbox / "received.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _xdn_chain(workdir: Path, documents: int, doc_bytes: int) -> tuple[float, int]:
    sites = (
        SiteSpec(name="d1", block="ProductionProcess"),
        SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
        SiteSpec(name="d3", block="Production", uplink="d2"),
    )
    subscriber = SubscriberSpec(name="alice", site="d3", attributes={"OU": "Cred1"})
    net = LocalNetwork(workdir / "net", sites=sites, subscribers=(subscriber,))
    net.workdir.mkdir(parents=True)
    net.prepare()
    docs = []
    for i in range(documents):
        path = workdir / f"doc{i}.xml"
        with open(path, "wb") as out:
            generate("production-dept", doc_bytes, out, seed=i)
        docs.append(path)
    with net:
        net.start_sites()
        net.start_subscriber("alice", extra=["--concept", "Production"])
        net.wait_subscribed("alice")
        started = time.perf_counter()
        net.publish("production-dept", docs, site="d1", wait_for=("alice",), timeout=600)
        deadline = time.monotonic() + 600
        while len(_records(net.inbox("alice"))) < documents:
            if time.monotonic() > deadline:
                raise RuntimeError("xdn chain did not deliver every document")
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
    fragments = sum(len(r["fragments"]) for r in _records(net.inbox("alice")))  # type: ignore[arg-type]
    return fragments / elapsed, fragments


def run(quick: bool) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="xdn-bench-net-") as tmp:
        workdir = Path(tmp)
        bare = _bare_chain(workdir, 5_000 if quick else 30_000)
        documents, size = (4, 200_000) if quick else (10, 1_000_000)
        rate, fragments = _xdn_chain(workdir, documents, size)
    return [
        ratio_result(
            name="relay3_fragments_vs_bare",
            value=rate,
            unit="fragments/s",
            baseline="bare grpc.aio relay chain, 3 hops, msgs/s",
            baseline_value=bare,
            goal=">= 10",
            note=f"{documents} documents of {size} bytes, {fragments} fragments delivered; "
            "publisher process start-up included",
        )
    ]
