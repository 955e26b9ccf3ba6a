"""Abusive callers must slow honest subscribers by less than 10 % (issues #13 and #15).

One network (d1 root, d2 and d3 below it; alice subscribed at d2), measured in the same run:

* baseline: the honest workload alone — small documents published at a steady pace, the
  latency of each from its issue (the manifest's timestamp) to alice's acceptance;
* abused: the same workload while an abuser process (carol, a subscriber certificate of the
  same CA) hammers d2 and d1 in a loop with what used to stall a site: oversized Subscribe
  requests (a million-odd concepts), Subscribes naming more concepts than the ontology has, and
  streams that never send their first message, past the per-certificate limit.

* flooded (issue #15): the same workload, twice, while a flooder process opens Subscribe calls
  to d2 and d1 under certificates they must refuse, each on a new connection (a TLS handshake
  apiece), a bounded number in flight: a subscriber certificate of another CA and an expired
  one of the network's CA (refused in the handshake), a revoked one (the sites load the CRL
  naming it at start) and a site certificate (the wrong role; both refused by the servicer);
  then, as a control, the same flood at d3 alone, which alice's documents never cross (what
  the flood costs through the shared machine, not through d1 and d2).

``abuse_p50_latency_vs_honest`` = p50 latency with the abuser ÷ p50 without it (goal ≤ 1.10);
``invalid_cert_flood_p50_latency_vs_honest`` likewise with the flooder;
``invalid_cert_flood_p50_latency_vs_off_path`` = the flooded p50 ÷ the control's: on one
machine the flooder and every refusal take CPU from every process, so this is the part of the
slow-down due to the flood reaching alice's sites rather than to the machine being shared.
Each honest baseline is measured before and after its disturbed run and pooled, so that drift
of the shared machine over the run does not count against either side. The flood's note gives
its calls a second, the refusals each site counted and d2's memory (VmRSS) before the flood and
after each flooded run: whether it grows with the number of refused calls or levels off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import grpc

from benchmarks.harness import Result, ratio_result
from benchmarks.procstat import cpu_seconds, memory_mb
from deploy.docgen import generate
from deploy.network import LocalNetwork, SubscriberSpec
from deploy.pki import Party, ensure_ca, issue_party, revoke_party
from xdn.certs import BLOCK_FIELD
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


# ---- the flooder of refused certificates (run as its own process) -----------------------------
# Each kind of certificate a site must refuse, and the party that holds it.
FLOOD_PARTIES = {
    "foreign-ca": "mallory",  # a subscriber certificate from another CA: the handshake fails
    "revoked": "revoked-sub",  # the network's CA, revoked in the CRL the sites load
    "expired": "expired-sub",  # the network's CA, valid for a day a month ago
    "wrong-role": "stray-site",  # the network's CA, a site certificate calling Subscribe
}
FLOOD_IN_FLIGHT = 16  # calls in flight per kind, at most
FLOOD_RATE = 50.0  # calls a second per kind, at most
# A new channel must not share the process-wide subchannel (and so the TLS session) of the
# last one: each call pays for its own handshake.
FLOOD_CHANNEL_OPTIONS = (*CHANNEL_OPTIONS, ("grpc.use_local_subchannel_pool", 1))
# How each refusal reads, for the tally: the first phrase the details contain names it.
_REFUSAL_PHRASES = {
    "revoked": "was revoked", "expired": "is not valid at", "wrong-role": "expected 'subscriber'",
}


def foreign_ca_dir(certs_dir: Path) -> Path:
    """Where the other CA and its subscriber certificate live (beside the network's)."""
    return certs_dir.parent / "foreign-ca"


def issue_flood_certificates(certs_dir: Path, *, now: datetime) -> None:
    """Issue every kind of :data:`FLOOD_PARTIES` certificate and revoke the revoked one.

    Call before the sites start (they then load the CRL naming it) or wait for a refusal.
    """
    foreign = foreign_ca_dir(certs_dir)
    ensure_ca(foreign, now=now, name="xdn-foreign-ca")
    cred1 = {"OU": "Cred1"}  # what alice holds: only the certificate itself is wrong
    issue_party(foreign, Party(name=FLOOD_PARTIES["foreign-ca"], role="subscriber",
                               attributes=cred1), now=now)
    issue_party(certs_dir, Party(name=FLOOD_PARTIES["revoked"], role="subscriber",
                                 attributes=cred1), now=now)
    revoke_party(certs_dir, FLOOD_PARTIES["revoked"], now=now)
    issue_party(certs_dir, Party(name=FLOOD_PARTIES["expired"], role="subscriber",
                                 attributes=cred1), now=now - timedelta(days=30), days=1)
    issue_party(certs_dir, Party(name=FLOOD_PARTIES["wrong-role"], role="site",
                                 hosts=("127.0.0.1",), attributes={BLOCK_FIELD: "WorkOrder"}),
                now=now)


def flood_credentials(certs_dir: Path) -> dict[str, TlsFiles]:
    """Each kind's TLS material; every kind trusts the network's CA to reach the site."""
    network_ca = (certs_dir / "ca.pem").read_bytes()
    credentials = {}
    for kind, name in FLOOD_PARTIES.items():
        directory = foreign_ca_dir(certs_dir) if kind == "foreign-ca" else certs_dir
        own = TlsFiles.from_dir(directory, name)
        credentials[kind] = TlsFiles(cert_pem=own.cert_pem, key_pem=own.key_pem,
                                     ca_pem=network_ca)
    return credentials


async def refused_subscribe(address: str, tls: TlsFiles) -> tuple[grpc.StatusCode, str]:
    """One Subscribe over a new channel (its own handshake); return how the site ended it.

    ``StatusCode.OK`` means the site accepted the subscription (a refusal was due).
    """
    ended = asyncio.Event()

    async def requests() -> AsyncIterator[pb.ClientMessage]:
        yield pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=["WorkOrder"]))
        await ended.wait()  # our side stays open: only the site ends the call

    async with grpc.aio.secure_channel(
        address, channel_credentials(tls), options=FLOOD_CHANNEL_OPTIONS
    ) as channel:
        call = pb_grpc.DisseminatorStub(channel).Subscribe(requests(), timeout=20)
        try:
            async for reply in call:
                if reply.WhichOneof("kind") == "subscribed":
                    return grpc.StatusCode.OK, f"subscribed as {reply.subscribed.subscriber}"
            return grpc.StatusCode.OK, "the site ended the stream without a status"
        except grpc.aio.AioRpcError as exc:
            return exc.code(), exc.details() or ""
        finally:
            ended.set()
            call.cancel()


