"""xdn.rdf: W3C rdf-canon known answers, strict parsing, pyoxigraph as an oracle, properties."""

from __future__ import annotations

import random
from pathlib import Path

import pyoxigraph as ox
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn.errors import ProvenanceError
from xdn.rdf import (
    IRI,
    RDF_LANGSTRING,
    XSD_STRING,
    Literal,
    Quad,
    canonical_lines,
    canonicalise,
    format_term,
    parse_line,
    parse_nquads,
    serialise,
)

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "rdf-canon"
PAIRS = sorted(VECTORS.glob("test*-in.nq"))


def _from_ox(quad: ox.Quad) -> Quad:
    def term(t: object) -> IRI | Literal:
        if isinstance(t, ox.NamedNode):
            return IRI(t.value)
        assert isinstance(t, ox.Literal), f"oracle produced {t!r}"
        return Literal(t.value, t.datatype.value, t.language)

    graph = None if isinstance(quad.graph_name, ox.DefaultGraph) else IRI(quad.graph_name.value)
    s, p, o = term(quad.subject), term(quad.predicate), term(quad.object)
    assert isinstance(s, IRI) and isinstance(p, IRI)
    return Quad(s, p, o, graph)


def oracle(data: bytes) -> tuple[Quad, ...]:
    return tuple(_from_ox(q) for q in ox.parse(data, format=ox.RdfFormat.N_QUADS))


def test_vector_files_are_present() -> None:
    assert len(PAIRS) >= 14
    assert (VECTORS / "LICENCE.md").is_file()


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.name.removesuffix("-in.nq"))
def test_rdfc10_known_answer(path: Path) -> None:
    expected = path.with_name(path.name.replace("-in.nq", "-rdfc10.nq")).read_bytes()
    assert canonicalise(parse_nquads(path.read_bytes())) == expected


@pytest.mark.parametrize("path", PAIRS, ids=lambda p: p.name.removesuffix("-in.nq"))
def test_parser_agrees_with_pyoxigraph(path: Path) -> None:
    data = path.read_bytes()
    assert parse_nquads(data) == oracle(data)


@pytest.mark.parametrize(
    ("document", "line", "reason"),
    [
        (b"_:a <http://e/p> <http://e/o> .", 1, "blank node as subject"),
        (b"<http://e/s> <http://e/p> _:b .", 1, "blank node as object"),
        (b"<http://e/s> <http://e/p> <http://e/o> _:g .", 1, "blank node as graph name"),
        (b"# ok\n\n<s> <http://e/p> <http://e/o> .", 3, "not absolute"),
        (b"<http://e/s> <http://e/p> <http://e/o>", 1, "expected an IRI as graph name"),
        (b'<http://e/s> <http://e/p> "a\\q" .', 1, "expected an IRI as object"),
        (b'<http://e/s> <http://e/p> "\\uD800" .', 1, "not a Unicode scalar value"),
        (b'<http://e/s> <http://e/p> "open .', 1, "expected an IRI as object"),
        (b'"x" <http://e/p> <http://e/o> .', 1, "expected an IRI as subject"),
        (b"<http://e/s> <http://e/p> <http://e/o> <http://e/g> <http://e/h> .", 1, "'.'"),
        (b"<http://e/s> <http://e/p> <http://e/o\\u0020> .", 1, "may not contain"),
        (b"<http://e/s> <http://e/p> <http://e/o\\t> .", 1, "expected an IRI as object"),
        (
            b'<http://e/s> <http://e/p> "x"^^<' + RDF_LANGSTRING.encode() + b"> .",
            1,
            "needs a language tag",
        ),
        (
            b"<http://e/s> <http://e/p> <http://e/o> .\r\n<http://e/s> <p> <http://e/o> .",
            2,
            "not absolute",
        ),
    ],
)
def test_malformed_lines_are_refused_with_their_number(
    document: bytes, line: int, reason: str
) -> None:
    with pytest.raises(ProvenanceError, match=rf"line {line}: .*{reason}"):
        parse_nquads(document)
    if b"_:" not in document:  # pyoxigraph accepts blank nodes; everything else it refuses too
        with pytest.raises(SyntaxError):
            oracle(document)


def test_invalid_utf8_is_refused() -> None:
    with pytest.raises(ProvenanceError, match="not valid UTF-8"):
        parse_nquads(b'<http://e/s> <http://e/p> "\xff" .')


def test_comments_blank_lines_and_whitespace() -> None:
    assert parse_line("   # a comment") is None
    assert parse_line("") is None
    quad = parse_line('\t<http://e/s>  <http://e/p>\t"v"@EN-gb <http://e/g> . # trailing')
    assert quad == Quad(
        IRI("http://e/s"), IRI("http://e/p"), Literal("v", language="en-gb"), IRI("http://e/g")
    )


