"""The fault campaign of issue #18: kills, pauses and link cuts while a stream is published;
every subscriber's application holds each version it is due exactly once, in order.

The short campaign (3 sites, 4 subscribers, 10 kills) runs in ``make test``; the full one
(5 sites, 20 subscribers, 100 kills, over 100,000 fragments, then ``xdn audit``) in ``make
faults``. Both need network namespaces (root): without them the test FAILS with the reason, as
the netns integration test does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from fault_campaign import FULL, SHORT, Campaign, Summary, leaked_processes, run_campaign
from fault_checks import Verdict, judge
from fault_hosts import NetnsUnavailable
from fault_schedule import FaultKind, LinkFault, Schedule, Target, make_schedule

from xdn.paths import REPO_ROOT

PROCESSES = [
    *(Target(role="site", name=s) for s in ("d1", "d2", "d3")),
    *(Target(role="subscriber", name=s) for s in ("s01", "s02")),
    Target(role="publisher", name="p"),
    Target(role="key-service", name="p"),
]


def _schedule(seed: int, concurrency: int = 2) -> Schedule:
    return make_schedule(
        seed=seed,
        processes=PROCESSES,
        sites=["d1", "d2", "d3"],
        kills=30,
        pauses=10,
        cuts=10,
        start_s=3.0,
        end_s=100.0,
        concurrency=concurrency,
    )


def test_a_schedule_is_the_same_for_the_same_seed_and_differs_for_another() -> None:
    assert _schedule(1) == _schedule(1)
    assert _schedule(1) != _schedule(2)


def test_a_schedule_has_what_was_asked_within_its_window_one_fault_per_target_at_a_time() -> None:
    schedule = _schedule(3)
    assert (
        schedule.count(FaultKind.KILL),
        schedule.count(FaultKind.PAUSE),
        schedule.count(FaultKind.CUT),
    ) == (30, 10, 10)
    faults = schedule.faults
    assert all(3.0 <= f.start_s < f.end_s for f in faults)
    assert [f.start_s for f in faults] == sorted(f.start_s for f in faults)
    for f in faults:
        overlapping = [g for g in faults if g.start_s < f.end_s and f.start_s < g.end_s]
        assert [g.target.resource for g in overlapping].count(f.target.resource) == 1, f
        in_force_at_start = [g for g in faults if g.start_s <= f.start_s < g.end_s]
        assert len(in_force_at_start) <= 2
    # Every role is killed, a publisher and its key service never faulted at once, cuts are
    # of sites' links.
    assert {f.target.role for f in faults if f.kind is FaultKind.KILL} == {
        "site",
        "subscriber",
        "publisher",
        "key-service",
    }
    assert {f.link for f in faults if f.kind is FaultKind.CUT} <= set(LinkFault)
    assert all(f.target.role == "link" for f in faults if f.kind is FaultKind.CUT)


def test_a_schedule_that_cannot_fit_is_refused() -> None:
    with pytest.raises(ValueError, match="no free target"):
        make_schedule(
            seed=1,
            processes=PROCESSES[:1],
            sites=[],
            kills=5,
            pauses=0,
            cuts=0,
            start_s=0.0,
            end_s=1.0,
            concurrency=3,
            downtime_s=(5.0, 6.0),
        )


OWED = {
    "p": [
        (("a", 1), {"a#0": "C"}),
        (("b", 1), {"b#0": "C"}),
        (("a", 2), {"a#0": "C"}),
    ]
}


def _record(
    document: str, version: int, fragments: dict[str, str] | None = None
) -> dict[str, object]:
    return {
        "publisher": "p",
        "document": document,
        "version": version,
        "fragments": fragments or {f"{document}#0": "C"},
    }


def test_the_verdict_counts_nothing_when_each_version_came_once_in_order() -> None:
    verdict = Verdict()
    judge("s", [_record("a", 1), _record("b", 1), _record("a", 2)], OWED, verdict)
    assert verdict.ok and verdict.deliveries == 3 and not verdict.problems


@pytest.mark.parametrize(
    ("records", "field"),
    [
        ([_record("a", 1), _record("a", 2)], "lost"),
        ([_record("a", 1), _record("b", 1), _record("b", 1), _record("a", 2)], "duplicated"),
        ([_record("b", 1), _record("a", 1), _record("a", 2)], "reordered"),
        ([_record("a", 1), _record("b", 1, {"b#0": "C", "b#1": "D"}), _record("a", 2)], "altered"),
        ([_record("a", 1), _record("b", 1), _record("a", 2), _record("c", 1)], "unexpected"),
    ],
)
def test_the_verdict_finds_each_kind_of_fault(records: list[dict[str, object]], field: str) -> None:
    verdict = Verdict()
    judge("s", records, OWED, verdict)
    assert getattr(verdict, field) == 1 and not verdict.ok, verdict


def test_a_process_left_running_in_the_campaign_directory_is_found(tmp_path: Path) -> None:
    assert leaked_processes(tmp_path) == []
    left = subprocess.Popen(["sleep", "60"], cwd=tmp_path)
    try:
        assert [line.split(":")[0] for line in leaked_processes(tmp_path)] == [str(left.pid)]
    finally:
        left.kill()
        left.wait()
    assert leaked_processes(tmp_path) == []


def _campaign(campaign: Campaign, workdir: Path) -> Summary:
    try:
        return run_campaign(campaign, workdir)
    except NetnsUnavailable as exc:
        pytest.fail(
            f"cannot create network namespaces here ({exc}); the fault campaign needs "
            "root and iproute2 (`ip netns add`)"
        )


def _assert_nothing_lost_or_duplicated(summary: Summary, campaign: Campaign) -> None:
    text = "\n".join(summary.lines())
    assert summary.kills == campaign.kills, text
    assert summary.restarts == campaign.kills, text
    assert summary.link_cuts == campaign.cuts and summary.pauses == campaign.pauses, text
    assert summary.faults_100_kills_lost == 0, text
    assert summary.faults_100_kills_duplicated_to_app == 0, text
    assert summary.ok, text


@pytest.mark.integration
def test_short_fault_campaign(tmp_path: Path) -> None:
    summary = _campaign(SHORT, tmp_path / "campaign")
    _assert_nothing_lost_or_duplicated(summary, SHORT)
    assert summary.deliveries > 0
    written = json.loads((tmp_path / "campaign" / "summary.json").read_text())
    assert written["faults_100_kills_lost"] == 0 and "recovery_p99_s" in written


@pytest.mark.faults
@pytest.mark.integration
@pytest.mark.timeout(3600)
def test_full_fault_campaign(tmp_path: Path) -> None:
    summary = _campaign(FULL, tmp_path / "campaign")
    kept = REPO_ROOT / "build" / "faults" / "summary.json"  # for BENCHMARKS.md
    kept.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "campaign" / "summary.json", kept)
    _assert_nothing_lost_or_duplicated(summary, FULL)
    assert summary.sites >= 5 and summary.subscribers >= 20
    assert summary.fragments_published >= 100_000
    assert summary.audit_ok is True
