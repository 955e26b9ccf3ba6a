"""Pictures of the containment DAG: an indented text tree, Graphviz DOT, and a plain SVG.

The SVG renderer is a small pure-Python layered layout (Sugiyama style, much simplified) so
that ``xdn ontology show --svg`` works where Graphviz is not installed:

1. *Layers* — a concept sits one layer below its deepest parent (longest path from a root);
   edges that close a cycle are set aside first so a cyclic ontology still renders.
2. *Order* — within each layer, concepts are ordered by the mean position of their parents,
   then of their children, for a few sweeps (the barycenter heuristic), which removes most
   edge crossings of a hierarchy.
3. *Place* — boxes are packed left to right and each layer is centred; edges are cubic curves
   from the bottom of the parent to the top of the child, with an arrowhead.
"""

from __future__ import annotations

from xml.sax.saxutils import escape, quoteattr

import networkx as nx

from xdn.ontology._model import Ontology

__all__ = ["dot_text", "svg_text", "tree_lines"]

_BOX_H, _GAP_X, _GAP_Y, _CHAR_W, _PAD = 28.0, 18.0, 56.0, 7.2, 14.0


def tree_lines(ontology: Ontology) -> list[str]:
    """The DAG as an indented tree; a concept with several parents appears under each."""
    lines: list[str] = []

    def walk(concept: str, depth: int, trail: frozenset[str]) -> None:
        others = sorted(ontology.parents(concept) - trail)
        note = f"  [also ⊑ {', '.join(others)}]" if depth and others else ""
        label = ontology.labels.get(concept, concept)
        lines.append(f"{'  ' * depth}{concept} — {label}{note}")
        for child in sorted(ontology.children(concept)):
            if child not in trail:
                walk(child, depth + 1, trail | {concept})

    for root in sorted(ontology.roots()):
        walk(root, 0, frozenset())
    return lines


def dot_text(ontology: Ontology) -> str:
    """Graphviz DOT of the containment DAG (edges parent → child)."""
    out = ["digraph ontology {", "  rankdir=TB;", '  node [shape=box, fontname="Helvetica"];']
    for concept in sorted(ontology.concepts):
        label = ontology.labels.get(concept, concept).replace("\\", "\\\\").replace('"', r"\"")
        out.append(f'  "{concept}" [label="{label}", tooltip="{concept}"];')
    out += [f'  "{p}" -> "{c}";' for p, c in sorted(ontology.graph.edges)]
    return "\n".join([*out, "}", ""])


def _acyclic_edges(graph: nx.DiGraph) -> list[tuple[str, str]]:
    """The edges minus those closing a cycle (back edges of a depth-first search)."""
    back: set[tuple[str, str]] = set()
    state: dict[str, int] = {}
    for start in sorted(graph.nodes):
        if start in state:
            continue
        stack = [(start, iter(sorted(graph.successors(start))))]
        state[start] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
            elif state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                state[child] = 1
                stack.append((child, iter(sorted(graph.successors(child)))))
    return [e for e in sorted(graph.edges) if e not in back]


def _layers(ontology: Ontology) -> tuple[list[list[str]], list[tuple[str, str]]]:
    edges = _acyclic_edges(ontology.graph)
    dag: nx.DiGraph = nx.DiGraph()
    dag.add_nodes_from(sorted(ontology.concepts))
    dag.add_edges_from(edges)
    depth: dict[str, int] = {}
    for node in nx.lexicographical_topological_sort(dag):
        depth[node] = max((depth[p] + 1 for p in dag.predecessors(node)), default=0)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for node in sorted(depth):
        layers[depth[node]].append(node)
    _order(layers, dag)
    return layers, edges


def _order(layers: list[list[str]], dag: nx.DiGraph) -> None:
    for sweep in range(4):
        downward = sweep % 2 == 0
        indices = range(1, len(layers)) if downward else range(len(layers) - 2, -1, -1)
        for i in indices:
            ref = layers[i - 1] if downward else layers[i + 1]
            pos = {n: k for k, n in enumerate(ref)}
            keys = {}
            for k, node in enumerate(layers[i]):
                near = dag.predecessors(node) if downward else dag.successors(node)
                ranks = [pos[n] for n in near if n in pos]
                keys[node] = (sum(ranks) / len(ranks) if ranks else float(k), node)
            layers[i].sort(key=keys.__getitem__)


def svg_text(ontology: Ontology) -> str:
    """A standalone SVG drawing of the containment DAG (no Graphviz needed)."""
    layers, kept = _layers(ontology)
    edges = set(kept)
    labels = {c: ontology.labels.get(c, c) for c in ontology.concepts}
    width = {c: len(labels[c]) * _CHAR_W + 2 * _PAD for c in ontology.concepts}
    rows = [sum(width[n] for n in layer) + _GAP_X * (len(layer) - 1) for layer in layers]
    total_w = max(rows, default=0) + 2 * _GAP_X
    total_h = len(layers) * (_BOX_H + _GAP_Y) - _GAP_Y + 2 * _GAP_X
    box: dict[str, tuple[float, float]] = {}
    for i, layer in enumerate(layers):
        x = (total_w - rows[i]) / 2
        y = _GAP_X + i * (_BOX_H + _GAP_Y)
        for node in layer:
            box[node] = (x, y)
            x += width[node] + _GAP_X
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{total_w:.0f}" height="{total_h:.0f}" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" font-family="Helvetica, Arial, sans-serif" '
        'font-size="12">',
        f"<title>{escape(ontology.iri)}</title>",
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>',
        '<g fill="none" stroke="#555" stroke-width="1.2">',
    ]
    for parent, child in sorted(ontology.graph.edges):
        (px, py), (cx, cy) = box[parent], box[child]
        x1, y1 = px + width[parent] / 2, py + (_BOX_H if (parent, child) in edges else 0)
        x2, y2 = cx + width[child] / 2, cy + (0 if (parent, child) in edges else _BOX_H)
        bend = (y2 - y1) / 2
        dash = "" if (parent, child) in edges else ' stroke-dasharray="4 3" stroke="#b00"'
        out.append(
            f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
            f'{x2:.1f},{y2:.1f}" marker-end="url(#arrow)"{dash}/>'
        )
    out.append("</g>")
    for node in sorted(box):
        x, y = box[node]
        out.append(
            f"<g><title>{escape(node)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width[node]:.1f}" height="{_BOX_H:.0f}" rx="4" '
            'fill="#f4f6fb" stroke="#334"/>'
            f'<text x="{x + width[node] / 2:.1f}" y="{y + _BOX_H / 2 + 4:.1f}" '
            f'text-anchor="middle" data-concept={quoteattr(node)}>{escape(labels[node])}</text></g>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
