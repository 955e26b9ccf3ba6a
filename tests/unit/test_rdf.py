"""xdn.rdf: W3C rdf-canon known answers, strict parsing, pyoxigraph as an oracle, properties."""

from __future__ import annotations

import random
from collections.abc import Iterable
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
from xdn.rdf_syntax import iri_problem

VECTORS = Path(__file__).resolve().parent.parent / "vectors" / "rdf-canon"
PAIRS = sorted(VECTORS.glob("test*-in.nq"))
XSD = "http://www.w3.org/2001/XMLSchema#"


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


def _to_ox(quad: Quad) -> ox.Quad:
    def term(t: IRI | Literal) -> ox.NamedNode | ox.Literal:
        if isinstance(t, IRI):
            return ox.NamedNode(t.value)
        if t.language is not None:
            return ox.Literal(t.value, language=t.language)
        return ox.Literal(t.value, datatype=ox.NamedNode(t.datatype))

    graph = ox.DefaultGraph() if quad.g is None else ox.NamedNode(quad.g.value)
    return ox.Quad(term(quad.s), term(quad.p), term(quad.o), graph)


def oracle_canonical(quads: Iterable[Quad]) -> bytes:
    """RDFC-1.0 of a blank-node-free dataset by pyoxigraph: its N-Quads lines, sorted, unique."""
    data = ox.serialize([_to_ox(q) for q in quads], format=ox.RdfFormat.N_QUADS)
    assert isinstance(data, bytes)
    lines = sorted({line + "\n" for line in data.decode("utf-8").split("\n")[:-1]})
    return "".join(lines).encode("utf-8")


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
        # issue #14: IRIs that are not RFC 3987, language tags that are not BCP 47
        (b"<http://e/s> <http://e/p> <http://e/%zz> .", 1, "malformed percent-escape '%zz'"),
        (b"<http://[::1/> <http://e/p> <http://e/o> .", 1, "IP-literal host that is not closed"),
        (b"<http://e/s> <http://e/p> <http://[1.2.3.4]/> .", 1, "neither IPv6 nor IPvFuture"),
        (b"<http://e/s> <http://e/p:8/> <http://e:x/> .", 1, "a port 'x' that is not a number"),
        (b"<http://e/s> <http://e/p> <http://e/a#b#c> .", 1, "more than one '#'"),
        (b"<http://e/s> <http://e/p> <http://e/[x]> .", 1, "brackets may only enclose"),
        (b"<http://e/s> <http://e/p> <http://e/\x7f> .", 1, "U\\+007F in the path"),
        (b'<http://e/s> <http://e/p> "x"@abcdefghi .', 1, "subtag 'abcdefghi'"),
        (b'<http://e/s> <http://e/p> "x"@en-a-b .', 1, "not well-formed BCP 47"),
        (b'<http://e/s> <http://e/p> "x"@ en .', 1, "expected an IRI as graph name"),
        (b'<http://e/s> <http://e/p> "x"^ ^<http://e/d> .', 1, "expected an IRI as graph name"),
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


_GOOD_LINE = b"<http://e/s> <http://e/p> <http://e/o> <http://e/g> .\n"


@pytest.mark.parametrize(
    ("document", "line", "reason"),
    [
        (b"<http://e/s> <http://e/p> <http://e/%zz> <http://e/g> .", 2, "percent-escape '%zz'"),
        (b"<http://e/s> <http://e/p> <http://e/a#b#c> .", 2, "more than one '#'"),
        (b"<http://e/s> <http://e/p> <http://e/o> <http://e/g> <http://e/h> .", 2, "'.'"),
        (b'<http://e/s> <http://e/p> "x"@ en .', 2, "expected an IRI as graph name"),
        (b"_:b <http://e/p> <http://e/o> .", 2, "blank node as subject"),
    ],
)
def test_a_bad_line_among_lines_nodes_write_is_refused_with_its_number(
    document: bytes, line: int, reason: str
) -> None:
    # Lines as nodes write them are read in one scan of the whole text; a bad one among them
    # is still refused with its number.
    with pytest.raises(ProvenanceError, match=rf"line {line}: .*{reason}"):
        parse_nquads(_GOOD_LINE + document + b"\n" + _GOOD_LINE)


