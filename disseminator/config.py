"""Site configuration: one frozen object per daemon, read from TOML.

Example ``d2.toml``::

    [site]
    name = "d2"                      # must equal the CN of the site certificate
    listen = "127.0.0.1:0"           # port 0: pick a free port, written to state_dir/port
    block = "WorkOrder"              # the maximum conceptual block this site serves
    uplink = "127.0.0.1:50051"       # absent for a root site
    state_dir = "build/sites/d2"
    provenance_log = "build/logs/d2.nq"
    lease_seconds = 86400            # how long a disconnected subscriber / downlink stays queued
    metrics_listen = "127.0.0.1:0"   # Prometheus /metrics (optional; port: state_dir/metrics_port)
    web_listen = "127.0.0.1:0"       # HTTPS linked data + LDN inbox (optional; state_dir/web_port)
    retain_documents = 10            # recent documents kept per publisher for new subscribers
    routed_retention_days = 7        # how long a routed version is remembered by its entry
    routed_per_publisher = 100000    # at most this many entries per publisher (the newest)
    heartbeat_seconds = 5            # heartbeat on idle streams; 3 intervals silent: peer dead
    drain_seconds = 10               # on SIGTERM, how long to wait for connected peers' acks
    crl_grace_seconds = 3600         # CRL stale this long: refuse new registrations and links
    durability = "full"              # "full": data on disk before any ack (survives power loss)
                                     # "normal": synced at checkpoints (survives a crash only)

    [tls]
    ca = "certs/ca.pem"
    cert = "certs/d2.pem"
    key = "certs/d2.key"
    crl = "certs/crl.pem"            # optional; reloaded when it changes or on SIGHUP

    [ontology]
    files = ["ontology/production.owl"]

    [limits]                         # what one caller may ask (docs/network.md); optional
    subscribe_concepts = 256         # concepts per SubscribeRequest (never more than the ontology)
    interest_members = 500           # members per InterestUpdate (downlinks send chunks this big)
    link_members = 100000            # members behind one downlink, all chunks together
    streams_per_subscriber = 4       # open Subscribe streams per subscriber certificate
    streams_per_site = 2             # open Link streams per downlink site certificate
    heartbeat_min_seconds = 0.05     # a peer announcing an interval outside [min, max] is refused
    heartbeat_max_seconds = 60
    stream_message_bytes = 1048576   # one Subscribe / Link stream message
    memory_bytes = 1073741824        # large messages held at once across all calls
    part_bytes = 4194304             # larger messages go out in parts of this size
    document_bytes = 2147483648      # one message sent in parts (a document), all parts together
    min_free_bytes = 67108864        # below this free in state_dir new work is refused

    [web]                            # the HTTPS endpoint's limits (docs/linked-data.md); optional
    notification_bytes = 262144      # one notification POSTed to the inbox

    [dht]                            # site discovery (see docs/dht.md); optional
    bootstrap = ["127.0.0.1:50051"]  # any running site; without `uplink` the uplink is found here

    [[publisher]]                    # one per publisher whose policy this site enforces
    name = "production-dept"
    certificate = "certs/production-dept.pem"
    policy = "policies/production-dept.toml"   # with its detached signature .sig beside it

Past a limit a caller is refused with ``RESOURCE_EXHAUSTED`` and a message naming the limit
(:mod:`disseminator.limits`). Sites of one network should share their ``[limits]``: a downlink
chunks its interest by its own ``interest_members`` and ``stream_message_bytes``.

The routed window (:mod:`disseminator.routed`) is how a site knows a document version it
routed before: entries older than ``routed_retention_days`` or beyond the newest
``routed_per_publisher`` are pruned, and a publisher's sequence numbers at or below the highest
pruned one are refused as replays; a document arriving that late is ignored.

Relative paths are resolved against the directory of the TOML file.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from disseminator.dht import DhtConfig
from disseminator.limits import Limits
from disseminator.web import WebConfig
from xdn.errors import ConfigError

__all__ = ["DURABILITY", "PublisherEntry", "SiteConfig", "load_site_config"]

DURABILITY = ("full", "normal")
"""``[site] durability``: SQLite ``synchronous`` of the commits that precede an
acknowledgement (:mod:`disseminator.store`, "Durability")."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PublisherEntry:
    """A publisher whose signed policy the site enforces."""

    name: str
    certificate: Path
    policy: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteConfig:
    """Everything a disseminator daemon needs to start."""

    name: str
    listen: str
    block: str
    uplink: str | None
    state_dir: Path
    provenance_log: Path
    ca: Path
    cert: Path
    key: Path
    ontology_files: tuple[Path, ...]
    publishers: tuple[PublisherEntry, ...]
    lease_seconds: float = 86_400.0
    housekeeping_seconds: float = 5.0
    heartbeat_seconds: float = 5.0
    drain_seconds: float = 10.0
    metrics_listen: str | None = None
    dht: DhtConfig = field(default_factory=DhtConfig)
    crl: Path | None = None
    crl_grace_seconds: float = 3600.0
    retain_documents: int = 10
    routed_retention_days: float = 7.0
    routed_per_publisher: int = 100_000
    limits: Limits = field(default_factory=Limits)
    web: WebConfig = field(default_factory=WebConfig)
    durability: str = "full"

    def __post_init__(self) -> None:
        if self.durability not in DURABILITY:
            raise ConfigError('site.durability must be "full" or "normal"')
        if self.retain_documents < 0:
            raise ConfigError("site.retain_documents must be 0 or more")
        if not self.routed_retention_days > 0 or self.routed_per_publisher < 1:
            raise ConfigError(
                "site.routed_retention_days must be positive and site.routed_per_publisher "
                "at least 1"
            )
        if self.lease_seconds <= 0 or self.housekeeping_seconds <= 0:
            raise ConfigError("site.lease_seconds and site.housekeeping_seconds must be positive")
        if not 0.001 <= self.heartbeat_seconds <= 86_400:
            raise ConfigError("site.heartbeat_seconds must be between 0.001 and 86400")
        low, high = self.limits.heartbeat_min_seconds, self.limits.heartbeat_max_seconds
        if not low <= self.heartbeat_seconds <= high:
            raise ConfigError(
                f"site.heartbeat_seconds must lie within the limits' heartbeat bounds "
                f"[{low:g}, {high:g}] (peers announcing another interval are refused)"
            )
        if self.drain_seconds < 0:
            raise ConfigError("site.drain_seconds must not be negative")
        if self.crl_grace_seconds < 0:
            raise ConfigError("site.crl_grace_seconds must not be negative")
        if not self.name or "/" in self.name:
            raise ConfigError(f"site name {self.name!r} is invalid")
        host, sep, port = self.listen.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"site.listen must be HOST:PORT, got {self.listen!r}")
        if not self.ontology_files:
            raise ConfigError("ontology.files must list at least one OWL file")


