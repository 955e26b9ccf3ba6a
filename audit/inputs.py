"""Which files of the input directories are provenance logs (no Spark imports here).

Theory of operation
-------------------
An auditor points ``xdn audit`` at whole directory trees — a site's state folder holds SQLite
queues, PEM credentials and port files next to ``provenance.nq`` — so the audit picks its own
files instead of feeding every byte to the N-Quads parser (which turned one SQLite file into
hundreds of "malformed log line" failures).

A file under a directory is read when its name is one a provenance log has:

* ``*.nq`` — what :class:`xdn.provenance.ProvenanceLog` writes (``provenance.nq`` by default,
  any configured ``provenance_log`` path);
* the names rotation gives it: ``*.nq.1``, ``*.nq.2``… (logrotate's numbered copies) and
  ``*.nq-20260105`` (``dateext``, any digits and dashes);
* any of these compressed, ``….gz`` (Spark decompresses gzip text by the file name).

Every other file is skipped, with a reason from its first bytes (SQLite database, PEM, gzip
without a log name, binary, text not named like a log) so the auditor sees what was left out
and why. A file named explicitly on the command line is always read: the auditor chose it.

Local paths are walked here (:func:`find_logs`); other URIs (``hdfs://``, ``s3a://``) are
listed by Spark's file system in :mod:`audit.job` and filtered with :func:`is_log_name`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "LogFile",
    "LogFiles",
    "Skipped",
    "find_logs",
    "is_local",
    "is_log_name",
    "skipped_line",
    "sniff",
]

_LOG_NAME = re.compile(r".+\.nq(?:[.-][0-9][0-9-]*)?(?:\.gz)?")
_SNIFF_BYTES = 4096
#: At most this many skipped files are named in the one line that reports them.
MAX_NAMED_SKIPS = 20


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFile:
    """A file the audit reads: its path (local path or URI) and size in bytes."""

    path: str
    size: int

    @property
    def compressed(self) -> bool:
        """Whether Spark decompresses it (its size then says nothing about its lines)."""
        return self.path.endswith(".gz")


@dataclass(frozen=True, slots=True, kw_only=True)
class Skipped:
    """A file of an input directory that is not a provenance log, and why."""

    path: str  # relative to the input directory it was found under
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LogFiles:
    """What :func:`find_logs` found: the logs to read and the files skipped."""

    logs: tuple[LogFile, ...]
    skipped: tuple[Skipped, ...]

    @property
    def total_bytes(self) -> int:
        """Bytes of all logs as stored (compressed logs count compressed)."""
        return sum(f.size for f in self.logs)


def is_log_name(name: str) -> bool:
    """Whether a file name (no directory) is one a provenance log or its rotations has."""
    return _LOG_NAME.fullmatch(name) is not None


def is_local(location: str) -> bool:
    """Whether ``location`` is a local path (no URI scheme, or ``file:``)."""
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]+):", location)
    return scheme is None or scheme[1].lower() == "file"


def _local_path(location: str) -> Path:
    if location.lower().startswith("file:"):
        return Path(re.sub(r"^file:(//)?", "", location, flags=re.IGNORECASE))
    return Path(location)


def sniff(head: bytes) -> str:
    """What the first bytes of a file that is not named like a log say it is."""
    if not head:
        return "empty"
    for magic, kind in (
        (b"SQLite format 3\x00", "SQLite database"),
        (b"-----BEGIN ", "PEM"),
        (b"\x1f\x8b", "gzip, not named *.nq.gz"),
        (b"PK\x03\x04", "zip archive"),
        (b"PAR1", "Parquet"),
    ):
        if head.startswith(magic):
            return kind
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the end of the sample
            return "not N-Quads: binary"
        text = head[: exc.start].decode("utf-8")
    if "\x00" in text:
        return "not N-Quads: binary"
    return "text, not named like a provenance log"


def _sniff_file(path: Path) -> str:
    try:
        with path.open("rb") as f:
            return sniff(f.read(_SNIFF_BYTES))
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"


def _walk(root: Path) -> Iterable[Path]:
    for directory, dirs, files in os.walk(root, onerror=None, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            yield Path(directory) / name


def find_logs(locations: Sequence[str]) -> LogFiles:
    """The provenance logs under local ``locations`` (files or directories, walked recursively).

    Raises:
        FileNotFoundError: a location does not exist.
    """
    logs: list[LogFile] = []
    skipped: list[Skipped] = []
    for location in locations:
        root = _local_path(location)
        if not root.exists():
            raise FileNotFoundError(f"path does not exist: {location}")
        if not root.is_dir():
            logs.append(LogFile(path=str(root.resolve()), size=root.stat().st_size))
            continue
        for path in _walk(root):
            if is_log_name(path.name) and path.is_file():
                logs.append(LogFile(path=str(path.resolve()), size=path.stat().st_size))
            elif path.is_file():
                skipped.append(Skipped(path=str(path.relative_to(root)), reason=_sniff_file(path)))
    return LogFiles(logs=tuple(logs), skipped=tuple(skipped))


def skipped_line(skipped: Sequence[Skipped]) -> str | None:
    """The one line that reports the skipped files (``None`` when there are none)."""
    if not skipped:
        return None
    named = ", ".join(f"{s.path} ({s.reason})" for s in skipped[:MAX_NAMED_SKIPS])
    more = len(skipped) - MAX_NAMED_SKIPS
    tail = f", and {more} more" if more > 0 else ""
    files = (
        "file that is not a provenance log"
        if len(skipped) == 1
        else ("files that are not provenance logs")
    )
    return f"skipped {len(skipped)} {files}: {named}{tail}"
