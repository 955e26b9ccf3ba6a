"""Configuration of a DHT node: one frozen object, optionally read from a ``[dht]`` TOML table.

Proposed site configuration (all keys optional)::

    [dht]
    bootstrap = ["10.0.0.1:50051", "10.0.0.2:50051"]   # peers to join through; [] = first site
    advertise = "d2.example.org:50051"   # address others dial; default: the bound listen address
    k = 20                   # bucket size and replication factor
    alpha = 3                # lookup parallelism
    rpc_timeout_s = 5.0
    record_ttl_s = 1800      # lifetime of a site's announcement
    republish_interval_s = 600
    refresh_interval_s = 900 # refresh buckets no lookup touched for this long
    maintenance_interval_s = 30
    uplink_recheck_s = 30    # a downlink asks again which uplink is nearest this often
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from disseminator.dht._ids import check_address
from disseminator.dht._records import MAX_TTL_MS
from xdn.errors import ConfigError

__all__ = ["DhtConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class DhtConfig:
    """Tunables of one DHT node (defaults follow Kademlia: k = 20, alpha = 3)."""

    bootstrap: tuple[str, ...] = ()
    advertise: str | None = None
    k: int = 20
    alpha: int = 3
    rpc_timeout_s: float = 5.0
    record_ttl_s: float = 1800.0
    republish_interval_s: float = 600.0
    refresh_interval_s: float = 900.0
    maintenance_interval_s: float = 30.0
    uplink_recheck_s: float = 30.0
    stale_after_failures: int = 2
    max_records_per_key: int = 64
    max_keys: int = 4096
    max_background_tasks: int = 64

    def __post_init__(self) -> None:
        for name in ("k", "alpha", "stale_after_failures", "max_records_per_key", "max_keys"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"dht.{name} must be a positive integer, got {value!r}")
        if self.max_background_tasks < 1:
            raise ConfigError("dht.max_background_tasks must be a positive integer")
        for name in (
            "rpc_timeout_s",
            "record_ttl_s",
            "republish_interval_s",
            "refresh_interval_s",
            "maintenance_interval_s",
            "uplink_recheck_s",
        ):
            value = getattr(self, name)
            if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                raise ConfigError(f"dht.{name} must be a positive number, got {value!r}")
        if self.record_ttl_s * 1000 > MAX_TTL_MS:
            raise ConfigError(f"dht.record_ttl_s must be at most {MAX_TTL_MS // 1000}")
        if self.republish_interval_s >= self.record_ttl_s:
            raise ConfigError("dht.republish_interval_s must be shorter than dht.record_ttl_s")
        try:
            for address in self.bootstrap:
                check_address(address)
            if self.advertise is not None:
                check_address(self.advertise)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"dht: {exc}") from None

    @property
    def record_ttl_ms(self) -> int:
        return int(self.record_ttl_s * 1000)

    @property
    def republish_interval_ms(self) -> int:
        return int(self.republish_interval_s * 1000)

    @property
    def refresh_interval_ms(self) -> int:
        return int(self.refresh_interval_s * 1000)

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str = "[dht]") -> DhtConfig:
        """Build from a parsed TOML table, refusing unknown keys and wrong types.

        Raises:
            ConfigError: naming ``source`` and the offending key.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown key(s) {', '.join(unknown)}")
        values = dict(table)
        bootstrap = values.get("bootstrap", [])
        if not isinstance(bootstrap, list | tuple) or not all(
            isinstance(a, str) for a in bootstrap
        ):
            raise ConfigError(f"{source}: bootstrap must be a list of HOST:PORT strings")
        values["bootstrap"] = tuple(bootstrap)
        if "advertise" in values and not isinstance(values["advertise"], str):
            raise ConfigError(f"{source}: advertise must be a HOST:PORT string")
        try:
            return cls(**values)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
