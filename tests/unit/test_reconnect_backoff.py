"""Reconnect backoff resets once a stream has worked (issue #18, finding 5).

The subscriber's reconnect loop (:func:`subscriber.client.run_subscriber`) and a site's link
to its uplink (:meth:`disseminator.uplink.Uplink.run`) back off exponentially while their peer
keeps failing, but a stream that worked (registered us, or delivered something) resets the
wait: after many outages a peer that comes back is reconnected to within a fraction of a
second, not after the cap. Driven with fake streams; the waits asked for are recorded instead
of slept.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, cast

import pytest

from disseminator.node import SiteNode
from disseminator.uplink import Uplink
from subscriber import client
from subscriber.session import SubscriberSetup, SubscriptionReport
from xdn.backoff import Backoff
from xdn.errors import ProtocolError
from xdn.grpc_tls import TlsFiles

# ---- the pure backoff ------------------------------------------------------------------------


def test_waits_double_to_the_cap_and_reset_to_the_first() -> None:
    backoff = Backoff(first=0.2, cap=5.0, jitter=lambda: 0.0)
    assert [backoff.next() for _ in range(7)] == [0.2, 0.4, 0.8, 1.6, 3.2, 5.0, 5.0]
    backoff.reset()
    assert backoff.next() == 0.2


def test_jitter_shortens_a_wait_by_up_to_half() -> None:
    draws = iter([0.0, 0.999, 0.5])
    backoff = Backoff(first=1.0, cap=8.0, jitter=lambda: next(draws))
    assert backoff.next() == 1.0
    assert backoff.next() == pytest.approx(2.0 * (1 - 0.999 / 2))
    assert backoff.next() == pytest.approx(4.0 * 0.75)


@pytest.mark.parametrize(("first", "cap"), [(0.0, 5.0), (6.0, 5.0), (-1.0, 1.0)])
def test_a_backoff_that_cannot_work_is_refused(first: float, cap: float) -> None:
    with pytest.raises(ValueError, match="first <= cap"):
        Backoff(first=first, cap=cap)


# ---- the subscriber ----------------------------------------------------------------------------


class _Session:
    """What run_subscriber touches of a session (no keyring, no files)."""

    def __init__(self, setup: SubscriberSetup, clock: Any) -> None:
        self.setup = setup
        self.report = SubscriptionReport()
        held, left = staticmethod(lambda: 0), staticmethod(lambda: None)
        self.keyring = type("K", (), {"held_count": held, "left_at_ms": left})()
        self.completeness = type("C", (), {"unvouched": staticmethod(lambda *_: {})})()

    def close(self) -> None:
        pass


def _setup(tmp_path: Path) -> SubscriberSetup:
    return SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=b"", key_pem=b"", ca_pem=b""), connect="d2:1",
        out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq",
    )


def _subscriber_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcomes: list[bool]
) -> list[float]:
    """Run the subscriber over streams that each break, after registering (True) or not
    (False); return the waits it asked for between them."""
    waits: list[float] = []
    left = list(outcomes)

    async def stream(session: Any, address: str, stop: asyncio.Event) -> str | None:
        worked = left.pop(0)
        if not left:
            stop.set()
        lost = client._ConnectionLost(f"{address}: UNAVAILABLE: gone")
        lost.registered = worked  # (what the real stream records once Subscribed came)
        raise lost

    async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(client, "Session", _Session)
    monkeypatch.setattr(client, "_stream", stream)
    monkeypatch.setattr(client, "_sleep_or_stop", sleep_or_stop)
    asyncio.run(client.run_subscriber(_setup(tmp_path), asyncio.Event()))
    return waits


def test_the_subscriber_backs_off_while_its_site_keeps_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    waits = _subscriber_waits(tmp_path, monkeypatch, [False] * 8)
    assert waits[-1] > 2.5  # (5 s at most, jittered down by up to half)
    assert all(0.1 <= w <= 5.0 for w in waits)


def test_the_subscriber_backoff_resets_after_a_stream_that_worked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten outages, each after a stream that registered; then one failed attempt between.
    outcomes = [True] * 10 + [False, True]
    waits = _subscriber_waits(tmp_path, monkeypatch, outcomes)
    assert len(waits) == len(outcomes)
    assert all(w <= 0.2 for w in waits[:10]), waits  # back quickly after each outage
    assert 0.2 <= waits[10] <= 0.4, waits  # a failed attempt doubles the wait ...
    assert waits[11] <= 0.2, waits  # ... and the next stream that works resets it


# ---- a site's uplink ---------------------------------------------------------------------------


def _uplink_waits(monkeypatch: pytest.MonkeyPatch, outcomes: list[bool]) -> list[float]:
    """Run an uplink over links that each break, after the uplink sent something (True) or
    not (False); return the waits between them."""
    uplink = Uplink(cast(SiteNode, object()), "d1:1")
    waits: list[float] = []
    left = list(outcomes)

    async def link_once() -> None:
        worked = left.pop(0)
        if worked:
            uplink.heard = True  # (what the real link records when a message arrives)
        raise ProtocolError("the uplink went away")

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        if not left:
            uplink.refused = "end of the test"

    monkeypatch.setattr(uplink, "_link_once", link_once)
    monkeypatch.setattr(asyncio, "sleep", sleep)
    asyncio.run(uplink.run())
    return waits


def test_the_uplink_backoff_resets_after_a_link_that_worked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits = _uplink_waits(monkeypatch, [True] * 10)
    assert len(waits) == 10
    assert all(w <= 0.2 for w in waits), waits


def test_the_uplink_backs_off_while_it_keeps_failing(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = _uplink_waits(monkeypatch, [False] * 8)
    assert waits[-1] > 2.5
    assert all(w <= 5.0 for w in waits)
