"""The soak of issue #18: a network run for a long time at half its maximum rate, subscribers
joining and leaving, every process's memory and descriptors and every site's queue sampled.

Theory of operation
-------------------
:func:`run_soak` starts a real local network (:class:`deploy.network.LocalNetwork`: three
sites, the two sample publishers with their key services, a dozen subscribers), then:

1. *Probe* (unless a rate is given): both publishers publish forty small generated documents
   as fast as they can, together; each one's rate is read from the times its ``published``
   lines appear. The soak publishes at half that rate. The queues are let drain.
2. *Soak*: each publisher is one long ``xdn publish --rate R --again`` process of R * duration
   documents cycling through a pool (every publication a new version of one of a dozen).
   Meanwhile the *churners* (a third of the subscribers) take turns to leave (``xdn
   unsubscribe``) and join again (``--rejoin``) on a seeded schedule; every few seconds each
   running process's RSS and open descriptors (``/proc/PID``) and each site's
   ``xdn_queued_deliveries`` (its Prometheus endpoint) are sampled. A publisher that exits
   before the end is started again with what it had left, and counted.
3. *End*: the publishers finish their lists (a publisher stopped mid-document would leave a
   gap in its signed sequence at every subscriber); the queues are given a while to drain
   (the time it took is in the summary); :mod:`soak_metrics` turns the samples into the
   summary, :mod:`soak_report` into the page.

Run it with ``make soak`` (an hour; ``SOAK_SECONDS=600 make soak`` for ten minutes) or
``python tests/soak/soak_driver.py --duration 600``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from soak_metrics import (
    RSS_GOAL_PCT,
    ProcessSample,
    QueueSample,
    process_growth,
    queue_bounds,
)
from soak_report import write_report

from deploy.docgen import generate
from deploy.network import DEFAULT_PUBLISHERS, DEFAULT_SITES, LocalNetwork, SubscriberSpec
from xdn.errors import UsageError

__all__ = ["SoakConfig", "SoakError", "main", "run_soak"]

# Who subscribes where, cycled over the subscribers: a credential and the site it asks first.
# (d3's block, ResourceDetails, holds no sample credential's grants: it relays, serves nobody.)
_PROFILES = (("Cred1", "d2"), ("Cred2", "d1"), ("Contractors", "d2"), ("Cred1", "d1"))
_POOL = 12  # distinct documents per publisher; the soak publishes new versions of them
_DOCUMENT_BYTES = 8_000


class SoakError(Exception):
    """The soak could not run (a process failed to start, the probe published too little)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SoakConfig:
    duration_s: float
    out: Path
    rate: float | None = None  # documents per second per publisher (None: half the probed max)
    warmup_s: float | None = None  # default: a quarter of the run, at most 5 minutes
    interval_s: float | None = None  # sampling period; default: ~400 samples per run, ≥ 2 s
    churn_every_s: float | None = None  # a join or a leave this often; default: ~40 per run
    subscribers: int = 12
    churners: int = 4
    probe_documents: int = 40  # each publisher's, published flat out
    drain_s: float = 120.0
    seed: int = 18
    workdir: Path | None = None  # kept when given; a temporary directory otherwise
    tracemalloc: Path | None = None  # every process reports its growth by allocation site here

    def __post_init__(self) -> None:
        if self.duration_s <= 0:
            raise ValueError("the soak's duration must be positive")
        if self.rate is not None and self.rate <= 0:
            raise ValueError("the rate must be positive")
        if not 0 < self.churners < self.subscribers:
            raise ValueError("churners must be some, not all, of the subscribers")

    @property
    def warmup_rule(self) -> str:
        if self.warmup_s is not None:
            return "given (--warmup)"
        return (
            "a quarter of the run, at most 5 minutes: start-up, registrations, the first churn"
            " and the statement memos filling to their bounds"
        )

    @property
    def warmup(self) -> float:
        return self.warmup_s if self.warmup_s is not None else min(self.duration_s / 4, 300.0)

    @property
    def interval(self) -> float:
        return self.interval_s or max(2.0, self.duration_s / 400)

    @property
    def churn_every(self) -> float:
        return self.churn_every_s or max(8.0, self.duration_s / 40)


