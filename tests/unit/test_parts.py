"""Messages in parts: cut and joined back exactly; every malformed sequence refused (xdn.parts)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn.errors import ProtocolError
from xdn.parts import MIN_PART_BYTES, Joiner, PartData, PartLimitError, cut

chunk_lists = st.lists(st.binary(max_size=5_000), min_size=1, max_size=8).filter(
    lambda chunks: sum(map(len, chunks)) > 0
)


@given(chunks=chunk_lists, part_bytes=st.integers(MIN_PART_BYTES, 6_000))
def test_parts_join_to_the_message_and_each_fits(chunks: list[bytes], part_bytes: int) -> None:
    parts = list(cut(chunks, part_bytes))
    message = b"".join(chunks)
    assert all(len(p.data) <= part_bytes for p in parts)
    assert [p.size for p in parts] == [len(message)] + [0] * (len(parts) - 1)
    assert [p.more for p in parts] == [True] * (len(parts) - 1) + [False]
    assert len(parts) == -(-len(message) // part_bytes)  # no part short but the last
    joiner = Joiner(len(message), "a test message")
    results = [joiner.add(p) for p in parts]
    assert results[:-1] == [None] * (len(parts) - 1)
    assert results[-1] == message
    assert not joiner.pending


def test_memoryview_chunks_are_cut_without_joining_first() -> None:
    body = bytes(range(256)) * 40
    chunks = [b"head", memoryview(body)[100:9_000], b"tail"]
    parts = list(cut(chunks, 2_048))
    assert b"".join(p.data for p in parts) == b"head" + body[100:9_000] + b"tail"


def test_cut_refuses_a_tiny_part_size_and_an_empty_message() -> None:
    with pytest.raises(ValueError, match="at least"):
        list(cut([b"x" * 5_000], MIN_PART_BYTES - 1))
    with pytest.raises(ValueError, match="empty"):
        list(cut([b""], MIN_PART_BYTES))


def test_a_message_over_the_limit_is_refused_at_its_first_part() -> None:
    joiner = Joiner(10_000, "a delivery")
    with pytest.raises(PartLimitError, match="a delivery of 10001 bytes is over") as caught:
        joiner.add(PartData(b"x" * 10, 10_001, True))
    assert (caught.value.size, caught.value.limit) == (10_001, 10_000)
    assert not joiner.pending and joiner.held_bytes == 0


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([PartData(b"abc", 0, True)], "does not state its size"),
        ([PartData(b"abc", 6, True), PartData(b"def", 6, False)], "states a size"),
        ([PartData(b"abc", 5, True), PartData(b"def", 0, False)], "more than the 5 bytes"),
        ([PartData(b"abc", 6, True), PartData(b"de", 0, False)], "end after 5 of the 6"),
        ([PartData(b"abc", 3, False), PartData(b"de", 0, False)], "does not state its size"),
    ],
)
def test_parts_that_do_not_follow_are_refused(parts: list[PartData], message: str) -> None:
    joiner = Joiner(100, "a delivery")
    with pytest.raises(ProtocolError, match=message):
        for part in parts:
            joiner.add(part)
    assert not joiner.pending  # what it held is dropped; the next message starts afresh
    assert joiner.add(PartData(b"ok", 2, False)) == b"ok"


def test_a_joiner_takes_one_message_after_another() -> None:
    joiner = Joiner(100, "a delivery")
    assert joiner.add(PartData(b"ab", 4, True)) is None
    assert joiner.pending and joiner.held_bytes == 2
    assert joiner.add(PartData(b"cd", 0, False)) == b"abcd"
    assert joiner.add(PartData(b"efg", 3, False)) == b"efg"


class _Recording:
    """A sink that records what happens to it."""

    def __init__(self, size: int) -> None:
        self.size, self.data, self.aborted = size, bytearray(), False
        opened.append(self)

    def write(self, data: bytes) -> None:
        self.data += data

    def finish(self) -> bytes:
        return bytes(self.data)

    def abort(self) -> None:
        self.aborted = True


opened: list[_Recording] = []


def test_a_joiner_hands_each_part_to_a_sink_opened_at_the_first_part() -> None:
    opened.clear()
    joiner: Joiner[bytes] = Joiner(100, "a test message", _Recording)
    assert joiner.add(PartData(b"abc", 6, True)) is None
    assert [s.size for s in opened] == [6] and opened[0].data == b"abc"
    assert joiner.add(PartData(b"def", 0, False)) == b"abcdef"
    assert not opened[0].aborted and not joiner.pending


@pytest.mark.parametrize(
    "second", [PartData(b"defg", 0, False), PartData(b"d", 0, False), PartData(b"d", 9, True)]
)
def test_a_sink_is_let_go_when_its_parts_do_not_follow(second: PartData) -> None:
    opened.clear()
    joiner: Joiner[bytes] = Joiner(100, "a test message", _Recording)
    joiner.add(PartData(b"abc", 6, True))
    with pytest.raises(ProtocolError):
        joiner.add(second)
    assert opened[0].aborted and not joiner.pending


def test_a_sink_is_never_opened_for_a_message_over_the_limit() -> None:
    opened.clear()
    joiner: Joiner[bytes] = Joiner(5, "a test message", _Recording)
    with pytest.raises(PartLimitError):
        joiner.add(PartData(b"abc", 6, True))
    assert opened == []


def test_reset_lets_a_partly_received_message_go() -> None:
    opened.clear()
    joiner: Joiner[bytes] = Joiner(100, "a test message", _Recording)
    joiner.add(PartData(b"abc", 6, True))
    joiner.reset()
    assert opened[0].aborted and not joiner.pending


class _Stored:
    """A readable chunk: counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self.reads: list[tuple[int, int]] = []

    def __len__(self) -> int:
        return len(self._data)

    def read(self, start: int, end: int) -> bytes:
        self.reads.append((start, end))
        return self._data[start:end]


def test_readable_chunks_are_read_a_part_at_a_time() -> None:
    body = bytes(range(256)) * 100
    stored = _Stored(body)
    parts = list(cut([b"head", stored, b"tail"], 4_096))
    assert b"".join(p.data for p in parts) == b"head" + body + b"tail"
    assert max(end - start for start, end in stored.reads) <= 4_096
    assert sum(end - start for start, end in stored.reads) == len(body)  # each byte read once
