"""A minimal RDF dataset model without blank nodes, N-Quads and RDFC-1.0 canonical form.

Theory of operation
-------------------
Provenance envelopes are RDF datasets that never use blank nodes (every node gets a hash URI of
its message instead), so the canonical form the signatures cover is simple: RDFC-1.0 applied to
a blank-node-free dataset issues no labels, and reduces to *the canonical N-Quads line of every
quad, sorted by code point, duplicates removed*. This module implements exactly that, plus a
strict N-Quads parser:

* terms are :class:`IRI` (an absolute RFC 3987 IRI) and :class:`Literal` (lexical form,
  datatype IRI, optional well-formed BCP 47 language tag — lower-cased, as RDF equates tags
  case-insensitively); :mod:`xdn.rdf_syntax` says what is wrong with one that is not;
* :func:`parse_nquads` refuses blank nodes, relative or malformed IRIs, bad language tags, bad
  escapes, surrogates and any malformed line with a :class:`~xdn.errors.ProvenanceError` that
  names the line number; like N-Quads it allows spaces and tabs between any two tokens,
  including before ``@lang`` and around ``^^``; a text made only of lines as nodes write them
  (single spaces, no escapes, no language tag) is read in one regular-expression scan, and
  anything else line by line;
* :func:`format_quad` writes canonical N-Quads (RDF 1.2 N-Quads §canonical form, which
  RDFC-1.0 uses): IRIs verbatim, literals escaping only ``"``, ``\\``, the five ECHAR
  controls, and U+0000 to U+0007, U+000B, U+000E to U+001F, U+007F, U+FFFE and U+FFFF as
  ``\\uXXXX`` (upper-case hex), ``xsd:string`` datatypes omitted.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable

from xdn.errors import ProvenanceError
from xdn.rdf_syntax import iri_problem, language_tag_problem

__all__ = [
    "IRI",
    "RDF_LANGSTRING",
    "XSD_STRING",
    "Literal",
    "Quad",
    "Term",
    "canonical_lines",
    "canonicalise",
    "format_quad",
    "format_term",
    "parse_line",
    "parse_nquads",
    "serialise",
]

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"

_LANGTAG = re.compile(r"[a-zA-Z]+(?:-[a-zA-Z0-9]+)*")
_SURROGATE = re.compile(r"[\ud800-\udfff]")

_UCHAR = r"\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8}"
# Runs of plain characters match in one step; possessive, so a bad token fails in linear time.
_IRIREF = rf"<((?:[^\x00-\x20<>\"{{}}|^`\\]++|{_UCHAR})*+)>"
_STRING = rf"\"((?:[^\"\\\n\r]++|\\[tbnrf\"'\\]|{_UCHAR})*+)\""
_WS = r"[ \t]*"
_IRI_TOKEN = re.compile(_WS + _IRIREF)
_LITERAL_TOKEN = re.compile(
    rf"{_WS}{_STRING}(?:{_WS}\^\^{_WS}{_IRIREF}|{_WS}@({_LANGTAG.pattern}))?"
)
_END = re.compile(rf"{_WS}\.{_WS}(?:#.*)?")
# The lines a node writes: single spaces, no escapes, a literal typed or plain (not tagged).
_PLAIN_IRI = r"<([^\x00-\x20<>\"{}|^`\\]*)>"
_PLAIN_LINE = re.compile(
    rf"{_PLAIN_IRI} {_PLAIN_IRI} (?:{_PLAIN_IRI}|\"([^\"\\\n\r]*)\"(?:\^\^{_PLAIN_IRI})?)"
    rf"(?: {_PLAIN_IRI})? \."
)
_PLAIN_LINES = re.compile(f"^{_PLAIN_LINE.pattern}$", re.MULTILINE)  # every such line at once
_BLANK_OR_COMMENT = re.compile(rf"{_WS}(?:#.*)?")
_ESCAPE = re.compile(rf"\\[tbnrf\"'\\]|{_UCHAR}")
_EOL = re.compile(r"\r\n|\r|\n")

_ECHARS = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_LITERAL_ESCAPES = {  # the backslash first: _escape_literal relies on the order
    "\\": "\\\\",
    '"': '\\"',
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\\ufffe\uffff]')
_OTHER_CONTROLS = re.compile(r"[\x00-\x07\x0b\x0e-\x1f\x7f\ufffe\uffff]")  # as \uXXXX
_RARE_ESCAPES = re.compile(r'[\x00-\x08\x0b-\x1f\x7f"\\\ufffe\uffff]')  # all but \n and \t


class IRI(str):
    """An absolute RFC 3987 IRI (no relative reference, nothing N-Quads or RFC 3987 forbids).

    A ``str`` of its own kind: hashed and compared by the interpreter's C code (terms are
    hashed in every set of statements), never equal to a :class:`Literal`.

    Raises:
        TypeError: ``value`` is not a str.
        ValueError: naming what is wrong (:func:`xdn.rdf_syntax.iri_problem`).
    """

    __slots__ = ()

    def __new__(cls, value: str) -> IRI:
        if not isinstance(value, str):
            raise TypeError("IRI value must be a str")
        if (problem := iri_problem(value)) is not None:
            raise ValueError(f"IRI {value!r} {problem}")
        return str.__new__(cls, value)

    @property
    def value(self) -> str:
        """The IRI's text, as a plain ``str`` (what leaves this module: Spark, JSON, logs)."""
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"IRI(value={str.__repr__(self)})"


