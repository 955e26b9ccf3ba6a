"""One site, thousands of subscribers (issue #15): fan-out, joins and memory.

A real root site process (d1, from :mod:`deploy.network`, durable queues, provenance on) serves
N live mutual-TLS subscriber streams, each with its own certificate and signed lease, in three
credential profiles (Cred1; Contractors; Cred1 asking only for Production). The streams are
light sessions (:mod:`benchmarks.fanout_clients`, several processes) that acknowledge
every delivery and do nothing else, so that the site is what is measured. The real key service
(:class:`publisher.client.Publisher`, in this process) publishes ~10 KB documents.

* ``fanout_10k_vs_bare`` — documents delivered per second to the N streams: N·M over the time
  from the start of publishing M documents to the moment the last stream had the last of them,
  ÷ the same for a bare grpc.aio server over mutual TLS (:mod:`benchmarks.bare_fanout`)
  streaming to the same N sessions, in the same processes, the very bytes a subscriber of each
  profile received from the site for those M documents. Median of the repetitions.
* ``join_cost_10k_vs_10`` — seconds from a new subscriber's first request to its first document
  (the site replays its retained documents to a new subscriber that asks for them) when the
  site serves N subscribers ÷ the same when it serves 10: median of several joins each, all
  from the process of the 10 (so that only the site's load differs, not the joiner's).
* ``non_readers_10k_honest_delivery_vs_readers`` — seconds for M documents to reach the 10
  subscribers of the join baseline (still connected) once the N never read again (streams
  open, heartbeats on, no read, no acknowledgement) ÷ the same while the N read and
  acknowledge (the site routes to as many queues either way); the note says how much the
  site's RSS grew while they did not read.
* ``site_rss_mb_10k_subscribers`` — the site's peak RSS (VmHWM) over the run, once it has
  routed 100 documents to the N subscribers: those of the fan-out streamed to them, the rest
  queued for them while they are away (registered, their streams moved to the bare server);
  the baseline is the bare server's peak RSS streaming to the same N streams.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import Result, ratio_result
from benchmarks.key_service import PUBLISHER, key_service
from benchmarks.procstat import memory_mb
from deploy.docgen import generate
from deploy.network import LocalNetwork, SiteSpec
from deploy.pki import Party, issue_party
from publisher.client import Publisher
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

PROFILES: tuple[tuple[dict[str, str], tuple[str, ...]], ...] = (
    ({"OU": "Cred1"}, ()),
    ({"OU": "Contractors"}, ()),
    ({"OU": "Cred1"}, ("Production",)),
)
PER_PROCESS = 2_500  # light sessions per client process (one descriptor each, and SQLite-free)
JOINS = 9
TOTAL_DOCUMENTS = 100


def _issue(directory: Path, names: list[tuple[str, int]]) -> None:
    now = datetime.now(UTC)
    for name, profile in names:
        issue_party(directory, Party(
            name=name, role="subscriber", attributes=PROFILES[profile][0],
        ), now=now)


def _issue_all(directory: Path, names: list[tuple[str, int]]) -> None:
    """Issue the certificates on every core (P-384 key generation dominates)."""
    cores = os.cpu_count() or 1
    with ProcessPoolExecutor(cores) as pool:
        list(pool.map(_issue, [directory] * cores, [names[i::cores] for i in range(cores)]))


class _Process:
    """One process driven by a line on stdin and answering a JSON line on stdout."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls, *args: str) -> _Process:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", *args, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, env={**os.environ, "GRPC_VERBOSITY": "ERROR"},
        )
        return cls(proc)

    async def read(self, timeout: float = 1_800) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        if not line:
            raise RuntimeError(f"{self.proc.pid} exited with {await self.proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    async def ask(self, command: str, timeout: float = 1_800) -> dict[str, Any]:
        self.send(command)
        return await self.read(timeout)

    def send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")

    async def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError, BrokenPipeError, ConnectionResetError):
            self.send("quit")
        try:
            await asyncio.wait_for(self.proc.wait(), 60)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def _ask_all(processes: list[_Process], command: str) -> list[dict[str, Any]]:
    return await asyncio.gather(*(p.ask(command) for p in processes))


