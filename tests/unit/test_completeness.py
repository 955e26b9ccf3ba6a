"""The gap tracker (pure) and the publisher's signed checkpoint.

The model: a publisher issues documents 1..n, each holding some concepts; each document's back
pointer per concept is the previous document holding it, and a checkpoint after document k
names each concept's newest document up to k. A subscriber follows concepts S from a join
point; a dishonest site withholds a subset W of the later documents (and their checkpoints).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn import certs, crypto
from xdn.completeness import Checkpoint, Gap, GapTracker, SignedCheckpoint, sign_checkpoint
from xdn.errors import ProtocolError, SignatureError
from xdn.wireconv import checkpoint_from_pb, checkpoint_to_pb

CONCEPTS = ("A", "B", "C", "D")
P = "pub"

Docs = Sequence[frozenset[str]]  # docs[k - 1]: the concepts of document k


def _latest(docs: Docs, k: int) -> dict[str, int]:
    """The checkpoint after document k: each concept published so far → its newest document."""
    out: dict[str, int] = {}
    for j in range(1, k + 1):
        out.update(dict.fromkeys(docs[j - 1], j))
    return out


def _previous(docs: Docs, k: int) -> dict[str, int]:
    """Back pointers of document k: concept → previous document holding it (0: none)."""
    before = _latest(docs, k - 1)
    return {concept: before.get(concept, 0) for concept in docs[k - 1]}


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[frozenset[str]], frozenset[str], int, frozenset[int]]:
    n = draw(st.integers(1, 20))
    docs = [frozenset(draw(st.sets(st.sampled_from(CONCEPTS), min_size=1))) for _ in range(n)]
    follow = frozenset(draw(st.sets(st.sampled_from(CONCEPTS), min_size=1)))
    join = draw(st.integers(0, n))
    withheld = frozenset(draw(st.sets(st.integers(join + 1, n)))) if join < n else frozenset()
    return docs, follow, join, withheld


def _run(
    docs: Docs, follow: frozenset[str], join: int, withheld: frozenset[int], *,
    anchor: bool, replay: bool,
) -> tuple[set[int], GapTracker, list[Gap]]:
    """Play the scenario; return the documents found missing, the tracker, the gaps reported."""
    tracker = GapTracker()
    tracker.follow(P, follow)
    found: set[int] = set()

    def note(gaps: list[Gap]) -> None:
        for gap in gaps:
            assert gap.concept in docs[gap.sequence - 1], "a gap names a concept of its document"
            assert gap.concept in follow
            found.add(gap.sequence)

    if anchor:  # the checkpoint the site hands over at registration
        note(tracker.checkpoint(P, _latest(docs, join)))
    for k in range(join + 1, len(docs) + 1):
        if k in withheld:
            continue
        note(tracker.receive(P, k, _previous(docs, k)))
        if k % 4 == 0:
            tracker = GapTracker.from_json(tracker.to_json())  # durable state round-trips
        note(tracker.checkpoint(P, _latest(docs, k)))
    note(tracker.checkpoint(P, _latest(docs, len(docs))))  # the publisher's periodic one
    reported: list[Gap] = []
    if replay:  # an honest site that retained everything replays what is asked
        while asked := tracker.missing().get(P):
            for k in asked:
                note(tracker.receive(P, k, _previous(docs, k)))
    else:  # a site that retained nothing
        reported = tracker.unavailable(P, tracker.missing().get(P, []))
    return found, tracker, reported


def _relevant(docs: Docs, follow: frozenset[str], withheld: frozenset[int]) -> set[int]:
    return {k for k in withheld if docs[k - 1] & follow}


@settings(max_examples=120, deadline=None)
@given(scenarios())
def test_every_withheld_document_of_a_followed_concept_is_found_and_nothing_else(
    scenario: tuple[list[frozenset[str]], frozenset[str], int, frozenset[int]],
) -> None:
    docs, follow, join, withheld = scenario
    found, tracker, _ = _run(docs, follow, join, withheld, anchor=True, replay=True)
    assert found == _relevant(docs, follow, withheld)
    assert tracker.missing() == {}


@settings(max_examples=120, deadline=None)
@given(scenarios(), st.booleans())
def test_no_false_gaps_and_any_withholding_shows_when_nothing_can_be_replayed(
    scenario: tuple[list[frozenset[str]], frozenset[str], int, frozenset[int]], anchor: bool
) -> None:
    docs, follow, join, withheld = scenario
    found, tracker, reported = _run(docs, follow, join, withheld, anchor=anchor, replay=False)
    relevant = _relevant(docs, follow, withheld)
    assert found <= relevant, "only withheld documents are ever missing"
    assert {g.sequence for g in reported} == found
    if anchor:
        assert bool(found) == bool(relevant), "some gap shows whenever one was withheld"
    assert tracker.missing() == {}
    # Reported once: the same checkpoint again finds nothing new.
    assert tracker.checkpoint(P, _latest(docs, len(docs))) == []


@settings(max_examples=80, deadline=None)
@given(scenarios())
def test_in_order_delivery_has_no_gaps_from_any_join_point(
    scenario: tuple[list[frozenset[str]], frozenset[str], int, frozenset[int]],
) -> None:
    docs, follow, join, _ = scenario
    for anchor in (False, True):
        found, _, _ = _run(docs, follow, join, frozenset(), anchor=anchor, replay=False)
        assert found == set()


@settings(max_examples=80, deadline=None)
@given(
    scenarios(),
    st.frozensets(st.sampled_from(CONCEPTS), min_size=1),
    st.integers(0, 20),
)
def test_a_grant_change_starts_new_concepts_fresh_and_forgets_old_ones(
    scenario: tuple[list[frozenset[str]], frozenset[str], int, frozenset[int]],
    after: frozenset[str],
    at: int,
) -> None:
    """Grants change after document ``at``: documents of a newly granted concept from before
    the change are not owed; withheld ones of a concept no longer granted are not gaps."""
    docs, before, _, _ = scenario
    at = min(at, len(docs))
    tracker = GapTracker()
    tracker.follow(P, before)
    for k in range(1, at + 1):
        assert tracker.receive(P, k, _previous(docs, k)) == []
    tracker.follow(P, after)
    assert tracker.following(P) == after
    for k in range(at + 1, len(docs) + 1):  # in order: nothing may be missing
        assert tracker.receive(P, k, _previous(docs, k)) == []
        assert tracker.checkpoint(P, _latest(docs, k)) == []


def test_join_point_and_fresh_concepts() -> None:
    tracker = GapTracker()
    tracker.follow(P, ["A", "B"])
    assert tracker.receive(P, 7, {"A": 4}) == []  # joined here: nothing before 7 is owed for A
    assert tracker.receive(P, 9, {"A": 8}) == [Gap(P, "A", 8)]
    assert tracker.missing() == {P: [8]}
    assert tracker.receive(P, 8, {"A": 7, "B": 5}) == []  # the replay fills it; B joins at 5
    assert tracker.missing() == {}
    # A checkpoint anchors a concept never published (0): its first document is owed whole.
    tracker.follow(P, ["A", "B", "C"])
    assert tracker.checkpoint(P, {"A": 9, "B": 8}) == []
    assert tracker.receive(P, 12, {"C": 11}) == [Gap(P, "C", 11)]
    assert tracker.receive(P, 11, {"C": 10}) == [Gap(P, "C", 10)]
    assert tracker.unavailable(P, [10]) == [Gap(P, "C", 10)]
    assert tracker.missing() == {}
    # A state-at-subscribe-time document is counted without following its back pointer.
    tracker.follow(P, ["D"])
    assert tracker.receive(P, 3, {"D": 1}, chain=False) == []
    assert tracker.receive(P, 13, {"D": 3}) == []
    assert tracker.receive(P, 0, {"D": 0}) == []  # unsequenced: not checked
    with pytest.raises(ValueError, match="not a gap tracker state"):
        GapTracker.from_json('{"a": 1}')


def test_a_rejoined_subscriber_is_owed_nothing_published_while_it_was_away() -> None:
    # Member for documents 1-5 (A: 1, 3, 5; B: 2, 4), document 4 still missing when it left;
    # away while 6-20 were published; the site retains only the newest, so what it replays of
    # the away period runs out: none of it is owed, document 4 still is.
    tracker = GapTracker()
    tracker.follow(P, ["A", "B"])
    assert tracker.receive(P, 1, {"A": 0}) == []
    assert tracker.receive(P, 2, {"B": 0}) == []
    assert tracker.receive(P, 3, {"A": 1}) == []
    assert tracker.receive(P, 5, {"A": 3}) == []
    assert tracker.checkpoint(P, {"A": 5, "B": 4}) == [Gap(P, "B", 4)]
    tracker.rejoin()
    tracker = GapTracker.from_json(tracker.to_json())  # (the leave survives a restart)
    assert tracker.missing() == {P: [4]}  # owed from before the leave: still asked for
    assert tracker.checkpoint(P, {"A": 5, "B": 4}) == []  # old news: no anchor
    assert tracker.receive(P, 4, {"B": 2}) == []  # owed from before: replayed, no anchor
    assert tracker.receive(P, 3, {"A": 1}) == []  # received before: no anchor either
    assert tracker.checkpoint(P, {"A": 18, "B": 19}) == []  # heads from the away period
    assert tracker.receive(P, 21, {"B": 19}) == []
    assert tracker.receive(P, 22, {"A": 18}) == []
    assert tracker.missing() == {}
    # After the rejoin, withholding shows again.
    assert tracker.receive(P, 24, {"A": 23}) == [Gap(P, "A", 23)]
    assert tracker.checkpoint(P, {"A": 24, "B": 25}) == [Gap(P, "B", 25)]
    assert tracker.missing() == {P: [23, 25]}


def test_retained_state_does_not_anchor_a_rejoined_chain() -> None:
    tracker = GapTracker()
    tracker.follow(P, ["A"])
    assert tracker.receive(P, 2, {"A": 1}) == []
    tracker.rejoin()
    assert tracker.receive(P, 9, {"A": 6}, chain=False) == []  # state at subscribe time
    assert tracker.receive(P, 30, {"A": 29}) == []  # the first live one anchors at 29
    assert tracker.receive(P, 32, {"A": 31}) == [Gap(P, "A", 31)]
    with pytest.raises(ValueError, match="not a gap tracker state"):
        GapTracker.from_json('[["p", "A", 1, [], [], [], true, 7]]')


# ---- the signed checkpoint -------------------------------------------------------------------
NOW = datetime.now(UTC)


@pytest.fixture(scope="module")
def publisher() -> tuple[bytes, crypto.PrivateKey]:
    ca = certs.create_ca("test-ca", now=NOW)
    cert_pem, key_pem = certs.issue(*ca, name="pub", role="publisher", now=NOW)
    return cert_pem, crypto.load_private_key_pem(key_pem)


def _checkpoint() -> Checkpoint:
    return Checkpoint(publisher=P, issued_at_ms=1_000, sequence=9, latest={"B": 9, "A": 4})


def test_checkpoint_round_trips_and_verifies(publisher: tuple[bytes, crypto.PrivateKey]) -> None:
    cert_pem, key = publisher
    signed = sign_checkpoint(_checkpoint(), key)
    message = checkpoint_to_pb(signed, publisher_certificate=cert_pem)
    back = checkpoint_from_pb(message)
    assert back == signed
    assert list(back.checkpoint.latest) == ["A", "B"]
    back.verify(certs.public_key_of(cert_pem))
    assert back.checkpoint.age_ms(4_000) == 3_000
    assert back.checkpoint.age_ms(0) == 0


@pytest.mark.parametrize(
    "tamper",
    [
        lambda m: setattr(m, "publisher", "other"),
        lambda m: setattr(m, "issued_at_ms", m.issued_at_ms + 1),
        lambda m: setattr(m, "sequence", m.sequence + 1),
        lambda m: setattr(m.concepts[0], "latest", m.concepts[0].latest + 1),
        lambda m: setattr(m.concepts[1], "concept", "C"),
        lambda m: m.concepts.pop(),
    ],
    ids=["publisher", "time", "sequence", "latest", "concept", "dropped-concept"],
)
def test_every_altered_checkpoint_field_is_refused(
    publisher: tuple[bytes, crypto.PrivateKey], tamper: object
) -> None:
    cert_pem, key = publisher
    message = checkpoint_to_pb(sign_checkpoint(_checkpoint(), key), publisher_certificate=cert_pem)
    tamper(message)  # type: ignore[operator]
    with pytest.raises(SignatureError):
        checkpoint_from_pb(message).verify(certs.public_key_of(cert_pem))


def test_malformed_checkpoints_are_protocol_errors(
    publisher: tuple[bytes, crypto.PrivateKey],
) -> None:
    cert_pem, key = publisher
    message = checkpoint_to_pb(sign_checkpoint(_checkpoint(), key), publisher_certificate=cert_pem)
    message.concepts.add(concept="A", latest=2)
    with pytest.raises(ProtocolError, match="listed twice"):
        checkpoint_from_pb(message)
    message = checkpoint_to_pb(sign_checkpoint(_checkpoint(), key), publisher_certificate=cert_pem)
    message.concepts[0].latest = 10  # beyond the sequence
    with pytest.raises(ProtocolError, match="outside the sequence"):
        checkpoint_from_pb(message)
    with pytest.raises(ValueError, match="non-empty"):
        SignedCheckpoint(checkpoint=_checkpoint(), signature=b"")
