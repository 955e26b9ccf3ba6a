"""The routing table: bucket splitting, LRU order, eviction by ping, nearest contacts."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disseminator.dht import Contact, NodeId, Outcome, RoutingTable

OWN = NodeId(value=0)


def contact(value: int, port: int = 7000) -> Contact:
    return Contact(node_id=NodeId(value=value), address=f"n{value % 10_000}.test:{port}")


def far(i: int) -> Contact:
    """Contacts whose distance from OWN (= 0) has the top bit set: all in the farthest bucket."""
    return contact((1 << 255) | i)


def test_a_fresh_table_has_one_bucket_over_the_whole_space() -> None:
    table = RoutingTable(OWN, k=4)
    (bucket,) = table.buckets()
    assert (bucket.low, bucket.high) == (0, 1 << 256)
    assert len(table) == 0


def test_own_id_is_ignored() -> None:
    table = RoutingTable(OWN, k=4)
    assert table.observe(contact(0), 0).outcome is Outcome.SELF
    assert len(table) == 0


def test_the_bucket_holding_our_own_id_splits_when_full() -> None:
    table = RoutingTable(OWN, k=2)
    for c in (far(1), far(2), contact(5)):
        assert table.observe(c, 0).outcome is Outcome.ADDED
    ranges = [(b.low, b.high) for b in table.buckets()]
    assert ranges == [(0, 1 << 255), (1 << 255, 1 << 256)]
    assert [len(b.contacts) for b in table.buckets()] == [1, 2]


def test_a_full_far_bucket_does_not_split_and_asks_to_ping_its_oldest() -> None:
    table = RoutingTable(OWN, k=2, fresh_ms=1000)
    table.observe(far(1), 0)
    table.observe(far(2), 0)
    table.observe(contact(5), 0)  # forces the split: far bucket now [2**255, 2**256)
    seen = table.observe(far(3), 5000)
    assert seen.outcome is Outcome.PING_OLDEST
    assert seen.ping == far(1)
    assert len(table.buckets()) == 2
    assert far(3).node_id not in table


def test_no_ping_while_the_oldest_was_seen_recently() -> None:
    table = RoutingTable(OWN, k=1, fresh_ms=1000)
    table.observe(far(1), 0)
    table.observe(contact(5), 0)
    assert table.observe(far(2), 500).outcome is Outcome.CACHED


def test_observing_a_known_contact_moves_it_to_the_most_recent_end() -> None:
    table = RoutingTable(OWN, k=3)
    for i in (1, 2, 3):
        table.observe(far(i), i)
    assert table.observe(far(1), 10).outcome is Outcome.UPDATED
    assert table.buckets()[-1].contacts == (far(2), far(3), far(1))


def test_observing_a_known_id_at_a_new_address_updates_it() -> None:
    table = RoutingTable(OWN, k=3)
    table.observe(far(1), 0)
    moved = Contact(node_id=far(1).node_id, address="moved.test:9")
    table.observe(moved, 1)
    assert table.get(far(1).node_id) == moved
    assert table.closest(far(1).node_id, 1) == [moved]


def full_far_bucket(k: int = 2) -> RoutingTable:
    table = RoutingTable(OWN, k=k, fresh_ms=0)
    table.observe(contact(5), 0)
    for i in range(1, k + 1):
        table.observe(far(i), i)
    table.observe(contact(6), 0)  # split so that the far bucket no longer holds our id
    return table


def test_an_oldest_that_answers_the_ping_stays_and_the_newcomer_waits() -> None:
    table = full_far_bucket()
    seen = table.observe(far(9), 100)
    assert seen.ping == far(1)
    table.ping_answered(far(1).node_id, 101)
    assert table.buckets()[-1].contacts == (far(2), far(1))
    assert table.buckets()[-1].replacements == 1


def test_an_oldest_that_fails_the_ping_is_evicted_for_the_newest_replacement() -> None:
    table = full_far_bucket()
    table.observe(far(8), 100)
    table.observe(far(9), 100)
    promoted = table.ping_failed(far(1).node_id, 102)
    assert promoted == far(9)
    assert far(1).node_id not in table
    assert table.buckets()[-1].contacts == (far(2), far(9))


def test_rpc_failures_evict_after_the_threshold() -> None:
    table = RoutingTable(OWN, k=4, stale_after_failures=2)
    table.observe(far(1), 0)
    assert table.rpc_failed(far(1).node_id, 1) is None
    assert far(1).node_id in table
    table.rpc_failed(far(1).node_id, 2)
    assert far(1).node_id not in table


def test_an_answer_resets_the_failure_count() -> None:
    table = RoutingTable(OWN, k=4, stale_after_failures=2)
    table.observe(far(1), 0)
    table.rpc_failed(far(1).node_id, 1)
    table.observe(far(1), 2)
    table.rpc_failed(far(1).node_id, 3)
    assert far(1).node_id in table


def test_stale_ranges_and_touch() -> None:
    table = RoutingTable(OWN, k=1)
    table.observe(far(1), 0)
    table.observe(contact(5), 0)
    assert len(table.stale_ranges(1000, 500)) == 2
    table.touch(far(7).node_id, 900)
    assert table.stale_ranges(1000, 500) == [(0, 1 << 255)]


def test_bucket_ranges_stay_a_partition_of_the_space() -> None:
    rng = random.Random(7)
    own = NodeId(value=rng.getrandbits(256))
    table = RoutingTable(own, k=3)
    for _ in range(500):
        table.observe(contact(rng.getrandbits(256)), 0)
    buckets = table.buckets()
    assert buckets[0].low == 0 and buckets[-1].high == 1 << 256
    assert all(a.high == b.low for a, b in itertools.pairwise(buckets))
    for bucket in buckets:
        assert len(bucket.contacts) <= 3
        assert all(bucket.low <= own.distance(c.node_id) < bucket.high for c in bucket.contacts)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.integers(min_value=1, max_value=(1 << 256) - 1), min_size=1, max_size=80),
    st.integers(min_value=0, max_value=(1 << 256) - 1),
    st.integers(min_value=1, max_value=10),
)
def test_closest_matches_brute_force(values: list[int], target: int, count: int) -> None:
    table = RoutingTable(OWN, k=100)  # large enough that nothing is dropped
    for v in values:
        table.observe(contact(v), 0)
    t = NodeId(value=target)
    expected = sorted(set(values), key=lambda v: v ^ target)[:count]
    assert [c.node_id.value for c in table.closest(t, count)] == expected


def test_closest_can_exclude_ids() -> None:
    table = RoutingTable(OWN, k=8)
    for i in (1, 2, 3):
        table.observe(contact(i), 0)
    assert [
        c.node_id.value for c in table.closest(NodeId(value=0), 5, exclude=[NodeId(value=1)])
    ] == [
        2,
        3,
    ]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        RoutingTable(OWN, k=0)
