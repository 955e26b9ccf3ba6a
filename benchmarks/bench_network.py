"""The three-site chain end to end, against baselines that carry the same bytes or do one stage.

One network, every process real: ``xdn publish`` → d1 (ProductionProcess) → d2 (WorkOrder) →
d3 (Production) → ``xdn subscribe`` (alice), mutual TLS on every hop. Each site runs under
:mod:`benchmarks.wire_tap`, which records the bytes of every Disseminator call it serves, so the
baselines replay exactly what this run's chain carried:

* ``relay_vs_bare_same_bytes`` — documents/s through the chain (1 MB documents; from the first
  document's issue, the manifest timestamp, to the last one's acceptance by the subscriber) ÷
  documents/s of :mod:`benchmarks.bare_relay` carrying the same messages: the requests the
  publisher sent d1 and the deliveries each site sent on (same count, same bytes, grouped per
  document), through three bare grpc.aio relays and a sink over mutual TLS with the same
  certificates, no parsing, crypto or storage. Not replayed: control calls
  (``GetMembership``), acknowledgements and receipts flowing back.
* ``e2e_vs_slowest_stage`` — the same documents/s ÷ the slower of the two ends alone on the
  same documents: a real ``xdn publish`` (the publisher's state as it was before that
  repetition) publishing them to :mod:`benchmarks.replay_site` standing in for d1 and
  answering what d1 answered, from the first issue to the last request received; and a real
  ``xdn subscribe`` with a fresh state receiving from a stand-in for d3 every message d3 sent
  alice, taken as fast as it can (documents of a repetition ÷ the time from accepting the
  document before them to accepting the last).
* ``p99_latency_ms_3hops`` — p99 of per-document latency (issue → acceptance) of ~10 KB
  documents published at half the maximum rate measured first (a burst); ``p99_vs_bare_p99``
  — that p99 ÷ the bare chain's p99 (first message sent → sink has the document's last one)
  for the same messages paced at the same rate.

Each figure is the median of the repetitions (their values in ``repetitions``); every baseline
is measured in the same run from the same recordings.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.bare_relay import drive, write_link
from benchmarks.captured import PUBLISH_METHODS, Link, chain_links, first_issue_ms, link_groups
from benchmarks.harness import Result
from benchmarks.wire_tap import REQUEST, RESPONSE, Record, read_tap, tap_launcher, write_records
from deploy.docgen import generate
from deploy.network import LocalNetwork, SiteSpec, SubscriberSpec
from deploy.pki import Party, issue_party
from xdn.certs import BLOCK_FIELD
from xdn.grpc_tls import TlsFiles

SITES = ("d1", "d2", "d3")
PUBLISHER, SUBSCRIBER = "production-dept", "alice"
BARE_SINK = "bare-sink"
SUBSCRIBE_EXTRA = ("--concept", "Production")
# What the publisher asks of its site (the stand-in answers them from d1's recording).
PUBLISHER_METHODS = ("GetMembership", *PUBLISH_METHODS, "GetReceipts")


@dataclass(frozen=True, slots=True)
class Sizes:
    documents: int  # per throughput repetition
    doc_bytes: int
    burst: int  # small documents published at once to find the maximum rate
    paced: int  # small documents per latency repetition
    small_bytes: int = 10_000
    repetitions: int = 3


FULL = Sizes(documents=10, doc_bytes=1_000_000, burst=200, paced=1_000)
QUICK = Sizes(documents=3, doc_bytes=200_000, burst=40, paced=100)


@dataclass(frozen=True, slots=True)
class Window:
    """A stretch of the run whose recorded traffic is one measurement's."""

    since_ns: int
    until_ns: int
    documents: tuple[Path, ...]


# ---- processes ----------------------------------------------------------------------------


def _wait_file(path: Path, proc: subprocess.Popen[bytes], what: str, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while not (path.exists() and (text := path.read_text().strip())):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.05)
    return text


@contextmanager
def _processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start(
    procs: list[subprocess.Popen[bytes]], args: list[str], port_file: Path, what: str
) -> str:
    proc = subprocess.Popen(args)
    procs.append(proc)
    return f"127.0.0.1:{_wait_file(port_file, proc, what)}"


