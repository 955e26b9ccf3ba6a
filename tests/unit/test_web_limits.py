"""The endpoint's per-client limits as pure state: token buckets, the connection gate."""

from __future__ import annotations

import pytest

from disseminator.web._limits import ConnectionGate, TokenBuckets


def test_a_bucket_serves_its_burst_then_refills_at_its_rate() -> None:
    buckets = TokenBuckets(rate=2.0, burst=3)
    assert [buckets.take("a", 10.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert buckets.take("a", 10.0) == pytest.approx(0.5)  # one token at 2 a second
    assert buckets.take("b", 10.0) == 0.0  # another client has its own
    assert buckets.take("a", 10.25) == pytest.approx(0.25)  # half a token so far
    assert buckets.take("a", 10.5) == 0.0
    assert buckets.take("a", 1000.0) == 0.0  # a long pause refills it to its burst, no more
    assert [buckets.take("a", 1000.0) for _ in range(3)][-1] == pytest.approx(0.5)
    assert TokenBuckets.retry_after(0.01) == "1" and TokenBuckets.retry_after(2.1) == "3"


def test_buckets_are_bounded_least_recently_used_forgotten() -> None:
    buckets = TokenBuckets(rate=1.0, burst=1, max_clients=2)
    for client in ("a", "b"):
        assert buckets.take(client, 0.0) == 0.0
    assert buckets.take("a", 0.0) > 0  # a used last: b is the one forgotten next
    assert buckets.take("c", 0.0) == 0.0
    assert len(buckets) == 2
    assert buckets.take("a", 0.0) > 0  # still limited
    assert buckets.take("b", 0.0) == 0.0  # forgotten: a full bucket again


@pytest.mark.parametrize("rate, burst, room", [(0, 1, 1), (1, 0, 1), (1, 1, 0)])
def test_a_rate_limit_needs_positive_settings(rate: float, burst: int, room: int) -> None:
    with pytest.raises(ValueError):
        TokenBuckets(rate=rate, burst=burst, max_clients=room)


def test_the_gate_caps_connections_in_total_and_per_address() -> None:
    gate = ConnectionGate(total=3, per_address=2)
    assert [gate.admit("a"), gate.admit("a"), gate.admit("a")] == [True, True, False]
    assert gate.admit("b") and not gate.admit("c")  # three in all
    assert (gate.open, gate.refused, gate.held("a")) == (3, 2, 2)
    gate.release("a")
    assert gate.admit("c") and not gate.admit("a")
    for address in ("a", "b", "c"):
        gate.release(address)
    assert gate.open == 0 and gate.held("a") == 0
    with pytest.raises(ValueError, match="no connection from 'a'"):
        gate.release("a")
