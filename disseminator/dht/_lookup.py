"""The iterative node lookup as a pure state machine (Kademlia §2.3).

A :class:`Lookup` knows the target, the candidates met so far and the state of each; the
caller does the I/O. It asks :meth:`Lookup.next_queries` whom to query (never more than
``alpha`` in flight), sends FIND_NODE or FIND_VALUE to them, and feeds back each answer with
:meth:`Lookup.on_answer` (the contacts the peer returned) or :meth:`Lookup.on_failure`.
It is :attr:`Lookup.done` when the ``k`` nearest candidates that have not failed have all
answered: nobody nearer is left to ask. FIND_VALUE lookups run to the same end, because a key
has one record per site and the union of the nearest nodes' records is the answer.

Each candidate moves through ``NEW → WAITING → ANSWERED | FAILED``; the transitions are the
table :data:`TRANSITIONS`, and an event outside it raises :class:`LookupStateError`.

Hops: seeds (from our own routing table) are at depth 1; a contact first learned from a peer
at depth ``d`` is at depth ``d + 1``. :attr:`LookupResult.hops` is the deepest referral chain
needed to reach the ``k`` nodes found, i.e. the number of sequential round trips the lookup
needed; Kademlia bounds it by ``O(log N)``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from disseminator.dht._errors import LookupStateError
from disseminator.dht._ids import Contact, NodeId

__all__ = ["TRANSITIONS", "CandidateState", "Lookup", "LookupEvent", "LookupResult"]


class CandidateState(enum.Enum):
    """Where one candidate stands in a lookup."""

    NEW = "new"
    WAITING = "waiting"
    ANSWERED = "answered"
    FAILED = "failed"


class LookupEvent(enum.Enum):
    """What can happen to a candidate."""

    QUERY = "query"
    ANSWER = "answer"
    FAIL = "fail"


TRANSITIONS: Mapping[tuple[CandidateState, LookupEvent], CandidateState] = MappingProxyType(
    {
        (CandidateState.NEW, LookupEvent.QUERY): CandidateState.WAITING,
        (CandidateState.WAITING, LookupEvent.ANSWER): CandidateState.ANSWERED,
        (CandidateState.WAITING, LookupEvent.FAIL): CandidateState.FAILED,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LookupResult:
    """What a finished lookup found.

    Attributes:
        target: the id looked up.
        closest: up to ``k`` nodes nearest to ``target`` that answered, nearest first.
        hops: sequential round trips needed to reach them (see the module docstring).
        queries: RPCs sent.
        failures: RPCs that failed.
    """

    target: NodeId
    closest: tuple[Contact, ...]
    hops: int
    queries: int
    failures: int


@dataclass(slots=True, kw_only=True)
class _Candidate:
    contact: Contact
    distance: int
    depth: int
    state: CandidateState = CandidateState.NEW


class Lookup:
    """One iterative lookup of ``target``."""

    def __init__(
        self,
        *,
        target: NodeId,
        own: NodeId,
        seeds: Iterable[Contact],
        k: int = 20,
        alpha: int = 3,
        max_candidates: int | None = None,
    ) -> None:
        if k < 1 or alpha < 1:
            raise ValueError("k and alpha must be at least 1")
        self.target = target
        self.own = own
        self.k = k
        self.alpha = alpha
        self._max_candidates = max_candidates or 16 * k
        self._candidates: dict[NodeId, _Candidate] = {}
        self.queries = 0
        self.failures = 0
        self._add(seeds, depth=1)

    # ---- state ------------------------------------------------------------------------------
    def _ordered(self) -> list[_Candidate]:
        return sorted(self._candidates.values(), key=lambda c: c.distance)

    def _window(self) -> list[_Candidate]:
        """The ``k`` nearest candidates that have not failed."""
        live = (c for c in self._ordered() if c.state is not CandidateState.FAILED)
        return [c for _, c in zip(range(self.k), live, strict=False)]

    @property
    def in_flight(self) -> int:
        """Queries sent and not yet answered or failed."""
        return sum(c.state is CandidateState.WAITING for c in self._candidates.values())

    @property
    def done(self) -> bool:
        """Whether the ``k`` nearest live candidates have all answered."""
        return all(c.state is CandidateState.ANSWERED for c in self._window())

    def state_of(self, node_id: NodeId) -> CandidateState | None:
        """The state of a candidate (``None`` if never met)."""
        candidate = self._candidates.get(node_id)
        return candidate.state if candidate else None

    # ---- transitions ------------------------------------------------------------------------
    def _step(self, node_id: NodeId, event: LookupEvent) -> _Candidate:
        candidate = self._candidates.get(node_id)
        if candidate is None:
            raise LookupStateError(f"{event.value}: node {node_id} is not a candidate")
        new_state = TRANSITIONS.get((candidate.state, event))
        if new_state is None:
            raise LookupStateError(
                f"{event.value} not allowed for node {node_id} in state {candidate.state.value}"
            )
        candidate.state = new_state
        return candidate

    def next_queries(self) -> list[Contact]:
        """Candidates to query now; each is marked WAITING. Empty when none may go yet."""
        budget = self.alpha - self.in_flight
        chosen: list[Contact] = []
        for candidate in self._window():
            if budget <= 0:
                break
            if candidate.state is CandidateState.NEW:
                self._step(candidate.contact.node_id, LookupEvent.QUERY)
                chosen.append(candidate.contact)
                self.queries += 1
                budget -= 1
        return chosen

    def on_answer(self, node_id: NodeId, contacts: Iterable[Contact]) -> None:
        """``node_id`` answered, naming ``contacts`` nearer to the target."""
        candidate = self._step(node_id, LookupEvent.ANSWER)
        self._add(contacts, depth=candidate.depth + 1)

    def on_failure(self, node_id: NodeId) -> None:
        """The query to ``node_id`` failed (timeout, error, or a malformed reply)."""
        self._step(node_id, LookupEvent.FAIL)
        self.failures += 1

    def _add(self, contacts: Iterable[Contact], *, depth: int) -> None:
        for contact in contacts:
            if contact.node_id == self.own:
                continue
            known = self._candidates.get(contact.node_id)
            if known is not None:
                known.depth = min(known.depth, depth)
                continue
            self._candidates[contact.node_id] = _Candidate(
                contact=contact, distance=contact.node_id.distance(self.target), depth=depth
            )
        self._prune()

    def _prune(self) -> None:
        """Bound memory: forget the farthest never-queried candidates beyond the cap."""
        excess = len(self._candidates) - self._max_candidates
        if excess <= 0:
            return
        for candidate in reversed(self._ordered()):
            if excess <= 0:
                break
            if candidate.state is CandidateState.NEW:
                del self._candidates[candidate.contact.node_id]
                excess -= 1

    def result(self) -> LookupResult:
        """The outcome; only once :attr:`done`."""
        if not self.done:
            raise LookupStateError("the lookup has not finished")
        window = self._window()
        return LookupResult(
            target=self.target,
            closest=tuple(c.contact for c in window),
            hops=max((c.depth for c in window), default=0),
            queries=self.queries,
            failures=self.failures,
        )
