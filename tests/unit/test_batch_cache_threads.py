"""A site's signature cache is used from its event loop (routing) and from worker threads
(checking receipts) at once: evicting from it concurrently must not fail (issue #18's soak
saw ``KeyError`` from two threads evicting the same oldest entry, failing a publication)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pytest

from xdn import crypto
from xdn.provenance._batch import BatchCache


@pytest.fixture
def switch_often() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # (threads interleave at nearly every bytecode)
    yield
    sys.setswitchinterval(before)


def test_threads_filling_a_full_cache_at_once_all_succeed(switch_often: None) -> None:
    cache = BatchCache(capacity=2)
    key = crypto.generate_private_key().public_key()
    failures: list[BaseException] = []
    start = threading.Barrier(4)

    def fill(thread: int) -> None:
        start.wait()
        try:
            for n in range(10_000):
                cache.remember(key, f"{thread}:{n}".encode(), b"signature")
        except Exception as exc:  # (collected: an exception in a thread fails nothing)
            failures.append(exc)

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    assert len(cache._seen) == 2
