"""Messages too large for one gRPC message travel in parts (issue #15).

Theory of operation
-------------------
gRPC caps one message (64 MiB here, :data:`xdn.grpc_tls.MAX_MESSAGE_BYTES`), and a message
held whole costs its size in memory at both ends. So a sender cuts a serialized message that
is larger than its *part size* into consecutive parts (the wire's ``Part``: ``data``, the
joined ``size`` on the first part, ``more`` on all but the last) and a receiver joins them:

* :func:`cut` yields the parts of a message given as a sequence of byte chunks (the spans a
  site stores a delivery as) without joining the chunks first: a part is the bytes of the
  chunks it spans, copied once, and a chunk larger than a part is sliced;
* :class:`Joiner` takes parts one at a time and returns the message once the last one came.
  The first part states the joined size, which is checked against the receiver's limit before
  anything is kept; then every part must fit in what was announced, and the last must end
  exactly there. Anything else is a :class:`~xdn.errors.ProtocolError` naming what was wrong
  (:class:`PartLimitError` for a message over the limit), and the joiner forgets what it held.
  Where the parts go is a :class:`Sink` the joiner opens at each first part: by default a
  buffer in memory (:class:`MemorySink`, the message joined in place), or anything that keeps
  them elsewhere (a site stages them in its store, a subscriber in a file), so a receiver
  never needs to hold a large message whole.

Pure: no I/O, no protobuf (the edges convert ``Part`` messages to and from :class:`PartData`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from xdn.errors import ProtocolError

__all__ = [
    "DEFAULT_PART_BYTES",
    "MIN_PART_BYTES",
    "Joiner",
    "MemorySink",
    "PartData",
    "PartLimitError",
    "ReadableChunk",
    "Sink",
    "cut",
]

DEFAULT_PART_BYTES = 4 * 1024 * 1024
MIN_PART_BYTES = 1024  # smaller parts would spend more on framing than they carry

Chunk = bytes | bytearray | memoryview


class PartLimitError(ProtocolError):
    """A message sent in parts announces a size over the receiver's limit."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} of {size} bytes is over this receiver's limit of {limit} bytes")
        self.size = size
        self.limit = limit


@dataclass(frozen=True, slots=True)
class PartData:
    """One part: its bytes, the joined size (first part only, else 0), whether more follow."""

    data: bytes
    size: int
    more: bool


class ReadableChunk(Protocol):
    """Bytes kept elsewhere (a span of a stored document), read only when a part needs them."""

    def __len__(self) -> int: ...

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the chunk."""
        ...


def cut(chunks: Sequence[Chunk | ReadableChunk], part_bytes: int) -> Iterator[PartData]:
    """The parts of the message made of ``chunks`` (joined in order), each at most
    ``part_bytes`` long: a part is the bytes of the chunks it spans, copied once (a readable
    chunk is read a part's worth at a time), and a chunk larger than a part is sliced.

    Raises:
        ValueError: ``part_bytes`` is below :data:`MIN_PART_BYTES`, or the message is empty.
    """
    if part_bytes < MIN_PART_BYTES:
        raise ValueError(f"part_bytes must be at least {MIN_PART_BYTES}, got {part_bytes}")
    total = sum(len(c) for c in chunks)
    if not total:
        raise ValueError("an empty message has no parts")
    sent = 0
    pending: list[Chunk] = []
    room = part_bytes
    for chunk in chunks:
        at, size = 0, len(chunk)
        while at < size:
            taken = min(room, size - at)
            pending.append(_slice(chunk, at, at + taken))
            at += taken
            room -= taken
            if room == 0:
                data = b"".join(pending)
                yield PartData(data, total if sent == 0 else 0, sent + len(data) < total)
                sent += len(data)
                pending, room = [], part_bytes
    if pending:
        data = b"".join(pending)
        yield PartData(data, total if sent == 0 else 0, False)


def _slice(chunk: Chunk | ReadableChunk, start: int, end: int) -> Chunk:
    if isinstance(chunk, bytes | bytearray | memoryview):
        return memoryview(chunk).cast("B")[start:end]
    return chunk.read(start, end)


_T = TypeVar("_T", covariant=True)


class Sink(Protocol[_T]):
    """Where the parts of one message go as they come (opened at its first part)."""

    def write(self, data: bytes) -> None:
        """Keep the next part's bytes."""
        ...

    def finish(self) -> _T:
        """All parts came: the message as this sink keeps it."""
        ...

    def abort(self) -> None:
        """The parts do not make a message: forget what was kept."""
        ...


class MemorySink:
    """Joins the parts in memory, in place (a large message is held once, not once more to
    join it)."""

    def __init__(self, size: int) -> None:
        self._held = bytearray()
        del size  # (grown as parts come: a false size must not reserve memory)

    def write(self, data: bytes) -> None:
        self._held += data

    def finish(self) -> bytearray:
        return self._held

    def abort(self) -> None:
        self._held = bytearray()


_M = TypeVar("_M")


class Joiner(Generic[_M]):
    """Joins the parts of one message at a time (see the module docstring).

    Args:
        limit: the largest joined message accepted, in bytes.
        what: what the message is, for errors (``"a delivery"``).
        open_sink: where a message's parts go, given its announced size once that has been
            checked (default: joined in memory, :class:`MemorySink`).
    """

    def __init__(
        self,
        limit: int,
        what: str,
        open_sink: Callable[[int], Sink[_M]] = MemorySink,  # type: ignore[assignment]
    ) -> None:
        if limit <= 0:
            raise ValueError(f"limit must be positive, got {limit}")
        self.limit = limit
        self.what = what
        self._open_sink = open_sink
        self._sink: Sink[_M] | None = None
        self._expected = 0
        self._received = 0

    @property
    def pending(self) -> bool:
        """Whether a message is partly received."""
        return bool(self._expected)

    @property
    def held_bytes(self) -> int:
        """Bytes received of the message partly received."""
        return self._received

    def add(self, part: PartData) -> _M | None:
        """Take the next part; return the message (as its sink keeps it) if it was the last.

        Raises:
            PartLimitError: a first part announces a message over the limit.
            ProtocolError: a part does not follow (no size on a first part, a size on a later
                one, more bytes than announced, or a last part short of it).
        """
        try:
            return self._add(part)
        except BaseException:  # (a sink's own failure too: what it kept is let go)
            self.reset()
            raise

    def _add(self, part: PartData) -> _M | None:
        if not self._expected:
            if part.size == 0:
                raise ProtocolError(f"the first part of {self.what} does not state its size")
            if part.size > self.limit:
                raise PartLimitError(self.what, part.size, self.limit)
            self._expected = part.size
            self._sink = self._open_sink(part.size)
        elif part.size:
            raise ProtocolError(
                f"a part of {self.what} states a size ({part.size}) where it continues one "
                f"of {self._expected} bytes"
            )
        self._received += len(part.data)
        if self._received > self._expected:
            raise ProtocolError(
                f"the parts of {self.what} hold more than the {self._expected} bytes announced"
            )
        assert self._sink is not None
        self._sink.write(part.data)
        if part.more:
            return None
        if self._received != self._expected:
            raise ProtocolError(
                f"the parts of {self.what} end after {self._received} of the "
                f"{self._expected} bytes announced"
            )
        joined = self._sink.finish()
        self._sink = None  # (finished: the caller owns the message now)
        self.reset()
        return joined

    def reset(self) -> None:
        """Forget a message partly received (its sink lets go of what it kept)."""
        sink, self._sink = self._sink, None
        self._expected, self._received = 0, 0
        if sink is not None:
            sink.abort()
