"""Serialisation: every RDF representation of a dataset reads back as the same dataset."""

from __future__ import annotations

import html
import re

import pyoxigraph as ox
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn import linked_data as ld
from xdn.linked_data import HTML, JSON_LD, N_QUADS, TRIG, TURTLE

LOCAL = "https://d1.xdn.example/"
_SEGMENT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_%", min_size=0, max_size=8)
_IRI = st.builds(
    lambda host, path, frag: f"https://{host}.example/{path}" + (f"#{frag}" if frag else ""),
    st.sampled_from(["a", "d1.xdn", "b"]),
    _SEGMENT.filter(lambda s: "%" not in s),
    _SEGMENT.filter(lambda s: "%" not in s),
).map(ox.NamedNode)
_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20
)
_LITERAL = st.one_of(
    _TEXT.map(ox.Literal),
    st.builds(
        lambda t, lang: ox.Literal(t, language=lang), _TEXT, st.sampled_from(["en", "fr-be"])
    ),
    st.integers().map(lambda i: ox.Literal(str(i), datatype=ox.NamedNode(
        "http://www.w3.org/2001/XMLSchema#integer"))),
    st.builds(lambda t, d: ox.Literal(t, datatype=d), _TEXT, _IRI),
)
_GRAPH = st.one_of(st.just(ox.DefaultGraph()), _IRI)
_QUAD = st.builds(ox.Quad, _IRI, _IRI, st.one_of(_IRI, _LITERAL), _GRAPH)


def _canonical(quads: object, media_type: str) -> set[str]:
    """The N-Quads lines of a dataset after a round trip through pyoxigraph's parser."""
    parsed = ox.parse(quads, format=ld._media.RDF_FORMATS[media_type])  # type: ignore[arg-type]
    return {str(q) for q in parsed}


@settings(max_examples=150, deadline=None)
@given(st.lists(_QUAD, max_size=12))
def test_json_ld_and_trig_read_back_as_the_n_quads_dataset(quads: list[ox.Quad]) -> None:
    dataset = tuple(quads)
    expected = _canonical(ld.serialise(dataset, N_QUADS, title=LOCAL, local_prefix=LOCAL), N_QUADS)
    assert expected == {str(q) for q in dataset}
    for media_type in (JSON_LD, TRIG):
        written = ld.serialise(dataset, media_type, title=LOCAL, local_prefix=LOCAL)
        assert _canonical(written, media_type) == expected, media_type


def test_blank_nodes_survive_as_an_isomorphic_dataset() -> None:
    n = ld.parse_notification(
        b'<https://a.example/s> <https://a.example/p> [ <https://a.example/q> "x" ] .',
        "text/turtle", uri=LOCAL + "inbox/n1", limits=ld.NotificationLimits(),
    )
    for media_type in (JSON_LD, TRIG, N_QUADS, TURTLE):
        written = ld.serialise(n.dataset, media_type, title=LOCAL, local_prefix=LOCAL)
        back = ox.Dataset(ox.parse(written, format=ld._media.RDF_FORMATS[media_type]))
        original = ox.Dataset(n.dataset)
        back.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
        original.canonicalize(ox.CanonicalizationAlgorithm.UNSTABLE)
        assert set(map(str, back)) == set(map(str, original)), media_type


def test_turtle_is_offered_only_without_named_graphs() -> None:
    s = ox.NamedNode("https://a.example/s")
    plain = (ox.Quad(s, s, s),)
    named = (ox.Quad(s, s, s, s),)
    assert TURTLE in ld.offers(plain)
    assert TURTLE not in ld.offers(named)
    assert ld.offers(named)[0] == JSON_LD
    with pytest.raises(ValueError, match="not offered"):
        ld.serialise(named, TURTLE, title=LOCAL, local_prefix=LOCAL)


def test_html_escapes_everything_and_links_only_web_iris() -> None:
    s = ox.NamedNode(LOCAL + "inbox/x")
    nasty = '<script>alert("x")</script> & \'q\''
    dataset = (
        ox.Quad(s, ox.NamedNode("https://a.example/p"), ox.Literal(nasty)),
        ox.Quad(s, ox.NamedNode("https://a.example/p"), ox.NamedNode("javascript:alert(1)")),
        ox.Quad(s, ox.NamedNode("https://a.example/p?a=1&b='2'"), ox.Literal(nasty, language="en")),
    )
    page = ld.serialise(dataset, HTML, title=LOCAL + 'inbox/"<x>', local_prefix=LOCAL).decode()
    assert "<script>" not in page
    assert html.escape(nasty) in page
    assert 'href="javascript:' not in page
    assert "<code>javascript:alert(1)</code>" in page
    assert 'href="/inbox/x"' in page  # the endpoint's own IRIs link by path
    assert 'href="https://a.example/p?a=1&amp;b=&#x27;2&#x27;"' in page
    assert "<title>https://d1.xdn.example/inbox/&quot;&lt;x&gt;</title>" in page
    for tag in re.findall(r"<(/?\w+)", page):  # only the tags the page writes itself
        assert tag.lstrip("/") in {"html", "head", "meta", "title", "style", "body", "h1", "h2",
                                   "table", "tr", "th", "td", "a", "code", "small"}


def test_from_terms_converts_the_provenance_model() -> None:
    from xdn import rdf

    quads = [
        rdf.Quad(rdf.IRI("https://a.example/s"), rdf.IRI("https://a.example/p"),
                 rdf.Literal("v", language="EN"), rdf.IRI("https://a.example/g")),
        rdf.Quad(rdf.IRI("https://a.example/s"), rdf.IRI("https://a.example/p"),
                 rdf.Literal("7", "http://www.w3.org/2001/XMLSchema#long")),
    ]
    written = ld.serialise(ld.from_terms(quads), N_QUADS, title=LOCAL, local_prefix=LOCAL)
    assert set(rdf.parse_nquads(written)) == set(quads)
