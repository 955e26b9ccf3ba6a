"""Deliveries larger than a site's part size cross every hop in parts, and arrive whole.

The sites' part size is cut to 64 KiB so that a document of ~600 KB goes in parts on the link
from d1 to d2 and to each subscriber: the same code path a document over gRPC's 64 MiB ceiling
takes at the default part size (4 MiB). The long test sends one over that ceiling.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from dishonest_site import launcher  # tests/integration is on sys.path (pytest's rootdir)

from benchmarks.procstat import memory_mb, run_measured
from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, wait_until
from xdn.grpc_tls import MAX_MESSAGE_BYTES
from xdn.ontology import load_ontology

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)

PUBLISHER = "production-dept"


@pytest.fixture
def small_parts(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalNetwork]:
    """The default network with 64 KiB parts; ``request.param``: (site, fault) to run one
    site as the dishonest double (tests/integration/dishonest_site.py)."""
    net = LocalNetwork(tmp_path / "net", limits={"part_bytes": 65_536})
    net.workdir.mkdir(parents=True)
    net.prepare()
    if getattr(request, "param", None):
        site, fault = request.param
        net.sites[site] = dataclasses.replace(net.sites[site], launcher=launcher(fault))
    try:
        net.start_sites()
        yield net
    finally:
        net.stop()


def _document(path: Path, size: int, seed: int, fragments: int | None = None) -> Path:
    with path.open("wb") as out:
        generate(PUBLISHER, size, out, seed=seed, fragments_hint=fragments)
    return path


def test_a_document_larger_than_a_part_reaches_each_subscriber_exactly(
    small_parts: LocalNetwork, tmp_path: Path
) -> None:
    net = small_parts
    for name in net.subscribers:
        net.start_subscriber(name)
        net.wait_subscribed(name)
    large = _document(tmp_path / "large.xml", 600_000, seed=5)
    small = _document(tmp_path / "small.xml", 5_000, seed=6)  # whole, between parts
    granted = net.granted_subscribers(PUBLISHER)
    assert granted, "the sample policy grants someone"
    net.publish(PUBLISHER, [large, small], wait_for=granted, timeout=300)
    ontology = load_ontology([ONTOLOGY])
    for name in granted:
        expected = expected_deliveries(net, ontology, name, {PUBLISHER: [large, small]})
        assert wait_until(
            lambda n=name, e=expected: read_received(net.inbox(n))[0] == e  # type: ignore[misc]
        ), net.output(name)
        assert read_received(net.inbox(name))[1] == 0  # nothing refused
    # The parts really went over a link and to subscribers, and only for the large one.
    assert net.metric("d1", "xdn_delivery_parts_sent_total", kind="site") > 1
    subscriber_parts = sum(
        net.metric(site, "xdn_delivery_parts_sent_total", kind="subscriber") for site in net.sites
    )
    assert subscriber_parts > len(granted)


@pytest.mark.parametrize("small_parts", [("d2", "mangle-parts")], indirect=True)
def test_parts_that_do_not_follow_are_refused_and_nothing_of_them_accepted(
    small_parts: LocalNetwork, tmp_path: Path
) -> None:
    net = small_parts
    net.start_subscriber("alice")
    net.wait_subscribed("alice")
    large = _document(tmp_path / "large.xml", 600_000, seed=5)
    net.publish(PUBLISHER, [large])
    # The repeated first part says it starts a delivery amid that delivery: alice drops the
    # stream at the bad part, resumes, gets the same bad parts, and drops it again.
    assert wait_until(lambda: net.output("alice").count("states a size") >= 2, timeout=60), (
        net.output("alice")
    )
    assert "connection lost" in net.output("alice")
    assert read_received(net.inbox("alice")) == ({}, 0)  # nothing accepted from them


def test_a_document_over_grpcs_message_ceiling_crosses_in_parts(tmp_path: Path) -> None:
    """~30 MB of XML: a publish request over 64 MiB (one gRPC message's most) goes to the root
    in default-sized parts (4 MiB), and on down the link and to alice."""
    net = LocalNetwork(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        large = _document(tmp_path / "huge.xml", 30_000_000, seed=7)
        net.publish(PUBLISHER, [large], wait_for=["alice"], timeout=600)
        parts = net.metric("d1", "xdn_publish_parts_total")
        assert parts * 4 * 1024 * 1024 > MAX_MESSAGE_BYTES  # it could not have gone whole
        expected = expected_deliveries(
            net, load_ontology([ONTOLOGY]), "alice", {PUBLISHER: [large]}
        )
        assert wait_until(
            lambda: read_received(net.inbox("alice")) == (expected, 0), timeout=300
        ), net.output("alice")
        assert net.metric("d1", "xdn_delivery_parts_sent_total", kind="site") > 1
        assert net.metric("d2", "xdn_delivery_parts_sent_total", kind="subscriber") > 1
    finally:
        net.stop()


def test_a_site_holds_a_few_parts_of_a_large_document_never_the_document(
    tmp_path: Path,
) -> None:
    """~100 MB in 1 MiB parts, publisher → d1 → d2 → alice: each site stages the document in
    its store as its parts come, routes it from the stored bytes and sends it on a part at a
    time, so its peak memory grows by well under the document (joined in memory, as sites did
    before, it grew by about four times the document; staged, it grows by some 15-30 MB of
    buffers whatever the document's size: 27-41 MB here, in 1 MiB parts)."""
    size, part = 100_000_000, 1_048_576
    net = LocalNetwork(tmp_path / "net", limits={"part_bytes": part})
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        small_parts = ["--part-bytes", str(part)]
        warm = _document(tmp_path / "warm.xml", 600_000, seed=5)  # every code path run once
        net.publish(PUBLISHER, [warm], wait_for=["alice"], extra=small_parts, timeout=300)
        peaks = {site: memory_mb(net.site_pid(site), "VmHWM") for site in ("d1", "d2")}
        large = _document(tmp_path / "large.xml", size, seed=8, fragments=1_000)  # (big ones)
        net.publish(PUBLISHER, [large], wait_for=["alice"], extra=small_parts, timeout=600)
        grown = {
            site: memory_mb(net.site_pid(site), "VmHWM") - peak for site, peak in peaks.items()
        }
        expected = expected_deliveries(
            net, load_ontology([ONTOLOGY]), "alice", {PUBLISHER: [warm, large]}
        )
        assert wait_until(
            lambda: read_received(net.inbox("alice")) == (expected, 0), timeout=300
        ), net.output("alice")
        assert net.metric("d1", "xdn_publish_parts_total") > size / part  # it came in parts
        # (d2 gets the fragments of its block, most of the document, in parts too)
        assert net.metric("d1", "xdn_delivery_parts_sent_total", kind="site") > size / part / 2
        bound_mb = 0.6 * size / 1e6  # (joined in memory: ~4 times the document)
        assert all(growth < bound_mb for growth in grown.values()), grown
    finally:
        net.stop()


def test_a_subscriber_spools_a_large_document_never_holds_it(tmp_path: Path) -> None:
    """~60 MB in a few large fragments (as in the measurements of docs/network.md) reaching
    alice in 64 KiB parts: she spools the parts to a file, verifies and decrypts each fragment
    from it as a stream and writes the view as a stream, so her peak memory grows by well
    under the document (joined in memory and decoded whole, as she did before, it grew by
    about 5.5 times the document), and nothing stays in her spool. (What she keeps per
    fragment, about 1.5 KB, is not bounded: a document of hundreds of thousands of fragments
    still costs that much.)"""
    size = 60_000_000
    net = LocalNetwork(tmp_path / "net", limits={"part_bytes": 65_536})
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        warm = _document(tmp_path / "warm.xml", 600_000, seed=5)  # every code path run once
        net.publish(PUBLISHER, [warm], wait_for=["alice"], timeout=300)
        peak = memory_mb(net.subscriber_pid("alice"), "VmHWM")
        parts_before = net.metric("d2", "xdn_delivery_parts_sent_total", kind="subscriber")
        large = _document(tmp_path / "large.xml", size, seed=8, fragments=10_000)
        net.publish(PUBLISHER, [large], wait_for=["alice"], timeout=600)
        # (its record is one long line: wait until it is whole before reading the file)
        assert wait_until(lambda: len(net.received("alice")) >= 2, timeout=300), net.output(
            "alice"
        )
        expected = expected_deliveries(
            net, load_ontology([ONTOLOGY]), "alice", {PUBLISHER: [warm, large]}
        )
        assert read_received(net.inbox("alice")) == (expected, 0), net.output("alice")
        grown = memory_mb(net.subscriber_pid("alice"), "VmHWM") - peak
        print(f"alice's peak memory grew by {grown} MB")
        sent = net.metric("d2", "xdn_delivery_parts_sent_total", kind="subscriber")
        assert sent - parts_before > 500  # it reached alice in parts
        assert grown < size / 1e6 / 2, grown
        views = sorted((net.inbox("alice") / "views").rglob("*.xml"))
        assert [v.name for v in views] == ["large.v1.xml", "warm.v1.xml"]
        assert all(v.stat().st_size > 0 for v in views)
        spool = net.workdir / "state" / "alice" / "spool"
        assert spool.is_dir() and not any(spool.iterdir())
    finally:
        net.stop()


def test_the_publisher_streams_a_large_document_never_holds_it(tmp_path: Path) -> None:
    """~100 MB in 1 MiB parts, publisher → d1 → d2 → alice: ``xdn publish`` finds the concepts
    in a first pass, encrypts each fragment into a file of its state directory as it comes,
    frames the request around the file and sends it a part at a time, so its peak memory grows
    by well under the document (parsed, encoded and serialized in memory, as it was before, it
    grew by about five times the document: 4,841 MB at 1 GB), and its files are gone after."""
    size, part = 100_000_000, 1_048_576
    net = LocalNetwork(tmp_path / "net", limits={"part_bytes": part})
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        net.start_subscriber("alice")
        net.wait_subscribed("alice")
        options = {"wait_for": ["alice"], "extra": ["--part-bytes", str(part)]}
        warm = _document(tmp_path / "warm.xml", 600_000, seed=5)  # every code path run once
        done, warm_peak = run_measured(
            net.publish_command(PUBLISHER, [warm], **options), cwd=net.workdir, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        large = _document(tmp_path / "large.xml", size, seed=8, fragments=1_000)
        done, peak = run_measured(
            net.publish_command(PUBLISHER, [large], **options), cwd=net.workdir, timeout=600
        )
        assert done.returncode == 0, done.stdout + done.stderr
        grown = peak - warm_peak
        print(f"xdn publish: peak {peak:.0f} MB for {size / 1e6:.0f} MB, {grown:.0f} MB more "
              f"than for {warm.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        expected = expected_deliveries(
            net, load_ontology([ONTOLOGY]), "alice", {PUBLISHER: [warm, large]}
        )
        assert wait_until(
            lambda: read_received(net.inbox("alice")) == (expected, 0), timeout=300
        ), net.output("alice")
        assert net.metric("d1", "xdn_publish_parts_total") > size / part  # it went in parts
        assert grown < 0.2 * size / 1e6, (peak, warm_peak)
        outgoing = net.workdir / "state" / PUBLISHER / "outgoing"
        assert outgoing.is_dir() and not any(outgoing.iterdir())
    finally:
        net.stop()
