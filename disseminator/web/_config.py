"""The ``[web]`` table of a site's configuration: where the HTTPS endpoint listens, its limits.

::

    [site]
    web_listen = "127.0.0.1:0"        # port 0: a free port, written to state_dir/web_port

    [web]                             # optional; these are the defaults
    advertise = "d2.example.org:8443" # the endpoint's address in the site's DHT record
                                      # (default: host of web_listen + the bound port)
    notification_bytes = 262144       # one POSTed notification (413 past it, checked as read)
    notification_statements = 10000   # statements in one notification (400 past it)
    notification_parties = 64         # parties one notification names as readers (400 past it)
    inbox_notifications = 10000       # notifications the inbox holds (507 past it)
    inbox_page = 500                  # notifications listed on one page of the inbox
    posts_in_flight = 16              # POSTs being read at once, all clients (429 past it)
    request_seconds = 30              # one request, from its headers to its response (408)
    handshake_seconds = 10            # one TLS handshake
    connection_seconds = 120          # one connection, however many requests it carries
    client_requests_per_second = 20   # one client certificate's requests, sustained (429 past)
    client_burst = 100                # ... and at once (its token bucket's size)
    connections = 256                 # TLS connections open at once, all clients together
    connections_per_address = 32      # ... from one client address (past either: closed at
                                      # accept, before the TLS handshake)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from xdn.errors import ConfigError

__all__ = ["WebConfig"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebConfig:
    """The endpoint's address (``None``: no endpoint) and limits."""

    listen: str | None = None
    advertise: str | None = None
    notification_bytes: int = 256 * 1024
    notification_statements: int = 10_000
    notification_parties: int = 64
    inbox_notifications: int = 10_000
    inbox_page: int = 500
    posts_in_flight: int = 16
    request_seconds: float = 30.0
    handshake_seconds: float = 10.0
    connection_seconds: float = 120.0
    client_requests_per_second: float = 20.0
    client_burst: int = 100
    connections: int = 256
    connections_per_address: int = 32

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.name in ("listen", "advertise"):
                continue
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"web.{f.name} must be a positive number, got {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise ConfigError(f"web.{f.name} must be a whole number, got {value!r}")
        if self.listen is not None:
            host, sep, port = self.listen.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise ConfigError(f"site.web_listen must be HOST:PORT, got {self.listen!r}")
        if self.advertise is not None:
            host, sep, port = self.advertise.rpartition(":") if isinstance(
                self.advertise, str) else ("", "", "")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ConfigError(f"web.advertise must be HOST:PORT, got {self.advertise!r}")

    @property
    def host(self) -> str:
        """The host part of :attr:`listen`."""
        return (self.listen or "").rpartition(":")[0]

    @property
    def port(self) -> int:
        """The port part of :attr:`listen` (0: any free port)."""
        return int((self.listen or ":0").rpartition(":")[2])

    def advertised(self, port: int) -> str:
        """The endpoint's address for others (``advertise``, else ``web_listen``'s host and
        the bound ``port``)."""
        return self.advertise or f"{self.host}:{port}"

    @classmethod
    def from_mapping(
        cls, table: Mapping[str, Any], *, listen: str | None, source: str = "[web]"
    ) -> WebConfig:
        """Build from a parsed ``[web]`` table, refusing unknown keys."""
        known = {f.name for f in fields(cls)} - {"listen"}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown keys {unknown}; known: {sorted(known)}")
        try:
            return cls(listen=listen, **table)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
