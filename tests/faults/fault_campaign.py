"""The fault campaign (issue #18): a network publishing a stream while a seeded schedule kills,
pauses and cuts off its parts; at the end nothing lost, nothing duplicated, nothing reordered.

Theory of operation
-------------------
1. Lay out a network (:class:`fault_hosts.HostedNetwork`: each site in its own network
   namespace), start the sites and the subscribers, wait until every subscriber registered.
2. Start one :class:`fault_lanes.Lane` per publisher, publishing its documents (some are new
   versions of earlier ones) at a steady rate, and the :class:`fault_executor.Executor` on a
   :func:`fault_schedule.make_schedule` schedule over the publishing window.
3. When the schedule is done (everything restarted, continued, restored) and the lanes have
   published everything, wait until every subscriber holds every version it is due (computed
   by :mod:`fault_checks` from the policies, never from the sites), up to a deadline.
4. Stop everything, look for processes left behind, run ``xdn audit`` on the logs, and write
   the summary (printed, and as JSON).

``python tests/faults/fault_campaign.py --help`` runs one from the command line; ``make
faults`` runs the full one through pytest (tests/faults/test_fault_campaign.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script: its siblings

from fault_checks import InboxTail, Verdict, due, fragments_of, judge
from fault_executor import Executor, Recoveries
from fault_hosts import HostedNetwork, Hosts
from fault_lanes import KEY_SERVICE, PUBLISHER, Document, Lane
from fault_schedule import Target, make_schedule

from deploy.docgen import generate
from deploy.network import DEFAULT_PUBLISHERS, ONTOLOGY, SiteSpec, SubscriberSpec
from xdn.ontology import Ontology, load_ontology

__all__ = ["FULL", "SHORT", "Campaign", "Summary", "leaked_processes", "run_campaign"]

HERE = Path(__file__).resolve().parent
# The sample policies plus two credentials for the leaves: Inspectors (quality inspections,
# served at d5) and Stores (resource details, served at d3).
PUBLISHERS = tuple(replace(p, policy=HERE / "policies" / p.policy.name) for p in DEFAULT_PUBLISHERS)
_CREDENTIALS = {  # OU → the site its subscribers connect to (they follow redirects)
    "Cred1": "d2",
    "Contractors": "d4",
    "Inspectors": "d5",
    "Stores": "d3",
    "Cred2": "d1",
}


def _subscribers(
    counts: Mapping[str, int], sites: Sequence[SiteSpec]
) -> tuple[SubscriberSpec, ...]:
    present = {s.name for s in sites}
    specs, n = [], 0
    for ou, count in counts.items():
        for _ in range(count):
            n += 1
            site = _CREDENTIALS[ou] if _CREDENTIALS[ou] in present else "d1"
            specs.append(SubscriberSpec(name=f"s{n:02d}", site=site, attributes={"OU": ou}))
    return tuple(specs)


@dataclass(frozen=True, slots=True, kw_only=True)
class Campaign:
    seed: int
    sites: tuple[SiteSpec, ...]
    subscribers: tuple[SubscriberSpec, ...]
    documents: int  # per publisher
    document_bytes: int
    new_version_every: int  # every n-th document is a new version of an earlier one
    kills: int
    pauses: int
    cuts: int
    window_s: float  # the faults happen within [warm-up, window]
    batch: int  # documents per `xdn publish` run (a key service run before each)
    drain_s: float  # after the faults, how long subscribers may take to catch up
    audit: bool = True


FIVE_SITES = (
    SiteSpec(name="d1", block="ProductionProcess"),
    SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
    SiteSpec(name="d3", block="ResourceDetails", uplink="d1"),
    SiteSpec(name="d4", block="Production", uplink="d2"),
    SiteSpec(name="d5", block="QualityInspection", uplink="d2"),
)
FULL = Campaign(
    seed=18,
    sites=FIVE_SITES,
    subscribers=_subscribers(
        {"Cred1": 5, "Contractors": 4, "Inspectors": 4, "Stores": 4, "Cred2": 3}, FIVE_SITES
    ),
    documents=180,
    document_bytes=42_000,
    new_version_every=10,
    kills=100,
    pauses=25,
    cuts=25,
    window_s=600.0,
    batch=6,
    drain_s=300.0,
)
SHORT = Campaign(
    seed=7,
    sites=FIVE_SITES[:3],
    subscribers=_subscribers(
        {"Cred1": 1, "Contractors": 1, "Stores": 1, "Cred2": 1}, FIVE_SITES[:3]
    ),
    documents=12,
    document_bytes=3_000,
    new_version_every=5,
    kills=10,
    pauses=2,
    cuts=2,
    window_s=18.0,
    batch=6,
    drain_s=120.0,
    audit=False,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    seed: int
    sites: int
    subscribers: int
    kills: int
    kills_by_role: dict[str, int]
    restarts: int
    pauses: int
    link_cuts: int
    documents_published: int
    fragments_published: int
    deliveries: int
    duplicates_suppressed: int
    faults_100_kills_lost: int
    faults_100_kills_duplicated_to_app: int
    reordered: int
    altered: int
    refused: int
    recovery_p50_s: float
    recovery_p99_s: float
    recovery_max_s: float
    unrecovered: list[str]
    exited_on_their_own: list[str]
    leaked_processes: list[str]
    lane_failures: list[str]
    audit_ok: bool | None
    problems: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not (
            self.faults_100_kills_lost
            or self.faults_100_kills_duplicated_to_app
            or self.reordered
            or self.altered
            or self.refused
            or self.unrecovered
            or self.exited_on_their_own
            or self.leaked_processes
            or self.lane_failures
            or self.audit_ok is False
            or self.problems
        )

    def lines(self) -> list[str]:
        roles = ", ".join(f"{role} {n}" for role, n in sorted(self.kills_by_role.items()))
        audit = {None: "not run", True: "every chain verifies", False: "FAILED"}[self.audit_ok]
        return [
            f"fault campaign (seed {self.seed}): {self.sites} sites, {self.subscribers} "
            f"subscribers, {self.seconds:.0f}s",
            f"  kills {self.kills} ({roles}), "
            f"restarts {self.restarts}, pauses {self.pauses}, link cuts {self.link_cuts}",
            f"  published {self.documents_published} document versions, "
            f"{self.fragments_published} fragments; deliveries {self.deliveries}, "
            f"duplicates suppressed {self.duplicates_suppressed}",
            f"  lost {self.faults_100_kills_lost}, duplicated to the application "
            f"{self.faults_100_kills_duplicated_to_app}, reordered {self.reordered}, altered "
            f"{self.altered}, refused {self.refused}",
            f"  recovery after a restart: p50 {self.recovery_p50_s:.2f}s, p99 "
            f"{self.recovery_p99_s:.2f}s, max {self.recovery_max_s:.2f}s"
            + (f"; never recovered: {self.unrecovered}" if self.unrecovered else ""),
            f"  audit: {audit}; processes left behind: {len(self.leaked_processes)}",
            *(f"  problem: {p}" for p in self.problems[:20]),
            *(f"  exited on its own: {p[-300:]}" for p in self.exited_on_their_own),
            *(f"  lane: {p}" for p in self.lane_failures),
            "  OK" if self.ok else "  FAILED",
        ]


def _documents(campaign: Campaign, workdir: Path, publisher: str) -> list[Document]:
    """The lane's documents: fresh ones, and every ``new_version_every``-th a new version (other
    content, same id) of one published earlier."""
    docs: list[Document] = []
    for i in range(campaign.documents):
        version_of = i - campaign.new_version_every + 1
        reuse = i % campaign.new_version_every == campaign.new_version_every - 1
        stem = f"{publisher}-{version_of if reuse else i:05d}"
        path = workdir / "documents" / publisher / f"{i:05d}" / f"{stem}.xml"
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            generate(publisher, campaign.document_bytes, out, seed=campaign.seed * 100_000 + i)
        docs.append(Document(document_id=stem, path=path))
    return docs


def _served(net: HostedNetwork) -> dict[str, frozenset[str]]:
    """Site → the subscribers whose path to the root crosses it (from where each registered)."""
    served: dict[str, set[str]] = {site: set() for site in net.sites}
    for name in net.subscribers:
        site: str | None = str(
            json.loads((net.inbox(name) / "subscription.json").read_text())["served_by"]
        )
        while site is not None:
            served[site].add(name)
            site = net.sites[site].uplink
    return {site: frozenset(names or net.subscribers) for site, names in served.items()}


def leaked_processes(workdir: Path) -> list[str]:
    """Processes still running from the campaign's directory."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if int(pid) != os.getpid() and (str(workdir) in cmdline or cwd == str(workdir)):
            found.append(f"{pid}: {cmdline[:200]}")
    return found


