"""``xdn cluster``: N local sites from a topology file, as detached background processes.

A topology TOML names the sites (and the block each serves), the publishers and the
subscribers of a development network (every key: docs/operations.md, "Topology files")::

    [[site]]
    name = "d1"
    block = "ProductionProcess"
    [[site]]
    name = "d2"
    block = "WorkOrder"            # uplink inferred: the nearest site serving an ancestor
    [[publisher]]
    name = "production-dept"       # mapping/policy default to ontology/mappings/NAME.toml
    [[subscriber]]                 # and policies/NAME.toml of the repository
    name = "alice"
    site = "d2"
    attributes = { OU = "Cred1" }

:class:`Cluster` reuses :class:`deploy.network.LocalNetwork` for the layout (PKI, signed
policies, one TOML per site) and starts each site in a new session, so it outlives the CLI.
Every site's pid lives in ``WORKDIR/run/NAME.pid``; ``status`` reads them back, asks each live
site's gRPC health service over mutual TLS, scrapes its Prometheus ``/metrics`` for the
queue depth and names its HTTPS linked-data endpoint and LDN inbox (``state/NAME/web_port``);
``down`` sends SIGTERM (downlinks first), SIGKILL after a timeout, and removes the pid files.
Nothing here keeps state in memory between commands.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deploy.network import LocalNetwork, PublisherSpec, SiteSpec, SubscriberSpec
from xdn.errors import ConfigError, UsageError
from xdn.paths import REPO_ROOT

if TYPE_CHECKING:
    from xdn.ontology import Ontology

__all__ = ["Cluster", "SiteStatus", "Topology", "load_topology"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """Sites (uplinks first), publishers and subscribers of a development network."""

    sites: tuple[SiteSpec, ...]
    publishers: tuple[PublisherSpec, ...]
    subscribers: tuple[SubscriberSpec, ...]

    def __post_init__(self) -> None:
        if not self.sites:
            raise ConfigError("a topology needs at least one [[site]]")
        names = [s.name for s in self.sites]
        names += [p.name for p in self.publishers] + [s.name for s in self.subscribers]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ConfigError(f"names must be unique across the topology: {duplicates}")
        sites = {s.name for s in self.sites}
        for sub in self.subscribers:
            if sub.site not in sites:
                raise ConfigError(f"subscriber {sub.name}: unknown site {sub.site!r}")

    def network(self, workdir: Path, *, verbose: bool = False) -> LocalNetwork:
        """The :class:`LocalNetwork` laying out this topology under ``workdir``."""
        return LocalNetwork(
            workdir, sites=self.sites, publishers=self.publishers,
            subscribers=self.subscribers, verbose=verbose,
        )


def _entries(data: Mapping[str, Any], key: str, source: Path) -> list[Mapping[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
        raise ConfigError(f"{source}: [[{key}]] must be an array of tables")
    return value


def _name(entry: Mapping[str, Any], key: str, source: Path, table: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value or "/" in value:
        raise ConfigError(f"{source}: every [[{table}]] needs a plain string {key!r}")
    return value


@functools.cache
def _network_ontology() -> Ontology:
    """The ontology of the networks ``xdn cluster`` runs, loaded once a process (loading it
    takes tens of milliseconds, far more than reading a topology)."""
    from deploy.network import ONTOLOGY
    from xdn.ontology import load_ontology

    return load_ontology([ONTOLOGY])


def _infer_uplinks(sites: Sequence[tuple[str, str, str | None]]) -> tuple[SiteSpec, ...]:
    """Fill in missing uplinks: the site serving the nearest ancestor of the block."""
    from deploy.network import ONTOLOGY

    ontology = _network_ontology()
    by_block: dict[str, str] = {}
    for name, block, _ in sites:
        if ontology.resolve(block) is None:
            raise ConfigError(f"site {name}: {block!r} is not a concept of {ONTOLOGY.name}")
        by_block.setdefault(block, name)
    specs = []
    for name, block, uplink in sites:
        if uplink is None:
            served = [a for a in ontology.ancestors(block) if a in by_block]
            nearest = max(served, key=lambda a: len(ontology.ancestors(a)), default=None)
            uplink = by_block[nearest] if nearest else None
        specs.append(SiteSpec(name=name, block=block, uplink=uplink))
    return tuple(specs)


def load_topology(path: Path) -> Topology:
    """Read and validate a topology TOML (relative paths: against its directory)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such topology file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    base = path.resolve().parent

    def file(entry: Mapping[str, Any], key: str, default: Path) -> Path:
        value = entry.get(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise ConfigError(f"{path}: [[publisher]] {key} must be a path")
        return Path(value) if Path(value).is_absolute() else base / value

    raw_sites = []
    for entry in _entries(data, "site", path):
        uplink = entry.get("uplink")
        if uplink is not None and not isinstance(uplink, str):
            raise ConfigError(f"{path}: [[site]] uplink must be a site name")
        raw_sites.append(
            (_name(entry, "name", path, "site"), _name(entry, "block", path, "site"), uplink)
        )
    publishers = []
    for entry in _entries(data, "publisher", path):
        name = _name(entry, "name", path, "publisher")
        publishers.append(PublisherSpec(
            name=name,
            mapping=file(entry, "mapping", REPO_ROOT / "ontology" / "mappings" / f"{name}.toml"),
            policy=file(entry, "policy", REPO_ROOT / "policies" / f"{name}.toml"),
        ))
    subscribers = []
    for entry in _entries(data, "subscriber", path):
        attributes = entry.get("attributes", {})
        if not isinstance(attributes, dict) or not all(
            isinstance(v, str) for v in attributes.values()
        ):
            raise ConfigError(f"{path}: [[subscriber]] attributes must map names to strings")
        subscribers.append(SubscriberSpec(
            name=_name(entry, "name", path, "subscriber"),
            site=_name(entry, "site", path, "subscriber"), attributes=attributes,
        ))
    names = {name for name, _, _ in raw_sites}
    for name, _, uplink in raw_sites:
        if uplink is not None and uplink not in names:
            raise ConfigError(f"{path}: site {name}: unknown uplink {uplink!r}")
    return Topology(
        sites=_infer_uplinks(raw_sites) if raw_sites else (),
        publishers=tuple(publishers), subscribers=tuple(subscribers),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteStatus:
    """What ``xdn cluster status`` reports for one site."""

    name: str
    block: str
    pid: int | None
    alive: bool
    port: int | None
    metrics_port: int | None
    health: str
    queued: float | None
    web_url: str | None = None  # the HTTPS linked-data endpoint (its inbox: web_url + "inbox/")

    @property
    def inbox_url(self) -> str | None:
        """The site's LDN inbox."""
        return None if self.web_url is None else self.web_url + "inbox/"


def _alive(pid: int, config: Path) -> bool:
    """Whether ``pid`` runs, is not a zombie, and is the site of ``config`` (pid reuse)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child that has exited
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path(f"/proc/{pid}")
    if not proc.exists():
        return True
    try:
        if ") Z" in (proc / "stat").read_text():
            return False
        return str(config).encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


async def _health(address: str, credentials: Any, timeout: float) -> str:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from xdn.grpc_tls import CHANNEL_OPTIONS

    async with grpc.aio.secure_channel(address, credentials, options=CHANNEL_OPTIONS) as channel:
        try:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout
            )
        except grpc.aio.AioRpcError as exc:
            return f"UNREACHABLE ({exc.code().name})"
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status))


def _queued(host: str, metrics_port: int, timeout: float) -> float | None:
    url = f"http://{host}:{metrics_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            text = reply.read().decode()
    except OSError as exc:  # e.g. HTTP 500: the site failed to compute its gauges
        log.warning("scraping %s failed: %s", url, exc)
        return None
    for line in text.splitlines():
        if line.startswith("xdn_queued_deliveries "):
            return float(line.split()[1])
    return None


class Cluster:
    """A topology's sites under ``workdir``, managed through pid files across commands."""

    def __init__(self, topology: Topology, workdir: Path, *, verbose: bool = False) -> None:
        self.topology = topology
        self.workdir = workdir.resolve()
        self.net = topology.network(self.workdir, verbose=verbose)
        self._verbose = verbose
        self.run_dir = self.workdir / "run"

    def pid_file(self, site: str) -> Path:
        return self.run_dir / f"{site}.pid"

    def config_path(self, site: str) -> Path:
        return self.workdir / f"{site}.toml"

    def _state(self, site: str, name: str) -> Path:
        return self.workdir / "state" / site / name

    def _host(self, site: str) -> str:
        listen = tomllib.loads(self.config_path(site).read_text())["site"]["listen"]
        return str(listen).rpartition(":")[0]

    def running(self) -> list[str]:
        """Sites with a pid file whose process is alive."""
        return [s.name for s in self.topology.sites if self._pid_alive(s.name)[1]]

    def _pid_alive(self, site: str) -> tuple[int | None, bool]:
        pid = _read_int(self.pid_file(site))
        return pid, pid is not None and _alive(pid, self.config_path(site))

    # ---- up ------------------------------------------------------------------------------
    def up(self, timeout: float = 60.0) -> dict[str, str]:
        """Lay out and start every site detached (uplinks first); return name → address."""
        if live := self.running():
            raise UsageError(f"sites already running under {self.workdir}: {live}; run down")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(exist_ok=True)
        self.net.prepare()
        pending = list(self.topology.sites)
        try:
            while pending:
                wave = [s for s in pending if s.uplink is None or s.uplink in self.net.ports]
                if not wave:
                    raise UsageError(f"sites {[s.name for s in pending]} have unknown uplinks")
                procs = {site.name: self._spawn_detached(site) for site in wave}
                for site in wave:
                    self.net.ports[site.name] = self._wait_port(site.name, procs[site.name],
                                                                timeout)
                    pending.remove(site)
        except BaseException:
            self.down()
            raise
        return {name: self.net.address(name) for name in self.net.ports}

    def _spawn_detached(self, site: SiteSpec) -> subprocess.Popen[bytes]:
        self._state(site.name, "port").unlink(missing_ok=True)
        self._state(site.name, "metrics_port").unlink(missing_ok=True)
        self._state(site.name, "web_port").unlink(missing_ok=True)
        config = self.net.site_config(site)
        args = [sys.executable, "-m", "cli", *(["-v"] if self._verbose else []),
                "disseminator", "serve", "--config", str(config)]
        with open(self.workdir / f"{site.name}.out", "ab") as out:
            proc = subprocess.Popen(  # a new session: the site outlives this command
                args, cwd=self.workdir, stdin=subprocess.DEVNULL, stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.pid_file(site.name).write_text(f"{proc.pid}\n")
        log.info("started site %s (pid %d)", site.name, proc.pid)
        return proc

    def _wait_port(self, site: str, proc: subprocess.Popen[bytes], timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise UsageError(f"site {site} exited with {proc.returncode}: "
                                 f"{self.net.output(site)}")
            if (port := _read_int(self._state(site, "port"))) is not None:
                return port
            time.sleep(0.05)
        raise UsageError(f"site {site} did not start within {timeout:.0f}s: "
                         f"{self.net.output(site)}")

    def web_url(self, site: str) -> str | None:
        """The base URL of a site's HTTPS linked-data endpoint (its inbox: ``…/inbox/``)."""
        port = _read_int(self._state(site, "web_port"))
        return f"https://{self._host(site)}:{port}/" if port is not None else None

    def metrics_url(self, site: str) -> str | None:
        port = _read_int(self._state(site, "metrics_port"))
        return f"http://{self._host(site)}:{port}/metrics" if port is not None else None

    # ---- status --------------------------------------------------------------------------
    def status(self, timeout: float = 3.0) -> list[SiteStatus]:
        """Pid, liveness, ports, gRPC health and queue depth of every site."""
        rows: list[dict[str, Any]] = []
        for site in self.topology.sites:
            pid, alive = self._pid_alive(site.name)
            rows.append({
                "name": site.name, "block": site.block, "pid": pid, "alive": alive,
                "port": _read_int(self._state(site.name, "port")) if alive else None,
                "metrics_port": (
                    _read_int(self._state(site.name, "metrics_port")) if alive else None
                ),
                "web_url": self.web_url(site.name) if alive else None,
            })
        live = [r for r in rows if r["port"] is not None]
        healths = asyncio.run(self._healths(live, timeout)) if live else []
        for row, health in zip(live, healths, strict=True):
            row["health"] = health
        for row in rows:
            row.setdefault("health", "-" if not row["alive"] else "NO PORT")
            row["queued"] = (
                _queued(self._host(row["name"]), row["metrics_port"], timeout)
                if row["metrics_port"] is not None else None
            )
        return [SiteStatus(**row) for row in rows]

    async def _healths(self, rows: Sequence[Mapping[str, Any]], timeout: float) -> list[str]:
        from xdn.grpc_tls import TlsFiles, channel_credentials

        certs = self.net.certs
        return list(await asyncio.gather(*(
            _health(
                f"{self._host(row['name'])}:{row['port']}",
                channel_credentials(TlsFiles.from_dir(certs, row["name"])), timeout,
            )
            for row in rows
        )))

    # ---- down ----------------------------------------------------------------------------
    def down(self, timeout: float = 15.0) -> dict[str, str]:
        """SIGTERM every live site (downlinks first), SIGKILL after ``timeout``; return name →
        how it ended. Pid files are removed."""
        pids: dict[str, int] = {}
        outcome: dict[str, str] = {}
        for site in reversed(self.topology.sites):
            pid, alive = self._pid_alive(site.name)
            if alive and pid is not None:
                os.kill(pid, signal.SIGTERM)
                pids[site.name] = pid
            elif pid is not None:
                outcome[site.name] = "not running"
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            for name, pid in list(pids.items()):
                if not _alive(pid, self.config_path(name)):
                    outcome[name] = "stopped"
                    del pids[name]
            time.sleep(0.1)
        for name, pid in pids.items():
            if _alive(pid, self.config_path(name)):
                os.kill(pid, signal.SIGKILL)
                outcome[name] = "killed"
            else:
                outcome[name] = "stopped"
        for site in self.topology.sites:
            self.pid_file(site.name).unlink(missing_ok=True)
        return outcome
