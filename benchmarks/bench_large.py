"""A large document crosses the network in bounded memory (issue #15).

One network in real processes (d1 the root, d2 below it, alice subscribed at d2), messages in
parts of 4 MiB (the default). A generated document of a few large fragments (1 GB; 100 MB with
``--quick``) is published once, and each process's memory is read from the kernel:

* ``large_document_site_growth`` — the larger of d1's and d2's peak RSS growth (``VmHWM`` after
  the document reached alice, less before it was published);
* ``large_document_subscriber_growth`` — the same for alice;
* ``large_document_publisher_peak`` — the peak RSS of the ``xdn publish`` process (the kernel's
  account of that child, from ``wait4``).

**Baseline**: the document's size in MB, so each ratio says how much of the document a
process holds at its peak (bounded: a small fraction that does not grow with the document).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.harness import Result, ratio_result
from benchmarks.procstat import memory_mb, run_measured
from deploy.docgen import generate
from deploy.expectations import read_received
from deploy.network import LocalNetwork, SiteSpec, SubscriberSpec, wait_until

PUBLISHER = "production-dept"
FRAGMENTS = 10_000  # a hint: padding makes a handful of large fragments (6 at 1 GB)


def _network(workdir: Path) -> LocalNetwork:
    net = LocalNetwork(
        workdir / "net",
        sites=(
            SiteSpec(name="d1", block="ProductionProcess"),
            SiteSpec(name="d2", block="WorkOrder", uplink="d1"),
        ),
        subscribers=(SubscriberSpec(name="alice", site="d2", attributes={"OU": "Cred1"}),),
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    return net


def run(quick: bool) -> list[Result]:
    size = 100_000_000 if quick else 1_000_000_000
    with tempfile.TemporaryDirectory(prefix="xdn-bench-large-") as tmp:
        workdir = Path(tmp)
        document = workdir / "large.xml"
        with document.open("wb") as out:
            generate(PUBLISHER, size, out, seed=1, fragments_hint=FRAGMENTS)
        mb = document.stat().st_size / 1e6
        with _network(workdir) as net:
            net.start_sites()
            net.start_subscriber("alice")
            net.wait_subscribed("alice")
            pids = {
                "d1": net.site_pid("d1"), "d2": net.site_pid("d2"),
                "alice": net.subscriber_pid("alice"),
            }
            before = {name: memory_mb(pid, "VmHWM") for name, pid in pids.items()}
            started = time.perf_counter()
            done, publisher_mb = run_measured(
                net.publish_command(PUBLISHER, [document], wait_for=["alice"]),
                cwd=net.workdir, timeout=3600,
            )
            if done.returncode != 0:
                raise RuntimeError(f"xdn publish failed: {done.stdout}{done.stderr}")
            published = time.perf_counter() - started
            if not wait_until(lambda: bool(read_received(net.inbox("alice"))[0]), timeout=3600):
                raise RuntimeError(f"alice did not accept the document: {net.output('alice')}")
            received = time.perf_counter() - started
            grown = {name: memory_mb(pid, "VmHWM") - before[name] for name, pid in pids.items()}
    note = (
        f"a generated document of {mb:,.0f} MB, published in {published:.0f} s, accepted by "
        f"alice {received:.0f} s after the publish began; peak growth d1 {grown['d1']:.0f} MB, "
        f"d2 {grown['d2']:.0f} MB, alice {grown['alice']:.0f} MB"
    )
    baseline = "the document's size (MB)"
    return [
        ratio_result(
            name="large_document_site_growth", value=max(grown["d1"], grown["d2"]), unit="MB",
            baseline=baseline, baseline_value=mb, goal="bounded", note=note,
        ),
        ratio_result(
            name="large_document_subscriber_growth", value=grown["alice"], unit="MB",
            baseline=baseline, baseline_value=mb, goal="bounded", note=note,
        ),
        ratio_result(
            name="large_document_publisher_peak", value=publisher_mb, unit="MB",
            baseline=baseline, baseline_value=mb, goal="bounded",
            note="xdn publish streams the document through files of its state directory "
            "(before: parsed, encrypted and framed in memory, 4,841 MB at 1 GB)",
        ),
    ]