AUDIT_OPTIONS = ("--ca", "certs/ca.pem", "--out", "audit")


def _audit(net: HostedNetwork, log: Callable[[str], None]) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "cli", "audit", "logs", *AUDIT_OPTIONS],
        cwd=net.workdir,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    log(f"audit (exit {done.returncode}): {(done.stdout + done.stderr).strip()[-1500:]}")
    return done.returncode == 0


def _percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _print(line: str) -> None:
    print(line, flush=True)


def run_campaign(
    campaign: Campaign, workdir: Path, *, log: Callable[[str], None] = _print
) -> Summary:
    """Run ``campaign`` in ``workdir`` (created); the summary is also written there as
    ``summary.json``. Raises :class:`fault_hosts.NetnsUnavailable` without network
    namespaces."""
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    ontology = load_ontology([ONTOLOGY])
    with Hosts([s.name for s in campaign.sites]) as hosts:
        net = HostedNetwork(
            workdir / "net",
            hosts,
            sites=campaign.sites,
            publishers=PUBLISHERS,
            subscribers=campaign.subscribers,
            verbose=True,
        )
        net.workdir.mkdir(parents=True)
        net.prepare()
        net.issue_site_certificates()
        documents = {p: _documents(campaign, net.workdir, p) for p in net.publishers}
        fragments = {
            p: dict(
                zip(
                    (d.path for d in docs),
                    fragments_of(net, ontology, p, [d.path for d in docs]),
                    strict=True,
                )
            )
            for p, docs in documents.items()
        }
        try:
            summary = _run(campaign, net, documents, fragments, ontology, log, started)
        finally:
            net.stop()
        leaked = leaked_processes(net.workdir)
        audit_ok = _audit(net, log) if campaign.audit else None
    summary = _finish(summary, leaked=leaked, audit_ok=audit_ok, started=started)
    (workdir / "summary.json").write_text(json.dumps(asdict(summary), indent=2) + "\n")
    for line in summary.lines():
        log(line)
    return summary


