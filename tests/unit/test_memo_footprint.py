"""The statement memos (xdn.rdf's lines, xdn.provenance._shape's graphs read) stay small in
memory whatever a long run feeds them: each is bounded by what it holds, not only by entries,
so a soak's processes do not grow for the best part of an hour while they fill."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

import pytest

from xdn import rdf
from xdn.provenance import _shape


def _statement(n: int, chars: int) -> rdf.Quad:
    """A statement with a literal of ``chars`` characters (a signature, a certificate)."""
    return rdf.Quad(
        rdf.IRI(f"https://d1.xdn.example/message/{n}"),
        rdf.IRI("https://w3id.org/xdn#signature"),
        rdf.Literal(f"{n:08d}" + "A" * chars),
        rdf.IRI(f"https://d1.xdn.example/graph/{n}"),
    )


def _retained_mb(fill: Callable[[], None]) -> float:
    """Memory still held after ``fill`` ran and everything it made was dropped."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        fill()
        gc.collect()
        return (tracemalloc.get_traced_memory()[0] - before) / 1e6
    finally:
        tracemalloc.stop()


def test_the_line_memo_holds_a_few_megabytes_of_long_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rdf, "_LINES", {})
    monkeypatch.setattr(rdf, "_QUADS", {})
    monkeypatch.setattr(rdf, "_memo_chars", 0)

    def fill() -> None:  # (far fewer statements than the memo's count bound)
        for n in range(3_000):
            rdf.format_quad(_statement(n, 2_000))

    assert _retained_mb(fill) < 3.0  # (all 3,000 would be 6 MB of lines alone)
    assert rdf.format_quad(_statement(2_999, 2_000)) in rdf._QUADS  # (the recent ones are kept)


def test_the_graph_memo_holds_a_bounded_number_of_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_shape, "_READ", {})
    monkeypatch.setattr(_shape, "_read_quads", 0)

    def count(name: str, quads: list[rdf.Quad]) -> int:
        return len(quads)

    def fill() -> None:  # (far fewer graphs than the memo's count bound)
        for graph in range(600):  # graphs of 20 statements, each graph read once
            quads = [_statement(graph * 20 + i, 1_000) for i in range(20)]
            assert _shape._read(count, f"g{graph}", quads) == 20

    retained = _retained_mb(fill)
    held = sum(len(statements) for _, _, statements in _shape._READ)
    assert 0 < held <= 8_192
    assert retained < 10.0, held  # (all 12,000 statements would be 13 MB of literals alone)
