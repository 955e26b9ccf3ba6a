"""The network benchmark's baselines replay what the chain carried, one group per document
(benchmarks.captured, benchmarks.bare_relay), and each run writes its own results file."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from benchmarks.__main__ import results_path
from benchmarks.bare_relay import _groups_done, read_link, write_link
from benchmarks.bench_network import QUICK, _ChainRun, _results
from benchmarks.captured import chain_links, first_issue_ms, link_groups
from benchmarks.wire_tap import REQUEST, RESPONSE, Record, read_tap, write_records
from xdn.wire.v1 import dissemination_pb2 as pb


def _document(name: str, issued: int = 0) -> pb.Dissemination:
    return pb.Dissemination(manifest=pb.Manifest(document_id=name, issued_at_ms=issued))


def _record(kind: int, method: str, data: bytes, at_ns: int) -> Record:
    return Record(kind, method, 1, at_ns, data)


def test_publisher_requests_group_per_document_keys_going_with_the_next() -> None:
    keys_only = pb.PublishRequest(keys=[pb.KeyMessage()]).SerializeToString()
    first = pb.PublishRequest(dissemination=_document("a", issued=7)).SerializeToString()
    whole = pb.PublishRequest(dissemination=_document("b", issued=9)).SerializeToString()
    parts = [
        pb.Part(data=whole[:5], size=len(whole), more=True).SerializeToString(),
        pb.Part(data=whole[5:]).SerializeToString(),
    ]
    records = [
        _record(REQUEST, "Publish", keys_only, 1),
        _record(REQUEST, "Publish", first, 2),
        _record(RESPONSE, "Publish", b"ack", 3),  # (the site's answer: not on this link)
        _record(REQUEST, "PublishParts", parts[0], 4),
        _record(REQUEST, "PublishParts", parts[1], 5),
        _record(REQUEST, "Publish", keys_only, 99),  # outside the window
    ]
    link = chain_links(["d1", "d2"])[0]
    groups = link_groups(records, link, since_ns=0, until_ns=50)
    assert [[r.at_ns for r in g] for g in groups] == [[1, 2], [4, 5]]
    assert [first_issue_ms(g) for g in groups] == [7, 9]


def test_deliveries_group_per_document_checkpoints_after_the_last_stay_with_it() -> None:
    joined = pb.Delivery(sequence=3, dissemination=_document("b")).SerializeToString()
    wrap = [
        pb.ServerMessage(subscribed=pb.Subscribed(subscriber="alice")),
        pb.ServerMessage(delivery=pb.Delivery(sequence=1, key=pb.KeyMessage())),
        pb.ServerMessage(delivery=pb.Delivery(sequence=2, dissemination=_document("a"))),
        pb.ServerMessage(
            delivery=pb.Delivery(sequence=3, part=pb.Part(data=joined[:4], more=True))
        ),
        pb.ServerMessage(delivery=pb.Delivery(sequence=3, part=pb.Part(data=joined[4:]))),
        pb.ServerMessage(delivery=pb.Delivery(sequence=4, checkpoint=pb.Checkpoint())),
    ]
    records = [_record(RESPONSE, "Subscribe", m.SerializeToString(), i) for i, m in enumerate(wrap)]
    link = chain_links(["d1", "d2"])[-1]
    assert (link.site, link.methods) == ("d2", ("Subscribe",))
    groups = link_groups(records, link, since_ns=0, until_ns=100)
    assert [[r.at_ns for r in g] for g in groups] == [[0, 1, 2], [3, 4, 5]]


def test_plans_and_tap_files_read_back_as_written(tmp_path: Path) -> None:
    write_link(tmp_path / "link0.bin", [[b"a", b""], [b"bcd"]])
    assert read_link(tmp_path / "link0.bin") == [[b"a", b""], [b"bcd"]]
    records = [_record(REQUEST, "Link", b"xyz", 5), _record(RESPONSE, "GetReceipts", b"", 6)]
    write_records(tmp_path / "t.tap", records)
    assert read_tap(tmp_path / "t.tap") == records


def test_a_relay_sees_each_group_complete_after_its_last_message() -> None:
    seen: list[tuple[int, int]] = []

    async def messages() -> AsyncIterator[bytes]:
        for i in range(6):
            seen.append((-1, i))
            yield b"m"

    async def run() -> None:
        async for group in _groups_done(messages(), [2, 1, 3]):
            seen.append((group, -1))

    asyncio.run(run())
    groups_after = [(g, seen[k - 1][1]) for k, (g, _) in enumerate(seen) if g >= 0]
    assert groups_after == [(0, 1), (1, 2), (2, 5)]


def test_each_kind_of_run_writes_its_own_results_file() -> None:
    assert results_path(quick=False, only="").name == "results.json"
    assert results_path(quick=True, only="").name == "results-quick.json"
    assert results_path(quick=False, only="network").name == "results-only-network.json"
    assert results_path(quick=True, only="net").name == "results-quick-only-net.json"


def test_network_figures_are_medians_of_repetitions_against_measured_baselines() -> None:
    chain = _ChainRun(
        throughput=[],
        throughput_rates=[1.0, 2.0, 4.0],
        wall_rates=[0.5, 1.0, 2.0],
        snapshots=[],
        max_rate=20.0,
        paced_rate=10.0,
        latency=[],
        latencies_ms=[list(range(1, 101)), list(range(101, 201)), list(range(201, 301))],
        subscribe_until_ns=0,
    )
    results = {
        r.name: r
        for r in _results(
            QUICK,
            chain,
            bare_rates=[100.0, 10.0, 40.0],
            bare_p99=[10.0, 100.0, 150.0],
            publish_rates=[2.0, 2.0, 2.0],
            subscribe_rates=[1.0, 4.0, 8.0],
        )
    }
    relay = results["relay_vs_bare_same_bytes"]
    assert (relay.value, relay.baseline_value) == (2.0, 40.0)
    assert relay.repetitions == (0.01, 0.2, 0.1)
    assert relay.ratio == 0.1  # the median of the repetitions' ratios
    e2e = results["e2e_vs_slowest_stage"]
    assert e2e.baseline_value == 2.0  # the slower stage of each repetition: 1, 2, 2
    assert e2e.repetitions == (1.0, 1.0, 2.0)
    p99 = results["p99_latency_ms_3hops"]
    assert (p99.value, p99.baseline_value) == (200, 100.0)  # p99s 100, 200, 300
    assert p99.repetitions == (10.0, 2.0, 2.0)
    assert results["p99_vs_bare_p99"].ratio == p99.ratio == 2.0
