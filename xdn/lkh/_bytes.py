"""Byte layouts of the LKH values: those of :mod:`xdn.binary`, shared with leases.

Every LKH encoding starts with a four-byte magic naming the type and its version, then fields in
a fixed order (see :mod:`xdn.binary`); decoding is strict.
"""

from __future__ import annotations

from xdn.binary import Reader, Writer, check_name, check_u64, label

__all__ = ["Reader", "Writer", "check_name", "check_u64", "label"]
