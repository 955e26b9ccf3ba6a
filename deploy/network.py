"""A local multi-site xdn network on loopback, as real processes.

Used by ``xdn demo`` and by the integration tests. :class:`LocalNetwork` lays out a working
directory (PKI, signed policies, one TOML config per site), starts each disseminator as its own
``xdn disseminator serve`` process on port 0 (uplinks first, reading each bound port from the
site's ``state/port`` file), starts subscribers and runs publishers as processes too, and stops
everything on exit — SIGTERM first, SIGKILL for anything that does not stop in time.

The default topology is the paper's: a root site serving the whole production-process block
and two sites serving its sub-blocks.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from prometheus_client.parser import text_string_to_metric_families

from deploy.expectations import expected_deliveries
from deploy.pki import Party, ensure_ca, issue_party, write_crl
from xdn import certs, crypto
from xdn.errors import UsageError
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import sign_policy, signature_path

__all__ = [
    "DEFAULT_PUBLISHERS",
    "DEFAULT_SITES",
    "DEFAULT_SUBSCRIBERS",
    "SAMPLE_DOCUMENTS",
    "LocalNetwork",
    "PublisherSpec",
    "SiteSpec",
    "SubscriberSpec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteSpec:
    name: str
    block: str
    uplink: str | None = None
    # A command prefix run instead of ``python -m cli`` (the tests' dishonest site).
    launcher: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherSpec:
    name: str
    mapping: Path
    policy: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberSpec:
    name: str  # what the network calls it: its inbox, state and output
    site: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    # A subscriber whose certificate's common name is not ``name`` (a namesake of another):
    # that name, and the folder (in the network's directory) holding its certificate.
    common_name: str | None = None
    certs: str = "certs"


DEFAULT_SITES = (
    SiteSpec(name="d1", block="ProductionProcess"),
    SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
    SiteSpec(name="d3", block="ResourceDetails", uplink="d1"),
)
DEFAULT_PUBLISHERS = tuple(
    PublisherSpec(
        name=name,
        mapping=REPO_ROOT / "ontology" / "mappings" / f"{name}.toml",
        policy=REPO_ROOT / "policies" / f"{name}.toml",
    )
    for name in ("production-dept", "qa-company")
)
DEFAULT_SUBSCRIBERS = (
    SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"}),
    SubscriberSpec(name="bob", site="d3", attributes={"OU": "Cred2"}),
)
ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"
# One sample document in each default publisher's schema.
SAMPLE_DOCUMENTS = {
    "production-dept": REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml",
    "qa-company": REPO_ROOT / "ontology" / "samples" / "qa-company-report.xml",
}


def _toml_value(value: object) -> str:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value))


def _toml(tables: Sequence[tuple[str, Mapping[str, object]]]) -> str:
    lines = []
    for header, table in tables:
        lines.append(header)
        lines.extend(f"{k} = {_toml_value(v)}" for k, v in table.items() if v is not None)
        lines.append("")
    return "\n".join(lines)


class LocalNetwork:
    """Sites, publishers and subscribers of one local network under ``workdir``."""

    def __init__(
        self,
        workdir: Path,
        *,
        sites: Sequence[SiteSpec] = DEFAULT_SITES,
        publishers: Sequence[PublisherSpec] = DEFAULT_PUBLISHERS,
        subscribers: Sequence[SubscriberSpec] = DEFAULT_SUBSCRIBERS,
        site_settings: Mapping[str, object] | None = None,
        limits: Mapping[str, object] | None = None,
        verbose: bool = False,
    ) -> None:
        self.workdir = workdir.resolve()
        self.sites = {s.name: s for s in sites}
        self.publishers = {p.name: p for p in publishers}
        self.subscribers = {s.name: s for s in subscribers}
        self.certs = workdir / "certs"
        self.logs = workdir / "logs"
        self.ports: dict[str, int] = {}
        self.site_settings = dict(site_settings or {})  # extra [site] keys of every site
        self.limits = dict(limits or {})  # the [limits] table of every site (none: defaults)
        self._verbose = verbose
        self._site_procs: dict[str, subprocess.Popen[bytes]] = {}
        self._subscriber_procs: dict[str, subprocess.Popen[bytes]] = {}
        self._markers = 0
        self._ontology: Ontology | None = None

    # ---- layout --------------------------------------------------------------------------
    def prepare(self) -> None:
        """Create the PKI, signed policy copies and site configs (idempotent for the CA)."""
        now = datetime.now(UTC)
        ensure_ca(self.certs, now=now)
        parties = [
            Party(
                name=s.name, role="site", hosts=("localhost", "127.0.0.1"),
                attributes={certs.BLOCK_FIELD: s.block},
            )
            for s in self.sites.values()
        ]
        parties += [Party(name=p, role="publisher") for p in self.publishers]
        parties += [
            Party(name=s.name, role="subscriber", attributes=s.attributes)
            for s in self.subscribers.values()
        ]
        for party in parties:
            issue_party(self.certs, party, now=now)
        if not (self.certs / "crl.pem").exists():
            write_crl(self.certs, now=now)  # empty; `xdn certs revoke` rewrites it
        policy_dir = self.workdir / "policies"
        policy_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.publishers.values():
            copy = policy_dir / spec.policy.name
            shutil.copyfile(spec.policy, copy)
            key = crypto.load_private_key_pem((self.certs / f"{spec.name}.key").read_bytes())
            signature_path(copy).write_bytes(sign_policy(copy.read_bytes(), key))
        self.logs.mkdir(parents=True, exist_ok=True)

    def site_config(self, site: SiteSpec, *, port: int = 0) -> Path:
        """Write the TOML config of ``site`` (its uplink must already be running)."""
        # Downlinks find their uplink through the DHT, bootstrapping from the root site.
        roots = [s.name for s in self.sites.values() if s.uplink is None]
        bootstrap = [
            f"127.0.0.1:{self.ports[r]}" for r in roots if r in self.ports and r != site.name
        ]
        tables: list[tuple[str, Mapping[str, object]]] = [
            ("[site]", {
                "name": site.name, "listen": f"127.0.0.1:{port}", "block": site.block,
                "state_dir": f"state/{site.name}",
                "provenance_log": f"logs/{site.name}.nq",
                "metrics_listen": "127.0.0.1:0", "web_listen": "127.0.0.1:0",
                **self.site_settings,
            }),
            ("[tls]", {
                "ca": "certs/ca.pem", "cert": f"certs/{site.name}.pem",
                "key": f"certs/{site.name}.key",
                "crl": "certs/crl.pem" if (self.certs / "crl.pem").exists() else None,
            }),
            ("[ontology]", {"files": [str(ONTOLOGY)]}),
            ("[dht]", {"bootstrap": bootstrap}),
        ]
        if self.limits:
            tables.append(("[limits]", self.limits))
        for spec in self.publishers.values():
            tables.append(("[[publisher]]", {
                "name": spec.name, "certificate": f"certs/{spec.name}.pem",
                "policy": f"policies/{spec.policy.name}",
            }))
        path = self.workdir / f"{site.name}.toml"
        path.write_text(_toml(tables))
        return path

    # ---- processes -----------------------------------------------------------------------
    def _xdn(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "cli", *(["-v"] if self._verbose else []), *args]

    def _site_command(self, site: SiteSpec, config: Path) -> list[str]:
        args = ("disseminator", "serve", "--config", str(config))
        if site.launcher:
            return [*site.launcher, *(["-v"] if self._verbose else []), *args]
        return self._xdn(*args)

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        with open(self.workdir / f"{name}.out", "ab") as out:  # the child keeps its own copy
            return subprocess.Popen(args, cwd=self.workdir, stdout=out, stderr=subprocess.STDOUT)

    def _wait_port(self, site: str, timeout: float) -> int:
        port_file = self.workdir / "state" / site / "port"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._site_procs[site]
            if proc.poll() is not None:
                raise UsageError(f"site {site} exited with {proc.returncode}: {self.output(site)}")
            if port_file.exists() and (text := port_file.read_text().strip()):
                return int(text)
            time.sleep(0.05)
        raise UsageError(f"site {site} did not start within {timeout:.0f}s: {self.output(site)}")

    def output(self, name: str) -> str:
        """The end of the captured output of a process of this network (for error messages)."""
        return self.full_output(name)[-4000:]

    def full_output(self, name: str) -> str:
        """All the captured output of a process of this network, over its restarts."""
        path = self.workdir / f"{name}.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def start_sites(self, timeout: float = 60.0) -> None:
        """Start every site, uplinks before their downlinks."""
        pending = list(self.sites.values())
        while pending:
            ready = [s for s in pending if s.uplink is None or s.uplink in self.ports]
            if not ready:
                raise UsageError(f"sites {[s.name for s in pending]} have unknown uplinks")
            for site in ready:
                for name in ("port", "web_port"):
                    (self.workdir / "state" / site.name / name).unlink(missing_ok=True)
                self._site_procs[site.name] = self._spawn(
                    site.name, self._site_command(site, self.site_config(site))
                )
            for site in ready:
                self.ports[site.name] = self._wait_port(site.name, timeout)
                pending.remove(site)

    def site_pid(self, site: str) -> int:
        """The process id of a running site."""
        return self._site_procs[site].pid

    def subscriber_pid(self, name: str) -> int:
        """The process id of a running subscriber."""
        return self._subscriber_procs[name].pid

    def signal_site(self, site: str, signum: int) -> None:
        """Send a signal to a site's process (e.g. SIGHUP: reload policies)."""
        self._site_procs[site].send_signal(signum)

    def wait_site(self, site: str, timeout: float = 30.0) -> int:
        """Wait for a site told to stop (e.g. SIGTERM: it drains) to exit; return its exit code.

        Raises:
            subprocess.TimeoutExpired: it did not exit in time (it is then killed).
        """
        proc = self._site_procs.pop(site)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise

    def kill_site(self, site: str) -> None:
        """SIGKILL a site (a crash: no graceful shutdown)."""
        proc = self._site_procs.pop(site)
        proc.kill()
        proc.wait()

    def restart_site(self, site: str, timeout: float = 60.0, *, joined: bool = True) -> None:
        """Start a stopped or killed site again on the same port, with its state on disk.

        Waits until it has joined the DHT (it writes its port then) unless ``joined`` is
        False: then returns at once (a site whose bootstrap peers are down answers calls on
        its port before it can join).
        """
        spec = self.sites[site]
        for name in ("port", "web_port"):
            (self.workdir / "state" / site / name).unlink(missing_ok=True)
        config = self.site_config(spec, port=self.ports[site])
        self._site_procs[site] = self._spawn(site, self._site_command(spec, config))
        if joined:
            self._wait_port(site, timeout)

    def metric(self, site: str, name: str, **labels: str) -> float:
        """A sample of a running site's ``/metrics`` (0 when it has none yet)."""
        port = (self.workdir / "state" / site / "metrics_port").read_text().strip()
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and labels.items() <= sample.labels.items():
                    return float(sample.value)
        return 0.0

    def signal_subscriber(self, name: str, signum: int) -> None:
        """Send a signal to a subscriber's process (e.g. SIGSTOP / SIGCONT)."""
        self._subscriber_procs[name].send_signal(signum)

    def subscriber_running(self, name: str) -> bool:
        proc = self._subscriber_procs.get(name)
        return proc is not None and proc.poll() is None

    def site_running(self, site: str) -> bool:
        proc = self._site_procs.get(site)
        return proc is not None and proc.poll() is None

    def address(self, site: str) -> str:
        return f"127.0.0.1:{self.ports[site]}"

    def web_url(self, site: str) -> str:
        """The base URL of a running site's HTTPS linked-data endpoint (``…/``; its inbox is
        ``…/inbox/``), read from the site's ``state/web_port``."""
        port = (self.workdir / "state" / site / "web_port").read_text().strip()
        return f"https://127.0.0.1:{port}/"

    def inbox(self, subscriber: str) -> Path:
        return self.workdir / "inbox" / subscriber

    def received(self, subscriber: str) -> list[dict[str, object]]:
        """The records of the documents ``subscriber`` accepted so far (``received.jsonl``)."""
        path = self.inbox(subscriber) / "received.jsonl"
        if not path.exists():
            return []
        lines = path.read_text().splitlines(keepends=True)
        # A line still being appended is not a record yet.
        return [json.loads(line) for line in lines if line.endswith("\n")]

    def start_subscriber(self, name: str, *, extra: Sequence[str] = ()) -> None:
        spec = self.subscribers[name]
        state = "state" if spec.common_name is None else f"state/{name}"
        self._subscriber_procs[name] = self._spawn(
            name,
            self._xdn(
                "subscribe", "--connect", self.address(spec.site),
                "--name", spec.common_name or name, "--certs", spec.certs,
                "--out", str(self.inbox(name)), "--state-dir", state,
                "--log", f"logs/{name}.nq", *extra,
            ),
        )

    def unsubscribe(self, name: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``xdn unsubscribe`` for subscriber ``name`` at its site (with its state, so
        that the leave is recorded there too), whatever its exit code."""
        spec = self.subscribers[name]
        state = "state" if spec.common_name is None else f"state/{name}"
        args = self._xdn(
            "unsubscribe", "--connect", self.address(spec.site),
            "--name", spec.common_name or name, "--certs", spec.certs, "--state-dir", state,
        )
        return subprocess.run(
            args, cwd=self.workdir, capture_output=True, text=True, timeout=timeout, check=False
        )

    def subscriber_exit(self, name: str, timeout: float = 30.0) -> int | None:
        """Wait until subscriber ``name`` exits on its own; its exit code (None: still running
        at the deadline)."""
        proc = self._subscriber_procs[name]
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def wait_subscribed(self, name: str, timeout: float = 30.0) -> dict[str, object]:
        """Wait until subscriber ``name`` reports its registration; return what it wrote."""
        path = self.inbox(name) / "subscription.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self._subscriber_procs[name]
            if proc.poll() is not None:
                raise UsageError(f"subscriber {name} exited: {self.output(name)}")
            if path.exists():
                data: dict[str, object] = json.loads(path.read_text())
                return data
            time.sleep(0.05)
        raise UsageError(f"subscriber {name} did not register within {timeout:.0f}s")

    def granted_subscribers(self, publisher: str) -> tuple[str, ...]:
        """Started subscribers whose registration lists grants from ``publisher``."""
        names = []
        for name in self._subscriber_procs:
            path = self.inbox(name) / "subscription.json"
            if path.exists() and publisher in json.loads(path.read_text()).get("grants", {}):
                names.append(name)
        return tuple(names)

    def publish(
        self, publisher: str, documents: Sequence[Path], *, site: str = "d1",
        wait_for: Sequence[str] = (), timeout: float = 120.0, rate: float | None = None,
        extra: Sequence[str] = (),
    ) -> str:
        """Run ``xdn publish`` to completion; return its output (``extra``: more options)."""
        done = self.run_publish(
            publisher, documents, site=site, wait_for=wait_for, timeout=timeout, rate=rate,
            extra=extra,
        )
        if done.returncode != 0:
            raise UsageError(f"publish by {publisher} failed: {done.stdout}{done.stderr}")
        return done.stdout

    def run_publish(
        self, publisher: str, documents: Sequence[Path], *, site: str = "d1",
        wait_for: Sequence[str] = (), timeout: float = 120.0, rate: float | None = None,
        extra: Sequence[str] = (), policy: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``xdn publish`` to completion, whatever its exit code, and return the process.

        ``publisher`` need not be one the sites know (give ``policy`` then; its documents are
        mapped as production-dept's); ``policy`` replaces the network's signed policy copy.
        """
        args = self.publish_command(
            publisher, documents, site=site, wait_for=wait_for, rate=rate, extra=extra,
            policy=policy,
        )
        return subprocess.run(
            args, cwd=self.workdir, capture_output=True, text=True, timeout=timeout, check=False
        )

    def publish_command(
        self, publisher: str, documents: Sequence[Path], *, site: str = "d1",
        wait_for: Sequence[str] = (), rate: float | None = None, extra: Sequence[str] = (),
        policy: Path | None = None,
    ) -> list[str]:
        """The ``xdn publish`` command :meth:`run_publish` runs (in :attr:`workdir`), for a
        caller that runs it itself (to measure it)."""
        spec = self.publishers.get(publisher)
        mapping = (spec or DEFAULT_PUBLISHERS[0]).mapping
        if policy is None:
            if spec is None:
                raise UsageError(f"{publisher} is not a publisher of this network: give policy")
            policy = Path("policies") / spec.policy.name
        args = self._xdn(
            "publish", *map(str, documents), "--connect", self.address(site),
            "--name", publisher, "--certs", "certs", "--mapping", str(mapping),
            "--policy", str(policy), "--ontology", str(ONTOLOGY),
            "--state-dir", "state", "--log", f"logs/{publisher}.nq", *extra,
        )
        for name in wait_for:
            args += ["--wait-for", name]
        if rate is not None:
            args += ["--rate", str(rate)]
        return args

    def publish_marker(
        self, publisher: str, subscribers: Sequence[str] | None = None, *, site: str = "d1",
        timeout: float = 60.0,
    ) -> Path:
        """Publish a fresh copy of ``publisher``'s sample; wait until ``subscribers`` accept it.

        A subscriber gets its deliveries in order, from one queue at one site, so once the
        marker is in, whatever was published before it and was going to reach the subscriber
        has: assert that something did *not* arrive (a duplicate, a fragment beyond a grant)
        only after a marker. ``subscribers`` defaults to every started subscriber the policy
        grants a fragment of the marker.

        Returns:
            The marker document: count it among what was published.

        Raises:
            UsageError: a subscriber did not accept the marker within ``timeout`` seconds.
        """
        self._markers += 1
        marker = self.workdir / "markers" / f"marker-{self._markers}-{publisher}.xml"
        marker.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SAMPLE_DOCUMENTS[publisher], marker)
        if self._ontology is None:
            self._ontology = load_ontology([ONTOLOGY])
        ontology = self._ontology
        waiting = tuple(subscribers) if subscribers is not None else tuple(
            name for name in self._subscriber_procs
            if expected_deliveries(self, ontology, name, {publisher: [marker]})
        )
        self.publish(publisher, [marker], site=site, wait_for=waiting)

        def missing() -> list[str]:
            return [
                name for name in waiting
                if not any(
                    r["publisher"] == publisher and r["document"] == marker.stem
                    for r in self.received(name)
                )
            ]

        if not wait_until(lambda: not missing(), timeout):
            raise UsageError(
                f"marker {marker.stem} did not reach {missing()} within {timeout:.0f}s"
            )
        return marker

    def markers(self, publisher: str) -> list[Path]:
        """The markers ``publisher`` published so far, oldest first."""
        directory = self.workdir / "markers"
        found = directory.glob(f"marker-*-{publisher}.xml") if directory.exists() else ()
        return sorted(found, key=lambda path: int(path.stem.split("-")[1]))

    def stop_subscriber(self, name: str, timeout: float = 10.0) -> int:
        proc = self._subscriber_procs.pop(name)
        return _stop(proc, timeout)

    def stop(self) -> None:
        """Stop subscribers, then sites (downlinks first)."""
        for name in list(self._subscriber_procs):
            self.stop_subscriber(name)
        for name in reversed(list(self._site_procs)):
            _stop(self._site_procs.pop(name), 10.0)

    def __enter__(self) -> LocalNetwork:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def wait_until(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``condition`` until it holds or ``timeout`` seconds pass; return whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode

