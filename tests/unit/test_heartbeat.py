"""The heartbeat driver on a real asyncio loop (short intervals, generous bounds)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from tests.unit.eventually import eventually
from xdn.heartbeat import Heartbeats, PeerSilent

HEARTBEAT = "heartbeat"


async def _quiet() -> AsyncIterator[str]:
    await asyncio.Event().wait()  # sends nothing, ever
    yield "never"


async def _busy(count: int, every: float) -> AsyncIterator[str]:
    for i in range(count):
        await asyncio.sleep(every)
        yield f"item {i}"


def _beat(interval_ms: int) -> str:
    return f"{HEARTBEAT} {interval_ms}"


async def _three_sent_while_idle(beats: Heartbeats) -> list[str]:
    out = []
    async for message in beats.outgoing(_quiet(), _beat):
        out.append(message)
        if len(out) == 3:
            break
    return out


def test_an_idle_stream_sends_heartbeats_announcing_the_interval() -> None:
    async def run() -> list[str]:
        return await _three_sent_while_idle(Heartbeats(0.05))

    assert asyncio.run(asyncio.wait_for(run(), 10)) == ["heartbeat 50"] * 3


def test_a_busy_stream_announces_its_interval_once_then_sends_only_its_messages() -> None:
    async def run() -> list[str]:
        beats = Heartbeats(1.0)
        return [m async for m in beats.outgoing(_busy(10, 0.01), _beat)]

    sent = asyncio.run(asyncio.wait_for(run(), 10))
    assert sent == ["heartbeat 1000"] + [f"item {i}" for i in range(10)]


def test_the_opening_messages_go_before_the_first_heartbeat() -> None:
    async def run() -> list[str]:
        beats = Heartbeats(1.0)
        return [m async for m in beats.outgoing(_busy(3, 0.01), _beat, opening=2)]

    sent = asyncio.run(asyncio.wait_for(run(), 10))
    assert sent == ["item 0", "item 1", "heartbeat 1000", "item 2"]


def test_no_heartbeat_goes_out_before_a_late_opening_message() -> None:
    async def run() -> list[str]:
        beats = Heartbeats(0.05)
        return [m async for m in beats.outgoing(_busy(1, 0.3), _beat, opening=1)]

    assert asyncio.run(asyncio.wait_for(run(), 10)) == ["item 0", "heartbeat 50"]


def test_a_source_that_fails_fails_the_stream_after_what_it_yielded_first() -> None:
    async def failing() -> AsyncIterator[str]:
        yield "item 0"
        yield "item 1"
        raise ValueError("the queue broke")

    async def run() -> list[str]:
        out: list[str] = []
        with pytest.raises(ValueError, match="the queue broke"):
            async for message in Heartbeats(1.0).outgoing(failing(), _beat):
                out.append(message)
        return out

    assert asyncio.run(asyncio.wait_for(run(), 10)) == ["heartbeat 1000", "item 0", "item 1"]


class _Endless:
    """A source of 1, 2, 3, … that counts the messages asked of it."""

    def __init__(self) -> None:
        self.taken = 0

    async def __call__(self) -> AsyncIterator[int]:
        while True:
            self.taken += 1
            yield self.taken


def test_the_source_is_read_only_a_bounded_number_of_messages_ahead() -> None:
    endless = _Endless()

    async def run() -> list[tuple[int, int]]:
        beats = Heartbeats(1.0)
        stream = beats.outgoing(endless(), lambda _: 0)
        received = [await anext(stream) for _ in range(6)]  # the heartbeat, then 1 … 5
        assert received == [0, 1, 2, 3, 4, 5]
        # The reader runs ahead until it holds its bound of 16, then waits for room: the
        # source was asked for exactly 5 + 16 messages (not one more while it waits).
        await eventually(lambda: beats.read_ahead == 16)
        seen = [(beats.read_ahead, endless.taken)]
        assert await anext(stream) == 6  # one sent: room for one more read
        await eventually(lambda: beats.read_ahead == 16)
        seen.append((beats.read_ahead, endless.taken))
        await stream.aclose()
        return seen

    assert asyncio.run(asyncio.wait_for(run(), 10)) == [(16, 5 + 16), (16, 6 + 16)]


def test_a_stream_may_read_fewer_messages_ahead_but_at_least_one() -> None:
    endless = _Endless()

    async def run() -> tuple[int, int]:
        beats = Heartbeats(1.0)
        stream = beats.outgoing(endless(), lambda _: 0, read_ahead=2)
        assert [await anext(stream) for _ in range(3)] == [0, 1, 2]
        await eventually(lambda: beats.read_ahead == 2)
        held = (beats.read_ahead, endless.taken)
        await stream.aclose()
        return held

    assert asyncio.run(asyncio.wait_for(run(), 10)) == (2, 2 + 2)

    async def none_ahead() -> None:
        await anext(Heartbeats(1.0).outgoing(endless(), lambda _: 0, read_ahead=0, opening=1))

    with pytest.raises(ValueError, match="at least one message ahead"):
        asyncio.run(asyncio.wait_for(none_ahead(), 10))


def test_slowing_down_announces_the_new_interval_at_once_and_never_speeds_up() -> None:
    async def run() -> list[str]:
        beats = Heartbeats(0.05)
        stream = beats.outgoing(_quiet(), _beat)
        out = [await anext(stream)]
        beats.slow_to(0.2)  # a busy site asks for fewer heartbeats
        beats.slow_to(0.01)  # (a faster one is never taken)
        out.append(await anext(stream))
        started = time.monotonic()
        out.append(await anext(stream))
        out.append("apart" if time.monotonic() - started >= 0.15 else "too soon")
        await stream.aclose()
        return out

    assert asyncio.run(asyncio.wait_for(run(), 10)) == [
        "heartbeat 50", "heartbeat 200", "heartbeat 200", "apart",
    ]


def test_slowing_down_while_waiting_announces_at_once_not_at_the_old_interval() -> None:
    async def run() -> tuple[str, float]:
        beats = Heartbeats(5.0)
        stream = beats.outgoing(_quiet(), _beat)
        await anext(stream)  # "heartbeat 5000"; the next one is due in 5 s
        pending = asyncio.ensure_future(anext(stream))
        await eventually(lambda: beats.waiting)  # the stream waits (its next beat: in 5 s)
        started = time.monotonic()
        beats.slow_to(20.0)
        message = await asyncio.wait_for(pending, 10)
        await stream.aclose()
        return message, time.monotonic() - started

    message, waited = asyncio.run(run())
    assert message == "heartbeat 20000"
    assert waited < 4.0  # not after the 5 s the peer still judges us by


def test_a_loop_held_up_past_the_limit_does_not_count_against_the_peer() -> None:
    async def late() -> AsyncIterator[str]:
        held_until = time.monotonic() + 0.4  # our own loop is busy (no await) for 0.4 s …
        while time.monotonic() < held_until:
            pass
        yield "item"  # … then has something to send, and nothing more
        await asyncio.Event().wait()

    async def run() -> list[str]:
        stream = Heartbeats(0.05).outgoing(late(), _beat, end_when_silent=True)
        out = [await anext(stream), await anext(stream), await anext(stream)]
        await stream.aclose()
        return out

    # the peer's silence limit is 0.15 s; what it sent meanwhile was not read yet
    assert asyncio.run(asyncio.wait_for(run(), 10)) == ["heartbeat 50", "item", "heartbeat 50"]


def test_the_site_end_stops_once_the_peer_is_silent_for_three_intervals() -> None:
    async def run() -> tuple[float, list[str]]:
        beats = Heartbeats(0.1)
        start, out = time.monotonic(), []
        with pytest.raises(PeerSilent, match="nothing received"):
            async for message in beats.outgoing(_quiet(), _beat, end_when_silent=True):
                out.append(message)
        return time.monotonic() - start, out

    elapsed, out = asyncio.run(asyncio.wait_for(run(), 10))
    assert 0.29 <= elapsed < 5
    assert out and set(out) == {"heartbeat 100"}


def test_a_peer_that_keeps_talking_is_not_taken_for_dead() -> None:
    async def run() -> int:
        beats = Heartbeats(0.1)

        async def peer() -> None:
            while True:
                await asyncio.sleep(0.02)
                beats.heard()

        talking = asyncio.ensure_future(peer())
        sent = 0
        try:
            async for _ in beats.outgoing(_quiet(), _beat, end_when_silent=True):
                sent += 1
                if sent == 8:  # well past three intervals
                    break
        finally:
            talking.cancel()
        return sent

    assert asyncio.run(asyncio.wait_for(run(), 10)) == 8


def test_receive_returns_what_arrives_and_counts_it_as_heard() -> None:
    async def run() -> tuple[str, float]:
        beats = Heartbeats(0.1)
        await asyncio.sleep(0.2)

        async def arrives() -> str:
            await asyncio.sleep(0.05)
            return "delivery"

        message = await beats.receive(arrives())
        return message, beats.state.silence(time.monotonic())

    message, silence = asyncio.run(asyncio.wait_for(run(), 10))
    assert message == "delivery"
    assert silence < 0.2


def test_receive_gives_up_on_a_silent_peer_judged_by_its_announced_interval() -> None:
    async def run() -> float:
        beats = Heartbeats(5.0)
        beats.heard_heartbeat(100)  # the peer promised something every 0.1 s
        start = time.monotonic()
        with pytest.raises(PeerSilent):
            await beats.receive(asyncio.Event().wait())
        return time.monotonic() - start

    assert 0.25 <= asyncio.run(asyncio.wait_for(run(), 10)) < 5


def test_silent_waits_for_the_limit_plus_grace() -> None:
    async def run() -> tuple[float, float]:
        beats = Heartbeats(0.1)
        start = time.monotonic()
        silence = await beats.silent(grace=0.1)
        return time.monotonic() - start, silence

    elapsed, silence = asyncio.run(asyncio.wait_for(run(), 10))
    assert 0.39 <= elapsed < 5
    assert silence >= 0.39


def test_a_busy_stream_sets_no_timer_per_message_in_either_direction() -> None:
    """Each message is waited for, until later each time: the pending timer serves."""

    async def run() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        timers = [0]
        call_at = loop.call_at

        def counted(when, callback, *args, **kwargs):  # type: ignore[no-untyped-def]
            if callback.__name__ != "_set_result_unless_cancelled":  # (not the test's sleeps)
                timers[0] += 1
            return call_at(when, callback, *args, **kwargs)

        loop.call_at = counted  # type: ignore[method-assign]
        beats = Heartbeats(5.0)
        turn = asyncio.Event()

        async def paced() -> AsyncIterator[str]:
            for i in range(200):
                await turn.wait()  # the stream waits for each one
                turn.clear()
                yield f"item {i}"

        sent = 0
        stream = beats.outgoing(paced(), _beat)
        await anext(stream)  # the opening heartbeat
        for _ in range(200):
            next_one = asyncio.ensure_future(anext(stream))
            while not beats.waiting:  # (polled with sleeps: eventually() sets timers)
                await asyncio.sleep(0.001)
            turn.set()
            await next_one
            sent += 1
        await stream.aclose()
        outgoing = timers[0]
        for _ in range(200):
            read = loop.create_future()
            loop.call_soon(read.set_result, "ack")
            await beats.receive(read)
        return sent, outgoing, timers[0] - outgoing

    sent, outgoing, incoming = asyncio.run(asyncio.wait_for(run(), 60))
    assert sent == 200
    assert outgoing <= 5 and incoming <= 5, (outgoing, incoming)


def test_a_second_stream_on_the_same_heartbeats_gets_its_own_timer() -> None:
    """A timer left pending by an ended stream wakes that stream's source, not the next one's:
    the next stream still sends its heartbeats on time."""

    async def run() -> list[str]:
        beats = Heartbeats(0.05)
        first = beats.outgoing(_busy(1, 0), _beat)
        assert await anext(first) == "heartbeat 50"
        assert beats.waiting or await anext(first) == "item 0"
        await first.aclose()
        return await _three_sent_while_idle(beats)

    assert asyncio.run(asyncio.wait_for(run(), 10)) == ["heartbeat 50"] * 3
