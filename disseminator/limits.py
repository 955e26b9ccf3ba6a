"""What one caller may ask of a site: the limits, and the pure bookkeeping that enforces them.

Theory of operation. A site serves many callers on one event loop, so no single caller may make
it do unbounded work or hold unbounded resources. Every limit here is checked *before* the work
it guards, with a check that costs O(1) (a length, a counter, a byte count):

* a Subscribe request names at most :attr:`Limits.subscribe_concepts` concepts, and never more
  than the ontology has (each named once, each known);
* one InterestUpdate lists at most :attr:`Limits.interest_members` members; a downlink with more
  sends its set in chunks (``more = true`` on all but the last), and the whole set behind one
  link holds at most :attr:`Limits.link_members`;
* one certificate holds at most :attr:`Limits.streams_per_subscriber` open Subscribe streams (a
  subscriber) or :attr:`Limits.streams_per_site` open Link streams (a downlink site), counted
  from the moment the stream opens, before its first message (:class:`StreamCounts`);
* heartbeats on idle streams stay within ``heartbeats_per_second`` for the whole site: a
  stream opened while N are open gets an interval of at least N / that many seconds (and asks
  its subscriber for as much in ``Subscribed.heartbeat_ms``), so 10,000 idle subscribers cost
  the site a few hundred heartbeats a second each way, not 2,000 (their peers' failures are
  detected later in proportion; a broken connection still ends at gRPC's keepalive);
* a peer's heartbeat announces an interval within [``heartbeat_min_seconds``,
  ``heartbeat_max_seconds``], so no peer holds a silent stream for longer than three of the
  longest intervals;
* one Subscribe or Link stream message is at most :attr:`Limits.stream_message_bytes` long, and
  large messages (from :data:`LARGE_MESSAGE_BYTES`, after any gRPC decompression) held at once
  across all calls fit :attr:`Limits.memory_bytes` (:class:`MemoryBudget`), refused before
  they are parsed;
* one delivery receipt (a subscriber's ``Ack.receipt``, one entry of a ``Receipts`` call) is at
  most :attr:`Limits.max_receipt_bytes` long, checked before it is parsed; a ``Receipts`` call
  carries at most :attr:`Limits.receipts_per_call` of them and, like a stream message, at most
  :attr:`Limits.stream_message_bytes` (checked before it is parsed); a ``GetReceipts`` reply
  holds as many;
* a message larger than :attr:`Limits.part_bytes` goes out in parts (:mod:`xdn.parts`), and
  one sent in parts (a Publish, a delivery from the uplink) is at most
  :attr:`Limits.document_bytes`, refused at its first part; it is staged in the store as it
  comes (never held whole), each part counting against the memory budget until it is stored;
* a publish, a delivery from the uplink or a new subscription is refused while the state
  directory has less than :attr:`Limits.min_free_bytes` free (:mod:`disseminator.storage`:
  ``StorageFull``, also ``RESOURCE_EXHAUSTED``);
* a site accepts no compressed request (:data:`SERVER_OPTIONS`): what xdn sends is ciphertext,
  which does not compress, so compression buys nothing and would let a small request inflate
  inside gRPC, before any limit here could see it (a compression bomb).

Past a limit the caller gets :class:`LimitExceeded` (mapped to ``RESOURCE_EXHAUSTED`` by the
servicer) naming the limit, its value and what to do. No I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from xdn.errors import ConfigError, ProtocolError
from xdn.grpc_tls import MAX_MESSAGE_BYTES
from xdn.parts import DEFAULT_PART_BYTES, MIN_PART_BYTES

__all__ = [
    "LARGE_MESSAGE_BYTES",
    "SERVER_OPTIONS",
    "LimitExceeded",
    "Limits",
    "MemoryBudget",
    "StreamCounts",
    "chunk_sizes",
]

# gRPC server options: only the identity "compression" is enabled (bit 0 of the set of
# algorithms), so a compressed request is refused by gRPC before it is inflated.
SERVER_OPTIONS: tuple[tuple[str, int], ...] = (("grpc.compression_enabled_algorithms_bitset", 1),)

# Messages from this size on count against the memory budget (smaller ones are cheap).
LARGE_MESSAGE_BYTES = 256 * 1024
_MIB = 1024 * 1024
# A document sent in parts is staged in chunk rows (disseminator.body_chunks), so no SQLite
# blob limit applies; this bounds what one call may make a site write to its disk.
MAX_BODY_BYTES = 64 * 1024 * _MIB


class LimitExceeded(ProtocolError):
    """A caller asked for more than a site limit allows (``RESOURCE_EXHAUSTED``)."""

    def __init__(self, what: str, *, limit: str, value: float, advice: str) -> None:
        shown = value if isinstance(value, int) else f"{value:g}"
        super().__init__(f"{what}: over the site's limit {limit} = {shown}; {advice}")
        self.limit = limit
        self.value = value


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The site's limits (the ``[limits]`` table of its configuration)."""

    subscribe_concepts: int = 256
    interest_members: int = 500
    link_members: int = 100_000
    streams_per_subscriber: int = 4
    streams_per_site: int = 2
    heartbeat_min_seconds: float = 0.05
    heartbeat_max_seconds: float = 60.0
    heartbeats_per_second: float = 200.0
    stream_message_bytes: int = 1 * _MIB
    memory_bytes: int = 1024 * _MIB
    receipt_bytes: int = 256 * 1024
    receipts_per_call: int = 256
    part_bytes: int = DEFAULT_PART_BYTES
    document_bytes: int = 2048 * _MIB
    # New work is refused below this much free space in the state directory (see
    # disseminator.storage): room kept for acknowledgements and the logs.
    min_free_bytes: int = 64 * _MIB

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"limits.{f.name} must be a positive number, got {value!r}")
            if f.type == "int" and not isinstance(value, int):
                raise ConfigError(f"limits.{f.name} must be a whole number, got {value!r}")
        if self.heartbeat_min_seconds > self.heartbeat_max_seconds:
            raise ConfigError("limits.heartbeat_min_seconds must not exceed heartbeat_max_seconds")
        if self.link_members < self.interest_members:
            raise ConfigError("limits.link_members must be at least limits.interest_members")
        if self.stream_message_bytes < 64 * 1024:
            raise ConfigError("limits.stream_message_bytes must be at least 65536")
        if self.memory_bytes < self.stream_message_bytes:
            raise ConfigError("limits.memory_bytes must be at least limits.stream_message_bytes")
        if self.part_bytes < MIN_PART_BYTES or self.part_bytes > MAX_MESSAGE_BYTES // 2:
            raise ConfigError(
                f"limits.part_bytes must be within [{MIN_PART_BYTES}, {MAX_MESSAGE_BYTES // 2}]"
            )
        if self.document_bytes > MAX_BODY_BYTES:
            raise ConfigError(f"limits.document_bytes must be at most {MAX_BODY_BYTES}")
        if self.receipts_per_call > 256:
            raise ConfigError("limits.receipts_per_call must be at most 256")

    @classmethod
    def from_mapping(cls, table: Mapping[str, Any], *, source: str) -> Limits:
        """Read a ``[limits]`` table; unknown keys are refused (a typo must not go unnoticed)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise ConfigError(f"{source}: unknown limits {unknown}; known: {sorted(known)}")
        try:
            return cls(**table)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    # ---- the cheap checks ----------------------------------------------------------------
    def check_concepts(self, count: int, *, ontology_size: int) -> None:
        """A Subscribe request names ``count`` concepts (checked before looking at any)."""
        limit = min(self.subscribe_concepts, ontology_size)
        if count > limit:
            name = "subscribe_concepts" if limit == self.subscribe_concepts else "ontology size"
            raise LimitExceeded(
                f"a SubscribeRequest names {count} concepts", limit=name, value=limit,
                advice="name each concept once (a concept includes its sub-concepts), "
                "or none to ask for everything your grants allow",
            )

    def check_members(self, count: int, *, pending: int) -> None:
        """An InterestUpdate chunk of ``count`` members arrives after ``pending`` others."""
        if count > self.interest_members:
            raise LimitExceeded(
                f"an InterestUpdate lists {count} members", limit="interest_members",
                value=self.interest_members,
                advice="send the members in chunks (InterestUpdate.more) of at most that many; "
                "sites of one network should share their [limits]",
            )
        if pending + count > self.link_members:
            raise LimitExceeded(
                f"the interest of this link lists more than {pending} members",
                limit="link_members", value=self.link_members,
                advice="split the downlink's subscribers over more sites",
            )

    def stream_heartbeat_s(self, configured_s: float, open_streams: int) -> float:
        """The heartbeat interval of a stream opened while ``open_streams`` are open: the
        site's configured one, longer when the site-wide budget requires, at most the limit."""
        budget = open_streams / self.heartbeats_per_second
        return min(max(configured_s, budget), max(configured_s, self.heartbeat_max_seconds))

    def check_heartbeat(self, interval_ms: int) -> None:
        """A peer's heartbeat announces ``interval_ms``."""
        seconds = interval_ms / 1000
        if seconds < self.heartbeat_min_seconds:
            limit, value = "heartbeat_min_seconds", self.heartbeat_min_seconds
        elif seconds > self.heartbeat_max_seconds:
            limit, value = "heartbeat_max_seconds", self.heartbeat_max_seconds
        else:
            return
        raise LimitExceeded(
            f"a heartbeat announces an interval of {seconds:g}s", limit=limit, value=value,
            advice=f"announce an interval between {self.heartbeat_min_seconds:g}s and "
            f"{self.heartbeat_max_seconds:g}s",
        )

    @property
    def max_receipt_bytes(self) -> int:
        """The largest receipt taken: ``receipt_bytes``, and never over half a stream message
        (so that a receipt always fits an Ack and a batch)."""
        return min(self.receipt_bytes, self.stream_message_bytes // 2)

    def check_receipts(self, count: int) -> None:
        """A ``Receipts`` call carries ``count`` receipts (checked before reading any)."""
        if count > self.receipts_per_call:
            raise LimitExceeded(
                f"a ReceiptBatch carries {count} receipts", limit="receipts_per_call",
                value=self.receipts_per_call,
                advice="send receipts in batches of at most that many; sites of one network "
                "should share their [limits]",
            )

    def check_stream_message(self, size: int, type_name: str) -> None:
        """One message of a Subscribe or Link stream is ``size`` bytes (before it is parsed)."""
        if size > self.stream_message_bytes:
            raise LimitExceeded(
                f"a {type_name} of {size} bytes", limit="stream_message_bytes",
                value=self.stream_message_bytes,
                advice="send smaller messages (chunk an interest update)",
            )


def chunk_sizes(sizes: list[int], *, max_count: int, max_bytes: int) -> list[int]:
    """Split items of the given encoded ``sizes`` into runs of at most ``max_count`` items and
    ``max_bytes`` bytes (an item larger than ``max_bytes`` gets a run of its own).

    Returns:
        The length of each run, in order; one empty run for no items (a set may be empty).
    """
    if max_count <= 0 or max_bytes <= 0:
        raise ValueError("chunks need a positive count and size")
    runs: list[int] = []
    count = total = 0
    for size in sizes:
        if count and (count == max_count or total + size > max_bytes):
            runs.append(count)
            count = total = 0
        count += 1
        total += size
    runs.append(count)
    return runs


class StreamCounts:
    """Open streams per key (a certificate), each kind under its own limit."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, bytes], int] = {}
        self.total = 0  # open streams of every kind and key

    def open(self, kind: str, key: bytes, limit: int) -> bool:
        """Count one more open stream of ``kind`` for ``key``; ``False`` (not counted) if full."""
        current = self._open.get((kind, key), 0)
        if current >= limit:
            return False
        self._open[(kind, key)] = current + 1
        self.total += 1
        return True

    def close(self, kind: str, key: bytes) -> None:
        """A stream counted by :meth:`open` ended."""
        current = self._open.get((kind, key), 0)
        if current == 0:
            return
        self.total -= 1
        if current == 1:
            self._open.pop((kind, key), None)
        else:
            self._open[(kind, key)] = current - 1

    def count(self, kind: str, key: bytes) -> int:
        return self._open.get((kind, key), 0)


class MemoryBudget:
    """Bytes of large messages held at once across all calls."""

    def __init__(self, total: int) -> None:
        if total <= 0:
            raise ValueError("a memory budget must be positive")
        self.total = total
        self.in_use = 0

    def reserve(self, size: int, type_name: str) -> None:
        """Hold ``size`` bytes for one message until :meth:`release`.

        Raises:
            LimitExceeded: the message does not fit what is left (or the whole budget).
        """
        if self.in_use + size > self.total:
            busy = f" ({self.in_use / _MIB:.1f} MiB held by other calls)" if self.in_use else ""
            raise LimitExceeded(
                f"a {type_name} of {size / _MIB:.1f} MiB does not fit the memory budget{busy}",
                limit="memory_bytes", value=self.total,
                advice="retry later, or send smaller messages" if size <= self.total
                else "send smaller messages",
            )
        self.in_use += size

    def release(self, size: int) -> None:
        self.in_use = max(0, self.in_use - size)