@dataclass(slots=True)
class _PublisherRun:
    """One publisher's ``xdn publish`` of ``total`` documents (cycling through ``pool``) at
    ``rate``, and the times its documents were acknowledged.

    It is left to finish its list: a publisher stopped while a document is in flight leaves a
    hole in its signed sequence that every subscriber notes as a gap. A run that fails is
    started again with the documents it has left.
    """

    net: LocalNetwork
    name: str
    pool: list[str]
    total: int
    rate: float | None
    acknowledged: list[float] = field(default_factory=list)
    restarts: int = 0
    stopped: bool = False  # it had to be stopped (its last document may be a gap)
    proc: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    @property
    def remaining(self) -> int:
        return self.total - len(self.acknowledged)

    def start(self) -> None:
        done = len(self.acknowledged)
        documents = [Path(self.pool[(done + i) % len(self.pool)]) for i in range(self.remaining)]
        command = self.net.publish_command(self.name, documents, rate=self.rate, extra=("--again",))
        cwd = self.net.workdir
        errors = open(cwd / f"publisher-{self.name}.err", "a")  # noqa: SIM115 (the child's)
        self.proc = subprocess.Popen(
            command, cwd=cwd, stdout=subprocess.PIPE, stderr=errors, text=True
        )
        errors.close()
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True)
        self._reader.start()

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith(("published ", "already published ")):
                self.acknowledged.append(time.monotonic())

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def failed(self) -> bool:
        """It ended with an error before publishing everything."""
        return self.proc is not None and self.proc.poll() not in (None, 0) and self.remaining > 0

    def finish(self, timeout: float) -> None:
        """Wait for it to publish what it has left (restarting it if it fails); stop it at
        the deadline."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc is not None:
            try:
                self.proc.wait(max(0.1, min(5.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                continue
            self._join()
            if not self.failed():
                return
            self.restarts += 1
            self.start()
        self.stop()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stopped = True
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._join()

    def _join(self) -> None:
        if self._reader is not None:
            self._reader.join(10)

    def error_tail(self) -> str:
        path = self.net.workdir / f"publisher-{self.name}.err"
        return path.read_text(errors="replace")[-2000:]


def _subscriber_specs(count: int) -> list[SubscriberSpec]:
    return [
        SubscriberSpec(name=f"s{i + 1:02d}", site=site, attributes={"OU": ou})
        for i, (ou, site) in zip(range(count), itertools.cycle(_PROFILES), strict=False)
    ]


def _document_pool(net: LocalNetwork, publisher: str) -> list[str]:
    """``_POOL`` small generated documents of ``publisher``'s schema (paths relative to the
    network's directory, to keep a long command line short)."""
    folder = net.workdir / "docs"
    folder.mkdir(exist_ok=True)
    short = "".join(word[0] for word in publisher.split("-"))
    paths = []
    for seed in range(_POOL):
        relative = f"docs/{short}{seed:02d}.xml"
        with open(net.workdir / relative, "wb") as out:
            generate(publisher, _DOCUMENT_BYTES, out, seed=seed)
        paths.append(relative)
    return paths


def _megabytes(folder: Path) -> float:
    """Bytes under ``folder``, in MB."""
    sizes = (entry.stat().st_size for entry in folder.rglob("*") if entry.is_file())
    return round(sum(sizes) / 1e6, 1) if folder.exists() else 0.0


