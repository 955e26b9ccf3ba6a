"""Proactive content negotiation (RFC 9110 §12.5.1): read ``Accept``, choose a representation.

Theory of operation
-------------------
:func:`parse_accept` turns an ``Accept`` value into :class:`MediaRange` entries (type, subtype,
parameters other than ``q``, weight). Malformed entries are skipped, as a lenient server may;
a header with no usable entry counts as absent (anything goes).

:func:`choose` gives each offered media type the weight of the *most specific* range that
matches it — ``type/subtype`` with parameters, then ``type/subtype``, ``type/*``, ``*/*`` — so
``text/*;q=0.3, text/html`` weighs HTML 1 and Turtle 0.3. Parameters on a range (a JSON-LD
``profile``) make it more specific but do not prevent a match: the endpoint has one
representation per media type. The heaviest offer wins; ties go to the earlier offer (the
server's preference, JSON-LD first); weight 0 means "not acceptable", and when every offer weighs
0 the caller answers 406 (:class:`~xdn.linked_data.NotAcceptable`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from xdn.linked_data._errors import NotAcceptable

__all__ = ["MediaRange", "choose", "parse_accept"]

_TOKEN = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_RANGE = re.compile(rf"\s*({_TOKEN})/({_TOKEN})\s*")
_QVALUE = re.compile(r"(?:0(?:\.[0-9]{0,3})?|1(?:\.0{0,3})?)")
MAX_RANGES = 64  # an Accept longer than this is read up to here (bounded work per request)


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaRange:
    """One entry of an ``Accept`` header."""

    type: str
    subtype: str
    params: tuple[tuple[str, str], ...] = ()
    q: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.q <= 1.0:
            raise ValueError(f"q must lie in [0, 1], got {self.q}")
        if self.type == "*" and self.subtype != "*":
            raise ValueError("a range */subtype is not allowed")

    def specificity(self, media_type: str) -> int:
        """How specifically this range matches ``media_type`` (-1: it does not match)."""
        kind, _, sub = media_type.partition("/")
        if self.type == "*":
            return 0
        if self.type != kind:
            return -1
        if self.subtype == "*":
            return 1
        if self.subtype != sub:
            return -1
        return 3 if self.params else 2


def _entry(text: str) -> MediaRange | None:
    kind, *params = text.split(";")
    match = _RANGE.fullmatch(kind)
    if match is None:
        return None
    q, extra = 1.0, []
    for param in params:
        key, eq, value = param.partition("=")
        key, value = key.strip().lower(), value.strip()
        if not eq or not key:
            return None
        if key == "q":
            if not _QVALUE.fullmatch(value):
                return None
            q = float(value)
            break  # what follows q are accept-extensions: ignored
        extra.append((key, value.strip('"')))
    try:
        return MediaRange(
            type=match.group(1).lower(), subtype=match.group(2).lower(), params=tuple(extra), q=q
        )
    except ValueError:
        return None


def parse_accept(header: str | None) -> tuple[MediaRange, ...]:
    """The usable media ranges of an ``Accept`` value, in order (``()``: accept anything)."""
    if header is None:
        return ()
    ranges = []
    for text in header.split(",", MAX_RANGES)[:MAX_RANGES]:
        if text.strip() and (entry := _entry(text)) is not None:
            ranges.append(entry)
    return tuple(ranges)


def _weight(ranges: Sequence[MediaRange], media_type: str) -> float:
    best, weight = -1, 0.0
    for entry in ranges:
        level = entry.specificity(media_type)
        if level < 0:
            continue
        if level > best or (level == best and entry.q > weight):  # (a type listed twice)
            best, weight = level, entry.q
    return weight


def choose(accept: str | None, offers: Sequence[str]) -> str:
    """The offered media type the ``Accept`` value prefers (the first offer if it has none).

    Raises:
        ValueError: ``offers`` is empty.
        NotAcceptable: no offer is acceptable, naming the offers.
    """
    if not offers:
        raise ValueError("nothing is offered")
    ranges = parse_accept(accept)
    if not ranges:
        return offers[0]
    weights = [_weight(ranges, offer) for offer in offers]
    best = max(weights)
    if best <= 0:
        raise NotAcceptable(
            f"none of the representations of this resource is acceptable: it offers "
            f"{', '.join(offers)}"
        )
    return offers[weights.index(best)]