def test_empty_literals_and_iri_objects_are_told_apart_in_a_whole_text_scan() -> None:
    text = (
        _GOOD_LINE
        + b'<http://e/s> <http://e/p> "" .\n<http://e/s> <http://e/p> "" <http://e/g> .\n'
    )
    assert parse_nquads(text) == (
        Quad(IRI("http://e/s"), IRI("http://e/p"), IRI("http://e/o"), IRI("http://e/g")),
        Quad(IRI("http://e/s"), IRI("http://e/p"), Literal("")),
        Quad(IRI("http://e/s"), IRI("http://e/p"), Literal(""), IRI("http://e/g")),
    )


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


@pytest.mark.parametrize(
    "line",
    [
        '<http://e/s> <http://e/p> "v" @en-GB <http://e/g> .',
        '<http://e/s> <http://e/p> "v"\t@en-GB\t<http://e/g>.',
        '<http://e/s> <http://e/p> "1" ^^ <http://www.w3.org/2001/XMLSchema#integer> .',
        '<http://e/s> <http://e/p> "1"\t^^<http://www.w3.org/2001/XMLSchema#integer><http://e/g>.',
        '<http://e/s><http://e/p>"1"^^\t<http://www.w3.org/2001/XMLSchema#integer> .',
    ],
)
def test_whitespace_before_language_and_around_datatype_is_allowed(line: str) -> None:
    # issue #14: N-Quads allows white space between any two terminals, "^^" and "@lang" too.
    quad = parse_line(line)
    assert quad is not None and (quad,) == oracle(line.encode())
    assert quad.o in (Literal("v", language="en-gb"), Literal("1", f"{XSD}integer"))


def test_noncharacters_fffe_and_ffff_are_escaped() -> None:
    # issue #14: canonical N-Quads (RDF 1.2, used by RDFC-1.0) writes U+FFFE and U+FFFF as UCHAR.
    literal = Literal("a\ufffeb\uffffc\ufffd")
    assert format_term(literal) == '"a\\uFFFEb\\uFFFFc\ufffd"'
    quad = Quad(IRI("http://e/s"), IRI("http://e/p"), literal)
    assert canonicalise([quad]) == oracle_canonical([quad])
    assert parse_nquads(canonicalise([quad])) == (quad,)


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

_IRI_CHARS = st.characters(categories=("L", "Nd")) | st.sampled_from("-._~/:?=&@[]%3A")
# RFC 3987: at most one "#", starting the fragment; the few strings that are no IRI (a port that
# is not a number, a stray "[" or "%") are filtered out.
iris = st.builds(
    lambda scheme, rest, fragment: f"{scheme}:{rest}{fragment}",
    st.sampled_from(["http", "urn", "https", "tag"]),
    st.text(_IRI_CHARS, min_size=1, max_size=12),
    st.one_of(st.just(""), st.text(_IRI_CHARS, max_size=6).map(lambda f: "#" + f)),
).filter(lambda text: iri_problem(text) is None).map(IRI)
languages = st.from_regex(r"\A[a-z]{2,3}(-[A-Z]{2})?\Z") | st.sampled_from(
    ["en-GB-oed", "i-klingon", "x-priv", "sr-Latn-RS", "de-CH-1901", "en-a-bb-x-cc", "zh-min-nan"]
)
# Any scalar value, with the characters canonical N-Quads escapes drawn often.
# (a list of characters, not st.text: its alphabet would fold the two into one uniform draw).
_ESCAPED = st.sampled_from('\ufffe\uffff\ufffd\x00\x07\x08\x0b\x7f\\"')
texts = st.lists(st.characters(exclude_categories=["Cs"]) | _ESCAPED, max_size=16).map("".join)
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


@given(datasets)
def test_canonical_form_is_byte_identical_to_pyoxigraph(dataset: list[Quad]) -> None:
    # issue #14: RDFC-1.0 of a blank-node-free dataset, checked against an independent writer.
    assert canonicalise(dataset) == oracle_canonical(dataset)
    assert oracle(canonicalise(dataset)) == parse_nquads(canonicalise(dataset))


