"""An unsubscription is durable on the subscriber's side (issue #18, finding 7).

``xdn unsubscribe`` records the leave in the subscriber's keyring; :func:`run_subscriber` on a
state that records one does not open a stream: it refuses to start unless told to rejoin, and a
run that finds the leave between reconnects stops. Real keyring (SQLite) in a temp folder, a
fake stream.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from subscriber import client
from subscriber.gaps import Completeness
from subscriber.session import SubscriberSetup, SubscriptionReport
from subscriber.store import Keyring
from xdn.completeness import Gap
from xdn.errors import UsageError
from xdn.grpc_tls import TlsFiles


class _Session:
    def __init__(self, setup: SubscriberSetup, clock: Any) -> None:
        self.setup = setup
        self.report = SubscriptionReport()
        self.keyring = Keyring(setup.state_dir / "keyring.sqlite")
        self.completeness = _completeness(setup)

    def close(self) -> None:
        self.keyring.close()
        self.completeness.close()


def _completeness(setup: SubscriberSetup) -> Completeness:
    return Completeness(setup.state_dir / "completeness.sqlite", setup.out_dir, name=setup.name)


def _setup(tmp_path: Path, *, rejoin: bool = False) -> SubscriberSetup:
    return SubscriberSetup(
        name="alice", tls=TlsFiles(cert_pem=b"", key_pem=b"", ca_pem=b""), connect="d2:1",
        out_dir=tmp_path / "out", state_dir=tmp_path / "state",
        provenance_log=tmp_path / "alice.nq", rejoin=rejoin,
    )


def _left(tmp_path: Path, at_ms: int = 1_700_000_000_000) -> None:
    keyring = Keyring(tmp_path / "state" / "keyring.sqlite")  # (as xdn unsubscribe does)
    try:
        keyring.record_leave(at_ms)
    finally:
        keyring.close()


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: SubscriberSetup,
         streams: list[str]) -> None:
    """Run the subscriber over fake streams that each break; ``streams`` collects the
    addresses it opened. The second stream's break comes after ``xdn unsubscribe`` ran."""

    async def stream(session: Any, address: str, stop: asyncio.Event) -> str | None:
        streams.append(address)
        if len(streams) == 2:
            _left(tmp_path)  # unsubscribed while this stream was down
        if len(streams) > 3:
            stop.set()
        raise client._ConnectionLost(f"{address}: UNAVAILABLE")

    async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
        pass

    monkeypatch.setattr(client, "Session", _Session)
    monkeypatch.setattr(client, "_stream", stream)
    monkeypatch.setattr(client, "_sleep_or_stop", sleep_or_stop)
    asyncio.run(client.run_subscriber(setup, asyncio.Event()))


def test_a_leave_recorded_between_reconnects_stops_the_subscriber(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    streams: list[str] = []
    _run(tmp_path, monkeypatch, _setup(tmp_path), streams)
    assert streams == ["d2:1", "d2:1"]  # no stream after the leave
    assert "not registering again" in capsys.readouterr().out


def test_a_state_that_left_refuses_to_subscribe_until_told_to_rejoin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "out").mkdir()
    before = _completeness(_setup(tmp_path))  # a member for document 1 of pub's chain of A
    before.follow({"pub": ["A"]})
    assert before.tracker.receive("pub", 1, {"A": 0}) == []
    before.follow({"pub": ["A"]})  # (saved)
    before.close()
    _left(tmp_path)
    streams: list[str] = []
    with pytest.raises(UsageError, match="--rejoin"):
        _run(tmp_path, monkeypatch, _setup(tmp_path), streams)
    assert streams == []
    _run(tmp_path, monkeypatch, _setup(tmp_path, rejoin=True), streams)
    assert streams == ["d2:1", "d2:1"]  # rejoined (and stopped by the next leave)
    after = _completeness(_setup(tmp_path))
    try:  # published while she was away (2-8): not owed; after the rejoin (10): owed
        assert after.tracker.receive("pub", 9, {"A": 8}) == []
        assert after.tracker.receive("pub", 11, {"A": 10}) == [Gap("pub", "A", 10)]
    finally:
        after.close()


def test_the_leave_is_kept_across_keyring_connections(tmp_path: Path) -> None:
    path = tmp_path / "keyring.sqlite"
    running, other = Keyring(path), Keyring(path)  # the subscriber, xdn unsubscribe
    try:
        assert running.left_at_ms() is None
        other.record_leave(5)
        assert running.left_at_ms() == 5
        assert running.subscribed_since_ms(1) == 1
        running.clear_leave()
        assert other.left_at_ms() is None
        assert other.subscribed_since_ms(7) == 7  # the rejoin is a new subscription
    finally:
        running.close()
        other.close()
