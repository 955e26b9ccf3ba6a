"""``xdn cluster up`` prints commands a user can paste as they are (issue #20)."""

from __future__ import annotations

import pytest

from deploy.cluster import load_topology
from deploy.cluster_cli import client_commands
from xdn.paths import REPO_ROOT


def test_complete_client_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    topology = load_topology(REPO_ROOT / "deploy" / "topologies" / "three-sites.toml")
    work = REPO_ROOT / "build" / "cluster" / "three-sites"
    addresses = {"d1": "127.0.0.1:1001", "d2": "127.0.0.1:1002", "d3": "127.0.0.1:1003"}
    lines = [line.split() for line in client_commands(topology, work, addresses)]
    w = "build/cluster/three-sites"
    assert lines[0] == [
        "subscriber", "alice:", "xdn", "-v", "subscribe", "--connect", "127.0.0.1:1002",
        "--name", "alice", "--certs", f"{w}/certs", "--out", f"{w}/inbox/alice",
        "--state-dir", f"{w}/clients",
    ]
    assert lines[1] == [
        "xdn", "unsubscribe", "--connect", "127.0.0.1:1002", "--name", "alice",
        "--certs", f"{w}/certs", "--state-dir", f"{w}/clients",
    ]
    publish = next(line for line in lines if line[:2] == ["publisher", "production-dept:"])
    assert publish[2:] == [
        "xdn", "publish", "ontology/samples/production-dept-order.xml",
        "--connect", "127.0.0.1:1001", "--name", "production-dept", "--certs", f"{w}/certs",
        "--mapping", "ontology/mappings/production-dept.toml",
        "--policy", f"{w}/policies/production-dept.toml", "--state-dir", f"{w}/clients",
    ]
    policies = " ".join(lines[-1])
    assert "the sites enforce the cluster's own copies, re-signed" in policies
    assert f"xdn policy sign {w}/policies/NAME.toml --key {w}/certs/NAME.key" in policies