def _run(
    campaign: Campaign,
    net: HostedNetwork,
    documents: Mapping[str, list[Document]],
    fragments: Mapping[str, Mapping[Path, dict[str, str]]],
    ontology: Ontology,
    log: Callable[[str], None],
    started: float,
) -> Summary:
    net.start_sites()
    for name in net.subscribers:
        net.start_subscriber(name)
    for name in net.subscribers:
        net.wait_subscribed(name, timeout=120)
    log(
        f"{time.monotonic() - started:.0f}s: {len(net.sites)} sites, {len(net.subscribers)} "
        "subscribers up"
    )
    # A little slower than the window allows: the stream still flows when the last fault
    # ends (a restart's recovery is seen by what reaches the restarted part afterwards).
    rate = campaign.documents / campaign.window_s * 0.9
    lanes = {
        p: Lane(net, p, docs, batch=campaign.batch, rate=rate) for p, docs in documents.items()
    }
    tails = {name: InboxTail(net.inbox(name) / "received.jsonl") for name in net.subscribers}
    recoveries = Recoveries(tails, lanes, _served(net))
    executor = Executor(net, lanes, recoveries, log)
    recoveries.start()
    _publish_through_faults(
        campaign,
        net,
        lanes,
        executor,
        lambda what: log(f"{time.monotonic() - started:.0f}s: {what}"),
    )
    published = {
        p: [(v, fragments[p][d.path]) for v, d in zip(lane.reported, documents[p], strict=False)]
        for p, lane in lanes.items()
    }
    owed = {name: due(net, ontology, name, published) for name in net.subscribers}

    def caught_up() -> bool:
        recoveries.poll()
        return all(
            {(str(r["publisher"]), str(r["document"]), r["version"]) for r in tails[n].records}
            >= {(p, v[0], v[1]) for p, vs in owed[n].items() for v, _ in vs}
            for n in net.subscribers
        )

    deadline = time.monotonic() + campaign.drain_s
    while not caught_up() and time.monotonic() < deadline:
        time.sleep(0.5)
    log(f"{time.monotonic() - started:.0f}s: subscribers caught up: {caught_up()}")
    unrecovered = recoveries.stop()
    (net.workdir.parent / "recoveries.json").write_text(json.dumps(recoveries.recovered) + "\n")
    verdict = Verdict()
    for name in net.subscribers:
        judge(name, tails[name].records, owed[name], verdict)
    return _summarize(
        campaign, net, lanes, executor, published, verdict, recoveries.times, unrecovered
    )


