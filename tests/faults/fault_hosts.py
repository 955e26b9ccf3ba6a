"""Sites as hosts whose links can be cut: one Linux network namespace per site.

Each site runs in its own namespace (``ip netns``), on a veth pair plugged into a bridge of the
campaign's namespace, with a 10.x address. Subscribers and publishers run in the campaign's
namespace and reach every site over the bridge, so a site's veth pair is its only link: to its
uplink, its downlinks, its subscribers and (for the root) the publishers. Setting both ends of
that pair down partitions the site; a token bucket (``tc … tbf``) on both ends throttles it
(delay, and loss once its queue is full); undoing either restores it. Nothing leaves the
machine (the bridge has no uplink and no forwarding). ``tc netem`` (random delay and loss)
would be the tool of choice, but it is a kernel module some kernels do not offer (this one's
did not), so only what every kernel we met has is used.

:class:`HostedNetwork` is a :class:`deploy.network.LocalNetwork` whose sites run in those
namespaces, listening on their 10.x address, certificates carrying it as an IP SAN.
"""

from __future__ import annotations

import os
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from fault_schedule import LinkFault

from deploy.network import LocalNetwork, SiteSpec
from deploy.pki import Party, issue_party
from xdn import certs

__all__ = ["HostedNetwork", "Hosts", "NetnsUnavailable"]

# A token bucket: a shaping qdisc every kernel we met has (see the module doc on netem).
_THROTTLE = ("root", "tbf", "rate", "256kbit", "burst", "16kb", "latency", "500ms")


class NetnsUnavailable(RuntimeError):
    """This machine does not let us create network namespaces (not root, no iproute2…)."""


def _run(*args: str) -> None:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed: {done.stderr.strip()}")


class Hosts:
    """A bridge and one namespace per site; :meth:`close` removes them all."""

    def __init__(self, sites: list[str]) -> None:
        tag = f"{os.getpid() % 10000:04d}"
        subnet = f"10.232.{os.getpid() % 250}"
        self._bridge = f"xfb{tag}"
        self.namespaces = {site: f"xf-{tag}-{site}" for site in sites}
        self.addresses = {site: f"{subnet}.{n + 1}" for n, site in enumerate(sites)}
        self._veths = {site: (f"xfo{tag}{n}", f"xfi{tag}{n}") for n, site in enumerate(sites)}
        self._created: list[str] = []
        self._impaired: dict[str, LinkFault] = {}
        self._bridged = False
        try:
            self._create(subnet)
        except (RuntimeError, OSError) as exc:
            self.close()
            raise NetnsUnavailable(str(exc)) from exc

    def _create(self, subnet: str) -> None:
        _run("ip", "link", "add", self._bridge, "type", "bridge")
        self._bridged = True
        _run("ip", "addr", "add", f"{subnet}.254/24", "dev", self._bridge)
        _run("ip", "link", "set", self._bridge, "up")
        for site, ns in self.namespaces.items():
            _run("ip", "netns", "add", ns)
            self._created.append(ns)
            outer, inner = self._veths[site]
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            _run("ip", "link", "set", inner, "netns", ns)
            _run("ip", "link", "set", outer, "master", self._bridge)
            _run("ip", "link", "set", outer, "up")
            _run("ip", "-n", ns, "addr", "add", f"{self.addresses[site]}/24", "dev", inner)
            _run("ip", "-n", ns, "link", "set", inner, "up")
            _run("ip", "-n", ns, "link", "set", "lo", "up")

    def exec_prefix(self, site: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[site]]

    def impair(self, site: str, fault: LinkFault) -> None:
        """Cut (both ends of its veth pair down) or throttle (a token bucket on both ends) the
        link of ``site``."""
        outer, inner = self._veths[site]
        ns = self.namespaces[site]
        if fault is LinkFault.PARTITION:
            _run("ip", "link", "set", outer, "down")
            _run("ip", "-n", ns, "link", "set", inner, "down")
        else:
            _run("tc", "qdisc", "replace", "dev", outer, *_THROTTLE)
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", inner, *_THROTTLE)
        self._impaired[site] = fault

    def restore(self, site: str) -> None:
        outer, inner = self._veths[site]
        ns = self.namespaces[site]
        if self._impaired.pop(site) is LinkFault.PARTITION:
            _run("ip", "link", "set", outer, "up")
            _run("ip", "-n", ns, "link", "set", inner, "up")
        else:
            _run("tc", "qdisc", "del", "dev", outer, "root")
            _run("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", inner, "root")

    def close(self) -> None:
        if self._bridged:
            subprocess.run(["ip", "link", "del", self._bridge], capture_output=True, check=False)
        for ns in self._created:  # deleting a namespace deletes its end of the veth pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        self._created.clear()
        self._bridged = False

    def __enter__(self) -> Hosts:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class HostedNetwork(LocalNetwork):
    """A :class:`LocalNetwork` whose sites run in ``hosts``' namespaces (call
    :meth:`issue_site_certificates` after :meth:`prepare`)."""

    def __init__(self, workdir: Path, hosts: Hosts, **kwargs: object) -> None:
        super().__init__(workdir, **kwargs)  # type: ignore[arg-type]
        self.hosts = hosts

    def issue_site_certificates(self) -> None:
        """Site certificates naming each site's 10.x address (an IP SAN), too."""
        now = datetime.now(UTC)
        for name, spec in self.sites.items():
            issue_party(
                self.certs,
                Party(
                    name=name,
                    role="site",
                    hosts=("localhost", "127.0.0.1", self.hosts.addresses[name]),
                    attributes={certs.BLOCK_FIELD: spec.block},
                ),
                now=now,
            )

    def site_config(self, site: SiteSpec, *, port: int = 0) -> Path:
        path = super().site_config(site, port=port)
        own = self.hosts.addresses[site.name]
        root = next(self.hosts.addresses[s.name] for s in self.sites.values() if s.uplink is None)
        text = re.sub(
            r'^(listen|metrics_listen|web_listen) = "127\.0\.0\.1:',
            rf'\1 = "{own}:',
            path.read_text(),
            flags=re.MULTILINE,
        )
        path.write_text(text.replace('"127.0.0.1:', f'"{root}:'))  # the DHT bootstrap
        return path

    def _site_command(self, site: SiteSpec, config: Path) -> list[str]:
        return [*self.hosts.exec_prefix(site.name), *super()._site_command(site, config)]

    def address(self, site: str) -> str:
        return f"{self.hosts.addresses[site]}:{self.ports[site]}"