def refusal(code: grpc.StatusCode, details: str) -> str:
    """A short name for how a call ended: ``handshake`` (the site's TLS refused it),
    ``unreachable`` (no site listening), ``revoked``, ``expired``, ``wrong-role``, ``accepted``
    or the status code's name."""
    if code == grpc.StatusCode.OK:
        return "accepted"
    if code == grpc.StatusCode.UNAVAILABLE and "failed to connect" in details:
        return "unreachable" if "Connection refused" in details else "handshake"
    if code == grpc.StatusCode.UNAUTHENTICATED:
        for name, phrase in _REFUSAL_PHRASES.items():
            if phrase in details:
                return name
    return str(code.name).lower()


@dataclass(slots=True)
class FloodTally:
    """How the flood's calls ended, by kind and by address; written as JSON for the benchmark
    to read (handshake refusals are counted nowhere else)."""

    started: float = field(default_factory=time.monotonic)
    ends: dict[str, dict[str, int]] = field(default_factory=dict)  # by kind
    by_address: dict[str, dict[str, int]] = field(default_factory=dict)
    details: dict[str, str] = field(default_factory=dict)  # the first details of each end

    def count(self, kind: str, address: str, code: grpc.StatusCode, details: str) -> None:
        end = refusal(code, details)
        for tally in (self.ends.setdefault(kind, {}), self.by_address.setdefault(address, {})):
            tally[end] = tally.get(end, 0) + 1
        self.details.setdefault(f"{kind}/{end}", details)

    def write(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({
            "seconds": time.monotonic() - self.started, "ends": self.ends,
            "by_address": self.by_address, "details": self.details,
        }))
        os.replace(tmp, path)


