"""xdn.provenance.LeafRanges: the manifest leaves an envelope carries, one spelling per set."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn.provenance import LeafRanges

MAX = 2**64


def _runs(leaves: set[int]) -> list[tuple[int, int]]:
    """The maximal runs of a set of integers (the reference the tests compare against)."""
    runs: list[tuple[int, int]] = []
    for leaf in sorted(leaves):
        if runs and runs[-1][1] == leaf:
            runs[-1] = (runs[-1][0], leaf + 1)
        else:
            runs.append((leaf, leaf + 1))
    return runs


small_sets = st.sets(st.integers(0, 40), min_size=1, max_size=30)
any_runs = st.lists(
    st.tuples(st.integers(0, 40), st.integers(1, 8)).map(lambda t: (t[0], t[0] + t[1])),
    min_size=1,
    max_size=8,
)


# ---------------------------------------------------------------------------- text form


@pytest.mark.parametrize(
    ("text", "runs"),
    [
        ("0-1", ((0, 1),)),
        ("0-120 300-7600", ((0, 120), (300, 7600))),
        ("5-7 9-10 11-12", ((5, 7), (9, 10), (11, 12))),
        (f"0-{MAX}", ((0, MAX),)),
        (f"{MAX - 1}-{MAX}", ((MAX - 1, MAX),)),
    ],
)
def test_the_canonical_text_parses_and_prints_back(text: str, runs: tuple[tuple[int, int]]) -> None:
    ranges = LeafRanges.parse(text)
    assert ranges.runs == runs
    assert str(ranges) == text


@given(small_sets)
def test_parse_and_str_round_trip(leaves: set[int]) -> None:
    ranges = LeafRanges.of((leaf, leaf + 1) for leaf in leaves)
    assert LeafRanges.parse(str(ranges)) == ranges
    assert str(LeafRanges.parse(str(ranges))) == str(ranges)


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "0-3 ",
        " 0-3",
        "0-3  5-7",
        "0-3\t5-7",
        "0-3,5-7",
        "0-3\n",
        "00-3",  # leading zeros: one set, one spelling
        "0-03",
        "5-7 01-3",
        "5-7 0-3",  # unsorted
        "0-3 3-7",  # adjacent: that is the run 0-7
        "0-5 3-7",  # overlapping
        "0-3 0-3",  # repeated
        "3-3",  # empty run
        "4-2",  # backwards
        "3",
        "3-",
        "-3",
        "-1-3",
        "+1-3",
        "0x1-3",
        "1.0-3",
        "1e2-300",
        "\u0663-\u0665",  # Arabic-Indic digits are digits to int(), not to the format
        f"0-{MAX + 1}",  # beyond any manifest (u64 leaf indexes)
        "0-" + "9" * 21,
    ],
)
def test_non_canonical_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        LeafRanges.parse(text)


def test_parse_refuses_what_is_not_text() -> None:
    with pytest.raises(ValueError):
        LeafRanges.parse(b"0-3")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "runs",
    [
        (),
        ((3, 3),),
        ((4, 2),),
        ((-1, 2),),
        ((0, MAX + 1),),
        ((5, 7), (0, 3)),
        ((0, 3), (3, 5)),
        ((0, 4), (2, 6)),
    ],
)
def test_the_constructor_takes_canonical_runs_only(runs: tuple[tuple[int, int], ...]) -> None:
    with pytest.raises(ValueError):
        LeafRanges(runs)


def test_the_constructor_wants_a_tuple() -> None:
    with pytest.raises(ValueError):
        LeafRanges([(0, 1)])  # type: ignore[arg-type]


# --------------------------------------------------------------------------------- of


@pytest.mark.parametrize(
    ("runs", "text"),
    [
        ([(5, 7), (0, 3)], "0-3 5-7"),  # sorted
        ([(0, 3), (3, 5)], "0-5"),  # adjacent merged
        ([(0, 4), (2, 6)], "0-6"),  # overlapping merged
        ([(2, 3), (0, 10)], "0-10"),  # contained
        ([(0, 3), (0, 3)], "0-3"),  # repeated
        ([(9, 10), (3, 4), (4, 9)], "3-10"),
    ],
)
def test_of_sorts_and_merges(runs: list[tuple[int, int]], text: str) -> None:
    assert str(LeafRanges.of(runs)) == text


@given(any_runs)
def test_of_is_the_union_in_canonical_form(runs: list[tuple[int, int]]) -> None:
    ranges = LeafRanges.of(runs)
    union = {leaf for start, end in runs for leaf in range(start, end)}
    assert set(ranges) == union
    assert list(ranges.runs) == _runs(union)  # maximal runs: one set, one value
    assert ranges.count == len(union)
    assert LeafRanges.of(reversed(runs)) == ranges


def test_of_refuses_no_runs_and_empty_runs() -> None:
    with pytest.raises(ValueError):
        LeafRanges.of([])
    with pytest.raises(ValueError):
        LeafRanges.of([(0, 2), (5, 5)])


# ---------------------------------------------------------------------- count and issubset


def test_count_and_iteration() -> None:
    ranges = LeafRanges.parse("0-120 300-7600")
    assert ranges.count == 7_420
    assert list(LeafRanges.parse("2-4 6-7")) == [2, 3, 6]
    assert LeafRanges.parse(f"0-{MAX}").count == MAX  # without building the set


@given(small_sets, small_sets)
def test_issubset_agrees_with_sets(mine: set[int], theirs: set[int]) -> None:
    a = LeafRanges(tuple(_runs(mine)))
    b = LeafRanges(tuple(_runs(theirs)))
    assert a.issubset(b) == (mine <= theirs)
    assert a.issubset(a) and b.issubset(b)
    union = LeafRanges.of([*a.runs, *b.runs])
    assert a.issubset(union) and b.issubset(union)


@pytest.mark.parametrize(
    ("mine", "theirs", "expected"),
    [
        ("2-5", "0-10", True),
        ("0-10", "0-10", True),
        ("0-3 5-7", "0-10", True),
        ("0-3 5-7", "0-3 5-7", True),
        ("2-6", "0-4 5-10", False),  # straddles a hole
        ("0-11", "0-10", False),
        ("9-11", "0-10", False),
        ("12-13", "0-3 5-7", False),  # beyond the last run
        ("0-1 12-13", "0-3 5-7 9-10", False),
        ("4-5", "0-3 5-7", False),  # in the hole
    ],
)
def test_issubset_examples(mine: str, theirs: str, expected: bool) -> None:
    assert LeafRanges.parse(mine).issubset(LeafRanges.parse(theirs)) is expected


def test_equal_sets_are_equal_values_with_equal_text() -> None:
    a = LeafRanges.of([(0, 2), (2, 4), (8, 9)])
    b = LeafRanges.parse("0-4 8-9")
    assert a == b and hash(a) == hash(b) and str(a) == str(b)