class Literal(tuple[str, str, "str | None"]):
    """A literal: lexical form, datatype IRI and (for ``rdf:langString``) a language tag.

    A language tag implies ``rdf:langString`` and is stored lower-cased. A tuple of its own
    kind ``(value, datatype, language)``: hashed and compared by the interpreter's C code.
    """

    __slots__ = ()

    def __new__(
        cls, value: str, datatype: str = XSD_STRING, language: str | None = None
    ) -> Literal:
        if not isinstance(value, str) or not isinstance(datatype, str):
            raise TypeError("literal value and datatype must be str")
        if not value.isascii() and _SURROGATE.search(value):
            raise ValueError("literal contains an unpaired surrogate")
        _check_datatype(datatype)
        if language is not None:
            if not isinstance(language, str):
                raise TypeError("language tag must be a str or None")
            if (problem := language_tag_problem(language)) is not None:
                raise ValueError(f"malformed language tag {language!r}: it {problem}")
            if datatype not in (XSD_STRING, RDF_LANGSTRING):
                raise ValueError("a literal with a language tag must be an rdf:langString")
            language, datatype = language.lower(), RDF_LANGSTRING
        elif datatype == RDF_LANGSTRING:
            raise ValueError("an rdf:langString literal needs a language tag")
        return tuple.__new__(cls, (value, datatype, language))

    value = property(operator.itemgetter(0), doc="The lexical form.")
    datatype = property(operator.itemgetter(1), doc="The datatype IRI.")
    language = property(operator.itemgetter(2), doc="The language tag, lower-cased, or None.")

    def __getnewargs__(self) -> tuple[str, str, str | None]:  # (pickled for Spark)
        return tuple(self)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Literal(value={self[0]!r}, datatype={self[1]!r}, language={self[2]!r})"


Term = IRI | Literal
_TERM_TYPES = (IRI, Literal)


@functools.lru_cache(maxsize=1024)
def _check_datatype(iri: str) -> None:
    """Raise ``ValueError`` unless ``iri`` is an IRI; checked once each (there are a handful)."""
    IRI(iri)


class Quad(tuple[IRI, IRI, Term, "IRI | None"]):
    """One statement; ``g`` is the graph name, ``None`` for the default graph.

    Positional (``Quad(s, p, o, g)``) like the RDF notation it mirrors; a tuple of its own kind,
    hashed and compared by the interpreter's C code.
    """

    __slots__ = ()

    def __new__(cls, s: IRI, p: IRI, o: Term, g: IRI | None = None) -> Quad:
        if type(s) is not IRI or type(p) is not IRI:
            raise TypeError("subject and predicate must be IRIs (blank nodes are not supported)")
        if not isinstance(o, _TERM_TYPES):
            raise TypeError("object must be an IRI or a Literal")
        if g is not None and type(g) is not IRI:
            raise TypeError("graph name must be an IRI or None")
        return tuple.__new__(cls, (s, p, o, g))

    s = property(operator.itemgetter(0), doc="The subject.")
    p = property(operator.itemgetter(1), doc="The predicate.")
    o = property(operator.itemgetter(2), doc="The object.")
    g = property(operator.itemgetter(3), doc="The graph name (None: the default graph).")

    def __getnewargs__(self) -> tuple[IRI, IRI, Term, IRI | None]:
        return tuple(self)  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"Quad(s={self[0]!r}, p={self[1]!r}, o={self[2]!r}, g={self[3]!r})"


def _new_quad(terms: tuple[IRI, IRI, Term, IRI | None]) -> Quad:
    """A statement of terms already known to be of the right kinds (the parser's)."""
    return tuple.__new__(Quad, terms)


# --------------------------------------------------------------------------- serialisation


def _escape_control(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04X}"