@dataclass(slots=True)
class Pace:
    """At most ``rate`` calls a second, shared by the workers of one kind."""

    rate: float
    next_slot: float = field(default_factory=time.monotonic)

    async def wait(self) -> None:
        now = time.monotonic()
        slot = max(self.next_slot, now)
        self.next_slot = slot + 1 / self.rate
        await asyncio.sleep(slot - now)


async def _flood_worker(
    address: str, kind: str, tls: TlsFiles, pace: Pace, tally: FloodTally
) -> None:
    while True:
        await pace.wait()
        code, details = await refused_subscribe(address, tls)
        tally.count(kind, address, code, details)


async def _report(tally: FloodTally, path: Path, parent: int) -> None:
    """Write the tally twice a second until the benchmark that started the flood is gone."""
    while os.getppid() == parent:
        tally.write(path)
        await asyncio.sleep(0.5)


async def _flood(addresses: list[str], certs: Path, rate: float, stats: Path) -> None:
    """Each kind at ``rate`` calls a second at most, :data:`FLOOD_IN_FLIGHT` in flight, to the
    addresses in turn. The flooder runs at the lowest priority: on the shared machine it yields
    the CPU to the network's processes (a real flooder's handshakes run on its own machine)."""
    os.nice(19)
    tally = FloodTally()
    workers = []
    for kind, tls in flood_credentials(certs).items():
        pace = Pace(rate)
        workers += [
            asyncio.ensure_future(
                _flood_worker(addresses[i % len(addresses)], kind, tls, pace, tally)
            )
            for i in range(FLOOD_IN_FLIGHT)
        ]
    reporter = asyncio.ensure_future(_report(tally, stats, parent=os.getppid()))
    done, _ = await asyncio.wait([reporter, *workers], return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        task.result()  # a worker's error ends the flood; else the benchmark has gone


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


# ---- the processes under way -------------------------------------------------------------------
def _start(
    net: LocalNetwork, *options: str, sites: tuple[str, ...] = ("d2", "d1")
) -> subprocess.Popen[bytes]:
    """This module as the abuser or the flooder, calling ``sites``."""
    return subprocess.Popen([
        sys.executable, "-m", "benchmarks.bench_abuse", "--certs", str(net.certs), *options,
        *(net.address(site) for site in sites),
    ])


class CpuSince:
    """The share of one core a running process uses from now on."""

    def __init__(self, pid: int) -> None:
        self._pid, self._cpu, self._at = pid, cpu_seconds(pid), time.monotonic()

    def share(self) -> float:
        return (cpu_seconds(self._pid) - self._cpu) / (time.monotonic() - self._at)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait()


@dataclass(slots=True)
class SiteCpu:
    """The CPU time d1 and d2 used over some runs, and how long those runs took."""

    seconds: dict[str, float] = field(default_factory=lambda: {"d1": 0.0, "d2": 0.0})
    wall: float = 0.0

    def measure(self, net: LocalNetwork, run: Callable[[], list[int]]) -> list[int]:
        """``run()``, adding what the sites used meanwhile."""
        before = {site: cpu_seconds(net.site_pid(site)) for site in self.seconds}
        started = time.monotonic()
        latencies = run()
        self.wall += time.monotonic() - started
        for site in self.seconds:
            self.seconds[site] += cpu_seconds(net.site_pid(site)) - before[site]
        return latencies

    def shares(self) -> str:
        """``d1 / d2`` shares of one core, in %."""
        return " / ".join(f"{100 * self.seconds[site] / self.wall:.0f}" for site in self.seconds)


@dataclass(frozen=True, slots=True)
class Workload:
    """The honest workload: ``count`` small documents at ``rate`` a second to alice."""

    net: LocalNetwork
    workdir: Path
    count: int
    rate: float

    def latencies(self, prefix: str, cpu: SiteCpu | None = None) -> list[int]:
        """Publish fresh documents named ``prefix…``; return their latencies (ms)."""
        docs = _documents(self.workdir, self.count, prefix)
        if cpu is None:
            return _latencies(self.net, docs, self.rate)
        return cpu.measure(self.net, lambda: _latencies(self.net, docs, self.rate))

    def describe(self) -> str:
        return f"{self.count} documents (~5 KB) at {self.rate:g}/s to alice at d2"


# ---- the flood, as the benchmark sees it -------------------------------------------------------
# The refusal each kind must meet (the flooder tallies calls over the limit apart).
EXPECTED_REFUSAL = {
    "foreign-ca": "handshake", "revoked": "revoked", "expired": "handshake",
    "wrong-role": "wrong-role",
}
SITE_REFUSAL_REASONS = ("unauthenticated", "LimitExceeded")


def _tally(stats: Path) -> dict[str, Any]:
    """The flooder's last report (empty before its first).

    Raises:
        RuntimeError: a site accepted a bad certificate.
    """
    try:
        report: dict[str, Any] = json.loads(stats.read_text())
    except FileNotFoundError:
        return {"seconds": 0.0, "ends": {}, "by_address": {}, "details": {}}
    accepted = {k: n for k, ends in report["ends"].items() if (n := ends.get("accepted"))}
    if accepted:
        raise RuntimeError(f"a site accepted bad certificates: {accepted} {report['details']}")
    return report


def _calls(report: dict[str, Any]) -> int:
    return sum(sum(ends.values()) for ends in report["ends"].values())


def _wait_every_refusal(stats: Path, flooder: subprocess.Popen[bytes]) -> None:
    """Wait until each kind has met its own refusal (so the sites hold the CRL)."""
    deadline = time.monotonic() + 60
    while any(not _tally(stats)["ends"].get(kind, {}).get(end)
              for kind, end in EXPECTED_REFUSAL.items()):
        if flooder.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the flood did not meet every refusal: {_tally(stats)}")
        time.sleep(0.1)


def _site_refusals(net: LocalNetwork) -> dict[str, dict[str, float]]:
    return {
        site: {r: net.metric(site, "xdn_refused_calls_total", reason=r)
               for r in SITE_REFUSAL_REASONS}
        for site in ("d2", "d1")
    }


def _site_refusals_since(
    net: LocalNetwork, before: dict[str, dict[str, float]]
) -> dict[str, dict[str, float]]:
    after = _site_refusals(net)
    return {
        site: {r: after[site][r] - before[site][r] for r in SITE_REFUSAL_REASONS}
        for site in after
    }


def _handshakes(net: LocalNetwork, report: dict[str, Any]) -> dict[str, int]:
    """The handshakes each site refused, as the flooder counted them."""
    return {
        site: report["by_address"].get(net.address(site), {}).get("handshake", 0)
        for site in ("d2", "d1")
    }


@dataclass(slots=True)
class FloodRun:
    """What the flooded phase measured."""

    latencies: list[int] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)  # d2: before, after each flooded run
    calls: list[int] = field(default_factory=list)  # the flooder's, at each RSS after the first
    report: dict[str, Any] = field(default_factory=dict)  # the flooder's last
    refused: dict[str, dict[str, float]] = field(default_factory=dict)  # by site, reason
    cpu_share: float = 0.0  # the flooder's, of one core
    site_cpu: SiteCpu = field(default_factory=SiteCpu)  # over the flooded runs
    log_growth: int = 0  # bytes d2's output grew by
    handshakes: dict[str, int] = field(default_factory=dict)  # refused, by site
    off_path: list[int] = field(default_factory=list)  # latencies, the same flood at d3 alone

    def note(self, honest_cpu: SiteCpu) -> str:
        seconds = self.report["seconds"]
        per_kind = ", ".join(
            f"{kind} {sum(ends.values()) / seconds:.0f}/s"
            for kind, ends in sorted(self.report["ends"].items())
        )
        d2, d1 = self.refused["d2"], self.refused["d1"]
        mb = [f"{value:.1f}" for value in self.rss_mb]
        return (
            f"bad-certificate calls, each on a new TLS connection, at most {FLOOD_IN_FLIGHT} in "
            f"flight and {FLOOD_RATE:g}/s per kind: {_calls(self.report) / seconds:.0f}/s in all "
            f"({per_kind}; foreign-ca and expired fail the handshake), flooder at nice 19 and "
            f"{100 * self.cpu_share:.0f} % of a core; d1 / d2 at {self.site_cpu.shares()} % of "
            f"a core flooded, {honest_cpu.shares()} % without; refused in the handshake (the "
            f"flooder's count): d2 {self.handshakes['d2']}, d1 {self.handshakes['d1']}; "
            f"refused by the servicer: d2 "
            f"{d2['unauthenticated']:.0f} + {d2['LimitExceeded']:.0f} over the per-certificate "
            f"stream limit, d1 {d1['unauthenticated']:.0f} + {d1['LimitExceeded']:.0f}; d2 VmRSS "
            f"{mb[0]} MB before, {mb[1]} MB after {self.calls[0]} calls, {mb[2]} MB after "
            f"{self.calls[1]}; d2's log grew {self.log_growth / 1024:.0f} KB; the same flood "
            f"at d3 alone (not on alice's path; the machine's share): p50 "
            f"{statistics.median(self.off_path):g} ms"
        )


