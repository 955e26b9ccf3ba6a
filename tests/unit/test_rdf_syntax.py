"""xdn.rdf_syntax: RFC 3987 IRIs and BCP 47 language tags, with pyoxigraph as the oracle."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from xdn.rdf import IRI, Literal
from xdn.rdf_syntax import diagnose_iri, iri_problem, language_tag_problem


def oxigraph_accepts_iri(text: str) -> bool:
    try:
        ox.NamedNode(text)
    except ValueError:
        return False
    return True


def oxigraph_accepts_tag(tag: str) -> bool:
    try:
        ox.Literal("x", language=tag)
    except ValueError:
        return False
    return True


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("http://e/%zz", "has a malformed percent-escape '%zz' in the path"),
        ("http://e/?q=%4", "has a malformed percent-escape '%4' in the query"),
        ("http://[::1/", "has an IP-literal host that is not closed by ']'"),
        ("http://[::1]x/", "has 'x' after its IP-literal host"),
        ("http://[fe80::1%eth0]/", "neither IPv6 nor IPvFuture"),
        ("http://[1.2.3.4]/", "neither IPv6 nor IPvFuture"),
        ("http://e:80x/", "has a port '80x' that is not a number"),
        ("http://a@b@e/", "has more than one '@' in its authority"),
        ("http://e/a b", "U+0020 in the path (character 11)"),
        ("http://e/\x7f", "U+007F in the path"),
        ("http://e/\ufffe", "U+FFFE in the path"),
        ("http://e/\ue000", "private-use character U+E000 outside the query"),
        ("http://e/x#a#b", "has more than one '#'"),
        ("http://e/[x]", "brackets may only enclose an IP-literal host"),
        ("e/relative", "is not absolute (no scheme)"),
        ("1http://e/", "is not absolute (no scheme)"),
    ],
)
def test_malformed_iris_are_refused_naming_the_fault(text: str, problem: str) -> None:
    assert problem in (iri_problem(text) or "")
    assert problem in (diagnose_iri(text) or "")
    with pytest.raises(ValueError, match="IRI .* " + problem.split(" (")[0].replace("+", r"\+")):
        IRI(text)
    assert not oxigraph_accepts_iri(text)


@pytest.mark.parametrize(
    "text",
    [
        "http://[::1]/",
        "http://[::ffff:1.2.3.4]:8080/a?b#c",
        "http://[v7.a:b]/",
        "urn:uuid:0b6e7c0e-3f1c-4c0e-9b1a-2f5d7e3c1a00",
        "tag:acme.example,2025:order/7",
        "https://d1.xdn.example/msg/order%207/v1/link-d2#e2",
        "http://user:pw@h:8/?q=\ue000#f",
        "http://é.example/ü?q=\U00010000#frag/?",
        "mailto:",
        "http://",
    ],
)
def test_valid_iris_are_accepted(text: str) -> None:
    assert iri_problem(text) is None and diagnose_iri(text) is None
    assert IRI(text).value == text
    assert oxigraph_accepts_iri(text)


# Strings drawn from the characters that decide IRI syntax, so that most are near misses.
_IRI_ALPHABET = st.sampled_from(
    [*"ab09:/?#[]@%.-_~!$&'()*+,;=vF <\x7f\xa0é\ue000\ufdd0\ufffe\U00010000\U000f0000"]
)
_HOSTS = st.sampled_from(["e", "[::1]", "[::1", "[v1.x]", "[1.2.3.4]", "u@e:8", "e:x", "", "%41"])
near_iris = st.one_of(
    st.text(_IRI_ALPHABET, max_size=16),
    st.builds(
        lambda scheme, host, rest: f"{scheme}://{host}{rest}",
        st.sampled_from(["http", "h+s.-1", "1h"]),
        _HOSTS,
        st.text(_IRI_ALPHABET, max_size=10),
    ),
    st.builds(lambda rest: f"urn:{rest}", st.text(_IRI_ALPHABET, max_size=12)),
)


@given(near_iris)
@example("http://a:b/")  # a port that is not a number must not slip through as a path
@example("http://[::1]:8/x")
def test_iri_syntax_agrees_with_pyoxigraph(text: str) -> None:
    ours = iri_problem(text)
    assert (ours is None) == oxigraph_accepts_iri(text), ours
    assert (diagnose_iri(text) is None) == (ours is None)  # the shortcut accepts a subset


@pytest.mark.parametrize(
    ("tag", "problem"),
    [
        ("en_GB", "has the subtag 'en_GB'"),
        ("abcdefghi", "has the subtag 'abcdefghi'"),
        ("en--ltr", "has the subtag ''"),
        ("en-a-b", "is not well-formed BCP 47"),
        ("i-foo", "is not well-formed BCP 47"),
        ("123", "is not well-formed BCP 47"),
    ],
)
def test_malformed_language_tags_are_refused(tag: str, problem: str) -> None:
    assert problem in (language_tag_problem(tag) or "")
    with pytest.raises(ValueError, match=f"malformed language tag '{tag}': it {problem}"):
        Literal("x", language=tag)
    assert not oxigraph_accepts_tag(tag)


_SUBTAGS = st.sampled_from(
    [
        *("en", "EN", "zh", "min", "nan", "Latn", "GB", "419", "1901", "rozaj", "a", "x", "u"),
        *("i", "klingon", "oed", "abcdefghi", "", "_", "12"),
    ]
)


@given(st.lists(_SUBTAGS, min_size=1, max_size=6).map("-".join))
@example("en-GB-oed")
@example("sgn-CH-DE")
def test_language_tag_syntax_agrees_with_pyoxigraph(tag: str) -> None:
    assert (language_tag_problem(tag) is None) == oxigraph_accepts_tag(tag)
