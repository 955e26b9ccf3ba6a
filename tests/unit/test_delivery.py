"""The delivery/ack state machine and the durable queue store."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from disseminator.delivery import StreamCursor, resume_point
from disseminator.store import Append, QueueFull, Store, StoredRegistration
from xdn.errors import ProtocolError

# ---- resume points ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("acked", "assigned", "applied", "expected"),
    [
        (0, 0, 0, 0),  # fresh
        (3, 10, 0, 3),  # receiver lost its cursor: resend everything unacknowledged
        (3, 10, 7, 7),  # acks 4..7 were lost in flight: the receiver applied them
        (7, 10, 3, 7),  # receiver is behind the queue's acknowledgement: nothing older remains
        (3, 10, 12, 3),  # receiver claims more than was assigned: the site was rebuilt
    ],
)
def test_resume_point(acked: int, assigned: int, applied: int, expected: int) -> None:
    assert resume_point(acked=acked, assigned=assigned, applied=applied) == expected


def test_negative_resume_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        resume_point(acked=0, assigned=0, applied=-1)


# ---- stream cursor ------------------------------------------------------------------------


def test_window_limits_unacknowledged_deliveries() -> None:
    cursor = StreamCursor(sent=0, acked=0, window=2)
    cursor.on_sent(1)
    cursor.on_sent(2)
    assert cursor.room == 0
    with pytest.raises(ProtocolError, match="window"):
        cursor.on_sent(3)
    assert cursor.on_ack(1)
    assert cursor.room == 1
    cursor.on_sent(3)


def test_illegal_events_are_refused() -> None:
    cursor = StreamCursor(sent=5, acked=5)
    with pytest.raises(ProtocolError, match="out of order"):
        cursor.on_sent(5)
    with pytest.raises(ProtocolError, match="only 5 were sent"):
        cursor.on_ack(6)
    assert cursor.on_ack(4) is False  # stale acknowledgements are harmless
    assert (cursor.sent, cursor.acked) == (5, 5)


@given(st.lists(st.sampled_from(["send", "ack"]), max_size=60), st.integers(1, 8))
def test_cursor_invariants_hold_for_any_legal_sequence(events: list[str], window: int) -> None:
    cursor = StreamCursor(sent=0, acked=0, window=window)
    for event in events:
        if event == "send" and cursor.room:
            cursor.on_sent(cursor.sent + 1)
        elif event == "ack" and cursor.acked < cursor.sent:
            cursor.on_ack(cursor.acked + 1)
        assert 0 <= cursor.acked <= cursor.sent <= cursor.acked + window


# ---- store --------------------------------------------------------------------------------


def _append(name: str, payload: bytes, kind: str = "subscriber") -> Append:
    return Append(kind=kind, name=name, payload=payload)


def test_routing_assigns_sequences_per_destination_atomically() -> None:
    store = Store(":memory:")
    last, full = store.commit_routing(
        document=("p", "doc", 1),
        appends=[_append("a", b"1"), _append("b", b"1"), _append("a", b"2")],
        log_graphs=[b"<g> .\n"],
    )
    assert last == {("subscriber", "a"): 2, ("subscriber", "b"): 1}
    assert full == []
    assert store.is_routed("p", "doc", 1)
    assert not store.is_routed("p", "doc", 2)
    assert store.pending("subscriber", "a", after=0, limit=10) == [(1, b"1"), (2, b"2")]
    assert [d for _, d in store.take_log_outbox()] == [b"<g> .\n"]


def test_ack_drops_delivered_and_never_moves_back() -> None:
    store = Store(":memory:")
    store.commit_routing(document=None, appends=[_append("a", bytes([i])) for i in range(5)])
    store.ack("subscriber", "a", 3)
    assert store.cursor("subscriber", "a") == (5, 3)
    assert [s for s, _ in store.pending("subscriber", "a", after=0, limit=10)] == [4, 5]
    store.ack("subscriber", "a", 1)
    assert store.cursor("subscriber", "a") == (5, 3)
    store.ack("subscriber", "a", 99)  # beyond what was assigned: ignored
    assert store.cursor("subscriber", "a") == (5, 3)
    assert [s for s, _ in store.pending("subscriber", "a", after=0, limit=10)] == [4, 5]


def _rows(store: Store) -> int:
    (count,) = store._db.execute("SELECT COUNT(*) FROM deliveries").fetchone()
    return int(count)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(
    st.tuples(st.just("route"), st.sampled_from("ab"), st.integers(1, 3)),
    st.tuples(st.just("ack"), st.sampled_from("ab"), st.integers(0, 12)),
    st.tuples(st.just("acks"), st.sampled_from("ab"), st.integers(0, 12)),
    st.tuples(st.just("drop"), st.sampled_from("ab"), st.just(0)),
    st.tuples(st.just("control"), st.sampled_from("ab"), st.just(0)),
    st.tuples(st.just("reopen"), st.just("a"), st.just(0)),
), max_size=30))  # fmt: skip
def test_the_queued_count_is_the_rows_a_queue_holds(
    operations: list[tuple[str, str, int]],
) -> None:
    """A counter kept in memory by every append, acknowledgement and drop (and rebuilt at
    opening): it always equals the delivery rows stored."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "site.sqlite"
        store = Store(path, max_queue=6)
        for operation, name, n in operations:
            if operation == "route":
                store.commit_routing(document=None, appends=[_append(name, b"x")] * n)
            elif operation == "ack":
                store.ack("subscriber", name, n)
            elif operation == "acks":
                store.ack_many({("subscriber", name): n, ("subscriber", "c"): n})
            elif operation == "drop":
                store.drop_destination("subscriber", name)
            elif operation == "control":
                registration = StoredRegistration(
                    kind="subscriber", owner="", subscriber=name, certificate=b"PEM",
                    grants={}, seen_ms=0,
                )
                store.change_registration(save=registration, control=_append(name, b"end"))
            else:
                store.close()
                store = Store(path, max_queue=6)
            assert store.queued_total() == _rows(store)
        store.close()


