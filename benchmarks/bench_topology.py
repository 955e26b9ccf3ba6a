"""Bytes on links: the concept DAG against star, broadcast and point-to-point dissemination.

The paper claims the concept-containment DAG uses the network better than star, broadcast and
point-to-point topologies but never measured it. Here the same workload runs through each:

* The physical network is a tree of sites mirroring the DAG (each site linked to its uplink's
  site); the publisher sits at the root site; every subscriber is attached to the site serving
  the smallest block that holds its grants. A byte counts once per physical link it crosses
  (site↔site links and the last mile site→subscriber).
* DAG: the real routing core (:class:`disseminator.routing.RoutingTable`) of every site decides
  what goes down each link; a fragment crosses a link at most once, however many subscribers
  behind it want it.
* Star: one broker at the root site sends each subscriber its entitled fragments directly.
* Point-to-point: the publisher sends each subscriber its entitled fragments directly (the
  same paths as the star without a broker).
* Broadcast: every fragment goes to every subscriber.

The figure is DAG bytes ÷ the best alternative's bytes, with the number of duplicate sends (a
fragment sent twice over one link) in the DAG, which must be 0.
"""

from __future__ import annotations

import random
from collections import Counter

import networkx as nx

from benchmarks.harness import Result, ratio_result
from disseminator.routing import Registration, RoutingTable
from xdn.ontology import Ontology

PUBLISHER = "p"


def _ontology(branching: int, depth: int) -> tuple[Ontology, nx.DiGraph]:
    tree = nx.balanced_tree(branching, depth, create_using=nx.DiGraph)
    mapping = {n: f"C{n}" for n in tree.nodes}
    tree = nx.relabel_nodes(tree, mapping)
    ontology = Ontology.from_edges(
        iri="http://bench.example/onto",
        concepts=list(tree.nodes),
        edges=list(tree.edges),
    )
    return ontology, tree


def _workload(
    ontology: Ontology, tree: nx.DiGraph, *, subscribers: int, documents: int, seed: int
) -> tuple[dict[str, list[str]], list[list[tuple[str, str, int]]], dict[str, str]]:
    rng = random.Random(seed)
    concepts = sorted(ontology.concepts)
    leaves = [c for c in concepts if tree.out_degree(c) == 0]
    # Sites serve every block that has children (the root and the inner concepts).
    sites = {c: c for c in concepts if tree.out_degree(c) > 0}
    grants: dict[str, list[str]] = {}
    home: dict[str, str] = {}
    for i in range(subscribers):
        # Most subscribers want one leaf block, some a whole inner block.
        granted = rng.choice(leaves) if rng.random() < 0.8 else rng.choice(sorted(sites))
        name = f"s{i}"
        grants[name] = sorted(ontology.block(granted))
        home[name] = granted if granted in sites else next(iter(tree.predecessors(granted)))
    docs = []
    for d in range(documents):
        fragments = [
            (f"d{d}#{k}", rng.choice(concepts), rng.randint(200, 4000)) for k in range(60)
        ]
        docs.append(fragments)
    return grants, docs, home


def _dag_bytes(
    tree: nx.DiGraph,
    grants: dict[str, list[str]],
    docs: list[list[tuple[str, str, int]]],
    home: dict[str, str],
) -> tuple[int, int]:
    sites = [c for c in tree.nodes if tree.out_degree(c) > 0]
    root = next(c for c in sites if tree.in_degree(c) == 0)
    regs = {
        s: Registration(subscriber=s, certificate=b"", grants={PUBLISHER: frozenset(g)})
        for s, g in grants.items()
    }
    tables: dict[str, RoutingTable] = {site: RoutingTable() for site in sites}
    for name, site in home.items():
        tables[site].local[name] = regs[name]
    # Each downlink states every member behind it (as the Link protocol does).
    for site in reversed(list(nx.topological_sort(tree.subgraph(sites)))):
        parents = list(tree.predecessors(site))
        if parents:
            tables[parents[0]].set_link_members(site, tables[site].members())
    total, sends = 0, Counter[tuple[str, str]]()
    for fragments in docs:
        sizes = {fid: size for fid, _, size in fragments}
        total += sum(sizes.values())  # publisher → root site
        inbound = {root: [(fid, concept) for fid, concept, _ in fragments]}
        for site in nx.topological_sort(tree.subgraph(sites)):
            arriving = inbound.get(site, [])
            concept_of = dict(arriving)
            for destination, ids in tables[site].plan(PUBLISHER, arriving).items():
                for fid in ids:
                    sends[(f"{site}->{destination.name}", fid)] += 1
                    total += sizes[fid]
                if destination.kind == "link":
                    inbound[destination.name] = [(fid, concept_of[fid]) for fid in ids]
    duplicates = sum(n - 1 for n in sends.values() if n > 1)
    return total, duplicates


def _direct_bytes(
    tree: nx.DiGraph,
    grants: dict[str, list[str]],
    docs: list[list[tuple[str, str, int]]],
    home: dict[str, str],
    *,
    everything: bool,
) -> int:
    """Bytes when each subscriber is served directly from the root site."""
    root = next(c for c in tree.nodes if tree.in_degree(c) == 0)
    depth = nx.single_source_shortest_path_length(tree, root)
    total = 0
    for fragments in docs:
        for name, granted in grants.items():
            wanted = set(granted)
            size = sum(s for _, c, s in fragments if everything or c in wanted)
            total += size * (depth[home[name]] + 1)  # site hops + the last mile
    return total


def run(quick: bool) -> list[Result]:
    ontology, tree = _ontology(branching=4, depth=3)
    grants, docs, home = _workload(
        ontology, tree, subscribers=400 if quick else 2000, documents=20 if quick else 100, seed=7
    )
    dag, duplicates = _dag_bytes(tree, grants, docs, home)
    pub_to_root = sum(s for fragments in docs for _, _, s in fragments)
    star = pub_to_root + _direct_bytes(tree, grants, docs, home, everything=False)
    p2p = _direct_bytes(tree, grants, docs, home, everything=False)
    broadcast = _direct_bytes(tree, grants, docs, home, everything=True)
    best_name, best = min(
        (("star", star), ("point-to-point", p2p), ("broadcast", broadcast)), key=lambda x: x[1]
    )
    sites = sum(1 for c in tree.nodes if tree.out_degree(c) > 0)
    note = (
        f"{len(grants)} subscribers, {sites} sites, {len(docs)} documents x 60 fragments; "
        f"star {star}, p2p {p2p}, broadcast {broadcast} bytes; DAG duplicate sends {duplicates}"
    )
    return [
        ratio_result(
            name="dag_link_bytes_vs_best_alternative",
            value=dag,
            unit="bytes",
            baseline=f"best of star/broadcast/point-to-point ({best_name})",
            baseline_value=best,
            goal="<= 0.5, 0 duplicate sends",
            note=note,
        ),
        ratio_result(
            name="dag_duplicate_sends",
            value=duplicates,
            unit="sends",
            baseline="fragment sends over links",
            baseline_value=max(1, dag),
            goal="0",
        ),
    ]
