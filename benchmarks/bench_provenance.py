"""What provenance costs: bytes per hop, CPU of a site's hop, end-to-end latency (issue #14).

Every figure goes through public entry points and measures bytes on the wire, CPU of real
processes or latency end to end, so it holds whatever the provenance format is:

* ``provenance_bytes_per_hop_vs_payload`` — a real :class:`publisher.client.Publisher`
  publishes a 1 MB document of ~7,600 fragments to an in-process stand-in for the root site
  that keeps the ``Publish`` request; the root site's code path
  (:meth:`disseminator.planning.Planner.document`) routes that Dissemination to 2 downlinks
  granted every concept. Per destination: the ``provenance`` field of the outgoing
  Dissemination (read back from the queued ``Delivery`` payload) minus that of the incoming
  one, ÷ the ciphertext bytes it carries. Baseline: those payload bytes.
* ``hop_cpu_vs_bare_hop`` — CPU (user + system, ``/proc/<pid>/stat``) of one real site process
  only: d2 (block WorkOrder) receives each document from its uplink d1, verifies, routes it to
  its 2 subscribers, signs, stores and sends; from the start of an ``xdn publish`` of N
  documents until both subscribers accepted them all (and d2 is idle again), per MB of what d2
  receives, less d2's idle CPU (heartbeats, housekeeping; measured before) over the run's wall
  time. Baseline: the CPU per MB of :mod:`benchmarks.bare_hop` (mutual TLS with the same
  PKI, one SQLite write per message with the store's durability, forwarding to 2 sinks) fed
  the same serialized Delivery bytes d1 queues for d2 (rebuilt in-process with the same
  Planner). Site and bare runs alternate (each repetition: the site once, then the bare hop
  three times, their median); medians over the repetitions, spread in the note.
* ``provenance_latency_overhead`` — p50 latency (the manifest's issue time → the subscriber
  accepted it, as ``bench_network``) of small documents through d1 → d2 → d3 → subscriber,
  with provenance on ÷ off. Two networks run side by side, the second with
  ``XDN_BENCH_PROVENANCE=off`` in the environment of its every process
  (:func:`xdn.provenance.enabled`); batches alternate on/off/off/on in each repetition, so
  that the shared machine's drift cancels. Median of the repetitions' p50s, spread in the note.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import grpc

from benchmarks.bare_hop import drive
from benchmarks.harness import Result, ratio_result
from benchmarks.procstat import CLK_TCK, cpu_seconds
from deploy.docgen import generate
from deploy.network import DEFAULT_PUBLISHERS, LocalNetwork, SiteSpec, SubscriberSpec
from deploy.pki import Party, issue_party
from disseminator.planning import Planner
from disseminator.routing import Registration, RoutingTable
from publisher.client import Publisher, PublisherSetup
from xdn import certs, crypto, provenance
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, server_credentials
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import load_signed_policy
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

PUBLISHER = DEFAULT_PUBLISHERS[0]  # production-dept
ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])


# ---- a publication as the publisher builds it -------------------------------------------------
class _RootStandIn(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """Answers the publisher as a root site enforcing its policy would, keeping what it sends."""

    def __init__(self, policy_version: int) -> None:
        self.policy_version = policy_version
        self.received: list[pb.Dissemination] = []

    def _standing(self) -> pb.SiteStanding:
        return pb.SiteStanding(root=True, policy_version=self.policy_version)

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        return pb.Membership(site="d1", standing=self._standing())

    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        self.received.append(request.dissemination)
        return pb.PublishAck(
            document_id=request.dissemination.manifest.document_id,
            fragments_accepted=len(request.dissemination.fragments), standing=self._standing(),
        )


async def _publish_to_stand_in(net: LocalNetwork, doc: Path, state: Path) -> pb.Dissemination:
    tls = TlsFiles.from_dir(net.certs, PUBLISHER.name)
    policy = load_signed_policy(
        net.workdir / "policies" / PUBLISHER.policy.name, ONTOLOGY,
        certs.public_key_of(tls.cert_pem), publisher=PUBLISHER.name,
    )
    site = _RootStandIn(policy.version)
    server = grpc.aio.server(options=CHANNEL_OPTIONS)
    pb_grpc.add_DisseminatorServicer_to_server(site, server)
    port = server.add_secure_port(
        "127.0.0.1:0", server_credentials(TlsFiles.from_dir(net.certs, "d1"))
    )
    await server.start()
    setup = PublisherSetup(
        name=PUBLISHER.name, tls=tls, ontology=ONTOLOGY,
        mapping=load_mapping(PUBLISHER.mapping, ONTOLOGY), policy=policy,
        state_dir=state, provenance_log=state / "provenance.nq", connect=f"127.0.0.1:{port}",
    )
    publisher = Publisher(setup)
    try:
        await publisher.publish(doc)
    finally:
        await publisher.close()
        await server.stop(None)
    (diss,) = site.received
    return diss


def _planner(net: LocalNetwork, site: str, links: dict[str, frozenset[str]]) -> Planner:
    """The Planner of ``site``, routing to downlinks ``links`` (name → concepts granted)."""
    table = RoutingTable()
    for link, concepts in links.items():
        member = Registration(
            subscriber=f"{link}-member", certificate=b"", grants={PUBLISHER.name: concepts}
        )
        table.set_link_members(link, [member])
    key = crypto.load_private_key_pem((net.certs / f"{site}.key").read_bytes())
    signer = provenance.Signer(
        node_uri=certs.node_uri(site),
        private_key=key,
        certificate=(net.certs / f"{site}.pem").read_bytes(),
    )
    return Planner(
        table=table, ontology=ONTOLOGY, signer=signer, now_ms=lambda: int(time.time() * 1000),
        chains=provenance.ChainVerifier((net.certs / "ca.pem").read_bytes()),
    )


def _bytes_per_hop(net: LocalNetwork, diss: pb.Dissemination) -> tuple[float, float, str]:
    """(provenance bytes one hop adds per destination, payload bytes per destination, note)."""
    everything = frozenset(ONTOLOGY.concepts)
    planner = _planner(net, "d1", {"d2": everything, "d3": everything})
    started = time.process_time()
    plan = planner.document(diss)
    cpu_ms = (time.process_time() - started) * 1000
    added, payload, other = [], [], []
    for append in plan.appends:
        out = pb.Delivery.FromString(append.delivery()).dissemination
        added.append(len(out.provenance) - len(diss.provenance))
        payload.append(sum(len(f.cipher_value) for f in out.fragments))
        other.append(len(append.delivery()) - payload[-1])
    if len(added) != 2 or min(payload) == 0:
        raise RuntimeError(f"expected 2 destinations carrying fragments, got {payload}")
    note = (
        f"{len(diss.fragments)} fragments to each of 2 downlinks; incoming provenance "
        f"{len(diss.provenance)} B, outgoing {[len(diss.provenance) + a for a in added]} B; "
        f"Planner.document {cpu_ms:.0f} ms CPU in-process; everything but ciphertext in each "
        f"outgoing Delivery: {statistics.mean(other) / statistics.mean(payload):.3f} x payload"
    )
    return statistics.mean(added), statistics.mean(payload), note


# ---- CPU of one site's hop against a bare hop -------------------------------------------------
def _settled_cpu_s(pid: int, *, timeout: float = 30.0) -> float:
    """CPU seconds of ``pid`` once it has gone idle (at most a tick in 0.25 s)."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = cpu_seconds(pid)
        if now - last <= 1.5 / CLK_TCK:
            return now
        last = now
    return last