class _Bench:
    def __init__(self, workdir: Path, many: int, batch: int, repetitions: int) -> None:
        self.workdir = workdir
        self.many, self.batch, self.repetitions = many, batch, repetitions
        self.net = LocalNetwork(
            workdir / "net", sites=(SiteSpec(name="d1", block="ProductionProcess"),),
            subscribers=(),
        )
        self.docs = self._documents(2 + TOTAL_DOCUMENTS)
        self.published = 0
        self.clients: list[_Process] = []
        self.few: _Process | None = None
        self.publisher: Publisher | None = None

    def _documents(self, count: int) -> list[Path]:
        docs = []
        for i in range(count):
            docs.append(self.workdir / "docs" / f"f{i}.xml")
            docs[-1].parent.mkdir(parents=True, exist_ok=True)
            with docs[-1].open("wb") as out:
                generate(PUBLISHER.name, 10_000, out, seed=500 + i)
        return docs

    def _spec(self, name: str, sessions: list[tuple[str, int]], spare: list[tuple[str, int]],
              capture: list[str]) -> Path:
        path = self.workdir / f"{name}.json"
        path.write_text(json.dumps({
            "certs": str(self.net.certs), "sessions": sessions, "spare": spare,
            "capture": capture,
            "concepts": {str(i): list(p[1]) for i, p in enumerate(PROFILES)},
        }))
        return path

    async def prepare(self) -> None:
        self.net.workdir.mkdir(parents=True)
        self.net.prepare()
        few = [(f"few{i:02d}", i % 3) for i in range(10)]
        spare_few = [(f"jf{i:02d}", i % 3) for i in range(JOINS)]
        many = [(f"s{i:05d}", i % 3) for i in range(self.many)]
        spare_many = [(f"jm{i:02d}", i % 3) for i in range(JOINS)]
        started = time.perf_counter()
        await asyncio.to_thread(
            _issue_all, self.net.certs, few + spare_few + many + spare_many
        )
        print(f"   fanout: {len(few) + len(many) + 2 * JOINS} certificates in "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        self.net.start_sites()
        self.few = await _Process.start(
            "benchmarks.fanout_clients",
            str(self._spec("few", few, spare_few + spare_many, [])),
        )
        processes = max(1, -(-self.many // PER_PROCESS))
        for k in range(processes):
            part = many[k::processes]
            capture = [name for name, _ in part[:3]] if k == 0 else []
            self.clients.append(await _Process.start(
                "benchmarks.fanout_clients", str(self._spec(f"many{k}", part, [], capture))
            ))
        ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
        self.publisher = key_service(self.net, ontology, self.net.address("d1"))

    async def _publish(self, count: int) -> None:
        assert self.publisher is not None
        for doc in self.docs[self.published:self.published + count]:
            await self.publisher.publish(doc)
        self.published += count

    async def _join(self, clients: _Process, prefix: str) -> list[float]:
        times = []
        for i in range(JOINS):
            answer = await clients.ask(f"join {prefix}{i:02d} {self.net.address('d1')}")
            times.append(answer["seconds"])
        return times

    async def joins_at_ten(self) -> list[float]:
        """The 10 subscribers connect and get two documents; then the joins, one by one."""
        assert self.few is not None and self.publisher is not None
        await self.few.ask(f"connect {self.net.address('d1')}")
        await self.publisher.wait_for_members([f"few{i:02d}" for i in range(10)], timeout=600)
        await self._publish(2)
        await self.few.ask("expect 2")
        return await self._join(self.few, "jf")

    async def fanout(self) -> tuple[list[float], list[float], list[float]]:
        """Connect the N, enrol them; time M documents per repetition (and how long the 10
        subscribers of :meth:`joins_at_ten`, still connected, take to get them); then joins
        at N."""
        assert self.publisher is not None and self.few is not None
        address = self.net.address("d1")
        started = time.perf_counter()
        await _ask_all(self.clients, f"connect {address}")
        print(f"   fanout: {self.many} subscribed in {time.perf_counter() - started:.0f} s",
              flush=True)
        names = [f"s{i:05d}" for i in range(self.many)]
        await self.publisher.wait_for_members(names, timeout=1_800)
        started = time.perf_counter()
        await self._publish(1)  # enrols everyone: not timed
        await _ask_all(self.clients, "expect 3")  # two retained documents, then this one
        print(f"   fanout: enrolled in {time.perf_counter() - started:.0f} s", flush=True)
        rates, honest = [], []
        expected = 3
        for rep in range(self.repetitions):
            if rep == 0:
                await _ask_all(self.clients, "capture")
            began = time.monotonic()
            await self._publish(self.batch)
            expected += self.batch
            answers = await _ask_all(self.clients, f"expect {expected}")
            last = max(a["last_at"] for a in answers)
            rates.append(self.many * self.batch / (last - began))
            honest.append((await self.few.ask(f"expect {self.published}"))["last_at"] - began)
            if rep == 0:
                await self.clients[0].ask(f"dump {self.workdir / 'captured'}")
        joins = await self._join(self.few, "jm")  # (the same light process as at 10)
        return rates, joins, honest

    async def stalled(self) -> tuple[list[float], list[float], float]:
        """The N stop reading (streams open, heartbeats on): how long the 10 honest ones take
        to get M documents, per repetition; how much the site's RSS had grown after each
        repetition (MB, from before they stopped: does it level off?); and the site's peak RSS
        before (MB)."""
        assert self.few is not None
        pid = self.net.site_pid("d1")
        peak = memory_mb(pid, "VmHWM")
        await _ask_all(self.clients, "stall")
        before = memory_mb(pid)
        times, growth = [], []
        for _ in range(self.repetitions):
            began = time.monotonic()
            await self._publish(self.batch)
            times.append((await self.few.ask(f"expect {self.published}"))["last_at"] - began)
            growth.append(memory_mb(pid) - before)
        return times, growth, peak

    async def rest(self) -> float:
        """Route the rest of the 100 documents to the N, now registered but away (their
        deliveries queue durably); the site's peak RSS over the whole run (MB)."""
        await self._publish(TOTAL_DOCUMENTS - self.published)
        return memory_mb(self.net.site_pid("d1"), "VmHWM")

    async def bare(self) -> tuple[list[float], float]:
        """The same N sessions against the bare server, the captured bytes, M per repetition."""
        await _ask_all(self.clients, "close")
        profiles = self.workdir / "profiles.json"
        profiles.write_text(json.dumps({f"s{i:05d}": i % 3 for i in range(self.many)}))
        server = await _Process.start(
            "benchmarks.bare_fanout", str(self.net.certs), "d1",
            str(self.workdir / "captured"), str(profiles),
        )
        try:
            port = (await server.read())["port"]
            await _ask_all(self.clients, f"connect localhost:{port}")
            rates = []
            for rep in range(self.repetitions):
                server.send("go")
                connected = (await server.read())["connected"]
                if connected != self.many:
                    raise RuntimeError(f"bare server streams to {connected}, not {self.many}")
                began = (await server.read())["started_at"]
                answers = await _ask_all(self.clients, f"expect {self.batch * (rep + 1)}")
                last = max(a["last_at"] for a in answers)
                rates.append(self.many * self.batch / (last - began))
            return rates, memory_mb(server.proc.pid, "VmHWM")
        finally:
            await _ask_all(self.clients, "close")
            await server.stop()

    async def stop(self) -> None:
        for process in [*self.clients, *([self.few] if self.few else [])]:
            await process.stop()
        if self.publisher is not None:
            await self.publisher.close()
        self.net.stop()


async def _measure(workdir: Path, many: int, batch: int, repetitions: int) -> dict[str, Any]:
    bench = _Bench(workdir, many, batch, repetitions)
    try:
        await bench.prepare()
        few_joins = await bench.joins_at_ten()
        rates, many_joins, honest = await bench.fanout()
        print(f"   fanout: honest delivery while the {many} read: {_spread(honest, '{:.2f}')} s",
              flush=True)
        stalled, stalled_growth, peak_reading = await bench.stalled()
        bare_rates, bare_rss = await bench.bare()
        site_rss = await bench.rest()
        return {
            "rates": rates, "bare_rates": bare_rates, "few_joins": few_joins,
            "many_joins": many_joins, "site_rss": site_rss, "bare_rss": bare_rss,
            "honest": honest, "stalled": stalled, "stalled_growth": stalled_growth,
            "peak_reading": peak_reading,
        }
    finally:
        await bench.stop()


def _spread(values: list[float], fmt: str = "{:.0f}") -> str:
    return ", ".join(fmt.format(v) for v in values)


def run(quick: bool) -> list[Result]:
    many, batch, repetitions = (300, 3, 3) if quick else (10_000, 5, 3)
    with tempfile.TemporaryDirectory(prefix="xdn-bench-fanout-") as tmp:
        started = time.perf_counter()
        m = asyncio.run(_measure(Path(tmp), many, batch, repetitions))
        print(f"   fanout: {time.perf_counter() - started:.0f} s", flush=True)
    label = f"{many // 1000}k" if many >= 1000 else str(many)
    return [
        ratio_result(
            name=f"fanout_{label}_vs_bare", value=statistics.median(m["rates"]),
            unit="documents delivered/s",
            baseline="bare grpc.aio server streaming the same bytes to the same streams",
            baseline_value=statistics.median(m["bare_rates"]), goal=">= 0.5",
            note=f"{many} mutual-TLS subscriber streams of 3 credential profiles, ~10 KB "
            f"documents, {batch} per repetition; site per repetition: "
            f"{_spread(m['rates'])}/s; bare: {_spread(m['bare_rates'])}/s",
        ),
        ratio_result(
            name=f"join_cost_{label}_vs_10", value=statistics.median(m["many_joins"]),
            unit="s", baseline="the same at 10 subscribers",
            baseline_value=statistics.median(m["few_joins"]), goal="<= 2",
            note=f"Subscribe to first (retained) document, {JOINS} joins each; at {many}: "
            f"{_spread(m['many_joins'], '{:.3f}')} s; at 10: "
            f"{_spread(m['few_joins'], '{:.3f}')} s",
        ),
        ratio_result(
            name=f"non_readers_{label}_honest_delivery_vs_readers",
            value=statistics.median(m["stalled"]), unit="s",
            baseline=f"the same while the {many} read",
            baseline_value=statistics.median(m["honest"]), goal="<= 1.1",
            note=f"seconds for {batch} documents to reach 10 honest subscribers while {many} "
            f"others never read (streams open, heartbeats on): {_spread(m['stalled'], '{:.2f}')}"
            f" s; while they read: {_spread(m['honest'], '{:.2f}')} s; site RSS grew "
            f"{_spread(m['stalled_growth'])} MB after each {batch} documents while they did "
            "not read",
        ),
        ratio_result(
            name=f"site_rss_mb_{label}_subscribers", value=m["site_rss"], unit="MB",
            baseline="bare streaming server's peak RSS, same streams",
            baseline_value=m["bare_rss"], goal="value <= 1000 MB",
            note=f"site peak RSS (VmHWM) after {TOTAL_DOCUMENTS} documents routed to {many} "
            f"subscribers, non-readers included ({m['peak_reading']:.0f} MB before they "
            "stopped reading)",
        ),
    ]
