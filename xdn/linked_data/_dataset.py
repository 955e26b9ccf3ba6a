"""Datasets as the endpoint serves them, and their serialisation in each offered media type.

A resource is a tuple of :class:`pyoxigraph.Quad` (blank nodes allowed: notifications have
them; provenance graphs never do). pyoxigraph writes N-Quads, TriG, Turtle and JSON-LD (the
expanded form: full IRIs, no remote context for a reader to fetch); :mod:`._html` writes the
page for people. Turtle is offered only for a dataset without named graphs.
"""

from __future__ import annotations

from collections.abc import Iterable

import pyoxigraph as ox

from xdn import rdf
from xdn.linked_data import _html
from xdn.linked_data._media import HTML, JSON_LD, N_QUADS, RDF_FORMATS, TRIG, TURTLE

__all__ = ["Dataset", "from_nquads", "from_terms", "nquads", "offers", "serialise"]

Dataset = tuple[ox.Quad, ...]

_PREFIXES = {
    "ldp": "http://www.w3.org/ns/ldp#",
    "as": "https://www.w3.org/ns/activitystreams#",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
    "xsd": "http://www.w3.org/2001/XMLSchema#",
}


def from_nquads(data: bytes) -> Dataset:
    """The dataset of N-Quads the endpoint wrote itself (stored notifications, node graphs).

    Raises:
        SyntaxError: ``data`` is not N-Quads (pyoxigraph's error: our own data is bad).
    """
    return tuple(ox.parse(data, format=ox.RdfFormat.N_QUADS))


def _term(term: rdf.Term) -> ox.NamedNode | ox.Literal:
    if isinstance(term, rdf.IRI):
        return ox.NamedNode(term.value)
    if term.language is not None:
        return ox.Literal(term.value, language=term.language)
    return ox.Literal(term.value, datatype=ox.NamedNode(term.datatype))


def from_terms(quads: Iterable[rdf.Quad]) -> Dataset:
    """The dataset of statements of :mod:`xdn.rdf` (the provenance model)."""
    return tuple(
        ox.Quad(
            ox.NamedNode(q.s.value), ox.NamedNode(q.p.value), _term(q.o),
            ox.DefaultGraph() if q.g is None else ox.NamedNode(q.g.value),
        )
        for q in quads
    )


def nquads(dataset: Dataset) -> bytes:
    """``dataset`` as N-Quads, in its order."""
    return _bytes(ox.serialize(dataset, format=ox.RdfFormat.N_QUADS))


def _has_named_graphs(dataset: Dataset) -> bool:
    return any(not isinstance(q.graph_name, ox.DefaultGraph) for q in dataset)


def offers(dataset: Dataset) -> tuple[str, ...]:
    """The media types ``dataset`` is offered in, the preferred (JSON-LD) first."""
    if _has_named_graphs(dataset):
        return (JSON_LD, TRIG, N_QUADS, HTML)
    return (JSON_LD, TRIG, N_QUADS, TURTLE, HTML)


def serialise(dataset: Dataset, media_type: str, *, title: str, local_prefix: str) -> bytes:
    """``dataset`` in ``media_type`` (one of :func:`offers`).

    Args:
        title: what the HTML page is about (the resource's IRI).
        local_prefix: IRIs below this are this endpoint's: the HTML page links them by path.

    Raises:
        ValueError: ``media_type`` is not one ``dataset`` is offered in.
    """
    if media_type not in offers(dataset):
        raise ValueError(f"{media_type!r} is not offered for this dataset")
    if media_type == HTML:
        return _html.page(dataset, title=title, local_prefix=local_prefix)
    if media_type == TURTLE:
        return _bytes(ox.serialize(
            [q.triple for q in dataset], format=ox.RdfFormat.TURTLE, prefixes=_PREFIXES
        ))
    prefixes = _PREFIXES if media_type == TRIG else None
    return _bytes(ox.serialize(dataset, format=RDF_FORMATS[media_type], prefixes=prefixes))


def _bytes(written: bytes | None) -> bytes:
    """What :func:`pyoxigraph.serialize` returns without an output (typed ``bytes | None``)."""
    assert written is not None
    return written