def _site_pid(net: LocalNetwork, site: str) -> int:
    """The pid of ``site``'s process (the one started with its config file)."""
    config = str(net.workdir / f"{site}.toml").encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if config in (entry / "cmdline").read_bytes().split(b"\0"):
                    return int(entry.name)
    raise RuntimeError(f"no process of site {site}")


def _idle_rate(pid: int, *, seconds: float) -> float:
    """CPU seconds per second ``pid`` spends with nothing to route (heartbeats, housekeeping)."""
    before, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - started)


def _wait_received(
    net: LocalNetwork, names: Sequence[str], count: int, *, timeout: float = 900
) -> None:
    deadline = time.monotonic() + timeout
    while any(len(net.received(n)) < count for n in names):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{names} did not receive {count} documents")
        time.sleep(0.05)


def _copies(source: Path, directory: Path, prefix: str, count: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{prefix}{i}.xml" for i in range(count)]
    for path in paths:
        path.write_bytes(source.read_bytes())
    return paths


class _BareHop:
    """A bare hop and its 2 sinks, as processes under ``net``'s PKI."""

    def __init__(self, net: LocalNetwork) -> None:
        self.net = net
        self.procs: list[subprocess.Popen[bytes]] = []
        self.tls = TlsFiles.from_dir(net.certs, PUBLISHER.name)
        for name in ("bare-hop", "bare-sink1", "bare-sink2"):
            party = Party(name=name, role="site", hosts=("localhost", "127.0.0.1"),
                          attributes={certs.BLOCK_FIELD: "WorkOrder"})
            issue_party(net.certs, party, now=datetime.now(UTC))
        sinks = [self._start("sink", f"bare-sink{i}") for i in (1, 2)]
        self.address = self._start(
            "hop", "bare-hop", "--db", str(net.workdir / "bare-hop.sqlite"),
            *(a for s in sinks for a in ("--next", s)),
        )
        self.pid = self.procs[-1].pid

    def _start(self, role: str, name: str, *extra: str) -> str:
        port_file = self.net.workdir / f"{name}.port"
        self.procs.append(subprocess.Popen([
            sys.executable, "-m", "benchmarks.bare_hop", role, "--certs", str(self.net.certs),
            "--name", name, "--port-file", str(port_file), *extra,
        ]))
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if time.monotonic() > deadline or self.procs[-1].poll() is not None:
                raise RuntimeError(f"bare {role} {name} did not start")
            time.sleep(0.05)
        return f"127.0.0.1:{port_file.read_text()}"

    def cpu_s(self, messages: Sequence[bytes]) -> float:
        """CPU seconds the hop spends on ``messages``."""
        before = cpu_seconds(self.pid)
        if asyncio.run(drive(self.address, self.tls, messages)) != len(messages):
            raise RuntimeError("the bare hop lost messages")
        return _settled_cpu_s(self.pid) - before

    def close(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.wait()


def _hop_cpu(
    workdir: Path, doc: Path, *, documents: int, repetitions: int, idle_s: float
) -> tuple[list[float], list[float], str]:
    """ms of CPU per MB of d2 and of the bare hop, per repetition; and a note."""
    subscribers = ("alice", "bob")
    net = LocalNetwork(
        workdir / "hop", sites=(SiteSpec(name="d1", block="ProductionProcess"),
                                SiteSpec(name="d2", block="WorkOrder", uplink="d1")),
        subscribers=tuple(SubscriberSpec(name=n, site="d2", attributes={"OU": "Cred1"})
                          for n in subscribers),
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    diss = asyncio.run(_publish_to_stand_in(net, doc, workdir / "hop-publisher"))
    to_d2 = _planner(net, "d1", {"d2": ONTOLOGY.block("WorkOrder")}).document(diss)
    message = to_d2.appends[0].delivery()  # the Delivery d1 queues for d2
    mb = len(message) / 1e6
    bare = _BareHop(net)
    site_ms, bare_ms = [], []
    try:
        with net:
            net.start_sites()
            for name in subscribers:
                net.start_subscriber(name)
                net.wait_subscribed(name)
            pid = _site_pid(net, "d2")
            net.publish(PUBLISHER.name, _copies(doc, workdir / "docs", "warm", 2), timeout=600)
            _wait_received(net, subscribers, 2)
            bare.cpu_s([message] * 2)  # warm up
            idle = _idle_rate(pid, seconds=idle_s)
            for rep in range(repetitions):
                docs = _copies(doc, workdir / "docs", f"r{rep}-", documents)
                before, seen = cpu_seconds(pid), len(net.received("alice"))
                started = time.monotonic()
                net.publish(PUBLISHER.name, docs, timeout=900)
                _wait_received(net, subscribers, seen + documents)
                spent = _settled_cpu_s(pid) - before - idle * (time.monotonic() - started)
                site_ms.append(spent * 1000 / (documents * mb))
                bare_runs = [bare.cpu_s([message] * documents) for _ in range(3)]
                bare_ms.append(statistics.median(bare_runs) * 1000 / (documents * mb))
            got = len(net.received("alice")[-1]["fragments"])  # type: ignore[arg-type]
    finally:
        bare.close()
    ratios = [s / b for s, b in zip(site_ms, bare_ms, strict=True)]
    note = (
        f"{documents} documents x {repetitions} repetitions; d2's idle CPU "
        f"({idle * 1000:.1f} ms/s over {idle_s:g} s, heartbeats and housekeeping) subtracted "
        f"over each run's wall time; d2 receives {mb:.2f} MB per "
        f"document ({len(to_d2.appends[0].delivery())} B Delivery, each subscriber accepted {got} "
        f"of {len(diss.fragments)} fragments); per repetition ms/MB site {_fmt(site_ms)}, "
        f"bare {_fmt(bare_ms)}, ratio {_fmt(ratios, 2)}"
    )
    return site_ms, bare_ms, note


def _fmt(values: Sequence[float], digits: int = 0) -> str:
    return "[" + ", ".join(f"{v:.{digits}f}" for v in values) + "]"


# ---- latency with provenance on and off -------------------------------------------------------
@contextlib.contextmanager
def _switch(on: bool) -> Iterator[None]:
    """Processes started inside have provenance on or off (the benchmark's switch)."""
    saved = os.environ.get(provenance.SWITCH)
    if on:
        os.environ.pop(provenance.SWITCH, None)
    else:
        os.environ[provenance.SWITCH] = "off"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(provenance.SWITCH, None)
        else:
            os.environ[provenance.SWITCH] = saved


def _chain(workdir: Path, on: bool) -> LocalNetwork:
    net = LocalNetwork(
        workdir, sites=(SiteSpec(name="d1", block="ProductionProcess"),
                        SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
                        SiteSpec(name="d3", block="Production", uplink="d2")),
        subscribers=(SubscriberSpec(name="alice", site="d3", attributes={"OU": "Cred1"}),),
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    with _switch(on):
        net.start_sites()
        net.start_subscriber("alice", extra=["--concept", "Production"])
    net.wait_subscribed("alice")
    return net


def _latencies(net: LocalNetwork, on: bool, docs: list[Path], rate: float) -> list[int]:
    seen = len(net.received("alice"))
    with _switch(on):
        net.publish(PUBLISHER.name, docs, timeout=900, rate=rate)
    _wait_received(net, ("alice",), seen + len(docs), timeout=120)
    return [
        int(r["received_at_ms"]) - int(r["issued_at_ms"])  # type: ignore[call-overload]
        for r in net.received("alice")[seen:]
    ]


def _latency(
    workdir: Path, *, samples: int, repetitions: int, rate: float
) -> tuple[list[float], list[float]]:
    """p50 latency (ms) with provenance on and off, per repetition."""
    sources = []
    for i in range(samples // 2):  # each side publishes them twice per repetition (ABBA)
        sources.append(workdir / "small" / f"s{i}.xml")
        sources[-1].parent.mkdir(parents=True, exist_ok=True)
        with sources[-1].open("wb") as out:
            generate(PUBLISHER.name, 5_000, out, seed=i)
    batches = iter(range(1_000_000))

    def fresh(count: int) -> list[Path]:
        """Copies of the sources under new document ids: publishing is idempotent per content
        and id, so a batch published again under the same ids would route nothing."""
        batch = next(batches)
        return [
            _copies(source, workdir / "batches", f"b{batch}-{i}-", 1)[0]
            for i, source in enumerate(sources[:count])
        ]

    nets = {True: _chain(workdir / "on", True), False: _chain(workdir / "off", False)}
    p50: dict[bool, list[float]] = {True: [], False: []}
    try:
        for on, net in nets.items():
            _latencies(net, on, fresh(3), rate)  # warm up: keys, connections
        for rep in range(repetitions):
            first = rep % 2 == 0
            measured: dict[bool, list[int]] = {True: [], False: []}
            for on in (first, not first, not first, first):
                measured[on] += _latencies(nets[on], on, fresh(len(sources)), rate)
            for on in (True, False):
                p50[on].append(statistics.median(measured[on]))
    finally:
        for net in nets.values():
            net.stop()
    return p50[True], p50[False]


# ---- the three figures ------------------------------------------------------------------------
def run(quick: bool) -> list[Result]:
    size, hint = (200_000, 1_500) if quick else (1_000_000, 10_000)
    documents, repetitions, idle_s = (3, 2, 2.0) if quick else (20, 3, 5.0)
    samples, latency_reps, rate = (20, 1, 10.0) if quick else (200, 3, 15.0)
    with tempfile.TemporaryDirectory(prefix="xdn-bench-prov-") as tmp:
        workdir = Path(tmp)
        doc = workdir / "doc.xml"
        with doc.open("wb") as out:
            generate(PUBLISHER.name, size, out, seed=2024, fragments_hint=hint)
        layout = LocalNetwork(workdir / "bytes")
        layout.workdir.mkdir(parents=True)
        layout.prepare()
        diss = asyncio.run(_publish_to_stand_in(layout, doc, workdir / "bytes-publisher"))
        added, payload, bytes_note = _bytes_per_hop(layout, diss)
        started = time.perf_counter()
        site_ms, bare_ms, cpu_note = _hop_cpu(
            workdir, doc, documents=documents, repetitions=repetitions, idle_s=idle_s
        )
        print(f"   hop CPU: {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()
        on, off = _latency(workdir, samples=samples, repetitions=latency_reps, rate=rate)
        print(f"   latency: {time.perf_counter() - started:.0f} s", flush=True)
    label = f"{size / 1e6:g} MB document"
    return [
        ratio_result(
            name="provenance_bytes_per_hop_vs_payload", value=added, unit="bytes",
            baseline="payload (ciphertext) bytes per destination", baseline_value=payload,
            goal="<= 0.02", note=f"{label}; {bytes_note}",
        ),
        ratio_result(
            name="hop_cpu_vs_bare_hop", value=statistics.median(site_ms), unit="ms CPU/MB",
            baseline="bare grpc.aio hop, mutual TLS, one SQLite write, 2 forwards (ms CPU/MB)",
            baseline_value=statistics.median(bare_ms), goal="<= 2",
            note=f"{label}; medians; {cpu_note}",
        ),
        ratio_result(
            name="provenance_latency_overhead", value=statistics.median(on), unit="ms",
            baseline="p50 latency with provenance off (XDN_BENCH_PROVENANCE=off)",
            baseline_value=statistics.median(off), goal="<= 1.2",
            note=f"~5 KB documents at {rate:g}/s through d1 -> d2 -> d3 -> subscriber, "
            f"{samples} per side per repetition (on/off/off/on); p50 per repetition: on "
            f"{_fmt(on)} ms, off {_fmt(off)} ms; median of the repetitions",
        ),
    ]
