"""The iterative lookup state machine, driven by hand and over a pure simulated network."""

from __future__ import annotations

import math
import random

import pytest

from disseminator.dht import (
    CandidateState,
    Contact,
    Lookup,
    LookupEvent,
    LookupStateError,
    NodeId,
    RoutingTable,
)
from disseminator.dht._lookup import TRANSITIONS

OWN = NodeId(value=0)


def c(value: int) -> Contact:
    return Contact(node_id=NodeId(value=value), address=f"n{value}.test:7000")


def test_transition_table_is_exactly_the_documented_one() -> None:
    assert dict(TRANSITIONS) == {
        (CandidateState.NEW, LookupEvent.QUERY): CandidateState.WAITING,
        (CandidateState.WAITING, LookupEvent.ANSWER): CandidateState.ANSWERED,
        (CandidateState.WAITING, LookupEvent.FAIL): CandidateState.FAILED,
    }


def test_at_most_alpha_queries_in_flight_nearest_first() -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(v) for v in (9, 1, 5, 3, 7)], alpha=3)
    assert [x.node_id.value for x in lookup.next_queries()] == [1, 3, 5]
    assert lookup.next_queries() == []
    assert lookup.in_flight == 3
    lookup.on_answer(NodeId(value=3), [])
    assert [x.node_id.value for x in lookup.next_queries()] == [7]


def test_done_when_the_k_nearest_have_answered() -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(4), c(8)], k=2, alpha=1)
    (first,) = lookup.next_queries()
    assert first == c(4)
    lookup.on_answer(first.node_id, [c(2), c(16)])  # learned 2: nearer than 8
    (second,) = lookup.next_queries()
    assert second == c(2)
    lookup.on_answer(second.node_id, [c(1)])
    (third,) = lookup.next_queries()
    assert third == c(1)
    assert not lookup.done
    lookup.on_answer(third.node_id, [])
    assert lookup.done
    result = lookup.result()
    assert result.closest == (c(1), c(2))
    assert result.hops == 3  # 4 -> 2 -> 1: a referral chain of three round trips
    assert result.queries == 3 and result.failures == 0


def test_failed_candidates_drop_out_of_the_window() -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(1), c(2), c(3)], k=2, alpha=3)
    assert lookup.next_queries() == [c(1), c(2)]  # 3 is outside the window of the k nearest
    lookup.on_failure(NodeId(value=1))
    lookup.on_answer(NodeId(value=2), [])
    assert not lookup.done
    assert lookup.next_queries() == [c(3)]  # 1 failed: 3 moves into the window
    lookup.on_answer(NodeId(value=3), [])
    assert lookup.done
    assert lookup.result().closest == (c(2), c(3))
    assert lookup.result().failures == 1


def test_own_id_is_never_a_candidate() -> None:
    lookup = Lookup(target=NodeId(value=5), own=OWN, seeds=[c(0), c(4)], k=2, alpha=2)
    assert lookup.next_queries() == [c(4)]
    lookup.on_answer(NodeId(value=4), [c(0)])
    assert lookup.state_of(OWN) is None


def test_no_seeds_means_done_with_nothing() -> None:
    lookup = Lookup(target=NodeId(value=5), own=OWN, seeds=[])
    assert lookup.done
    assert lookup.result().closest == ()
    assert lookup.result().hops == 0


@pytest.mark.parametrize(
    "events",
    [
        [LookupEvent.ANSWER],  # answer without a query
        [LookupEvent.FAIL],
        [LookupEvent.QUERY, LookupEvent.ANSWER, LookupEvent.ANSWER],  # answered twice
        [LookupEvent.QUERY, LookupEvent.FAIL, LookupEvent.ANSWER],  # late answer after failure
    ],
)
def test_illegal_transitions_raise(events: list[LookupEvent]) -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(1)], alpha=1)
    with pytest.raises(LookupStateError):
        for event in events:
            if event is LookupEvent.QUERY:
                lookup.next_queries()
            elif event is LookupEvent.ANSWER:
                lookup.on_answer(NodeId(value=1), [])
            else:
                lookup.on_failure(NodeId(value=1))


def test_unknown_node_and_early_result_raise() -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(1)])
    with pytest.raises(LookupStateError, match="not a candidate"):
        lookup.on_answer(NodeId(value=99), [])
    with pytest.raises(LookupStateError, match="not finished"):
        lookup.result()


def test_candidates_are_bounded() -> None:
    lookup = Lookup(target=NodeId(value=0), own=OWN, seeds=[c(1)], k=2, alpha=1, max_candidates=5)
    lookup.next_queries()
    lookup.on_answer(NodeId(value=1), [c(v) for v in range(2, 100)])
    assert sum(lookup.state_of(NodeId(value=v)) is not None for v in range(1, 100)) == 5
    assert lookup.state_of(NodeId(value=2)) is CandidateState.NEW  # the nearest are kept


def simulate(n: int, k: int, alpha: int, seed: int) -> tuple[list[int], int]:
    """A synchronous network of pure tables: each node knows ``k`` per bucket, all correct."""
    rng = random.Random(seed)
    ids = [NodeId(value=rng.getrandbits(256)) for _ in range(n)]
    tables = {}
    for me in ids:
        table = RoutingTable(me, k=k)
        for other in ids:
            table.observe(Contact(node_id=other, address="x.test:1"), 0)
        tables[me] = table
    hops, exact = [], 0
    for _ in range(50):
        source, target = rng.choice(ids), NodeId(value=rng.getrandbits(256))
        lookup = Lookup(
            target=target, own=source, seeds=tables[source].closest(target, k), k=k, alpha=alpha
        )
        while not lookup.done:
            for peer in lookup.next_queries():
                lookup.on_answer(peer.node_id, tables[peer.node_id].closest(target, k))
        result = lookup.result()
        truth = sorted((i for i in ids if i != source), key=lambda i: i.distance(target))[:k]
        exact += [x.node_id for x in result.closest] == truth
        hops.append(result.hops)
    return hops, exact


@pytest.mark.parametrize("n", [64, 256])
def test_pure_lookups_converge_in_logarithmically_many_hops(n: int) -> None:
    hops, exact = simulate(n, k=4, alpha=3, seed=n)
    assert exact == 50
    assert max(hops) <= math.ceil(math.log2(n))
