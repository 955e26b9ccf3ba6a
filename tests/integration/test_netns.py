"""Three sites as three hosts: Linux network namespaces joined by a bridge.

Each site runs in its own network namespace (``ip netns``) with a 10.x address on a veth pair
plugged into a bridge in the test's namespace; the subscribers run in the third site's
namespace, the publisher in the root (test) namespace. No traffic leaves the machine: the
bridge has no uplink and no forwarding. Site certificates carry their 10.x address as an IP SAN.

Needs root and iproute2. If network namespaces cannot be created here the test FAILS with the
reason (it is an acceptance test of the issue, not an optional one).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork
from deploy.pki import Party, issue_party
from xdn import certs
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SUBNET = "10.231.{}.{}"
HOSTS = {"d1": 1, "d2": 2, "d3": 3}  # site → last octet; the bridge (root namespace) is .254
SUBSCRIBER_HOST = "d3"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"`ip {' '.join(args)}` failed: {done.stderr.strip()}")


@dataclass(frozen=True, slots=True)
class Hosts:
    """The namespaces (site → name) and addresses (site → 10.x) of one test."""

    tag: str
    namespaces: dict[str, str]
    addresses: dict[str, str]

    def exec(self, site: str) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[site]]


def _require_netns() -> None:
    if shutil.which("ip") is None:
        pytest.fail("iproute2 is not installed (`ip` not found); the netns test needs it")
    version = subprocess.run(["ip", "-V"], capture_output=True, text=True, check=False)
    if version.returncode != 0:
        pytest.fail(f"`ip -V` failed: {version.stderr.strip()}")
    if os.geteuid() != 0:
        pytest.fail("the netns test needs root (ip netns add); run it as root or in CI as root")


@pytest.fixture
def hosts() -> Iterator[Hosts]:
    _require_netns()
    tag = f"{os.getpid() % 10000:04d}"
    subnet = str(100 + os.getpid() % 150)
    bridge = f"xdnb{tag}"
    namespaces = {site: f"xdn-{tag}-{site}" for site in HOSTS}
    addresses = {site: SUBNET.format(subnet, n) for site, n in HOSTS.items()}
    created: list[str] = []
    try:
        try:
            _ip("netns", "add", namespaces["d1"])
        except RuntimeError as exc:
            pytest.fail(f"cannot create network namespaces here ({exc}); this sandbox does not "
                        "allow `ip netns add` — run the test where it does (root, CAP_SYS_ADMIN)")
        created.append(namespaces["d1"])
        _ip("link", "add", bridge, "type", "bridge")
        _ip("addr", "add", f"{SUBNET.format(subnet, 254)}/24", "dev", bridge)
        _ip("link", "set", bridge, "up")
        for site, ns in namespaces.items():
            if ns not in created:
                _ip("netns", "add", ns)
                created.append(ns)
            outer, inner = f"xdv{tag}{HOSTS[site]}", f"xdp{tag}{HOSTS[site]}"
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{addresses[site]}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield Hosts(tag=tag, namespaces=namespaces, addresses=addresses)
    finally:
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
        for ns in created:  # deleting a namespace deletes its end of the veth pair, and the pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


class _Hosted:
    """Processes of a :class:`LocalNetwork` layout, each in its host's namespace."""

    def __init__(self, net: LocalNetwork, hosts: Hosts) -> None:
        self.net, self.hosts = net, hosts
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(self, name: str, host: str, args: Sequence[str]) -> None:
        command = [*self.hosts.exec(host), sys.executable, "-m", "cli", *args]
        with open(self.net.workdir / f"{name}.out", "ab") as out:
            self.procs[name] = subprocess.Popen(
                command, cwd=self.net.workdir, stdout=out, stderr=subprocess.STDOUT
            )

    def start_site(self, site: str, timeout: float = 60.0) -> None:
        config = self.net.site_config(self.net.sites[site])
        own, root = self.hosts.addresses[site], self.hosts.addresses["d1"]
        text = re.sub(r'^(listen|metrics_listen|web_listen) = "127\.0\.0\.1:', rf'\1 = "{own}:',
                      config.read_text(), flags=re.MULTILINE)
        config.write_text(text.replace('"127.0.0.1:', f'"{root}:'))  # the DHT bootstrap
        self.spawn(site, site, ["disseminator", "serve", "--config", str(config)])
        port_file = self.net.workdir / "state" / site / "port"
        deadline = time.monotonic() + timeout
        while not (port_file.exists() and port_file.read_text().strip()):
            if self.procs[site].poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"site {site} did not start: {self.net.output(site)}")
            time.sleep(0.05)
        self.net.ports[site] = int(port_file.read_text())

    def address(self, site: str) -> str:
        return f"{self.hosts.addresses[site]}:{self.net.ports[site]}"

    def stop(self) -> None:
        for proc in reversed(self.procs.values()):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _wait(condition: object, timeout: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_sites_in_separate_network_namespaces(hosts: Hosts, tmp_path: Path) -> None:
    net = LocalNetwork(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    now = datetime.now(UTC)
    for site, address in hosts.addresses.items():  # the 10.x address as an IP SAN
        party = Party(name=site, role="site", hosts=("localhost", "127.0.0.1", address),
                      attributes={certs.BLOCK_FIELD: net.sites[site].block})
        issue_party(net.certs, party, now=now)
    hosted = _Hosted(net, hosts)
    try:
        for site in ("d1", "d2", "d3"):
            hosted.start_site(site)
        for name, sub_spec in net.subscribers.items():
            hosted.spawn(name, SUBSCRIBER_HOST, [
                "subscribe", "--connect", hosted.address(sub_spec.site), "--name", name,
                "--certs", "certs", "--out", str(net.inbox(name)), "--state-dir", "state",
                "--log", f"logs/{name}.nq",
            ])
        for name in net.subscribers:
            sub = net.inbox(name) / "subscription.json"
            _wait(lambda s=sub: s.exists(), 60, f"{name} to register: {net.output(name)}")
        # The publisher runs in the root namespace, reaching d1 over the bridge.
        spec = net.publishers["production-dept"]
        # A second document after the sample: once it is in, nothing else is due to alice.
        marker = net.workdir / "marker.xml"
        shutil.copyfile(SAMPLE, marker)
        publish = [
            sys.executable, "-m", "cli", "publish", str(SAMPLE), str(marker),
            "--connect", hosted.address("d1"), "--name", spec.name, "--certs", "certs",
            "--mapping", str(spec.mapping), "--policy", f"policies/{spec.policy.name}",
            "--ontology", str(ONTOLOGY), "--state-dir", "state", "--log", f"logs/{spec.name}.nq",
            "--wait-for", "alice",
        ]
        done = subprocess.run(publish, cwd=net.workdir, capture_output=True, text=True,
                              timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr

        expected = expected_deliveries(
            net, load_ontology([ONTOLOGY]), "alice", {"production-dept": [SAMPLE, marker]}
        )
        assert len(expected) == 2
        _wait(lambda: ("production-dept", "marker") in read_received(net.inbox("alice"))[0], 60,
              "alice's view of the marker")
        received, refused = read_received(net.inbox("alice"))
        assert (received, refused) == (expected, 0)
        assert list((net.inbox("alice") / "views").rglob("*.xml"))
        # The traffic really crossed namespaces: every site listened on its own 10.x address.
        for site, address in hosts.addresses.items():
            assert f'listen = "{address}:0"' in (net.workdir / f"{site}.toml").read_text()
    finally:
        hosted.stop()
