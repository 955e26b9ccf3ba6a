"""The subscriber's queue of failure notices for its site: durable, in order, bounded."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest

from subscriber.client import send_notices
from subscriber.outbox import NoticeOutbox
from xdn.wire.v1 import dissemination_pb2 as pb


def test_notices_wait_in_order_until_dropped_and_survive_a_restart(tmp_path: Path) -> None:
    box = NoticeOutbox(tmp_path / "notices.sqlite")
    for n in range(5):
        box.put(f"notice {n}".encode())
    batch = box.batch(limit=3, max_bytes=10**6)
    assert [d for _, d in batch] == [b"notice 0", b"notice 1", b"notice 2"]
    box.drop([seq for seq, _ in batch[:2]])
    box.close()
    box = NoticeOutbox(tmp_path / "notices.sqlite")  # a restart
    assert [d for _, d in box.batch(limit=10, max_bytes=10**6)] == [
        b"notice 2", b"notice 3", b"notice 4"
    ]
    assert [d for _, d in box.batch(limit=10, max_bytes=17)] == [b"notice 2", b"notice 3"]
    assert [d for _, d in box.batch(limit=10, max_bytes=1)] == [b"notice 2"]  # one at least
    box.close()


def test_past_its_capacity_the_oldest_go_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    box = NoticeOutbox(tmp_path / "notices.sqlite", capacity=3)
    with caplog.at_level(logging.WARNING):
        for n in range(5):
            box.put(f"notice {n}".encode())
    assert [d for _, d in box.batch(limit=10, max_bytes=10**6)] == [
        b"notice 2", b"notice 3", b"notice 4"
    ]
    assert "1 failure notice(s) dropped unsent: more than 3 wait" in caplog.text
    box.close()


class _Session:
    def __init__(self, box: NoticeOutbox) -> None:
        self.notices = box
        self.notice_ready = asyncio.Event()


class _Failed(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                         details="the site is down")


class _Stub:
    """A site that fails the first call, then takes every batch."""

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []
        self.taken = asyncio.Event()

    async def Notices(self, request: pb.NoticeBatch, timeout: float) -> Any:
        self.calls.append(list(request.notices))
        if len(self.calls) == 1:
            raise _Failed()
        self.taken.set()
        return pb.ReceiptBatchAck(accepted=len(request.notices))


def test_the_sender_retries_until_the_site_answers_then_forgets(tmp_path: Path) -> None:
    box = NoticeOutbox(tmp_path / "notices.sqlite")
    session = _Session(box)
    box.put(b"n1")
    box.put(b"n2")
    stub = _Stub()

    async def run() -> None:
        sender = asyncio.ensure_future(send_notices(session, stub))  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(stub.taken.wait(), 10)
            stub.taken.clear()
            assert box.count() == 0  # dropped once the site answered
            box.put(b"n3")  # a refusal later: the sender wakes for it
            session.notice_ready.set()
            await asyncio.wait_for(stub.taken.wait(), 10)
        finally:
            sender.cancel()

    asyncio.run(run())
    assert stub.calls == [[b"n1", b"n2"], [b"n1", b"n2"], [b"n3"]]  # the failed call retried
    assert box.count() == 0
    box.close()
