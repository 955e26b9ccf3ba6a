"""Leaf order: every maximum conceptual block is as few runs of leaves as possible."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn.codec import concept_order
from xdn.codec._order import leaf_sort_key
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT


def runs(order: tuple[str, ...], block: frozenset[str]) -> int:
    flags = [c in block for c in order]
    return sum(1 for before, now in itertools.pairwise([False, *flags]) if now and not before)


def test_every_block_of_the_shipped_ontology_is_one_run() -> None:
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    order = concept_order(ontology)
    assert sorted(order) == sorted(ontology.concepts)
    assert ontology.parents("ResourceSpecification") == {"ProductSpecification", "ResourceDetails"}
    for concept in ontology.concepts:
        assert runs(order, ontology.block(concept)) == 1, concept
    assert concept_order(ontology) == order  # deterministic


def test_a_tree_is_ordered_depth_first() -> None:
    tree = Ontology.from_edges(
        iri="urn:t",
        concepts=["R"],
        edges=[("R", "B"), ("R", "A"), ("A", "A2"), ("A", "A1"), ("B", "B1")],
    )
    order = concept_order(tree)
    assert order == ("R", "A", "A1", "A2", "B", "B1")


def test_a_dag_without_a_perfect_order_still_orders_everything() -> None:
    # X is under three parents that share nothing else: no order makes every block one run.
    dag = Ontology.from_edges(
        iri="urn:d",
        concepts=["R"],
        edges=[("R", "P"), ("R", "Q"), ("R", "S"), ("P", "X"), ("Q", "X"), ("S", "X"),
               ("P", "P1"), ("Q", "Q1"), ("S", "S1")],
    )  # fmt: skip
    order = concept_order(dag)
    assert sorted(order) == sorted(dag.concepts)
    total = sum(runs(order, dag.block(c)) for c in dag.concepts)
    assert total <= len(dag.concepts) + 1  # one extra run at most: P, Q and S cannot all touch X


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_random_forests_give_one_run_per_block(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 40), label="size")
    parents = [data.draw(st.integers(-1, i - 1), label=f"parent-{i}") for i in range(size)]
    names = [f"c{i:02d}" for i in range(size)]
    edges = [(names[p], names[i]) for i, p in enumerate(parents) if p >= 0]
    forest = Ontology.from_edges(iri="urn:f", concepts=names, edges=edges)
    order = concept_order(forest)
    assert sorted(order) == names
    for concept in names:
        assert runs(order, forest.block(concept)) == 1


def test_leaf_sort_key_lists_unknown_concepts_last_by_name() -> None:
    key = leaf_sort_key(["B", "A"])
    leaves = [("A", 4), ("Z", 0), ("B", 9), ("C", 1), ("A", 2)]
    assert sorted(leaves, key=lambda leaf: key(*leaf)) == [
        ("B", 9),
        ("A", 2),
        ("A", 4),
        ("C", 1),
        ("Z", 0),
    ]
    with pytest.raises(TypeError):
        leaf_sort_key("AB")
    with pytest.raises(ValueError):
        leaf_sort_key(["A", "A"])
