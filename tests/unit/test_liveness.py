"""The pure heartbeat rules: when a heartbeat is due, when a silent peer is dead."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn.errors import ProtocolError
from xdn.liveness import MAX_PEER_INTERVAL_S, MISSED_INTERVALS, Liveness, interval_ms


def test_interval_on_the_wire_is_whole_milliseconds() -> None:
    assert interval_ms(5) == 5000
    assert interval_ms(0.5) == 500
    assert interval_ms(0.001) == 1


@pytest.mark.parametrize("seconds", [0, -1, 0.0001, 2**32])
def test_interval_out_of_range_is_refused(seconds: float) -> None:
    with pytest.raises(ValueError, match="out of range"):
        interval_ms(seconds)


def test_interval_must_be_a_number() -> None:
    with pytest.raises(TypeError):
        interval_ms(True)
    with pytest.raises(TypeError):
        interval_ms("5")  # type: ignore[arg-type]


def test_a_heartbeat_is_due_after_one_interval_of_sending_nothing() -> None:
    state = Liveness.start(1.0, now=100.0)
    assert not state.heartbeat_due(100.9)
    assert state.until_heartbeat(100.25) == pytest.approx(0.75)
    assert state.heartbeat_due(101.0)
    state.on_sent(100.8)  # something else went out: the heartbeat moves on
    assert not state.heartbeat_due(101.0)
    assert state.heartbeat_due(101.8)


def test_before_its_first_heartbeat_the_peer_is_judged_by_our_own_interval() -> None:
    state = Liveness.start(1.0, now=0.0)
    assert state.silence_limit == MISSED_INTERVALS * 1.0
    assert not state.dead(2.9)
    assert state.dead(3.0)


def test_the_peer_is_judged_by_the_interval_it_announced() -> None:
    state = Liveness.start(1.0, now=0.0)
    state.on_heartbeat(5000, now=1.0)
    assert state.peer_interval_s == 5.0
    assert not state.dead(15.9)
    assert state.dead(16.0)
    assert state.until_dead(10.0) == pytest.approx(6.0)


def test_a_peer_cannot_announce_itself_days_of_silence() -> None:
    state = Liveness.start(5.0, now=0.0)
    state.on_heartbeat(interval_ms(40 * 86_400), now=0.0)  # "expect me in 40 days"
    limit = MISSED_INTERVALS * MAX_PEER_INTERVAL_S
    assert not state.dead(limit - 1)
    assert state.dead(limit)


def test_anything_heard_restarts_the_peers_clock() -> None:
    state = Liveness.start(1.0, now=0.0)
    state.on_heard(2.5)
    assert not state.dead(5.0)
    assert state.silence(5.0) == pytest.approx(2.5)
    state.on_heard(1.0)  # a late report never moves the clock back
    assert state.last_heard == 2.5


def test_a_heartbeat_announcing_no_interval_is_a_protocol_error() -> None:
    state = Liveness.start(1.0, now=0.0)
    with pytest.raises(ProtocolError, match="positive interval"):
        state.on_heartbeat(0, now=1.0)
    assert state.peer_interval_s is None


def test_our_own_stall_is_not_held_against_the_peer() -> None:
    state = Liveness.start(1.0, now=0.0)
    assert not state.overslept(meant=3.0, now=3.2)
    assert state.overslept(meant=1.0, now=9.0)
    state.on_stall(9.0)
    assert not state.dead(9.0)
    assert state.dead(12.0)


def test_the_peer_is_judged_only_after_listening_a_little() -> None:
    state = Liveness.start(1.0, now=0.0)
    assert state.until_judged(1.0) == pytest.approx(2.0)
    assert state.until_judged(9.0) == pytest.approx(0.25)  # overdue: listen a bit first


def test_invalid_own_interval_is_refused() -> None:
    with pytest.raises(ValueError):
        Liveness.start(0.0, now=0.0)


@given(
    interval=st.floats(min_value=0.01, max_value=100),
    announced=st.one_of(st.none(), st.integers(min_value=1, max_value=100_000)),
    heard=st.floats(min_value=0, max_value=1000),
    later=st.floats(min_value=0, max_value=1000),
    more=st.floats(min_value=0, max_value=1000),
)
def test_silence_only_grows_until_the_peer_is_heard_again(
    interval: float, announced: int | None, heard: float, later: float, more: float
) -> None:
    state = Liveness.start(interval, now=0.0)
    if announced is not None:
        state.on_heartbeat(announced, now=heard)
    else:
        state.on_heard(heard)
    now = heard + later
    if state.dead(now):
        assert state.dead(now + more)  # nothing but a message brings a peer back
        state.on_heard(now + more)
        assert not state.dead(now + more)
    if state.heartbeat_due(now):
        assert state.heartbeat_due(now + more)