def _escape_literal(value: str) -> str:
    """Escape a literal's lexical form (str.replace per escape: long tables have many)."""
    if not _NEEDS_ESCAPE.search(value):
        return value
    if not _RARE_ESCAPES.search(value):  # tables and id lists: only newlines and tabs
        return value.replace("\n", "\\n").replace("\t", "\\t")
    for char, escape in _LITERAL_ESCAPES.items():  # the backslash first
        value = value.replace(char, escape)
    return _OTHER_CONTROLS.sub(_escape_control, value)


def format_term(term: Term) -> str:
    """Canonical N-Quads form of one term."""
    if isinstance(term, IRI):
        return f"<{term.value}>"
    text = '"' + _escape_literal(term.value) + '"'
    if term.language is not None:
        return f"{text}@{term.language}"
    if term.datatype == XSD_STRING:
        return text
    return f"{text}^^<{term.datatype}>"


# Statements formatted or parsed lately, both ways: a node formats the same statements several
# times (to check a chain's signatures, to sign over it, to send it on), and parses them again
# when the receipt comes back through it; a line it parsed is often canonical already.
# Bounded by the characters of the lines held (a memo holding them takes about twice that), so
# it fills within minutes at any rate and stays small: a node's reuse is of recent statements.
_LINES: dict[Quad, str] = {}  # statement → its canonical line
_QUADS: dict[str, Quad] = {}  # line → its statement (lines parsed or written canonically)
_MEMO_MAX = 16384
_MEMO_MAX_CHARS = 1 << 20
_memo_chars = 0  # characters of the lines in _QUADS


def _remember_line(quad: Quad, line: str) -> None:
    """Remember that ``line`` is the canonical form of ``quad``."""
    global _memo_chars
    if len(_LINES) >= _MEMO_MAX or len(_QUADS) >= _MEMO_MAX or _memo_chars >= _MEMO_MAX_CHARS:
        _LINES.clear()  # (cheaper than LRU bookkeeping on every hit; refilled in one message)
        _QUADS.clear()
        _memo_chars = 0
    _LINES[quad] = line
    if line not in _QUADS:
        _memo_chars += len(line)
    _QUADS[line] = quad


def format_quad(quad: Quad, *, remember: bool = True) -> str:
    """Canonical N-Quads line of ``quad``, without the line terminator.

    Args:
        remember: keep the line in the memo (statements met once need not be).
    """
    line = _LINES.get(quad)
    if line is None:
        parts = [format_term(quad.s), format_term(quad.p), format_term(quad.o)]
        if quad.g is not None:
            parts.append(format_term(quad.g))
        line = " ".join(parts) + " ."
        if remember:
            _remember_line(quad, line)
    return line


def serialise(quads: Iterable[Quad]) -> bytes:
    """N-Quads (UTF-8) of ``quads`` in the order given, one canonical line each."""
    return "".join(format_quad(q) + "\n" for q in quads).encode("utf-8")


def canonical_lines(quads: Iterable[Quad], *, remember: bool = True) -> list[str]:
    """The sorted, de-duplicated canonical N-Quads lines (without terminators)."""
    return sorted({format_quad(q, remember=remember) for q in quads})


def canonicalise(quads: Iterable[Quad]) -> bytes:
    """RDFC-1.0 canonical form of a blank-node-free dataset, as UTF-8 N-Quads."""
    return "".join(line + "\n" for line in canonical_lines(quads)).encode("utf-8")


# --------------------------------------------------------------------------------- parsing


def _unescape_echars(text: str) -> str | None:
    """Unescape a lexical form already matched by ``_STRING`` that has no ``\\u`` escapes
    (``None`` if it has some) with ``str.replace``: long fragment tables have thousands."""
    if text.count("\\") == text.count("\\n") + text.count("\\t"):
        # Every backslash starts a \n or a \t (tables and id lists use no other escape).
        return text.replace("\\n", "\n").replace("\\t", "\t")
    # Once escaped backslashes are split out, every backslash left starts a two-character escape.
    pieces = text.split("\\\\")
    if any("\\u" in piece or "\\U" in piece for piece in pieces):
        return None
    for char, escape in _LITERAL_ESCAPES.items():
        if char != "\\":
            pieces = [piece.replace(escape, char) for piece in pieces]
    return "\\".join(piece.replace("\\'", "'") for piece in pieces)


def _unescape(text: str, *, allow_echar: bool) -> str:
    if "\\" not in text:
        return text
    if allow_echar and (unescaped := _unescape_echars(text)) is not None:
        return unescaped

    def replace(match: re.Match[str]) -> str:
        escape = match.group()
        if escape[1] in "uU":
            code = int(escape[2:], 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"escape {escape} is not a Unicode scalar value")
            return chr(code)
        if not allow_echar:
            raise ValueError(f"escape {escape} is not allowed in an IRI")
        return _ECHARS[escape[1]]

    return _ESCAPE.sub(replace, text)


