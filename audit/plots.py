"""The report's figures, drawn with matplotlib (and networkx for the network's layout) as
inline SVG: readable without JavaScript, text kept as text, the same bytes for the same data.

Every figure is bounded whatever the size of the logs: the time series has at most a few
dozen buckets, the latency chart the busiest :data:`MAX_LINKS` links, and the network at most
:data:`MAX_DRAWN` nodes (beyond that, subscribers are drawn as one node per site that serves
them, labelled with how many).
"""

from __future__ import annotations

import io
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import matplotlib as mpl
import networkx as nx
from matplotlib.figure import Figure

if TYPE_CHECKING:
    from audit.report import HopLatency, NodeInfo, TimePoint

__all__ = ["MAX_DRAWN", "MAX_LINKS", "latency_svg", "network_svg", "timeline_svg"]

#: The links shown in the latency chart (the busiest).
MAX_LINKS = 30
#: The nodes drawn one by one in the network (beyond: subscribers grouped per site).
MAX_DRAWN = 60

_STYLE: Any = {  # (matplotlib types its keys as literals)
    "svg.fonttype": "none",  # text stays text: small, selectable, never clipped into paths
    "svg.hashsalt": "xdn-audit",  # stable element ids: the same report for the same data
    "font.size": 9,
    "font.family": "sans-serif",
}
_ROLE_COLOURS = {"publisher": "#3b6ea8", "site": "#6a9a3b", "subscriber": "#c77d2e"}

Name = Callable[[str], str]
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.DOTALL)


def _svg(figure: Figure) -> str:
    out = io.StringIO()
    with mpl.rc_context(_STYLE):
        figure.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = out.getvalue()
    text = text[text.index("<svg") :]  # inline: no prolog, no doctype
    return _METADATA.sub("", text).replace("\n", "")  # nor the tool's metadata


def _figure(width: float, height: float) -> Figure:
    with mpl.rc_context(_STYLE):
        return Figure(figsize=(width, height), layout="constrained")


def timeline_svg(points: Sequence[TimePoint], bucket_ms: int) -> str:
    """Throughput (receipts per second) and end-to-end latency (p50, p99) over time."""
    with mpl.rc_context(_STYLE):
        figure = _figure(8, 4)
        top, bottom = figure.subplots(2, 1, sharex=True)
        times = [datetime.fromtimestamp(p.start_ms / 1000, UTC) for p in points]
        per_second = [p.deliveries * 1000 / bucket_ms for p in points]
        width = bucket_ms / 86_400_000  # matplotlib dates are in days
        top.bar(times, per_second, width=width, align="edge", color="#3b6ea8")
        top.set_ylabel("receipts / s")
        top.set_title(f"per {_duration(bucket_ms)}, by time of receipt (UTC)")
        middle = [t.timestamp() + bucket_ms / 2000 for t in times]
        centres = [datetime.fromtimestamp(m, UTC) for m in middle]
        bottom.plot(centres, [p.p50_ms for p in points], marker=".", label="p50")
        bottom.plot(centres, [p.p99_ms for p in points], marker=".", label="p99")
        bottom.set_ylabel("end-to-end ms")
        bottom.legend(loc="upper left")
        bottom.tick_params(axis="x", labelrotation=30)
        return _svg(figure)


