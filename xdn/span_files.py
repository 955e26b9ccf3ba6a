"""A file read a span at a time, then deleted: what a spooled or staged message is kept in.

A subscriber spools a delivery that comes in parts (:mod:`subscriber.spool`) and a publisher
stages a document it streams (:mod:`publisher.staging`); both read it back a span at a time
(:class:`~xdn.parts.ReadableChunk`, :class:`~xdn.wire_scan.Source`) and delete it once done.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

__all__ = ["FileSource", "ScratchFolder"]

log = logging.getLogger(__name__)


class ScratchFolder:
    """A folder of such files (created if need be), named at random; what a crash left in it
    is deleted by :meth:`clear`. ``what`` names its files in the log."""

    what = "files"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def clear(self) -> int:
        """Delete what an earlier run left behind; return how many files."""
        left = [p for p in self.folder.iterdir() if p.is_file()]
        for path in left:
            path.unlink(missing_ok=True)
        if left:
            log.info("deleted %d %s left by an earlier run", len(left), self.what)
        return len(left)

    def new_path(self, suffix: str) -> Path:
        """A fresh path in the folder ending in ``suffix``."""
        return self.folder / f"{secrets.token_hex(8)}{suffix}"


class FileSource:
    """The file at ``path``, opened for reading; :meth:`delete` closes and removes it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    def __len__(self) -> int:
        return self._size

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of the file.

        Raises:
            ValueError: the span is not within the file.
        """
        if not 0 <= start <= end <= self._size:
            raise ValueError(f"span {start}-{end} is not within {self._size} bytes")
        return os.pread(self._fd, end - start, start)

    def delete(self) -> None:
        """Close and delete the file (again: nothing happens)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self.path.unlink(missing_ok=True)
