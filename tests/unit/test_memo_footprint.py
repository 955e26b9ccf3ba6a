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

_SIGNATURE_CHARS = 300  # about a provenance statement's line (base64 signatures, URIs)


def _statement(n: int) -> rdf.Quad:
    return rdf.Quad(
        rdf.IRI(f"https://d1.xdn.example/message/{n}"),
        rdf.IRI("https://w3id.org/xdn#signature"),
        rdf.Literal(f"{n:08d}" + "A" * _SIGNATURE_CHARS),
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


def test_the_line_memo_holds_a_few_megabytes_after_forty_thousand_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(rdf, "_LINES", {})
    monkeypatch.setattr(rdf, "_QUADS", {})
    monkeypatch.setattr(rdf, "_memo_chars", 0)

    def fill() -> None:
        for n in range(40_000):
            rdf.format_quad(_statement(n))

    assert _retained_mb(fill) < 4.0
    assert rdf.format_quad(_statement(39_999)) in rdf._QUADS  # (the recent ones are kept)


def test_the_graph_memo_holds_a_bounded_number_of_statements(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_shape, "_READ", {})
    monkeypatch.setattr(_shape, "_read_quads", 0)

    def count(name: str, quads: list[rdf.Quad]) -> int:
        return len(quads)

    def fill() -> None:
        for graph in range(2_000):  # graphs of 20 statements, each graph read once
            quads = [_statement(graph * 20 + i) for i in range(20)]
            assert _shape._read(count, f"g{graph}", quads) == 20

    assert _retained_mb(fill) < 8.0
    held = sum(len(statements) for _, _, statements in _shape._READ)
    assert 0 < held <= 8192
