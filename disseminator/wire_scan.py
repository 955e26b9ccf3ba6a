"""Protobuf framing read a window at a time: moved to :mod:`xdn.wire_scan` (shared with the
subscriber); re-exported here for the site's modules."""

from xdn.wire_scan import LEN, VARINT, Cursor, MemorySource, Source

__all__ = ["LEN", "VARINT", "Cursor", "MemorySource", "Source"]
