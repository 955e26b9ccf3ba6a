"""``received.jsonl``: the application's record of what arrived — append-only.

Theory of operation. Each accepted document's record (one line per document *version*) is
committed in the keyring (``received_log``, with the document's entry and the delivery cursor,
in one transaction), then appended to ``received.jsonl`` without a sync. The keyring also
keeps an **export mark** (:class:`~subscriber.store.ExportMark`): the last record known to be
in the file, and the file's size up to it, both true after a sync. So the file is always its
synced first ``offset`` bytes, then the lines of the records after the mark — unless a crash
lost or tore some of those.

The file is history: every version ever received stays in it, in the order accepted. Nothing
here rewrites it. The only bytes ever cut are an unterminated last line (a write torn by a
crash or a full disk), which no reader can have taken for a record; everything else is only
appended to.

* :func:`reconcile` (at start-up) reads the file after the mark a line at a time and appends
  the records after the mark that it lacks (in the order accepted), synced; the mark moves to
  the end. A line the keyring has no record of (a keyring newer than the file, or one whose
  last commits were lost) is kept as it is. Nothing before the mark is read, and memory stays
  bounded by the records after the mark, however long the file.
* :func:`checkpoint` (every housekeeping pass, and on close) syncs the file, moves the mark to
  its end and drops the records before it from the database, so ``received_log`` holds only
  what was accepted since the last pass. It checks first, as at start-up, that the lines
  written since the mark are all there (reading only those), and appends any a failed write
  left out.

A store written by an older version kept every document's latest record in ``documents``
instead; the first start of this version appends those the file lacks (read a line at a time,
as above), then drops them.

If the file was cut short behind the mark (edited, or replaced, by hand), the lines the
database no longer holds cannot be restored: a warning says so, and the records after the mark
that the file lacks are appended to what is there.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence

from subscriber.store import Inbox, Keyring

__all__ = ["checkpoint", "complete", "reconcile"]

log = logging.getLogger(__name__)

_READ_BYTES = 64 * 1024  # the least kept of a line read


def reconcile(keyring: Keyring, inbox: Inbox) -> None:
    """Append to the file the records after the export mark that it lacks; move the mark."""
    legacy = keyring.legacy_records()
    if legacy is not None:
        keyring.drop_legacy_records(complete(inbox, legacy, start=0))
        return
    mark = keyring.export_mark()
    tail = keyring.export_tail()
    size = complete(inbox, [record for _, record in tail], start=mark.offset)
    keyring.mark_exported(tail[-1][0] if tail else mark.seq, size)


def checkpoint(keyring: Keyring, inbox: Inbox) -> None:
    """Sync the file and move the export mark to its end (nothing to do if no record came)."""
    tail = keyring.export_tail()
    if not tail:
        return
    mark = keyring.export_mark()
    size = complete(inbox, [record for _, record in tail], start=mark.offset)
    keyring.mark_exported(tail[-1][0], size)


def complete(inbox: Inbox, records: Sequence[str], *, start: int) -> int:
    """Append (synced) those of ``records`` that the file's lines from byte ``start`` on lack,
    in their order; cut nothing but an unterminated last line. Return the file's new size.

    The file is read a line at a time: memory is bounded by ``records``, not by the file.
    """
    size = inbox.received_size()
    if size < start:
        log.warning(
            "%s is shorter than the %d bytes it had when last synced; the lines before the "
            "last synced ones cannot be restored", inbox.received_path, start,
        )
        start = 0
    wanted = Counter(record.encode() for record in records)
    # A line is compared by its first ``keep`` bytes (a longer one is no record of ours).
    keep = max(max((len(record) for record in wanted), default=0) + 2, _READ_BYTES)
    whole = start  # the end of the last whole line
    for end, line, terminated in inbox.received_lines(start, keep=keep):
        if not terminated:
            break  # torn: cut below
        whole = end
        body = line[:-1]
        if wanted[body] > 0:
            wanted[body] -= 1
    missing = []
    for record in reversed(records):  # the last occurrences are the ones not found
        encoded = record.encode()
        if wanted[encoded] > 0:
            wanted[encoded] -= 1
            missing.append(encoded + b"\n")
    missing.reverse()
    if whole < size:
        log.warning("%s ends with a torn line (%d bytes): cut", inbox.received_path, size - whole)
    if not missing and whole == size:
        return inbox.sync_received()
    return inbox.append_received(b"".join(missing), after=whole)