# ---- the xdn chain ------------------------------------------------------------------------


def _chain_network(workdir: Path) -> LocalNetwork:
    sites = (
        SiteSpec(name="d1", block="ProductionProcess", launcher=tap_launcher(workdir / "d1.tap")),
        SiteSpec(
            name="d2", block="WorkOrder", uplink="d1", launcher=tap_launcher(workdir / "d2.tap")
        ),
        SiteSpec(
            name="d3", block="Production", uplink="d2", launcher=tap_launcher(workdir / "d3.tap")
        ),
    )
    subscriber = SubscriberSpec(name=SUBSCRIBER, site="d3", attributes={"OU": "Cred1"})
    net = LocalNetwork(workdir / "net", sites=sites, subscribers=(subscriber,))
    net.workdir.mkdir(parents=True)
    net.prepare()
    return net


def _documents(workdir: Path, count: int, size: int, prefix: str) -> tuple[Path, ...]:
    workdir.mkdir(parents=True, exist_ok=True)
    docs = []
    for i in range(count):
        path = workdir / f"{prefix}{i}.xml"
        with open(path, "wb") as out:
            generate(PUBLISHER, size, out, seed=i)
        docs.append(path)
    return tuple(docs)


def _times(record: dict[str, object]) -> dict[str, int]:
    issued, received = record["issued_at_ms"], record["received_at_ms"]
    assert isinstance(issued, int) and isinstance(received, int)
    return {"issued": issued, "received": received}


def _accepted(
    net: LocalNetwork, docs: Sequence[Path], timeout: float = 900
) -> list[dict[str, int]]:
    """The subscriber's records of ``docs`` (issue and acceptance times), once all are in."""
    wanted = {d.stem for d in docs}
    deadline = time.monotonic() + timeout
    while True:
        found = {
            str(r["document"]): _times(r)
            for r in net.received(SUBSCRIBER)
            if r["document"] in wanted
        }
        if len(found) == len(wanted):
            return [found[d.stem] for d in docs]
        if time.monotonic() > deadline:
            raise RuntimeError(f"the chain delivered {len(found)} of {len(wanted)} documents")
        time.sleep(0.05)


def _settle(taps: Sequence[Path], quiet_s: float = 0.5, timeout: float = 30) -> int:
    """Wait until the taps stop growing (the messages after a document are in); the time."""
    deadline = time.monotonic() + timeout
    sizes: list[int] = []
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        now = [t.stat().st_size if t.exists() else 0 for t in taps]
        if now != sizes:
            sizes, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            break
        time.sleep(0.05)
    return time.time_ns()


def _span_rate(count: int, first_ms: float, last_ms: float) -> float:
    return count / (max(last_ms - first_ms, 1.0) / 1000)


@dataclass(slots=True)
class _ChainRun:
    throughput: list[Window]
    throughput_rates: list[float]
    wall_rates: list[float]
    snapshots: list[Path]
    max_rate: float
    paced_rate: float
    latency: list[Window]
    latencies_ms: list[list[int]]
    subscribe_until_ns: int