def _publish_through_faults(
    campaign: Campaign,
    net: HostedNetwork,
    lanes: Mapping[str, Lane],
    executor: Executor,
    log: Callable[[str], None],
) -> None:
    """Start the lanes; once each published, carry out the schedule; let them finish."""
    processes = [
        *(Target(role="site", name=s) for s in net.sites),
        *(Target(role="subscriber", name=s) for s in net.subscribers),
        *(Target(role=role, name=p) for p in net.publishers for role in (PUBLISHER, KEY_SERVICE)),
    ]
    schedule = make_schedule(
        seed=campaign.seed,
        processes=processes,
        sites=list(net.sites),
        kills=campaign.kills,
        pauses=campaign.pauses,
        cuts=campaign.cuts,
        start_s=3.0,
        end_s=campaign.window_s,
    )
    try:
        for lane in lanes.values():
            lane.start()
        deadline = time.monotonic() + 300  # the stream flows before the first fault
        while not all(lane.reported for lane in lanes.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        executor.run(schedule)
        log(f"schedule done ({len(schedule.faults)} faults)")
        for lane in lanes.values():
            lane.finale.set()
        for lane in lanes.values():  # (a lane stops by itself when it cannot publish for minutes)
            lane.join()
        log("everything published")
    finally:
        for lane in lanes.values():  # on any way out, no publish run left behind
            lane.finale.set()
            lane.hold()


def _summarize(
    campaign: Campaign,
    net: HostedNetwork,
    lanes: Mapping[str, Lane],
    executor: Executor,
    published: Mapping[str, list[tuple[tuple[str, int], dict[str, str]]]],
    verdict: Verdict,
    times: Sequence[float],
    unrecovered: list[str],
) -> Summary:
    tally = executor.tally
    exited = [
        *tally.exited_on_their_own,
        *(f"{n}: {net.output(n)}" for n in net.subscribers if not net.subscriber_running(n)),
        *(f"site {s}: {net.output(s)}" for s in net.sites if not net.site_running(s)),
    ]
    refusals = [net.inbox(n) / "refused.jsonl" for n in net.subscribers]
    suppressed = sum(
        net.full_output(n).count("delivered again; already applied") for n in net.subscribers
    ) + sum(lane.already for lane in lanes.values())
    return Summary(
        seed=campaign.seed,
        sites=len(net.sites),
        subscribers=len(net.subscribers),
        kills=sum(tally.kills.values()),
        kills_by_role=dict(tally.kills),
        restarts=tally.restarts,
        pauses=tally.pauses,
        link_cuts=tally.cuts,
        documents_published=sum(len(v) for v in published.values()),
        fragments_published=sum(len(f) for v in published.values() for _, f in v),
        deliveries=verdict.deliveries,
        duplicates_suppressed=suppressed,
        faults_100_kills_lost=verdict.lost,
        faults_100_kills_duplicated_to_app=verdict.duplicated,
        reordered=verdict.reordered,
        altered=verdict.altered + verdict.unexpected,
        refused=sum(len(p.read_text().splitlines()) for p in refusals if p.exists()),
        recovery_p50_s=round(statistics.median(times), 3) if times else 0.0,
        recovery_p99_s=round(_percentile(times, 0.99), 3),
        recovery_max_s=round(max(times, default=0.0), 3),
        unrecovered=unrecovered,
        exited_on_their_own=exited,
        leaked_processes=[],
        lane_failures=[
            f"{p}: {lane.failure or 'unfinished'} ({len(lane.pending)} documents left)"
            for p, lane in lanes.items()
            if lane.failure or lane.pending
        ],
        audit_ok=None,
        problems=verdict.problems,
        seconds=0.0,
    )


def _finish(
    summary: Summary, *, leaked: list[str], audit_ok: bool | None, started: float
) -> Summary:
    return replace(
        summary,
        leaked_processes=leaked,
        audit_ok=audit_ok,
        seconds=round(time.monotonic() - started, 1),
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workdir", type=Path, help="a new directory for the campaign")
    parser.add_argument("--short", action="store_true", help="the short campaign of make test")
    parser.add_argument("--seed", type=int, help="the schedule's seed (default: the preset's)")
    parser.add_argument("--kills", type=int, help="how many kills (default: the preset's)")
    parser.add_argument("--no-audit", action="store_true", help="skip xdn audit")
    args = parser.parse_args(argv)
    campaign = SHORT if args.short else FULL
    changes: dict[str, object] = {}
    if args.seed is not None:
        changes["seed"] = args.seed
    if args.kills is not None:
        changes["kills"] = args.kills
    if args.no_audit:
        changes["audit"] = False
    summary = run_campaign(replace(campaign, **changes), args.workdir)  # type: ignore[arg-type]
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