def test_full_queue_refuses_only_that_destination() -> None:
    store = Store(":memory:", max_queue=2)
    store.commit_routing(document=None, appends=[_append("slow", b"x"), _append("slow", b"y")])
    last, full = store.commit_routing(
        document=None, appends=[_append("slow", b"z"), _append("fast", b"z")]
    )
    assert full == [("subscriber", "slow")]
    assert last == {("subscriber", "fast"): 1}


def test_routing_that_will_be_acknowledged_refuses_a_full_queue_before_committing() -> None:
    """With ``refuse_full`` (what the site's routing uses, acknowledged after the commit) a
    full queue takes nothing of the transaction: no sibling's append, no routed mark, no
    resume counter, so the acknowledgement that would follow never covers a dropped delivery
    (the sender keeps it and sends it again)."""
    store = Store(":memory:", max_queue=2)
    store.commit_routing(document=None, appends=[_append("slow", b"x"), _append("slow", b"y")])
    with pytest.raises(QueueFull) as refused:
        store.commit_routing(
            document=("p", "d", 1), appends=[_append("fast", b"z"), _append("slow", b"z")],
            counter=("uplink", 7), refuse_full=True,
        )
    assert refused.value.destinations == (("subscriber", "slow"),)
    assert store.cursor("subscriber", "fast") == (0, 0)
    assert not store.is_routed("p", "d", 1)
    assert store.counter("uplink") == 0
    assert store.queued_total() == 2
    store.ack("subscriber", "slow", 1)  # room again: the same routing goes through
    last, full = store.commit_routing(
        document=("p", "d", 1), appends=[_append("fast", b"z"), _append("slow", b"z")],
        counter=("uplink", 7), refuse_full=True,
    )
    assert full == [] and last == {("subscriber", "fast"): 1, ("subscriber", "slow"): 3}
    assert store.counter("uplink") == 7


def test_state_survives_reopening(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "site.sqlite"
    store = Store(path)
    store.commit_routing(
        document=("p", "d", 1), appends=[_append("a", b"x")], counter=("uplink_applied", 7)
    )
    store.save_registration(
        StoredRegistration(
            kind="subscriber",
            owner="",
            subscriber="a",
            certificate=b"PEM",
            grants={"p": ["C"]},
            seen_ms=5,
        )
    )
    store.close()
    again = Store(path)
    assert again.is_routed("p", "d", 1)
    assert again.counter("uplink_applied") == 7
    assert again.pending("subscriber", "a", after=0, limit=5) == [(1, b"x")]
    assert [r.subscriber for r in again.registrations()] == ["a"]
    assert again.drop_destination("subscriber", "a") == 1
    assert again.cursor("subscriber", "a") == (0, 0)
    again.close()