def _duration(ms: int) -> str:
    for unit, size in (("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit}"
    return f"{ms} ms"


def latency_svg(links: Sequence[HopLatency], name: Name) -> str:
    """Per link: p50 as a bar, p90, p99 and max as marks (the busiest :data:`MAX_LINKS`)."""
    shown = sorted(links, key=lambda h: (-h.hops, h.sender, h.receiver))[:MAX_LINKS]
    shown.reverse()  # the busiest on top
    with mpl.rc_context(_STYLE):
        figure = _figure(8, 0.8 + 0.28 * len(shown))
        axes = figure.subplots()
        rows = range(len(shown))
        axes.barh(rows, [h.p50_ms for h in shown], color="#3b6ea8", label="p50")
        axes.scatter(
            [h.p90_ms for h in shown], rows, marker="|", s=120, color="#222", label="p90", zorder=3
        )
        axes.scatter(
            [h.p99_ms for h in shown],
            rows,
            marker="|",
            s=120,
            color="#b00020",
            label="p99",
            zorder=3,
        )
        axes.scatter(
            [h.max_ms for h in shown], rows, marker="x", s=20, color="#777", label="max", zorder=3
        )
        axes.set_yticks(list(rows), [f"{name(h.sender)} → {name(h.receiver)}" for h in shown])
        axes.set_xlabel("ms")
        axes.legend(loc="lower right")
        return _svg(figure)


def _layers(graph: nx.DiGraph, roles: dict[str, str]) -> dict[str, int]:
    """Each node's layer: its distance from the nearest publisher (unreached: after all)."""
    sources = [n for n in graph if roles.get(n) == "publisher"] or [
        n for n in graph if graph.in_degree(n) == 0
    ]
    layer: dict[str, int] = {}
    for source in sources:
        for node, depth in nx.single_source_shortest_path_length(graph, source).items():
            layer[node] = min(depth, layer.get(node, depth))
    deepest = max(layer.values(), default=0)
    return {n: layer.get(n, deepest + 1) for n in graph}


def _grouped(
    edges: Sequence[tuple[str, str, int]], roles: dict[str, str]
) -> tuple[list[tuple[str, str, int]], dict[str, str]]:
    """With more than :data:`MAX_DRAWN` nodes: each site's subscribers as one node."""
    nodes = {n for s, r, _ in edges for n in (s, r)}
    if len(nodes) <= MAX_DRAWN:
        return list(edges), {}
    served: dict[str, set[str]] = defaultdict(set)
    for sender, receiver, _ in edges:
        if roles.get(receiver) == "subscriber" and roles.get(sender) != "subscriber":
            served[sender].add(receiver)
    group = {sub: f"subscribers of {site}" for site, subs in served.items() for sub in subs}
    labels = {f"subscribers of {site}": f"{len(subs)} subscribers" for site, subs in served.items()}
    weights: Counter[tuple[str, str]] = Counter()
    for sender, receiver, hops in edges:
        weights[(group.get(sender, sender), group.get(receiver, receiver))] += hops
    return [(s, r, w) for (s, r), w in sorted(weights.items()) if s != r], labels


def _ordered(edges: Sequence[tuple[str, str, int]], roles: dict[str, str]) -> nx.DiGraph:
    """The graph with each node's ``layer``, its nodes added layer by layer, each layer in
    the order of the nodes that feed them (so that few lines cross)."""
    loose = nx.DiGraph()
    loose.add_weighted_edges_from(sorted(edges))
    layer = _layers(loose, roles)
    rank: dict[str, int] = {}
    for depth in sorted(set(layer.values())):
        here = [n for n in loose if layer[n] == depth]

        def key(node: str) -> tuple[int, str]:
            fed_by = [rank[p] for p in loose.predecessors(node) if p in rank]
            return (min(fed_by, default=len(rank)), node)

        for node in sorted(here, key=key):
            rank[node] = len(rank)
    graph = nx.DiGraph()
    for node in sorted(rank, key=rank.__getitem__):
        graph.add_node(node, layer=layer[node])
    graph.add_weighted_edges_from(sorted(edges))
    return graph


def _positions(graph: nx.DiGraph) -> dict[str, tuple[float, float]]:
    """Layers left to right, each layer's nodes top to bottom in the graph's order, centred."""
    by_layer: dict[int, list[str]] = defaultdict(list)
    for node, layer in graph.nodes(data="layer"):
        by_layer[layer].append(node)
    return {
        node: (float(layer), (len(nodes) - 1) / 2 - i)
        for layer, nodes in by_layer.items()
        for i, node in enumerate(nodes)
    }


def network_svg(
    edges: Sequence[tuple[str, str, int]], nodes: Sequence[NodeInfo], name: Name
) -> str:
    """The nodes that took part and the links between them (width: messages carried),
    publishers on the left, each node one layer right of the nearest node that feeds it."""
    roles = {n.uri: n.role for n in nodes}
    drawn, labels = _grouped(edges, roles)
    graph = _ordered(drawn, roles)
    position = _positions(graph)
    heaviest = max((w for _, _, w in drawn), default=1)
    with mpl.rc_context(_STYLE):
        widest = max(Counter(nx.get_node_attributes(graph, "layer").values()).values())
        figure = _figure(8, max(3.0, 0.3 * widest))
        axes = figure.subplots()
        axes.set_axis_off()
        ordered = sorted(graph.nodes)
        colours = [
            _ROLE_COLOURS.get(roles.get(n, "subscriber" if n in labels else ""), "#999")
            for n in ordered
        ]
        nx.draw_networkx_edges(
            graph,
            position,
            ax=axes,
            edge_color="#888",
            arrowsize=8,
            node_size=300,
            width=[0.6 + 2.4 * graph.edges[e]["weight"] / heaviest for e in graph.edges],
        )
        nx.draw_networkx_nodes(
            graph, position, ax=axes, nodelist=ordered, node_color=colours, node_size=300
        )
        nx.draw_networkx_labels(
            graph,
            {n: (x + 0.08, y) for n, (x, y) in position.items()},
            ax=axes,
            font_size=8,
            labels={n: labels.get(n) or name(n) for n in graph.nodes},
            horizontalalignment="left",
            clip_on=False,
        )
        for role, colour in _ROLE_COLOURS.items():
            axes.scatter([], [], color=colour, label=role)
        axes.legend(loc="upper center", bbox_to_anchor=(0.5, 0), ncol=3, frameon=False)
        return _svg(figure)
