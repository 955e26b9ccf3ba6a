"""A seeded schedule of faults: which process is killed or paused, which link is cut, and when.

Pure: the same seed and the same targets give the same schedule, so a failing campaign can be
replayed. A fault has a start and an end (a killed process is restarted at its end, a paused one
continued, a cut link restored). Faults of one target never overlap, and at most
``concurrency`` faults are in force at once, so the network is degraded, never all down.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Fault", "FaultKind", "LinkFault", "Schedule", "Target", "make_schedule"]


class FaultKind(StrEnum):
    KILL = "kill"  # SIGKILL, restarted at the end
    PAUSE = "pause"  # SIGSTOP, SIGCONT at the end
    CUT = "cut"  # a site's link impaired (see LinkFault), restored at the end


class LinkFault(StrEnum):
    PARTITION = "partition"  # the site's link down: every packet to and from it dropped
    THROTTLE = "throttle"  # the site's link slowed to 256 kbit/s each way: queueing delay,
    # and drops once the queue (500 ms of it) is full


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """A process (or, for a cut, a site's link). ``role``: site, subscriber, publisher or
    key-service; ``name``: the site, subscriber or publisher it is."""

    role: str
    name: str

    def __str__(self) -> str:
        return f"{self.role}:{self.name}"

    @property
    def resource(self) -> str:
        """What two faults must not hit at once: a publisher and its key service run in
        turn, as one lane of processes."""
        return f"publisher:{self.name}" if self.role == "key-service" else str(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class Fault:
    kind: FaultKind
    target: Target
    start_s: float  # seconds after the campaign's start
    end_s: float
    link: LinkFault | None = None

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise ValueError(f"fault ends before it starts: {self}")
        if (self.kind is FaultKind.CUT) != (self.link is not None):
            raise ValueError(f"a cut, and only a cut, names a link fault: {self}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    seed: int
    faults: tuple[Fault, ...]  # by start time

    def count(self, kind: FaultKind) -> int:
        return sum(1 for fault in self.faults if fault.kind is kind)


def make_schedule(
    *,
    seed: int,
    processes: Sequence[Target],
    sites: Sequence[str],
    kills: int,
    pauses: int,
    cuts: int,
    start_s: float,
    end_s: float,
    concurrency: int = 2,
    downtime_s: tuple[float, float] = (0.2, 3.0),
    pause_s: tuple[float, float] = (1.0, 4.0),
    cut_s: tuple[float, float] = (1.0, 5.0),
) -> Schedule:
    """Spread ``kills`` kills, ``pauses`` pauses and ``cuts`` link cuts over
    [``start_s``, ``end_s``], each at a random free target.

    Raises:
        ValueError: nothing to fault, or a window too short for the faults asked.
    """
    if not processes or (cuts and not sites):
        raise ValueError("a schedule needs processes (and sites, for cuts) to fault")
    if min(kills, pauses, cuts) < 0 or concurrency < 1 or end_s <= start_s:
        raise ValueError("counts must be ≥ 0, concurrency ≥ 1 and the window not empty")
    rng = random.Random(seed)
    kinds = [FaultKind.KILL] * kills + [FaultKind.PAUSE] * pauses + [FaultKind.CUT] * cuts
    rng.shuffle(kinds)
    step = (end_s - start_s) / max(1, len(kinds))
    faults: list[Fault] = []
    at = start_s
    for index, kind in enumerate(kinds):
        at = max(at, start_s + step * (index + rng.random() * 0.5))  # never earlier
        length = rng.uniform(
            *{FaultKind.KILL: downtime_s, FaultKind.PAUSE: pause_s, FaultKind.CUT: cut_s}[kind]
        )
        in_force = [f for f in faults if f.end_s > at]
        if len(in_force) >= concurrency:  # wait for the first of them to end
            at = min(f.end_s for f in in_force) + 0.1
        busy = {f.target.resource for f in faults if f.end_s > at}
        pool = (
            [Target(role="link", name=s) for s in sites]
            if kind is FaultKind.CUT
            else list(processes)
        )
        free = [t for t in pool if t.resource not in busy]
        if not free:
            raise ValueError(f"no free target for a {kind} at {at:.1f}s: too many at once")
        if kind is FaultKind.KILL:  # every role killed at least once, when kills allow
            killed = {f.target.role for f in faults if f.kind is FaultKind.KILL}
            free = [t for t in free if t.role not in killed] or free
        target = rng.choice(free)
        link = rng.choice(list(LinkFault)) if kind is FaultKind.CUT else None
        faults.append(Fault(kind=kind, target=target, start_s=at, end_s=at + length, link=link))
    return Schedule(seed=seed, faults=tuple(faults))