def _run_chain(net: LocalNetwork, workdir: Path, sizes: Sizes) -> _ChainRun:
    taps = [workdir / f"{s}.tap" for s in SITES]
    net.start_sites()
    net.start_subscriber(SUBSCRIBER, extra=list(SUBSCRIBE_EXTRA))
    net.wait_subscribed(SUBSCRIBER)
    warm = _documents(workdir / "docs", 2, sizes.small_bytes, "warm")
    net.publish(PUBLISHER, warm, timeout=600)  # keys reach alice; connections warm up
    _accepted(net, warm)
    since = _settle(taps)
    run = _ChainRun([], [], [], [], 0.0, 0.0, [], [], 0)
    for rep in range(sizes.repetitions):
        docs = _documents(workdir / "docs", sizes.documents, sizes.doc_bytes, f"r{rep}-doc")
        snapshot = workdir / f"publisher-state-{rep}"
        shutil.copytree(net.workdir / "state" / PUBLISHER, snapshot)
        started = time.perf_counter()
        net.publish(PUBLISHER, docs, timeout=900)
        records = _accepted(net, docs)
        wall = time.perf_counter() - started
        until = _settle(taps)
        run.throughput.append(Window(since, until, docs))
        run.snapshots.append(snapshot)
        first = min(r["issued"] for r in records)
        run.throughput_rates.append(
            _span_rate(len(docs), first, max(r["received"] for r in records))
        )
        run.wall_rates.append(len(docs) / wall)
        since = until
    run.subscribe_until_ns = since
    burst = _documents(workdir / "docs", sizes.burst, sizes.small_bytes, "burst")
    net.publish(PUBLISHER, burst, timeout=900)
    records = _accepted(net, burst)
    run.max_rate = _span_rate(
        len(burst), min(r["issued"] for r in records), max(r["received"] for r in records)
    )
    run.paced_rate = run.max_rate / 2
    since = _settle(taps)
    for rep in range(sizes.repetitions):
        docs = _documents(workdir / "docs", sizes.paced, sizes.small_bytes, f"p{rep}-doc")
        net.publish(PUBLISHER, docs, timeout=3600, rate=run.paced_rate)
        records = _accepted(net, docs)
        until = _settle(taps)
        run.latency.append(Window(since, until, docs))
        run.latencies_ms.append(sorted(r["received"] - r["issued"] for r in records))
        since = until
    return run


# ---- the bare chain ------------------------------------------------------------------------


def _plan(taps: dict[str, list[Record]], window: Window, plan: Path) -> Path:
    """Write the plan of the bare chain: each link's messages in ``window``, per document."""
    plan.mkdir(parents=True)
    for index, link in enumerate(chain_links(SITES)):
        groups = link_groups(
            taps[link.site], link, since_ns=window.since_ns, until_ns=window.until_ns
        )
        if len(groups) != len(window.documents):
            raise RuntimeError(
                f"link {index} carried {len(groups)} documents, not {len(window.documents)}"
            )
        write_link(plan / f"link{index}.bin", [[r.data for r in g] for g in groups])
    return plan


@contextmanager
def _bare_chain(certs: Path, workdir: Path) -> Iterator[str]:
    """Three bare relays and a sink presenting the chain's certificates; the first's address.

    The sink serves (alice is a client in the chain), so it presents a certificate of the
    same CA that a server may use."""
    issue_party(
        certs,
        Party(
            name=BARE_SINK,
            role="site",
            hosts=("localhost", "127.0.0.1"),
            attributes={BLOCK_FIELD: "Production"},
        ),
        now=datetime.now(UTC),
    )
    with _processes() as procs:
        next_address: str | None = None
        # Each hop presents its party's certificate and receives link ``index`` of the plan.
        for name, index in ((BARE_SINK, 3), ("d3", 2), ("d2", 1), ("d1", 0)):
            port_file = workdir / f"bare-{name}.port"
            args = [
                sys.executable,
                "-m",
                "benchmarks.bare_relay",
                "--certs",
                str(certs),
                "--name",
                name,
                "--index",
                str(index),
                "--port-file",
                str(port_file),
            ]
            if next_address is not None:
                args += ["--next", next_address]
            next_address = _start(procs, args, port_file, f"bare {name}")
        assert next_address is not None
        yield next_address


# ---- one stage alone -----------------------------------------------------------------------


def _replay_site(
    procs: list[subprocess.Popen[bytes]], certs: Path, site: str, script: Path, log: Path
) -> str:
    port_file = log.with_suffix(".port")
    args = [
        sys.executable,
        "-m",
        "benchmarks.replay_site",
        "--certs",
        str(certs),
        "--name",
        site,
        "--script",
        str(script),
        "--log",
        str(log),
        "--port-file",
        str(port_file),
    ]
    return _start(procs, args, port_file, f"replay of {site}")


def _solo_dir(net: LocalNetwork, path: Path) -> Path:
    path.mkdir(parents=True)
    for shared in ("certs", "policies"):
        os.symlink(net.workdir / shared, path / shared)
    (path / "logs").mkdir()
    (path / "state").mkdir()
    return path