def _table(data: Mapping[str, Any], key: str, source: Path) -> Mapping[str, Any]:
    value = data.get(key)
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: missing [{key}] table")
    return value


def _str(table: Mapping[str, Any], key: str, source: Path, section: str) -> str:
    value = table.get(key)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{source}: [{section}] needs a non-empty string {key!r}")
    return value


def _limits(table: object, source: Path) -> Limits:
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [limits] must be a table")
    return Limits.from_mapping(table, source=f"{source} [limits]")


def _web(site: Mapping[str, Any], table: object, source: Path) -> WebConfig:
    listen = site.get("web_listen")
    if listen is not None and not isinstance(listen, str):
        raise ConfigError(f"{source}: [site] web_listen must be HOST:PORT")
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [web] must be a table")
    return WebConfig.from_mapping(table, listen=listen, source=f"{source} [web]")


def load_site_config(path: Path) -> SiteConfig:
    """Read and validate a site's TOML configuration."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such configuration file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    base = path.resolve().parent

    def resolve(value: str) -> Path:
        p = Path(value)
        return p if p.is_absolute() else base / p

    site, tls = _table(data, "site", path), _table(data, "tls", path)
    ontology = _table(data, "ontology", path)
    files = ontology.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise ConfigError(f"{path}: [ontology] files must be a list of paths")
    entries = data.get("publisher", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{path}: publishers must be [[publisher]] tables")
    publishers = []
    for entry in entries:
        publishers.append(
            PublisherEntry(
                name=_str(entry, "name", path, "publisher"),
                certificate=resolve(_str(entry, "certificate", path, "publisher")),
                policy=resolve(_str(entry, "policy", path, "publisher")),
            )
        )
    metrics_listen = site.get("metrics_listen")
    if metrics_listen is not None and not isinstance(metrics_listen, str):
        raise ConfigError(f"{path}: [site] metrics_listen must be HOST:PORT")
    uplink = site.get("uplink")
    if uplink is not None and not isinstance(uplink, str):
        raise ConfigError(f"{path}: [site] uplink must be HOST:PORT")
    name = _str(site, "name", path, "site")
    crl = tls.get("crl")
    if crl is not None and (not isinstance(crl, str) or not crl):
        raise ConfigError(f"{path}: [tls] crl must be the path of a PEM CRL")
    grace = site.get("crl_grace_seconds", 3600.0)
    if not isinstance(grace, int | float) or isinstance(grace, bool):
        raise ConfigError(f"{path}: [site] crl_grace_seconds must be a number of seconds")
    timings = {}
    for key in ("lease_seconds", "housekeeping_seconds", "heartbeat_seconds", "drain_seconds"):
        if key in site:
            if not isinstance(site[key], int | float) or isinstance(site[key], bool):
                raise ConfigError(f"{path}: [site] {key} must be a number of seconds")
            timings[key] = float(site[key])
    retain = site.get("retain_documents", 10)
    if not isinstance(retain, int) or isinstance(retain, bool):
        raise ConfigError(f"{path}: [site] retain_documents must be a whole number")
    routed_days = site.get("routed_retention_days", 7.0)
    if not isinstance(routed_days, int | float) or isinstance(routed_days, bool):
        raise ConfigError(f"{path}: [site] routed_retention_days must be a number of days")
    routed_count = site.get("routed_per_publisher", 100_000)
    if not isinstance(routed_count, int) or isinstance(routed_count, bool):
        raise ConfigError(f"{path}: [site] routed_per_publisher must be a whole number")
    for key in ("state_dir", "provenance_log"):
        if key in site and (not isinstance(site[key], str) or not site[key]):
            raise ConfigError(f"{path}: [site] {key} must be a path")
    durability = site.get("durability", "full")
    if durability not in DURABILITY:
        raise ConfigError(f'{path}: [site] durability must be "full" or "normal"')
    return SiteConfig(
        name=name,
        listen=_str(site, "listen", path, "site"),
        block=_str(site, "block", path, "site"),
        uplink=uplink or None,
        state_dir=resolve(site.get("state_dir", f"state/{name}")),
        provenance_log=resolve(site.get("provenance_log", f"state/{name}/provenance.nq")),
        ca=resolve(_str(tls, "ca", path, "tls")),
        cert=resolve(_str(tls, "cert", path, "tls")),
        key=resolve(_str(tls, "key", path, "tls")),
        crl=resolve(crl) if crl else None,
        crl_grace_seconds=float(grace),
        ontology_files=tuple(resolve(f) for f in files),
        publishers=tuple(publishers),
        metrics_listen=metrics_listen,
        dht=DhtConfig.from_mapping(data.get("dht", {}), source=f"{path} [dht]"),
        retain_documents=retain,
        routed_retention_days=float(routed_days),
        routed_per_publisher=routed_count,
        durability=durability,
        limits=_limits(data.get("limits", {}), path),
        web=_web(site, data.get("web", {}), path),
        **timings,
    )
