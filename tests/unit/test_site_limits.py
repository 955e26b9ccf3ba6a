"""Site limits: the pure checks, their bookkeeping, the ``[limits]`` table, interest chunks."""

from __future__ import annotations

from pathlib import Path

import pytest

from disseminator.config import load_site_config
from disseminator.limits import (
    LimitExceeded,
    Limits,
    MemoryBudget,
    StreamCounts,
    chunk_sizes,
)
from disseminator.uplink import interest_chunks
from xdn.errors import ConfigError, ProtocolError
from xdn.wire.v1 import dissemination_pb2 as pb

GOOD = """
[site]
name = "d2"
listen = "127.0.0.1:0"
block = "WorkOrder"

[tls]
ca = "certs/ca.pem"
cert = "certs/d2.pem"
key = "certs/d2.key"

[ontology]
files = ["onto.owl"]
"""


# ---- the checks ------------------------------------------------------------------------------
def test_a_limit_exceeded_is_a_protocol_error_naming_limit_value_and_advice() -> None:
    with pytest.raises(LimitExceeded) as info:
        Limits(subscribe_concepts=3).check_concepts(4, ontology_size=100)
    assert isinstance(info.value, ProtocolError)
    assert (info.value.limit, info.value.value) == ("subscribe_concepts", 3)
    message = str(info.value)
    assert "names 4 concepts" in message
    assert "subscribe_concepts = 3" in message
    assert "name each concept once" in message


def test_concepts_up_to_the_limit_pass_and_never_more_than_the_ontology_has() -> None:
    limits = Limits(subscribe_concepts=10)
    limits.check_concepts(10, ontology_size=50)
    limits.check_concepts(0, ontology_size=50)
    limits.check_concepts(5, ontology_size=5)
    with pytest.raises(LimitExceeded, match="ontology size = 5"):
        limits.check_concepts(6, ontology_size=5)


def test_members_per_update_and_per_link() -> None:
    limits = Limits(interest_members=4, link_members=10)
    limits.check_members(4, pending=6)
    with pytest.raises(LimitExceeded, match=r"lists 5 members.*interest_members = 4.*chunks"):
        limits.check_members(5, pending=0)
    with pytest.raises(LimitExceeded, match="link_members = 10"):
        limits.check_members(4, pending=7)


@pytest.mark.parametrize(
    ("interval_ms", "limit"),
    [(49, "heartbeat_min_seconds = 0.05"), (60_001, "heartbeat_max_seconds = 60"),
     (300_000, "heartbeat_max_seconds = 60")],
)
def test_a_heartbeat_out_of_bounds_is_refused(interval_ms: int, limit: str) -> None:
    with pytest.raises(LimitExceeded, match=limit):
        Limits().check_heartbeat(interval_ms)


@pytest.mark.parametrize("interval_ms", [50, 5_000, 60_000])
def test_a_heartbeat_within_bounds_passes(interval_ms: int) -> None:
    Limits().check_heartbeat(interval_ms)


def test_stream_message_size() -> None:
    limits = Limits(stream_message_bytes=65_536)
    limits.check_stream_message(65_536, "xdn.wire.v1.ClientMessage")
    with pytest.raises(LimitExceeded, match=r"ClientMessage of 65537 bytes.*stream_message_bytes"):
        limits.check_stream_message(65_537, "xdn.wire.v1.ClientMessage")


# ---- bookkeeping -----------------------------------------------------------------------------
def test_stream_counts_per_kind_and_key() -> None:
    counts = StreamCounts()
    assert counts.open("subscriber", b"a", 2)
    assert counts.open("subscriber", b"a", 2)
    assert not counts.open("subscriber", b"a", 2)  # full: not counted
    assert counts.count("subscriber", b"a") == 2
    assert counts.open("subscriber", b"b", 2)  # another certificate
    assert counts.open("site", b"a", 2)  # another kind
    counts.close("subscriber", b"a")
    assert counts.open("subscriber", b"a", 2)
    for _ in range(3):
        counts.close("subscriber", b"a")
    assert counts.count("subscriber", b"a") == 0


def test_memory_budget_across_calls() -> None:
    budget = MemoryBudget(100)
    budget.reserve(60, "xdn.wire.v1.PublishRequest")
    with pytest.raises(LimitExceeded, match=r"other calls.*memory_bytes = 100.*retry"):
        budget.reserve(41, "xdn.wire.v1.PublishRequest")
    budget.reserve(40, "xdn.wire.v1.PublishRequest")
    budget.release(60)
    budget.release(40)
    assert budget.in_use == 0
    with pytest.raises(LimitExceeded, match="send smaller messages"):
        budget.reserve(101, "xdn.wire.v1.PublishRequest")
    assert budget.in_use == 0