def _publish_alone(
    net: LocalNetwork,
    workdir: Path,
    taps: dict[str, list[Record]],
    window: Window,
    snapshot: Path,
) -> float:
    """Documents/s of a real ``xdn publish`` to a stand-in for d1 answering as d1 did."""
    solo = _solo_dir(net, workdir)
    shutil.copytree(snapshot, solo / "state" / PUBLISHER)
    script = [
        r
        for r in taps["d1"]
        if r.method in PUBLISHER_METHODS and window.since_ns <= r.at_ns < window.until_ns
    ]
    write_records(workdir / "script.tap", script)
    with _processes() as procs:
        address = _replay_site(procs, net.certs, "d1", workdir / "script.tap", workdir / "log.tap")
        args = net.publish_command(PUBLISHER, window.documents)
        args[args.index("--connect") + 1] = address
        done = subprocess.run(args, cwd=solo, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"publish alone failed: {done.stdout}{done.stderr}")
    groups = link_groups(read_tap(workdir / "log.tap"), Link("d1", REQUEST, PUBLISH_METHODS))
    if len(groups) != len(window.documents):
        raise RuntimeError(f"publish alone sent {len(groups)} of {len(window.documents)}")
    return _span_rate(len(groups), first_issue_ms(groups[0]), groups[-1][-1].at_ns / 1e6)


def _subscribe_alone(
    net: LocalNetwork, workdir: Path, taps: dict[str, list[Record]], run: _ChainRun
) -> list[float]:
    """Per throughput repetition, documents/s of a real ``xdn subscribe`` (fresh state)
    taking what d3 sent alice, up to the end of those repetitions, from a stand-in for d3."""
    solo = _solo_dir(net, workdir)
    script = [
        r
        for r in taps["d3"]
        if r.kind == RESPONSE and r.method == "Subscribe" and r.at_ns < run.subscribe_until_ns
    ]
    if len({r.call for r in script}) != 1:
        raise RuntimeError("alice's subscription was not one stream: cannot replay it")
    write_records(workdir / "script.tap", script)
    solo_net = LocalNetwork(solo, subscribers=tuple(net.subscribers.values()))
    with _processes() as procs:
        address = _replay_site(procs, net.certs, "d3", workdir / "script.tap", workdir / "log.tap")
        solo_net.ports["d3"] = int(address.rpartition(":")[2])
        solo_net.start_subscriber(SUBSCRIBER, extra=list(SUBSCRIBE_EXTRA))
        try:
            rates = []
            before: int | None = None
            all_docs = [d for w in run.throughput for d in w.documents]
            _accepted(solo_net, all_docs)
            for window in run.throughput:
                records = _accepted(solo_net, window.documents)
                last = max(r["received"] for r in records)
                if before is None:  # the documents before the first repetition: the warm-up
                    before = max(
                        _times(r)["received"]
                        for r in solo_net.received(SUBSCRIBER)
                        if str(r["document"]).startswith("warm")
                    )
                rates.append(_span_rate(len(window.documents), before, last))
                before = last
        finally:
            solo_net.stop()
    return rates


# ---- results -------------------------------------------------------------------------------