def _process_sample(t: float, name: str, role: str, pid: int) -> ProcessSample | None:
    """RSS and open descriptors of ``pid`` from ``/proc`` (None: it has just exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            rss_mb = int(line.split()[1]) / 1024
            return ProcessSample(t=t, name=name, role=role, pid=pid, rss_mb=rss_mb, fds=fds)
    return None  # a zombie has no memory lines


class _Soak:
    """The network and what the run has seen so far."""

    def __init__(self, config: SoakConfig, workdir: Path) -> None:
        self.config = config
        self.specs = _subscriber_specs(config.subscribers)
        self.net = LocalNetwork(workdir, sites=DEFAULT_SITES, subscribers=self.specs)
        self.churners = [s.name for s in self.specs[-config.churners :]]
        self.rng = random.Random(config.seed)
        self.left: set[str] = set()  # churners that left (they rejoin with --rejoin)
        self.joins = 0
        self.leaves = 0
        self.leave_failures: list[str] = []
        self.processes: list[ProcessSample] = []
        self.queues: list[QueueSample] = []
        self.published: dict[str, list[tuple[float, int]]] = {}
        self.every_run: list[_PublisherRun] = []
        self.start = time.monotonic()

    # ---- set-up --------------------------------------------------------------------------
    def start_network(self) -> None:
        net = self.net
        net.workdir.mkdir(parents=True, exist_ok=True)
        net.prepare()
        net.start_sites(timeout=120)
        # Half the churners start inside, half outside the network.
        outside = set(self.churners[: len(self.churners) // 2])
        for spec in self.specs:
            if spec.name not in outside:
                net.start_subscriber(spec.name)
        for spec in self.specs:
            if spec.name not in outside:
                self.wait_subscribed(spec.name)

    def wait_subscribed(self, name: str) -> None:
        """Wait for ``name``'s registration; its later calls go to the site serving it."""
        served_by = self.net.wait_subscribed(name, timeout=180)["served_by"]
        spec = self.net.subscribers[name]
        if isinstance(served_by, str) and served_by != spec.site:  # it was sent elsewhere
            self.net.subscribers[name] = replace(spec, site=served_by)

    def publisher_runs(
        self, documents: dict[str, int], rate: dict[str, float] | None
    ) -> list[_PublisherRun]:
        runs = [
            _PublisherRun(
                net=self.net,
                name=spec.name,
                pool=_document_pool(self.net, spec.name),
                total=documents[spec.name],
                rate=None if rate is None else rate[spec.name],
            )
            for spec in DEFAULT_PUBLISHERS
        ]
        self.every_run += runs
        return runs

    def probe(self) -> dict[str, float]:
        """Each publisher's rate (documents/s) publishing flat out, both at once."""
        runs = self.publisher_runs(
            {spec.name: self.config.probe_documents for spec in DEFAULT_PUBLISHERS}, None
        )
        for run in runs:
            run.start()
        for run in runs:
            run.finish(timeout=600)
        rates = {}
        for run in runs:
            times = run.acknowledged
            if len(times) < 3 or times[-1] <= times[0]:
                raise SoakError(
                    f"the probe published {len(times)} documents of {run.name}: {run.error_tail()}"
                )
            rates[run.name] = (len(times) - 1) / (times[-1] - times[0])
        return rates

    # ---- sampling ------------------------------------------------------------------------
    def now(self) -> float:
        return time.monotonic() - self.start

    def sample(self, runs: Sequence[_PublisherRun]) -> None:
        t = self.now()
        pids = [(site, "site", self.net.site_pid(site)) for site in self.net.sites]
        pids += [
            (name, "subscriber", self.net.subscriber_pid(name))
            for name in self.net.subscribers
            if self.net.subscriber_running(name)
        ]
        pids += [
            (f"publisher:{r.name}", "publisher", r.proc.pid)
            for r in runs
            if r.proc is not None and r.running()
        ]
        for name, role, pid in pids:
            if (sample := _process_sample(t, name, role, pid)) is not None:
                self.processes.append(sample)
        for site in self.net.sites:
            try:
                depth = int(self.net.metric(site, "xdn_queued_deliveries"))
            except OSError:  # a scrape refused or timed out on a loaded machine: skip it
                continue
            self.queues.append(QueueSample(t=t, site=site, depth=depth))
        for run in runs:
            self.published.setdefault(run.name, []).append((t, len(run.acknowledged)))

    def queued(self) -> int | None:
        try:
            return sum(int(self.net.metric(s, "xdn_queued_deliveries")) for s in self.net.sites)
        except OSError:
            return None

    def drain(self, timeout: float) -> float | None:
        """Seconds until every site's queue is empty (None: not within ``timeout``)."""
        began = time.monotonic()
        while time.monotonic() - began < timeout:
            if self.queued() == 0:
                return time.monotonic() - began
            time.sleep(1.0)
        return None

    # ---- churn ---------------------------------------------------------------------------
    def churn(self) -> None:
        """One churner leaves or joins (whichever it is not)."""
        name = self.rng.choice(self.churners)
        net = self.net
        if net.subscriber_running(name):
            try:
                self.wait_subscribed(name)  # a leave before registering is no leave
                done = net.unsubscribe(name, timeout=120)
                failure = "" if done.returncode == 0 else done.stdout + done.stderr
            except (UsageError, subprocess.TimeoutExpired) as error:
                failure = str(error)
            if failure:
                self.leave_failures.append(f"{name}: {failure.strip()[-300:]}")
            else:
                self.leaves += 1
            net.subscriber_exit(name, timeout=30)
            net.stop_subscriber(name)
            self.left.add(name)
        else:
            (net.inbox(name) / "subscription.json").unlink(missing_ok=True)
            net.start_subscriber(name, extra=("--rejoin",) if name in self.left else ())
            self.joins += 1

    # ---- the run -------------------------------------------------------------------------
    def soak(self, rate: dict[str, float]) -> list[_PublisherRun]:
        """Publish for the soak's duration, sampling and churning meanwhile; then let the
        publishers finish their lists."""
        config = self.config
        documents = {name: max(1, round(r * config.duration_s)) for name, r in rate.items()}
        runs = self.publisher_runs(documents, rate)
        self.start = time.monotonic()
        for run in runs:
            run.start()
        next_sample, next_churn = 0.0, config.churn_every
        while (t := self.now()) < config.duration_s:
            if t >= next_sample:
                self.sample(runs)
                next_sample += config.interval
            if t >= next_churn:
                self.churn()
                next_churn += config.churn_every
            for run in runs:
                if run.failed():  # go on with what it has left
                    run.restarts += 1
                    run.start()
            time.sleep(max(0.0, min(next_sample, next_churn, config.duration_s) - self.now()))
        self.sample(runs)
        for run in runs:  # (behind their pace when the machine is slower than at the probe)
            run.finish(timeout=max(120.0, config.duration_s / 4))
        return runs

    def received(self) -> tuple[int, dict[str, int]]:
        """Records accepted over all subscribers, and the gaps each noted (those that noted
        any): documents of a publisher's signed sequence it was not given."""
        total = sum(len(self.net.received(name)) for name in self.net.subscribers)
        gaps = {}
        for name in self.net.subscribers:
            path = self.net.inbox(name) / "gaps.jsonl"
            if path.exists():
                gaps[name] = len(path.read_text().splitlines())
        return total, gaps


