"""``xdn cluster up|status|down`` through the real CLI, each command its own process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.network import wait_until
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

TOPOLOGY = REPO_ROOT / "deploy" / "topologies" / "three-sites.toml"



def _xdn(*args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def _cluster(action: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    return _xdn("cluster", action, str(TOPOLOGY), "--workdir", str(workdir))


def _pids(workdir: Path) -> dict[str, int]:
    return {p.stem: int(p.read_text()) for p in (workdir / "run").glob("*.pid")}


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and ") Z" in stat.read_text())


def test_up_status_down(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    up = _cluster("up", workdir)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        pids = _pids(workdir)
        assert sorted(pids) == ["d1", "d2", "d3"]
        # The sites outlived the `up` process.
        assert all(_running(pid) for pid in pids.values())
        for site in pids:
            port = (workdir / "state" / site / "port").read_text().strip()
            assert f"127.0.0.1:{port}" in up.stdout
            assert "/metrics" in up.stdout

        status = _cluster("status", workdir)
        assert status.returncode == 0, status.stdout + status.stderr
        lines = {line.split()[0]: line for line in status.stdout.splitlines()[1:-1]}
        for site, pid in pids.items():
            assert str(pid) in lines[site]
            assert "SERVING" in lines[site]
            # each site's HTTPS endpoint and LDN inbox, on the line below its row
            web_port = (workdir / "state" / site / "web_port").read_text().strip()
            base = f"https://127.0.0.1:{web_port}/"
            below = status.stdout.split(lines[site], 1)[1].splitlines()[1]
            assert below.split() == ["web", base, "inbox:", f"{base}inbox/"]
            assert f"inbox: {base}inbox/" in up.stdout
        assert "3/3 sites serving" in status.stdout

        again = _cluster("up", workdir)
        assert again.returncode == 1
        assert "already running" in again.stderr
    finally:
        down = _cluster("down", workdir)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "cluster down (3 stopped)" in down.stdout
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(p) for p in pids.values()):
        time.sleep(0.1)
    assert not any(_running(p) for p in pids.values())
    assert _pids(workdir) == {}

    after = _cluster("status", workdir)
    assert after.returncode == 3
    assert "0/3 sites serving" in after.stdout


def test_status_of_a_site_killed_behind_the_clusters_back(tmp_path: Path) -> None:
    workdir = tmp_path / "cluster"
    up = _cluster("up", workdir)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        pid = _pids(workdir)["d3"]
        os.kill(pid, 9)
        assert wait_until(lambda: not _running(pid))
        status = _cluster("status", workdir)
        assert status.returncode == 3
        d3 = next(line for line in status.stdout.splitlines() if line.startswith("d3 "))
        assert " no " in d3
        assert "2/3 sites serving" in status.stdout
    finally:
        down = _cluster("down", workdir)
    assert down.returncode == 0
    assert "d3: not running" in down.stdout


def test_a_bad_topology_is_refused_before_anything_starts(tmp_path: Path) -> None:
    topology = tmp_path / "bad.toml"
    topology.write_text('[[site]]\nname = "d1"\nblock = "NoSuchConcept"\n')
    done = _xdn("cluster", "up", str(topology), "--workdir", str(tmp_path / "w"))
    assert done.returncode == 1
    assert "NoSuchConcept" in done.stderr
    assert not (tmp_path / "w" / "run").exists()
