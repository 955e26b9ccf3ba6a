"""Which leaves of a document's signed manifest a hop carries, as a few ranges.

A document's fragments are the leaves of the publisher's Merkle manifest, and the publisher
lays them out concept by concept (one run of leaves per concept). Routing selects whole
concepts, so what one hop forwards is a handful of runs whatever the number of fragments: an
envelope names them as half-open leaf ranges (``xdn:carriesLeaves "0-120 300-7600"``), sorted,
adjacent runs merged. That is what the paper's content graph would say fragment by fragment,
in space that grows with the number of concepts forwarded, not of fragments; the recipient
checks it against the range proofs that tie each run to the manifest root.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise

__all__ = ["LeafRanges"]

_RANGE = r"(?:0|[1-9][0-9]{0,19})-(?:0|[1-9][0-9]{0,19})"
_TEXT = re.compile(rf"{_RANGE}(?: {_RANGE})*")
_MAX = 2**64


@dataclass(frozen=True, slots=True)
class LeafRanges:
    """A non-empty set of leaf indexes as sorted, disjoint, non-adjacent ``[start, end)`` runs.

    Build one with :meth:`of` (which sorts and merges) or :meth:`parse` (which insists on the
    canonical text, so that one set has one spelling and one signature).
    """

    runs: tuple[tuple[int, int], ...]
    _text: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.runs, tuple) or not self.runs:
            raise ValueError("leaf ranges need at least one run")
        for start, end in self.runs:
            if not 0 <= start < end <= _MAX:
                raise ValueError(f"leaf run {start}-{end} is empty or out of range")
        if any(a[1] >= b[0] for a, b in pairwise(self.runs)):
            raise ValueError("leaf runs must be sorted, disjoint and not adjacent")

    @classmethod
    def of(cls, runs: Iterable[tuple[int, int]]) -> LeafRanges:
        """The union of ``runs`` (any order, overlapping or adjacent), in canonical form."""
        merged: list[list[int]] = []
        for start, end in sorted(runs):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        return cls(tuple((s, e) for s, e in merged))

    @classmethod
    def parse(cls, text: str) -> LeafRanges:
        """Read the canonical text form; raise ``ValueError`` for anything else."""
        if not isinstance(text, str) or not _TEXT.fullmatch(text):
            raise ValueError("leaf ranges must read 'start-end start-end …' in decimal")
        runs = tuple(
            (int(a), int(b)) for a, b in (part.split("-") for part in text.split(" "))
        )
        return cls(runs)

    def __str__(self) -> str:
        text = self._text
        if text is None:  # (one set goes into many envelopes: written once)
            text = " ".join(f"{start}-{end}" for start, end in self.runs)
            object.__setattr__(self, "_text", text)
        return text

    def __iter__(self) -> Iterator[int]:
        for start, end in self.runs:
            yield from range(start, end)

    @property
    def count(self) -> int:
        """How many leaves the ranges cover."""
        return sum(end - start for start, end in self.runs)

    def issubset(self, other: LeafRanges) -> bool:
        """Whether every leaf here is in ``other`` (each run inside one of ``other``'s runs:
        both are merged, so a run cannot straddle two of them)."""
        theirs = other.runs
        index = 0
        for start, end in self.runs:
            while index < len(theirs) and theirs[index][1] < end:
                index += 1
            if index == len(theirs) or not theirs[index][0] <= start:
                return False
        return True