def _flooded(workload: Workload) -> FloodRun:
    """Two equally long flooded runs of the workload, d2's memory before and after each."""
    net = workload.net
    d2, stats, log = net.site_pid("d2"), workload.workdir / "flood.json", net.workdir / "d2.out"
    before = _site_refusals(net)
    flood = FloodRun(rss_mb=[memory_mb(d2)])
    log_size = log.stat().st_size
    flooder = _start(net, "--flood", str(stats), "--rate", str(FLOOD_RATE))
    try:
        _wait_every_refusal(stats, flooder)
        flooder_cpu = CpuSince(flooder.pid)
        for prefix in ("d", "e"):
            flood.latencies += workload.latencies(prefix, flood.site_cpu)
            flood.rss_mb.append(memory_mb(d2))
            flood.calls.append(_calls(_tally(stats)))
        if flooder.poll() is not None:
            raise RuntimeError(f"the flooder ended early ({flooder.returncode})")
        flood.cpu_share = flooder_cpu.share()
        flood.report = _tally(stats)
    finally:
        _stop(flooder)
    flood.handshakes = _handshakes(net, flood.report)
    flood.refused = _site_refusals_since(net, before)
    flood.log_growth = log.stat().st_size - log_size
    flood.off_path = _flooded_off_path(workload)
    return flood


