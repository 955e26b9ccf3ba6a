"""Identifiers in IRIs and file names (xdn.ids): known answers, bad input, round trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import ids
from xdn.rdf import IRI

# Text a document id may be: anything non-empty but control characters and lone surrogates.
ID_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x7f"),
    min_size=1,
).filter(lambda t: not re.search("[\x00-\x1f]", t))


@pytest.mark.parametrize(
    ("text", "encoded"),
    [
        ("order-7", "order-7"),
        ("order 7", "order%207"),
        ("café", "caf%C3%A9"),
        ("2024/03/order", "2024%2F03%2Forder"),
        ("a#b?c", "a%23b%3Fc"),
        ("100%", "100%25"),
        ("~x_y.z", "~x_y.z"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("../x", "..%2Fx"),
        ("日本", "%E6%97%A5%E6%9C%AC"),
    ],
)
def test_segment_known_answers(text: str, encoded: str) -> None:
    assert ids.segment(text) == encoded
    assert ids.unsegment(encoded) == text


@pytest.mark.parametrize(
    "bad", ["", "a b", "a/b", "%", "%4", "%zz", "%41", "%c3%a9", "%C3", ".", "..", "é"]
)
def test_unsegment_refuses_what_segment_never_writes(bad: str) -> None:
    with pytest.raises(ValueError):
        ids.unsegment(bad)


def test_wrong_types_and_empty_text_are_refused_early() -> None:
    with pytest.raises(TypeError):
        ids.segment(b"x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ids.file_stem(7)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ids.segment("")
    with pytest.raises(ValueError):
        ids.segment("\udcff")  # a file name byte that is not UTF-8 (surrogateescape)


@pytest.mark.parametrize("bad", ["", "a\tb", "a\nb", "nul\x00", "del\x7f", "\udcff"])
def test_check_id_refuses_what_the_codec_would(bad: str) -> None:
    with pytest.raises(ValueError):
        ids.check_id(bad)


def test_check_id_accepts_free_text() -> None:
    for text in ("order 7", "café", "a/b", "../x", "#1"):
        assert ids.check_id(text) == text


@given(ID_TEXT)
def test_segment_round_trips_and_is_one_absolute_iri_segment(text: str) -> None:
    encoded = ids.segment(text)
    assert ids.unsegment(encoded) == text
    assert encoded.isascii() and not set(encoded) & set("/?#")
    assert encoded not in (".", "..")
    IRI(f"https://d1.xdn.example/msg/{encoded}/v1")  # no character IRIs forbid


@pytest.mark.parametrize(
    ("text", "stem"),
    [
        ("order 7", "order 7"),
        ("café", "café"),
        ("a/b", "a%2Fb"),
        ("../x", "%2E.%2Fx"),
        ("..", "%2E."),
        (".hidden", "%2Ehidden"),
        ("a\\b", "a%5Cb"),
        ("50%", "50%25"),
        ("~", "%7E"),
    ],
)
def test_file_stem_known_answers(text: str, stem: str) -> None:
    assert ids.file_stem(text) == stem


@given(ID_TEXT)
def test_file_stem_is_one_safe_path_component(text: str) -> None:
    stem = ids.file_stem(text)
    assert stem and "/" not in stem and "\\" not in stem and "\x00" not in stem
    assert not stem.startswith(".")
    assert len(stem.encode("utf-8")) <= ids.MAX_STEM_BYTES
    assert Path("views", stem).parent == Path("views")


@given(ID_TEXT, ID_TEXT)
def test_distinct_ids_get_distinct_file_stems(a: str, b: str) -> None:
    if a != b:
        assert ids.file_stem(a) != ids.file_stem(b)


def test_long_ids_are_cut_with_a_hash_and_stay_distinct() -> None:
    a, b = "é" * 300 + "a", "é" * 300 + "b"
    stem_a, stem_b = ids.file_stem(a), ids.file_stem(b)
    assert stem_a != stem_b
    assert len(stem_a.encode("utf-8")) <= ids.MAX_STEM_BYTES
    assert re.fullmatch(r"é+~[0-9a-f]{16}", stem_a)
    escaped = ids.file_stem("/" * 300)  # never cut inside an escape
    assert re.fullmatch(r"(%2F)+~[0-9a-f]{16}", escaped)
