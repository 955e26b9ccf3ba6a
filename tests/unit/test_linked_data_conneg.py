"""Content negotiation: Accept parsed with q-values; the most specific matching range decides."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import linked_data as ld
from xdn.linked_data import HTML, JSON_LD, N_QUADS, TRIG, TURTLE, MediaRange

OFFERS = (JSON_LD, TRIG, N_QUADS, TURTLE, HTML)


def test_parse_accept_reads_types_parameters_and_weights() -> None:
    ranges = ld.parse_accept('application/ld+json;profile="x";q=0.5, text/*;q=0, */*')
    assert ranges == (
        MediaRange(type="application", subtype="ld+json", params=(("profile", "x"),), q=0.5),
        MediaRange(type="text", subtype="*", q=0.0),
        MediaRange(type="*", subtype="*"),
    )


@pytest.mark.parametrize(
    "header", ["", "nonsense", "text", "*/html", "text/html;q=2", "text/html;q=abc", "a/b;q"]
)
def test_malformed_entries_are_skipped(header: str) -> None:
    assert ld.parse_accept(header) == ()


@pytest.mark.parametrize(
    ("accept", "chosen"),
    [
        (None, JSON_LD),  # no Accept: the preferred offer
        ("", JSON_LD),
        ("*/*", JSON_LD),
        ("application/n-quads", N_QUADS),
        ("application/trig, application/ld+json;q=0.9", TRIG),
        ("text/turtle;q=0.5, application/n-quads;q=0.4", TURTLE),
        ("TEXT/HTML", HTML),
        # a browser's Accept: HTML beats the wildcard
        ("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", HTML),
        # the most specific range wins, whatever the order
        ("text/*;q=0.3, text/html;q=0.1", TURTLE),
        ("*/*;q=0.1, application/ld+json;q=0", TRIG),
        ('application/ld+json;profile="http://www.w3.org/ns/json-ld#compacted"', JSON_LD),
    ],
)
def test_choose(accept: str | None, chosen: str) -> None:
    assert ld.choose(accept, OFFERS) == chosen


@pytest.mark.parametrize("accept", ["image/png", "application/json", "*/*;q=0", "text/html;q=0"])
def test_nothing_acceptable_is_406(accept: str) -> None:
    offers = (JSON_LD, HTML) if accept != "text/html;q=0" else (HTML,)
    with pytest.raises(ld.NotAcceptable, match="offers"):
        ld.choose(accept, offers)


def test_nothing_offered_is_our_mistake() -> None:
    with pytest.raises(ValueError, match="nothing is offered"):
        ld.choose("*/*", ())


_TYPES = st.sampled_from([*OFFERS, "image/png", "text/*", "application/*", "*/*"])
_RANGE = st.builds(
    lambda t, q: f"{t};q={q / 1000:.3f}", _TYPES, st.integers(min_value=0, max_value=1000)
)


@given(st.lists(_RANGE, max_size=6), st.permutations(OFFERS))
def test_the_choice_is_an_offer_of_the_greatest_weight(
    ranges: list[str], offers: list[str]
) -> None:
    accept = ", ".join(ranges)
    parsed = ld.parse_accept(accept)

    def weight(offer: str) -> float:
        matching = [(r.specificity(offer), r.q) for r in parsed if r.specificity(offer) >= 0]
        return max(matching)[1] if matching else 0.0

    try:
        chosen = ld.choose(accept, offers)
    except ld.NotAcceptable:
        assert parsed and all(weight(o) == 0 for o in offers)
        return
    assert chosen in offers
    if parsed:
        assert weight(chosen) == max(weight(o) for o in offers) > 0
        # ties go to the earlier offer
        assert offers.index(chosen) == min(
            i for i, o in enumerate(offers) if weight(o) == weight(chosen)
        )