def _parse_iri(line: str, pos: int, role: str) -> tuple[IRI, int]:
    match = _IRI_TOKEN.match(line, pos)
    if match is None:
        rest = line[pos:].lstrip(" \t")
        if rest.startswith("_:"):
            raise ValueError(f"blank node as {role}: blank nodes are not allowed")
        raise ValueError(f"expected an IRI as {role} at column {pos + 1}")
    return _iri_token(match.group(1)), match.end()


@functools.lru_cache(maxsize=4096)
def _iri_token(text: str) -> IRI:
    """The IRI an N-Quads token spells; cached: graph names and vocabulary repeat on every line."""
    return IRI(_unescape(text, allow_echar=False))


def _parse_object(line: str, pos: int) -> tuple[Term, int]:
    match = _LITERAL_TOKEN.match(line, pos)
    if match is None:
        return _parse_iri(line, pos, "object")
    value = _unescape(match.group(1), allow_echar=True)
    if match.group(2) is not None:
        datatype = _unescape(match.group(2), allow_echar=False)
        return Literal(value, datatype), match.end()
    return Literal(value, language=match.group(3)), match.end()


def parse_line(line: str, line_no: int = 1) -> Quad | None:
    """Parse one N-Quads line; ``None`` for a blank or comment-only line.

    Raises:
        ProvenanceError: naming ``line_no`` when the line is malformed or uses a blank node.
    """
    if _BLANK_OR_COMMENT.fullmatch(line):
        return None
    quad = _QUADS.get(line)
    if quad is not None:
        return quad
    try:
        return _parse_statement(line)
    except ValueError as exc:
        raise ProvenanceError(f"N-Quads line {line_no}: {exc}") from None


def _parse_statement(line: str) -> Quad:
    """The statement on a line that is not blank, raising ``ValueError`` if it is malformed."""
    if plain := _PLAIN_LINE.fullmatch(line):  # one match instead of one per token
        return _plain_quad(line, *plain.groups())
    s, pos = _parse_iri(line, 0, "subject")
    p, pos = _parse_iri(line, pos, "predicate")
    o, pos = _parse_object(line, pos)
    g: IRI | None = None
    if _END.fullmatch(line, pos) is None:
        g, pos = _parse_iri(line, pos, "graph name")
        if _END.fullmatch(line, pos) is None:
            raise ValueError(f"expected '.' at column {pos + 1}")
    return Quad(s, p, o, g)


def _plain_quad(
    line: str, subject: str, predicate: str, iri: str | None, value: str | None,
    datatype: str | None, graph: str | None,
) -> Quad:
    """The statement of a line ``_PLAIN_LINE`` matched, from its groups (``ValueError`` if a
    term is not one RDF allows)."""
    quad = _new_quad((  # (the terms are checked: no need of Quad's own checks)
        _iri_token(subject),
        _iri_token(predicate),
        _iri_token(iri) if value is None else Literal(value, datatype or XSD_STRING),
        None if graph is None else _iri_token(graph),
    ))
    if value is None or (datatype != XSD_STRING and not _NEEDS_ESCAPE.search(value)):
        _remember_line(quad, line)  # the line is the quad's canonical form
    return quad


def _parse_plain(text: str) -> list[Quad] | None:
    """The statements of ``text`` if every line is one ``_PLAIN_LINE`` matches and ends with a
    line feed (what nodes write), found in one scan of the whole text; else ``None``.

    Each match spans exactly one whole line (``^``…``$``, and no token matches a line break),
    so as many matches as lines means every line matched.
    """
    lines = text.split("\n")
    if lines.pop():  # the text does not end with a line feed
        return None
    found = list(_PLAIN_LINES.finditer(text))
    if len(found) != len(lines):
        return None
    quads = []
    try:
        for line, match in zip(lines, found, strict=True):
            quad = _QUADS.get(line)
            quads.append(_plain_quad(line, *match.groups()) if quad is None else quad)
    except ValueError:  # a term RDF does not allow: the line-by-line parse names the line
        return None
    return quads


def parse_nquads(data: bytes | str) -> tuple[Quad, ...]:
    """Parse an N-Quads document strictly, keeping the order of its statements.

    Raises:
        ProvenanceError: on invalid UTF-8, a blank node or any malformed line (with its number).
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProvenanceError(f"N-Quads is not valid UTF-8 at byte {exc.start}") from None
    if "\r" not in data and (plain := _parse_plain(data)) is not None:
        return tuple(plain)
    quads: list[Quad] = []
    lines = _EOL.split(data) if "\r" in data else data.split("\n")
    for number, line in enumerate(lines, start=1):
        quad = parse_line(line, number)
        if quad is not None:
            quads.append(quad)
    return tuple(quads)