def _summary(
    soak: _Soak,
    runs: Sequence[_PublisherRun],
    *,
    max_rate: dict[str, float] | None,
    rate: dict[str, float],
    drained_s: float | None,
    load: tuple[float, float],
) -> dict[str, object]:
    config = soak.config
    end = config.duration_s
    grown, partial = process_growth(soak.processes, warmup_s=config.warmup, end_s=end)
    bounds = queue_bounds(soak.queues, warmup_s=config.warmup, end_s=end)
    received, gaps = soak.received()
    rss_growth = max((g.rss_pct for g in grown), default=math.nan)
    return {
        "soak_seconds": config.duration_s,
        "warmup_s": config.warmup,
        "warmup_rule": config.warmup_rule,
        "sample_interval_s": config.interval,
        "sites": len(soak.net.sites),
        "publishers": len(runs),
        "subscribers": config.subscribers,
        "churners": config.churners,
        "max_rate_docs_per_s": max_rate and {k: round(v, 2) for k, v in max_rate.items()},
        "rate_docs_per_s": {k: round(v, 2) for k, v in rate.items()},
        "document_bytes": _DOCUMENT_BYTES,
        "documents_published": {r.name: len(r.acknowledged) for r in runs},
        "publisher_restarts": sum(r.restarts for r in runs),
        "publishers_stopped": [r.name for r in runs if r.stopped],
        "joins": soak.joins,
        "leaves": soak.leaves,
        "leave_failures": soak.leave_failures,
        "deliveries_received": received,
        "gaps": gaps,
        "gaps_at_steady_subscribers": sum(
            n for name, n in gaps.items() if name not in soak.churners
        ),
        "soak_rss_growth_pct": round(rss_growth, 2),
        "rss_goal_met": rss_growth < RSS_GOAL_PCT,
        "rss_growth_pct": {g.name: round(g.rss_pct, 2) for g in grown},
        "rss_end_mb": {g.name: round(g.rss_end_mb, 1) for g in grown},
        "soak_rss_late_slope_mb_per_h": round(
            max((g.rss_late_slope_mb_per_h for g in grown), default=0.0), 1
        ),
        "rss_late_slope_mb_per_h": {g.name: round(g.rss_late_slope_mb_per_h, 1) for g in grown},
        "soak_fd_growth": max((g.fd_growth for g in grown), default=0),
        "fd_growth": {g.name: g.fd_growth for g in grown},
        "incarnations_not_judged": partial,
        "soak_queue_depth_max": max((b.peak for b in bounds), default=0),
        "queues": {b.site: {**asdict(b), "bounded": b.bounded} for b in bounds},
        "queues_bounded": all(b.bounded for b in bounds),
        "queues_drained_s": None if drained_s is None else round(drained_s, 1),
        # What the run left on disk: the sites' stores, provenance logs, subscribers' output.
        "disk_mb": {
            part: _megabytes(soak.net.workdir / part) for part in ("state", "logs", "inbox")
        },
        "load_average_1m": {"start": round(load[0], 2), "end": round(load[1], 2)},
        "cpus": os.cpu_count(),
    }


