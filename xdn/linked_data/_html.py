"""A small readable HTML page of a dataset: one table per graph, every text escaped.

IRIs below the endpoint's own prefix link by path (so a browser follows them on the same
endpoint, whatever address it reached it at); other ``http(s)`` IRIs link as they are; no other
scheme becomes a link (no ``javascript:``). Everything written comes through
:func:`html.escape`, attribute values included.
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence

import pyoxigraph as ox

__all__ = ["page"]

_STYLE = (
    "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;margin-bottom:2em}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}"
    "code{word-break:break-all}"
)
_XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"


def _iri(value: str, local_prefix: str) -> str:
    text = html.escape(value)
    if value.startswith(local_prefix):
        href = "/" + value[len(local_prefix):]
    elif value.startswith(("https://", "http://")):
        href = value
    else:
        return f"<code>{text}</code>"
    return f'<a href="{html.escape(href, quote=True)}"><code>{text}</code></a>'


def _cell(term: object, local_prefix: str) -> str:
    if isinstance(term, ox.NamedNode):
        return _iri(term.value, local_prefix)
    if isinstance(term, ox.BlankNode):
        return f"<code>_:{html.escape(term.value)}</code>"
    if isinstance(term, ox.Literal):
        text = f"{html.escape(term.value)}"
        if term.language:
            return f"{text} <small>@{html.escape(term.language)}</small>"
        if term.datatype.value != _XSD_STRING:
            return f"{text} <small>^^{_iri(term.datatype.value, local_prefix)}</small>"
        return text
    return html.escape(str(term))


def _graph_name(graph: object, local_prefix: str) -> str:
    if isinstance(graph, ox.DefaultGraph):
        return "default graph"
    return "graph " + _cell(graph, local_prefix)


def page(dataset: Sequence[ox.Quad], *, title: str, local_prefix: str) -> bytes:
    """The HTML page of ``dataset`` (UTF-8)."""
    graphs: dict[str, list[ox.Quad]] = defaultdict(list)
    for quad in dataset:
        graphs[_graph_name(quad.graph_name, local_prefix)].append(quad)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_iri(title, local_prefix)}</h1>",
    ]
    if not graphs:
        parts.append("<p>No statements.</p>")
    for name, quads in graphs.items():
        parts.append(f"<h2>{name}</h2><table><tr><th>subject</th><th>predicate</th>"
                     "<th>object</th></tr>")
        for quad in quads:
            parts.append(
                f"<tr><td>{_cell(quad.subject, local_prefix)}</td>"
                f"<td>{_cell(quad.predicate, local_prefix)}</td>"
                f"<td>{_cell(quad.object, local_prefix)}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "\n".join(parts).encode("utf-8")