def _loose_term(term: IRI | Literal, typed: bool) -> str:
    """A term as N-Quads allows but the canonical form does not always write it: controls and
    noncharacters raw, ``xsd:string`` spelled out."""
    if isinstance(term, IRI):
        return f"<{term.value}>"
    escaped = "".join({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r"}.get(c, c)
                      for c in term.value)  # fmt: skip
    if term.language is not None:
        return f'"{escaped}"@{term.language}'
    if term.datatype == XSD_STRING and not typed:
        return f'"{escaped}"'
    return f'"{escaped}"^^<{term.datatype}>'


@given(datasets, st.booleans())
def test_parsed_lines_that_are_not_canonical_are_written_canonically(
    dataset: list[Quad], typed: bool
) -> None:
    # A parsed line is remembered as a statement's canonical form only when it is one.
    text = "".join(
        " ".join(_loose_term(t, typed) for t in (q.s, q.p, q.o, *([q.g] if q.g else []))) + " .\n"
        for q in dataset
    )
    parsed = parse_nquads(text)
    assert parsed == tuple(dataset)
    assert canonicalise(parsed) == oracle_canonical(dataset)


# ------------------------------------------------------------------- terms as values


def test_an_iri_and_a_literal_of_the_same_text_are_different_terms() -> None:
    iri, literal = IRI("http://e/x"), Literal("http://e/x")
    assert iri != literal
    assert len({iri, literal}) == 2
    quads = {Quad(IRI("http://e/s"), IRI("http://e/p"), term) for term in (iri, literal)}
    assert len(quads) == 2


def test_literals_differ_by_datatype_and_language() -> None:
    plain, typed = Literal("1"), Literal("1", XSD + "long")
    tagged, retagged = Literal("1", language="en"), Literal("1", language="EN")
    assert len({plain, typed, tagged}) == 3
    assert tagged == retagged and hash(tagged) == hash(retagged)  # tags compare lower-cased
    assert (tagged.value, tagged.datatype, tagged.language) == ("1", RDF_LANGSTRING, "en")


def test_a_parsed_statement_equals_and_hashes_as_the_built_one() -> None:
    built = Quad(IRI("http://e/s"), IRI("http://e/p"), Literal("v", XSD + "long"), IRI("http://e/g"))
    (parsed,) = parse_nquads(
        b'<http://e/s> <http://e/p> "v"^^<http://www.w3.org/2001/XMLSchema#long> <http://e/g> .\n'
    )
    assert parsed == built and hash(parsed) == hash(built)
    assert (parsed.s, parsed.p, parsed.o, parsed.g) == (built.s, built.p, built.o, built.g)
    assert type(parsed) is Quad and type(parsed.o) is Literal and type(parsed.s) is IRI


def test_terms_and_statements_survive_pickling_checked_again() -> None:
    import pickle

    quad = Quad(IRI("http://e/s"), IRI("http://e/p"), Literal("x", language="de"), None)
    copy = pickle.loads(pickle.dumps(quad))
    assert copy == quad and type(copy.o) is Literal and type(copy.s) is IRI
    assert copy.o.language == "de"
    forged = pickle.dumps(IRI("http://e/s")).replace(b"http://e/s", b"not an iri")
    with pytest.raises(ValueError, match="IRI"):
        pickle.loads(forged)


def test_a_statement_refuses_terms_of_the_wrong_kind() -> None:
    s, p = IRI("http://e/s"), IRI("http://e/p")
    with pytest.raises(TypeError, match="subject and predicate"):
        Quad("http://e/s", p, s)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="object"):
        Quad(s, p, "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="graph name"):
        Quad(s, p, s, Literal("g"))  # type: ignore[arg-type]


def test_an_iris_value_is_a_plain_str() -> None:
    # Values leave this module (Spark's Java unpickler cannot build an IRI, JSON, logs).
    iri = IRI("http://e/x")
    assert type(iri.value) is str and iri.value == "http://e/x"
    assert type(str(iri)) is str