@pytest.mark.parametrize(
    ("sizes", "count", "size", "runs"),
    [
        ([], 3, 10, [0]),
        ([1] * 7, 3, 100, [3, 3, 1]),
        ([4, 4, 4, 4], 10, 8, [2, 2]),
        ([20, 1, 1], 10, 8, [1, 2]),  # an item larger than the size gets a run of its own
    ],
)
def test_chunk_sizes(sizes: list[int], count: int, size: int, runs: list[int]) -> None:
    assert chunk_sizes(sizes, max_count=count, max_bytes=size) == runs


def test_interest_chunks_mark_all_but_the_last_and_keep_every_member_in_order() -> None:
    members = [pb.Member(subscriber=f"s{i}", certificate=b"x" * 100) for i in range(1201)]
    messages = interest_chunks(members, Limits(interest_members=500))
    updates = [m.interest for m in messages]
    assert [len(u.members) for u in updates] == [500, 500, 201]
    assert [u.more for u in updates] == [True, True, False]
    assert [m.subscriber for u in updates for m in u.members] == [f"s{i}" for i in range(1201)]
    # Nobody behind the site: one empty, complete update.
    assert [(len(m.interest.members), m.interest.more) for m in interest_chunks([], Limits())] == [
        (0, False)
    ]


def test_interest_chunks_stay_under_half_the_stream_message_size() -> None:
    members = [pb.Member(subscriber=f"s{i}", certificate=b"x" * 10_000) for i in range(40)]
    limits = Limits(stream_message_bytes=65_536)
    for message in interest_chunks(members, limits):
        assert message.ByteSize() <= limits.stream_message_bytes // 2 + 64


# ---- configuration ---------------------------------------------------------------------------
def _load(tmp_path: Path, extra: str) -> Limits:
    path = tmp_path / "d2.toml"
    path.write_text(GOOD + extra)
    return load_site_config(path).limits


def test_limits_default_when_the_table_is_absent(tmp_path: Path) -> None:
    assert _load(tmp_path, "") == Limits()


def test_limits_are_read_from_the_table(tmp_path: Path) -> None:
    limits = _load(tmp_path, "[limits]\nsubscribe_concepts = 8\nheartbeat_max_seconds = 30\n")
    assert limits == Limits(subscribe_concepts=8, heartbeat_max_seconds=30)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ("subscribe_concept = 8", r"unknown limits \['subscribe_concept'\]"),
        ("subscribe_concepts = 0", "subscribe_concepts must be a positive number"),
        ('memory_bytes = "1G"', "memory_bytes must be a positive number"),
        ("streams_per_site = 1.5", "streams_per_site must be a whole number"),
        ("streams_per_site = true", "streams_per_site must be a positive number"),
        ("heartbeat_min_seconds = 10\nheartbeat_max_seconds = 5", "must not exceed"),
        ("interest_members = 10\nlink_members = 5", "link_members must be at least"),
        ("stream_message_bytes = 1000", "stream_message_bytes must be at least 65536"),
        ("memory_bytes = 70000\nstream_message_bytes = 80000", "memory_bytes must be at least"),
    ],
)
def test_bad_limits_are_refused_naming_the_problem(
    tmp_path: Path, table: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        _load(tmp_path, f"[limits]\n{table}\n")
    assert "[limits]" in str(info.value)


def test_limits_must_be_a_table(tmp_path: Path) -> None:
    path = tmp_path / "d2.toml"
    path.write_text("limits = 3\n" + GOOD)
    with pytest.raises(ConfigError, match=r"\[limits\] must be a table"):
        load_site_config(path)


def test_the_sites_own_heartbeat_must_lie_within_the_bounds(tmp_path: Path) -> None:
    path = tmp_path / "d2.toml"
    path.write_text(
        GOOD.replace("[tls]", "heartbeat_seconds = 90\n\n[tls]")
    )
    with pytest.raises(ConfigError, match=r"within the limits' heartbeat bounds \[0.05, 60\]"):
        load_site_config(path)


def test_a_busy_site_spaces_heartbeats_to_keep_within_its_budget() -> None:
    limits = Limits(heartbeats_per_second=200, heartbeat_max_seconds=60)
    assert limits.stream_heartbeat_s(5.0, 1) == 5.0
    assert limits.stream_heartbeat_s(5.0, 1_000) == 5.0
    assert limits.stream_heartbeat_s(5.0, 4_000) == 20.0
    assert limits.stream_heartbeat_s(5.0, 10_000) == 50.0
    assert limits.stream_heartbeat_s(5.0, 100_000) == 60.0  # never past the peers' limit
    assert limits.stream_heartbeat_s(90.0, 1) == 90.0  # a configured longer one stands


def test_stream_counts_keep_a_total_over_kinds_and_keys() -> None:
    counts = StreamCounts()
    assert counts.open("subscriber", b"a", 2) and counts.open("subscriber", b"a", 2)
    assert not counts.open("subscriber", b"a", 2)
    assert counts.open("site", b"b", 1)
    assert counts.total == 3
    counts.close("subscriber", b"a")
    counts.close("site", b"b")
    counts.close("site", b"b")  # (one close too many is not counted)
    assert counts.total == 1