def _p99(samples: Sequence[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _median_result(
    *,
    name: str,
    values: Sequence[float],
    unit: str,
    baseline: str,
    baselines: Sequence[float],
    goal: str,
    note: str,
) -> Result:
    """Medians of the repetitions; the ratio is the median of their ratios."""
    ratios = tuple(v / b for v, b in zip(values, baselines, strict=True))
    return Result(
        name=name,
        value=statistics.median(values),
        unit=unit,
        baseline=baseline,
        baseline_value=statistics.median(baselines),
        ratio=statistics.median(ratios),
        goal=goal,
        note=note,
        repetitions=ratios,
    )


def run(quick: bool) -> list[Result]:
    sizes = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="xdn-bench-net-") as tmp:
        workdir = Path(tmp)
        net = _chain_network(workdir)
        with net:
            chain = _run_chain(net, workdir, sizes)
        taps = {s: read_tap(workdir / f"{s}.tap") for s in SITES}
        tls = TlsFiles.from_dir(net.certs, PUBLISHER)
        bare_rates: list[float] = []
        bare_p99: list[float] = []
        with _bare_chain(net.certs, workdir) as first_hop:
            for rep, window in enumerate(chain.throughput):
                plan = _plan(taps, window, workdir / f"plan-t{rep}")
                sent, arrived = asyncio.run(drive(first_hop, tls, plan))
                bare_rates.append(len(arrived) / ((arrived[-1] - sent[0]) / 1e9))
            for rep, window in enumerate(chain.latency):
                plan = _plan(taps, window, workdir / f"plan-p{rep}")
                sent, arrived = asyncio.run(drive(first_hop, tls, plan, rate=chain.paced_rate))
                bare_p99.append(_p99([(a - s) / 1e6 for s, a in zip(sent, arrived, strict=True)]))
        publish_rates = [
            _publish_alone(net, workdir / f"publish-alone-{rep}", taps, window, snapshot)
            for rep, (window, snapshot) in enumerate(
                zip(chain.throughput, chain.snapshots, strict=True)
            )
        ]
        subscribe_rates = _subscribe_alone(net, workdir / "subscribe-alone", taps, chain)
    return _results(
        sizes,
        chain,
        bare_rates=bare_rates,
        bare_p99=bare_p99,
        publish_rates=publish_rates,
        subscribe_rates=subscribe_rates,
    )


def _results(
    sizes: Sizes,
    chain: _ChainRun,
    *,
    bare_rates: Sequence[float],
    bare_p99: Sequence[float],
    publish_rates: Sequence[float],
    subscribe_rates: Sequence[float],
) -> list[Result]:
    """The four figures, each the median of the repetitions against its baseline's."""
    slowest = [min(p, s) for p, s in zip(publish_rates, subscribe_rates, strict=True)]
    p99s = [_p99(samples) for samples in chain.latencies_ms]
    docs = f"{sizes.documents} documents of {sizes.doc_bytes:,} bytes per repetition"
    fmt = ", ".join
    # both throughput figures divide the chain's documents/s by a baseline's
    chain_rate = functools.partial(
        _median_result, values=chain.throughput_rates, unit="documents/s"
    )
    return [
        chain_rate(
            name="relay_vs_bare_same_bytes",
            baseline="bare grpc.aio chain (mutual TLS, 3 relays) carrying the same messages",
            baselines=bare_rates,
            goal=">= 0.5",
            note=f"{docs}; first issue to last acceptance; per repetition xdn "
            f"{fmt(f'{r:.2f}' for r in chain.throughput_rates)} vs bare "
            f"{fmt(f'{r:.2f}' for r in bare_rates)} documents/s; from the launch of "
            f"xdn publish (start-up included): {fmt(f'{r:.2f}' for r in chain.wall_rates)}",
        ),
        chain_rate(
            name="e2e_vs_slowest_stage",
            baseline="slower of xdn publish alone and xdn subscribe alone, same documents",
            baselines=slowest,
            goal=">= 0.7",
            note=f"{docs}; publish alone {fmt(f'{r:.2f}' for r in publish_rates)}, "
            f"subscribe alone {fmt(f'{r:.2f}' for r in subscribe_rates)} documents/s",
        ),
        *(
            _median_result(
                name=name,
                values=p99s,
                unit="ms",
                baseline="bare chain p99, same messages at the same rate",
                baselines=bare_p99,
                goal=goal,
                note=f"{sizes.paced} documents of ~{sizes.small_bytes:,} bytes per repetition "
                f"at {chain.paced_rate:.1f}/s, half the maximum {chain.max_rate:.1f}/s measured "
                f"first ({sizes.burst} at once); issue of the manifest to acceptance; p99 per "
                f"repetition {fmt(f'{p:.0f}' for p in p99s)} ms (medians "
                f"{fmt(str(statistics.median(s)) for s in chain.latencies_ms)} ms); bare p99 "
                f"{fmt(f'{p:.1f}' for p in bare_p99)} ms (first message sent to the sink having "
                "the document's last one)",
            )
            for name, goal in (("p99_latency_ms_3hops", "<= 25 ms"), ("p99_vs_bare_p99", "<= 2"))
        ),
    ]
