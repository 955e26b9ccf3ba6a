"""``xdn audit --master spark://…`` on a real standalone cluster: a master and a worker started
as separate processes on loopback, the audit run as a user runs it (``xdn audit`` in its own
driver process), and its verdict, failures and tables compared with local mode.

The executors run a Python that has xdn's dependencies but not xdn itself (a venv whose path
holds the test interpreter's site-packages, without the editable install's hook), through a
wrapper that records each start: the run only passes if ``--executor-python`` is honoured
and the shipped zip is what the executors import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import sysconfig
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest
from audit_logs import Network, make_network
from pyspark.sql import SparkSession
from pyspark.testing.utils import assertDataFrameEqual

from audit.job import run_audit

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_S = 180.0  # deadline for a JVM daemon to come up on a loaded machine


def _wait_for(what: str, check: Callable[[], object], deadline_s: float) -> object:
    """``check()``'s first truthy result, polled until ``deadline_s`` seconds have passed."""
    end = time.monotonic() + deadline_s
    while not (found := check()):
        if time.monotonic() > end:
            raise TimeoutError(f"{what}: not within {deadline_s:.0f} s")
        time.sleep(0.2)
    return found


def _daemon_env(tmp: Path) -> dict[str, str]:
    """The environment of the master and the worker (and so of the executors): loopback, no
    PYTHONPATH (the executors must find xdn in the shipped zip alone), no site settings."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    (tmp / "conf").mkdir(exist_ok=True)
    return env | {
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_CONF_DIR": str(tmp / "conf"),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_DIRS": str(tmp / "local"),
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",  # no fixed port 6066
    }


def _start(cls: str, args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), cls, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log.parent,  # not the source tree: a Python started there would import it
            start_new_session=True,  # its own process group: the executors it starts too
        )


def _stop(process: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 30)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _logged(log: Path, pattern: str, process: subprocess.Popen[bytes]) -> Callable[[], object]:
    def check() -> object:
        if process.poll() is not None:
            raise RuntimeError(f"{log.name} exited early:\n{log.read_text()[-3000:]}")
        return re.search(pattern, log.read_text(errors="replace"))

    return check


def _alive_workers(ui: str) -> int:
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=5) as answer:
            status = json.load(answer)
    except OSError:
        return 0
    return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")


@dataclass(frozen=True, slots=True, kw_only=True)
class Standalone:
    url: str  # spark://127.0.0.1:PORT
    ui: str  # http://127.0.0.1:PORT
    started_s: float


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A standalone master and one worker (2 cores, 2 GiB), ports picked by the JVMs (0) and
    read from their logs; the worker counted as registered by the master's JSON status."""
    tmp = tmp_path_factory.mktemp("standalone")
    env = _daemon_env(tmp)
    began = time.monotonic()
    processes = []
    try:
        master_log = tmp / "master.log"
        master = _start(
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", "0", "--webui-port", "0"],
            master_log,
            env,
        )
        processes.append(master)
        found = _wait_for(
            "master's ports",
            _logged(
                master_log,
                r"Starting Spark master at (spark://127\.0\.0\.1:\d+)(?s:.*)"
                r"service 'MasterUI' on port (\d+)",
                master,
            ),
            START_S,
        )
        assert isinstance(found, re.Match)
        url, ui = found[1], f"http://127.0.0.1:{found[2]}"
        worker = _start(
            "org.apache.spark.deploy.worker.Worker",
            [
                url,
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--webui-port",
                "0",
                "--cores",
                "2",
                "--memory",
                "2g",
                "--work-dir",
                str(tmp / "work"),
            ],
            tmp / "worker.log",
            env,
        )
        processes.append(worker)
        _wait_for(
            "a registered worker", lambda: worker.poll() is None and _alive_workers(ui), START_S
        )
        yield Standalone(url=url, ui=ui, started_s=time.monotonic() - began)
    finally:
        for process in reversed(processes):
            _stop(process)


@pytest.fixture(scope="module")
def executor_python(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wrapper around a Python that has xdn's dependencies but cannot import xdn, and the
    file it appends a line to each time it starts."""
    tmp = tmp_path_factory.mktemp("executor-python")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    site = Path(sysconfig.get_paths(vars={"base": str(tmp / "venv")})["purelib"])
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # a path, no hooks
    started = tmp / "started"
    wrapper = tmp / "python"
    wrapper.write_text(
        f'#!/bin/sh\necho "$$" >> {started}\nexec {tmp / "venv" / "bin" / "python"} "$@"\n'
    )
    wrapper.chmod(0o755)
    env = _daemon_env(tmp)

    def imports(module: str) -> bool:
        probe = [str(tmp / "venv" / "bin" / "python"), "-c", f"import {module}"]
        found = subprocess.run(probe, env=env, cwd=tmp, capture_output=True, check=False)
        return found.returncode == 0

    assert imports("cryptography") and imports("pyspark")
    assert not imports("xdn") and not imports("audit")  # only the zip can bring them
    return wrapper, started


def _logs(network: Network, root: Path) -> Path:
    """The forged network's logs with a site's SQLite state among them."""
    logs = root / "logs"
    shutil.copytree(network.forged, logs)
    with sqlite3.connect(logs / "d1" / "state.sqlite3") as db:
        db.execute("CREATE TABLE queue (seq INTEGER)")
    db.close()
    return logs


def test_audit_on_a_standalone_cluster_matches_local_mode(
    spark: SparkSession,
    standalone: Standalone,
    executor_python: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    network = make_network(tmp_path / "network")
    logs = _logs(network, tmp_path)
    (tmp_path / "ca.pem").write_bytes(network.ca_pem)
    wrapper, started = executor_python
    # local mode: the shared test session (a session active in this process)
    local = run_audit([str(logs)], ca_pem=network.ca_pem, out_dir=tmp_path / "local")
    # the cluster: `xdn audit` in its own driver process, as a user runs it
    env = {k: v for k, v in os.environ.items() if k != "PYSPARK_PYTHON"}
    env |= {"PYTHONPATH": str(ROOT), "SPARK_LOCAL_IP": "127.0.0.1"}
    began = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli",
            "audit",
            str(logs),
            "--ca",
            str(tmp_path / "ca.pem"),
            "--out",
            str(tmp_path / "cluster"),
            "--master",
            standalone.url,
            "--executor-python",
            str(wrapper),
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--progress-every",
            "5",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    took = time.monotonic() - began
    print(f"cluster up in {standalone.started_s:.0f} s; cluster audit took {took:.0f} s")
    assert done.returncode == (0 if local.ok else 1) == 1, done.stderr[-5000:]
    assert started.exists(), "the executors did not run --executor-python"
    assert re.search(r"audit: shipping xdn-audit-[0-9a-f]{16}\.zip", done.stderr)
    assert f"Spark {standalone.url}: 2 cores, 1 partition" in done.stderr  # (small logs)
    assert "d1/state.sqlite3 (SQLite database)" in done.stderr
    assert re.search(r"audit: read [\d,]+ log lines, 17 envelopes read", done.stderr)
    failed = sorted(line for line in done.stdout.splitlines() if line.startswith("FAILED "))
    assert failed == sorted(
        f"FAILED [{f.kind or '-'}] {f.graph or '-'} ({f.node or '-'}): {f.reason}"
        for f in local.failures
    )
    assert len(failed) == 3 + 4  # and four deliveries to s1 without a receipt
    for table in ("paths", "fan_out", "latency", "failures", "chains", "signatures", "refusals"):
        assertDataFrameEqual(
            spark.read.parquet(str(tmp_path / "cluster" / table)),
            spark.read.parquet(str(tmp_path / "local" / table)),
        )