def _flooded_off_path(workload: Workload) -> list[int]:
    """The workload while the same flood hits d3 alone, which alice's documents never cross:
    what the flood costs through the shared machine rather than through d1 and d2."""
    stats = workload.workdir / "flood-d3.json"
    flooder = _start(workload.net, "--flood", str(stats), "--rate", str(FLOOD_RATE),
                     sites=("d3",))
    try:
        _wait_every_refusal(stats, flooder)
        return workload.latencies("g") + workload.latencies("h")  # as long as the flooded runs
    finally:
        _stop(flooder)


# ---- the benchmark -----------------------------------------------------------------------------
def _abused(workload: Workload) -> tuple[list[int], str]:
    """The workload while the abuser runs; and what the note says of it."""
    net = workload.net
    refused = net.metric("d2", "xdn_refused_calls_total", reason="LimitExceeded")
    abuser = _start(net)
    try:
        time.sleep(2)  # the abuse is under way
        abuser_cpu = CpuSince(abuser.pid)
        abused = workload.latencies("b")
        cpu_share = abuser_cpu.share()
    finally:
        _stop(abuser)
    refused = net.metric("d2", "xdn_refused_calls_total", reason="LimitExceeded") - refused
    return abused, (
        f"d2 refused {refused:.0f} calls past a limit; abuser at {100 * cpu_share:.0f} % of a core"
    )


