"""Small I/O helpers shared by the streaming encoder and decoder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, cast

__all__ = ["opened"]


class _CountingReader:
    """A binary file wrapper reporting how many bytes were read to a progress callback."""

    def __init__(self, raw: IO[bytes], progress: Callable[[int], None]) -> None:
        self._raw = raw
        self._progress = progress
        self._done = 0
        self.name = getattr(raw, "name", "<stream>")

    def read(self, size: int = -1) -> bytes:
        data = self._raw.read(size)
        self._done += len(data)
        self._progress(self._done)
        return data


@contextmanager
def opened(
    source: Path | IO[bytes], progress: Callable[[int], None] | None = None
) -> Iterator[IO[bytes]]:
    """``source`` opened for binary reading (a path is opened and closed here), with progress."""
    if isinstance(source, Path):
        with source.open("rb") as raw:
            yield raw if progress is None else cast(IO[bytes], _CountingReader(raw, progress))
    else:
        yield source if progress is None else cast(IO[bytes], _CountingReader(source, progress))
