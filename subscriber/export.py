"""``received.jsonl``: the application's record of what arrived, checked by its tail only.

Theory of operation. Each accepted document's record is committed in the keyring
(``received_log``, with the document's entry and the delivery cursor, in one transaction), then
appended to ``received.jsonl`` without a sync. The keyring also keeps an **export mark**
(:class:`~subscriber.store.ExportMark`): the last record known to be in the file, and the
file's size up to it, both true after a sync. So the file is always its synced first
``offset`` bytes, then the lines of the records after the mark — unless a crash lost or tore
some of those.

* :func:`reconcile` (at start-up) reads only the file's tail after the mark and compares it
  with the records after the mark; if a crash left them apart, the tail is rewritten from the
  database and synced, and the mark moves to the end. Nothing before the mark is read.
* :func:`checkpoint` (every housekeeping pass, and on close) syncs the file, moves the mark to
  its end and drops the records before it from the database, so ``received_log`` holds only
  what was accepted since the last pass.

A store written by an older version kept every document's latest record in ``documents``
instead and compared the whole file at every start; the first start of this version does that
comparison once (appending the records the file lacks), then drops those records.

If the file was cut short behind the mark (edited, or replaced, by hand), the lines the
database no longer holds cannot be restored: the tail is written after its last whole line and
a warning says so.
"""

from __future__ import annotations

import logging

from subscriber.store import Inbox, Keyring

__all__ = ["checkpoint", "reconcile"]

log = logging.getLogger(__name__)


def _lines(records: list[tuple[int, str]]) -> bytes:
    return "".join(record + "\n" for _, record in records).encode()


def reconcile(keyring: Keyring, inbox: Inbox) -> None:
    """Make the file's tail after the export mark hold exactly the records after it."""
    legacy = keyring.legacy_records()
    if legacy is not None:
        _adopt(keyring, inbox, legacy)
        return
    mark = keyring.export_mark()
    tail = keyring.export_tail()
    expected = _lines(tail)
    found = inbox.received_from(mark.offset)
    if found == expected:
        return
    if found is None:
        log.warning(
            "%s is shorter than the %d bytes it had when last synced; the lines before the "
            "last synced ones cannot be restored", inbox.received_path, mark.offset,
        )
    size = inbox.rewrite_received(mark.offset, expected)
    keyring.mark_exported(tail[-1][0] if tail else mark.seq, size)


def checkpoint(keyring: Keyring, inbox: Inbox) -> None:
    """Sync the file and move the export mark to its end (nothing to do if no record came)."""
    tail = keyring.export_tail()
    if not tail:
        return
    mark = keyring.export_mark()
    size = inbox.sync_received()
    expected = _lines(tail)
    if size != mark.offset + len(expected):  # a line was not written (e.g. a full disk)
        size = inbox.rewrite_received(mark.offset, expected)
    keyring.mark_exported(tail[-1][0], size)


def _adopt(keyring: Keyring, inbox: Inbox, legacy: list[str]) -> None:
    """Once, for a store of an older version: append the records the file lacks, then keep
    only the mark."""
    whole = inbox.received_from(0) or b""
    kept = whole[: whole.rfind(b"\n") + 1]  # a torn last line goes
    present = set(kept.decode().splitlines())
    missing = [record for record in legacy if record not in present]
    size = inbox.rewrite_received(len(kept), _lines(list(enumerate(missing))))
    keyring.drop_legacy_records(size)