def _network(workdir: Path) -> LocalNetwork:
    """The network, its PKI with carol and the flood's bad certificates (the CRL revoking one
    is in place before the sites start)."""
    subscriber = SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"})
    net = LocalNetwork(workdir / "net", subscribers=(subscriber,))
    net.workdir.mkdir(parents=True)
    net.prepare()
    now = datetime.now(UTC)
    issue_party(net.certs, Party(name=ABUSER, role="subscriber", attributes={"OU": "Cred1"}),
                now=now)
    issue_flood_certificates(net.certs, now=now)
    return net


def run(quick: bool) -> list[Result]:
    count, rate = (10, 5.0) if quick else (30, 10.0)
    with tempfile.TemporaryDirectory(prefix="xdn-bench-abuse-") as tmp:
        workdir = Path(tmp)
        with _network(workdir) as net:
            net.start_sites()
            net.start_subscriber("alice")
            net.wait_subscribed("alice")
            workload = Workload(net, workdir, count, rate)
            _latencies(net, _documents(workdir, 3, "warm"), rate)  # warm up
            honest = workload.latencies("a")
            abused, abuse_note = _abused(workload)
            honest_cpu = SiteCpu()
            between = workload.latencies("c", honest_cpu)
            flood = _flooded(workload)
            after_flood = workload.latencies("f", honest_cpu)
    return [
        ratio_result(
            name="abuse_p50_latency_vs_honest",
            value=statistics.median(abused),
            unit="ms",
            baseline="p50 latency of the same workload without the abuser",
            baseline_value=statistics.median(honest + between),
            goal="<= 1.10",
            note=f"{workload.describe()} while carol sends oversized and over-limit Subscribes "
            f"and silent Subscribe / Link streams to d2 and d1 in a loop; {abuse_note}",
        ),
        ratio_result(
            name="invalid_cert_flood_p50_latency_vs_honest",
            value=statistics.median(flood.latencies),
            unit="ms",
            baseline="p50 latency of the same workload without the flood (before and after)",
            baseline_value=statistics.median(between + after_flood),
            goal="<= 1.10",
            note=f"{workload.describe()}, twice, while a flooder sends Subscribes to d2 and d1 "
            "under another CA's, revoked, expired and site (wrong-role) certificates: "
            f"{flood.note(honest_cpu)}",
        ),
        ratio_result(
            name="invalid_cert_flood_p50_latency_vs_off_path",
            value=statistics.median(flood.latencies),
            unit="ms",
            baseline="p50 latency of the same workload while the same flood hits d3 alone "
            "(not on alice's path)",
            baseline_value=statistics.median(flood.off_path),
            goal="<= 1.10",
            note="what refusing the flood at alice's sites costs her beyond what the flood "
            "costs any process of this machine: both sides carry the same flooder and the same "
            "refusals, at d1 and d2 or at d3; two runs each",
        ),
    ]


def main() -> None:
    """The abuser process: ``python -m benchmarks.bench_abuse --certs DIR ADDRESS...``; with
    ``--flood STATS [--rate N]``, the flooder of refused certificates, tallying its calls in
    STATS."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--certs", type=Path, required=True)
    parser.add_argument("--flood", type=Path, metavar="STATS")
    parser.add_argument("--rate", type=float, default=FLOOD_RATE, help="flood calls/s per kind")
    parser.add_argument("addresses", nargs="+")
    args = parser.parse_args()
    if args.flood is not None:
        asyncio.run(_flood(args.addresses, args.certs, args.rate, args.flood))
    else:
        asyncio.run(_abuse(args.addresses, args.certs))


if __name__ == "__main__":
    main()
