"""A site whose disk fills: refuse new work, keep serving what it has, recover by itself.

Theory of operation. Two things tell a site its state directory is full:

* the free space (``os.statvfs``) is below the floor ``[limits] min_free_bytes``: checked, in
  O(1), before new work (a publish, a delivery from the uplink, a new subscription), so that
  the room left stays for what frees space (acknowledgements, which delete queued rows) and
  for the provenance log and the site's own output;
* a write fails anyway: SQLite answers ``SQLITE_FULL`` ("database or disk is full"), or a file
  write ``ENOSPC`` / ``EDQUOT``. :meth:`StorageGuard.mapped` rolls back the store's open
  transaction (nothing half-written stays, and the next transaction works once space returns)
  and raises :class:`xdn.errors.StorageFull` instead.

:class:`~xdn.errors.StorageFull` names the directory and what is free; the servicer answers it
with ``RESOURCE_EXHAUSTED`` (a publisher retries later; a downlink site does not acknowledge the
delivery it could not store, so its uplink keeps it queued and sends it again on the next link).
Nothing here blocks or sleeps: once space returns, the next call succeeds. Every refusal is
counted in ``xdn_storage_full_total{operation}``.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from xdn.errors import StorageFull

__all__ = ["StorageGuard", "free_bytes", "is_full_error"]

log = logging.getLogger(__name__)

_SQLITE_FULL = 13
_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem of ``directory``."""
    stat = os.statvfs(directory)
    return stat.f_bavail * stat.f_frsize


def is_full_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or quota) is full: SQLITE_FULL, ENOSPC or EDQUOT."""
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return bool(code & 0xFF == _SQLITE_FULL)
        return "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in _FULL_ERRNOS


class StorageGuard:
    """The free-space floor of one state directory, and the mapping of write failures.

    Args:
        directory: the state directory (``None``: a store in memory, never full).
        min_free_bytes: new work is refused below this many free bytes.
        rollback: ends the store's open transaction, if any (called after a failed write).
        counted: called with the operation's name on every refusal (a metric).
    """

    def __init__(
        self,
        directory: Path | None,
        *,
        min_free_bytes: int,
        rollback: Callable[[], None] = lambda: None,
        counted: Callable[[str], None] = lambda operation: None,
    ) -> None:
        self.directory = directory
        self.min_free_bytes = min_free_bytes
        self._rollback = rollback
        self._counted = counted

    def free(self) -> int | None:
        """Free bytes in the state directory (``None`` when it has none, or cannot be read)."""
        if self.directory is None:
            return None
        try:
            return free_bytes(self.directory)
        except OSError:
            return None

    def _full(self, operation: str, what: str, detail: str) -> StorageFull:
        self._counted(operation)
        free = self.free()
        return StorageFull(
            f"{what or operation} refused: the state directory {self.directory} is full "
            f"({'unknown' if free is None else free} bytes free, floor [limits] "
            f"min_free_bytes = {self.min_free_bytes}; {detail}); retry once space is freed",
            directory=self.directory, free_bytes=free,
        )

    def check(self, operation: str, what: str = "") -> None:
        """Refuse new work while free space is below the floor.

        Args:
            operation: the kind of work (``publish``, ``delivery``, ``subscription``): the
                metric's label.
            what: the work itself, for the message (default: ``operation``).

        Raises:
            StorageFull: below the floor.
        """
        free = self.free()
        if free is not None and free < self.min_free_bytes:
            raise self._full(operation, what, "below the floor")

    @contextlib.contextmanager
    def mapped(self, operation: str, what: str = "") -> Iterator[None]:
        """Translate a write that failed for want of space into :class:`StorageFull` (after
        rolling the store's transaction back); other errors pass unchanged."""
        try:
            yield
        except StorageFull:
            raise
        except (sqlite3.Error, OSError) as exc:
            if not is_full_error(exc):
                raise
            try:
                self._rollback()
            except sqlite3.Error as again:  # (SQLite may have rolled back already)
                log.debug("rollback after a full disk: %s", again)
            raise self._full(operation, what, f"a write failed: {exc}") from exc