def test_literal_escaping_is_canonical() -> None:
    literal = Literal('\t\b\n\r\f"\\\x00\x1f\x7f\x80é\U0001f303')
    assert format_term(literal) == '"\\t\\b\\n\\r\\f\\"\\\\\\u0000\\u001F\\u007F\x80é\U0001f303"'
    assert format_term(Literal("1", "http://www.w3.org/2001/XMLSchema#integer")) == (
        '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'
    )
    assert format_term(Literal("x", XSD_STRING)) == '"x"'


@pytest.mark.parametrize(
    ("build", "error"),
    [
        (lambda: IRI("relative/path"), ValueError),
        (lambda: IRI("http://e/a b"), ValueError),
        (lambda: IRI(3), TypeError),  # type: ignore[arg-type]
        (lambda: Literal("x", language="en_GB"), ValueError),
        (lambda: Literal("x", "http://e/dt", language="en"), ValueError),
        (lambda: Literal("\ud800"), ValueError),
        (lambda: Quad(IRI("http://e/s"), IRI("http://e/p"), "o"), TypeError),  # type: ignore[arg-type]
        (lambda: Quad(Literal("s"), IRI("http://e/p"), IRI("http://e/o")), TypeError),  # type: ignore[arg-type]
    ],
)
def test_terms_validate_on_construction(build: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        build()  # type: ignore[operator]


def test_language_tags_compare_case_insensitively() -> None:
    assert Literal("x", language="EN") == Literal("x", language="en")
    assert Literal("x", language="en").datatype == RDF_LANGSTRING


# ------------------------------------------------------------------------------- properties

_IRI_CHARS = st.characters(categories=("L", "Nd")) | st.sampled_from("-._~/:?=&")
# RFC 3987: at most one "#", starting the fragment (pyoxigraph checks; N-Quads' IRIREF does not).
iris = st.builds(
    lambda scheme, rest, fragment: IRI(f"{scheme}:{rest}{fragment}"),
    st.sampled_from(["http", "urn", "https", "tag"]),
    st.text(_IRI_CHARS, min_size=1, max_size=12),
    st.one_of(st.just(""), st.text(_IRI_CHARS, max_size=6).map(lambda f: "#" + f)),
)
languages = st.from_regex(r"\A[a-z]{2,3}(-[A-Z]{2})?\Z")
texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=16)
literals = st.one_of(
    st.builds(Literal, texts),
    st.builds(lambda t, lang: Literal(t, language=lang), texts, languages),
    st.builds(lambda t, dt: Literal(t, dt.value), texts, iris),
)
quads = st.builds(Quad, iris, iris, st.one_of(iris, literals), st.one_of(st.none(), iris))
datasets = st.lists(quads, max_size=8)


# Each escape token with what it stands for.
_ESCAPES = {
    "\\\\": "\\", '\\"': '"', "\\'": "'", "\\n": "\n", "\\t": "\t", "\\b": "\b", "\\f": "\f",
    "\\r": "\r", "\\u0041": "A", "\\U0001F600": "\U0001f600", "n": "n", "u": "u", "x": "x",
}


@given(st.lists(st.sampled_from(sorted(_ESCAPES)), max_size=12))
def test_every_escape_form_is_read_back(tokens: list[str]) -> None:
    # Long literals are unescaped with str.replace; this pins it to the token-by-token meaning.
    quad = parse_line(f'<http://e/s> <http://e/p> "{"".join(tokens)}" .')
    assert quad is not None and quad.o == Literal("".join(_ESCAPES[t] for t in tokens))


@given(datasets)
def test_parse_inverts_serialise(dataset: list[Quad]) -> None:
    assert parse_nquads(serialise(dataset)) == tuple(dataset)


@given(datasets)
def test_pyoxigraph_reads_what_we_write(dataset: list[Quad]) -> None:
    assert oracle(serialise(dataset)) == tuple(dataset)


@given(datasets)
def test_canonicalise_is_idempotent_sorted_and_deduplicated(dataset: list[Quad]) -> None:
    once = canonicalise(dataset)
    assert canonicalise(parse_nquads(once)) == once
    lines = canonical_lines(dataset)
    assert lines == sorted(set(lines))
    assert set(parse_nquads(once)) == set(dataset)


@given(datasets, st.randoms(use_true_random=False))
def test_canonical_form_ignores_order_and_duplicates(
    dataset: list[Quad], rnd: random.Random
) -> None:
    shuffled = dataset + dataset[:2]
    rnd.shuffle(shuffled)
    assert canonicalise(shuffled) == canonicalise(dataset)
