"""What a subscriber has of each (publisher, concept) chain, and the gaps in it.

Theory of operation. A publisher numbers its documents (every new document version gets the
next sequence number) and each signed manifest says, for every concept it holds, the number of
the publisher's previous document holding that concept (a back pointer,
:mod:`xdn.codec._manifest`). The documents holding concept C thus form a signed chain, and a
subscriber granted C can follow it without seeing any other document. The publisher's signed
checkpoints (:mod:`xdn.completeness._checkpoint`) name the head of each chain.

Per (publisher, concept) it follows, the :class:`GapTracker` keeps a *floor* — nothing at or
below it is expected: documents from before the subscriber joined, or already accounted for —
and above the floor the documents received, those known to exist but not received (*missing*:
to ask the site for) and those the site said it cannot replay (*unavailable*: reported). The
events:

* :meth:`~GapTracker.follow` sets the concepts followed for a publisher (the grants): a concept
  newly granted starts *fresh* (no floor yet), one no longer granted is forgotten;
* :meth:`~GapTracker.receive` a verified document n: n is received (no longer missing); for
  each followed concept with back pointer p, a fresh chain takes p as its floor (it joined
  here: nothing before n is owed to it), otherwise p above the floor and not received is a gap;
* :meth:`~GapTracker.checkpoint`: the head L of a followed chain above the floor and not
  received is a gap; a fresh chain takes L as its floor (0 for a concept never published);
* :meth:`~GapTracker.unavailable`: the site cannot replay these; they are reported once;
* :meth:`~GapTracker.rejoin`: the subscriber left (its own signed, recorded ``xdn unsubscribe``)
  and subscribes again: nothing published while it was away is owed, so each chain restarts
  like a fresh one — its next anchor (a document's back pointer, a checkpoint's head) raises
  the floor — but keeps what it still owed from before the leave, and its floor never drops;
  what it knew of before the leave (a replay of a document it owed, a head at or below its
  floor) is no anchor.
  Only the subscriber's own act restarts a chain, never anything a site says.

A replayed missing document brings its own back pointer, so a run of withheld documents is
uncovered one by one, each asked for in turn. A chain with nothing missing is compacted: its
floor moves up to the newest document accounted for, so the state stays small.

Documents replayed as *state at subscribe time* (issued before the subscription began) are
received without following their back pointers (``chain=False``): a site retains only the
latest version of each document, so the chain through them has holes nobody withheld.

Pure: no I/O, no clock. :meth:`GapTracker.to_json` / :meth:`GapTracker.from_json` let the caller
keep the state durably.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Gap", "GapTracker"]


@dataclass(frozen=True, slots=True, order=True)
class Gap:
    """Document ``sequence`` of ``publisher``, holding followed ``concept``, not received."""

    publisher: str
    concept: str
    sequence: int


@dataclass(slots=True)
class _Chain:
    floor: int | None = None  # None: fresh, nothing seen yet
    rejoined: bool = False  # subscribed again after leaving: the next anchor raises the floor
    received: set[int] = field(default_factory=set)
    missing: set[int] = field(default_factory=set)
    unavailable: set[int] = field(default_factory=set)

    def owed(self, sequence: int) -> bool:
        """Is ``sequence`` a document of this chain we should have and do not?"""
        assert self.floor is not None
        return (
            sequence > self.floor
            and sequence not in self.received
            and sequence not in self.unavailable
        )

    def starts_at(self, sequence: int) -> bool:
        """Does this chain start (fresh) or restart (rejoined) at ``sequence``? A rejoined one
        not at what it knew of before the leave (at or below its floor, received, owed): that
        says nothing of the away period."""
        if self.floor is None:
            return True
        return self.rejoined and self.owed(sequence) and sequence not in self.missing

    def anchor(self, sequence: int) -> None:
        """Nothing up to ``sequence`` is owed (a fresh or rejoined chain starts there)."""
        self.floor = sequence if self.floor is None else max(self.floor, sequence)
        self.rejoined = False

    def compact(self) -> None:
        if self.floor is not None and not self.missing:
            self.floor = max([self.floor, *self.received, *self.unavailable])
            self.received.clear()
            self.unavailable.clear()


class GapTracker:
    """The chains one subscriber follows, per (publisher, concept)."""

    def __init__(self) -> None:
        self._chains: dict[tuple[str, str], _Chain] = {}

    def follow(self, publisher: str, concepts: Iterable[str]) -> None:
        """Follow exactly ``concepts`` of ``publisher``: new ones start fresh."""
        wanted = set(concepts)
        for key in [k for k in self._chains if k[0] == publisher and k[1] not in wanted]:
            del self._chains[key]
        for concept in wanted:
            self._chains.setdefault((publisher, concept), _Chain())

    def following(self, publisher: str) -> frozenset[str]:
        """The concepts of ``publisher`` followed."""
        return frozenset(c for p, c in self._chains if p == publisher)

    def publishers(self) -> frozenset[str]:
        """The publishers some concept of which is followed."""
        return frozenset(p for p, _ in self._chains)

    def receive(
        self, publisher: str, sequence: int, previous: Mapping[str, int], *, chain: bool = True
    ) -> list[Gap]:
        """Document ``sequence`` arrived holding the concepts of ``previous`` (concept → back
        pointer); return the gaps it reveals. ``chain=False``: state at subscribe time."""
        if sequence < 1:
            return []  # unsequenced: nothing to check
        gaps = []
        for concept, back in sorted(previous.items()):
            track = self._chains.get((publisher, concept))
            if track is None:
                continue
            starts = track.starts_at(sequence)
            track.missing.discard(sequence)
            track.unavailable.discard(sequence)
            if starts:
                if not chain:
                    track.received.add(sequence)
                    continue
                track.anchor(back)
            if track.owed(sequence):  # (above the floor)
                track.received.add(sequence)
            if chain and track.owed(back) and back not in track.missing:
                track.missing.add(back)
                gaps.append(Gap(publisher, concept, back))
            track.compact()
        return gaps

    def checkpoint(self, publisher: str, latest: Mapping[str, int]) -> list[Gap]:
        """A verified checkpoint of ``publisher`` names each concept's newest document; return
        the gaps it reveals."""
        gaps = []
        for (p, concept), track in sorted(self._chains.items()):
            if p != publisher:
                continue
            newest = latest.get(concept, 0)
            if track.starts_at(newest):
                track.anchor(newest)
            elif track.owed(newest) and newest not in track.missing:
                track.missing.add(newest)
                gaps.append(Gap(publisher, concept, newest))
            track.compact()
        return gaps

    def rejoin(self) -> None:
        """The subscriber left and subscribes again: what its publishers published while it was
        away is not owed; what it owed before it left still is."""
        for track in self._chains.values():
            track.rejoined = True

    def unavailable(self, publisher: str, sequences: Iterable[int]) -> list[Gap]:
        """The site cannot replay ``sequences``: the gaps that stay open, to report."""
        gone = set(sequences)
        gaps = []
        for (p, concept), track in sorted(self._chains.items()):
            if p != publisher:
                continue
            for sequence in sorted(track.missing & gone):
                track.missing.discard(sequence)
                track.unavailable.add(sequence)
                gaps.append(Gap(publisher, concept, sequence))
            track.compact()
        return gaps

    def missing(self) -> dict[str, list[int]]:
        """Publisher → the sequence numbers to ask the site for."""
        out: dict[str, set[int]] = {}
        for (publisher, _), track in self._chains.items():
            if track.missing:
                out.setdefault(publisher, set()).update(track.missing)
        return {p: sorted(s) for p, s in sorted(out.items())}

    def to_json(self) -> str:
        """The state, for :meth:`from_json`."""
        return json.dumps(
            [
                [
                    p,
                    c,
                    t.floor,
                    sorted(t.received),
                    sorted(t.missing),
                    sorted(t.unavailable),
                    t.rejoined,
                ]
                for (p, c), t in sorted(self._chains.items())
            ]
        )

    @classmethod
    def from_json(cls, data: str) -> GapTracker:
        """A tracker in the state :meth:`to_json` wrote.

        Raises:
            ValueError: ``data`` is not such a state.
        """
        tracker = cls()
        try:
            for p, c, floor, received, missing, unavailable, *rest in json.loads(data):
                if len(rest) > 1:
                    raise ValueError("too many fields")
                tracker._chains[(str(p), str(c))] = _Chain(
                    floor=None if floor is None else int(floor),
                    received={int(s) for s in received},
                    missing={int(s) for s in missing},
                    unavailable={int(s) for s in unavailable},
                    rejoined=bool(rest and rest[0]),  # (absent in states written before rejoins)
                )
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a gap tracker state: {exc}") from None
        return tracker