def _trace_allocations(folder: Path, *, warmup: float) -> None:
    """Make every process started from now on trace its allocations and report to ``folder``
    what grew after ``warmup`` (``tracemalloc_hook/sitecustomize.py``; test-only)."""
    hook = Path(__file__).resolve().parent / "tracemalloc_hook"
    path = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = f"{hook}{os.pathsep}{path}" if path else str(hook)
    os.environ["XDN_SOAK_TRACEMALLOC"] = str(folder)
    os.environ["XDN_SOAK_TRACEMALLOC_WARMUP"] = str(warmup)


def run_soak(config: SoakConfig) -> dict[str, object]:
    """Run the soak; write ``summary.json``, ``samples.json`` and ``soak.html`` to
    ``config.out``; return the summary.

    Raises:
        SoakError: the network or the probe failed.
    """
    config.out.mkdir(parents=True, exist_ok=True)
    scratch = None if config.workdir else Path(tempfile.mkdtemp(prefix="xdn-soak-"))
    soak = _Soak(config, config.workdir or Path(str(scratch)) / "net")
    load_start = os.getloadavg()[0]
    if config.tracemalloc is not None:
        _trace_allocations(config.tracemalloc.resolve(), warmup=config.warmup)
    try:
        try:
            soak.start_network()
        except UsageError as error:
            raise SoakError(f"the network did not start: {error}") from error
        max_rate = None
        if config.rate is None:
            max_rate = soak.probe()
            soak.drain(config.drain_s)
            rate = {name: r / 2 for name, r in max_rate.items()}
        else:
            rate = {spec.name: config.rate for spec in DEFAULT_PUBLISHERS}
        runs = soak.soak(rate)
        drained_s = soak.drain(config.drain_s)
        summary = _summary(
            soak,
            runs,
            max_rate=max_rate,
            rate=rate,
            drained_s=drained_s,
            load=(load_start, os.getloadavg()[0]),
        )
    finally:
        for run in soak.every_run:  # (stopped only if something failed on the way)
            run.stop()
        soak.net.stop()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    (config.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (config.out / "samples.json").write_text(
        json.dumps(
            {
                "processes": [asdict(s) for s in soak.processes],
                "queues": [asdict(s) for s in soak.queues],
                "published": soak.published,
            }
        )
    )
    write_report(
        config.out / "soak.html",
        summary=summary,
        processes=soak.processes,
        queues=soak.queues,
        published=soak.published,
    )
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument(
        "--duration",
        type=float,
        default=float(os.environ.get("SOAK_SECONDS", "3600")),
        help="seconds of soak after the probe (default $SOAK_SECONDS or 3600)",
    )
    parser.add_argument(
        "--rate", type=float, help="documents/s per publisher (default: half the probed max)"
    )
    parser.add_argument("--warmup", type=float, help="seconds not judged (default ¼, ≤ 300)")
    parser.add_argument("--interval", type=float, help="seconds between samples")
    parser.add_argument("--churn-every", type=float, help="seconds between joins/leaves")
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--out", type=Path, default=Path("build/soak"))
    parser.add_argument(
        "--workdir", type=Path, help="keep the network's files here (default: a temporary one)"
    )
    parser.add_argument(
        "--tracemalloc",
        type=Path,
        help="every process writes its growth by allocation site here (slow: for diagnosis)",
    )
    args = parser.parse_args(argv)
    config = SoakConfig(
        duration_s=args.duration,
        out=args.out,
        rate=args.rate,
        warmup_s=args.warmup,
        interval_s=args.interval,
        churn_every_s=args.churn_every,
        seed=args.seed,
        workdir=args.workdir,
        tracemalloc=args.tracemalloc,
    )
    try:
        summary = run_soak(config)
    except SoakError as error:
        print(f"soak: error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(summary, indent=2))
    print(f"report: {args.out / 'soak.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
