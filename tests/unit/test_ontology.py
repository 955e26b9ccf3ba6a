"""The production ontology loads into the expected DAG; bad ontology files fail clearly."""

from __future__ import annotations

import argparse
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import admin_cli
from xdn.errors import OntologyError
from xdn.ontology import Ontology, check, load_ontology, local_name

REPO = Path(__file__).resolve().parents[2]
OWL = REPO / "ontology" / "production.owl"
IRI = "http://xdn.example.org/ontology/production"

# child ⊑ parent, exactly as agreed with the other engineers.
EXPECTED_EDGES = {
    ("ProductionProcess", "WorkOrder"),
    ("ProductionProcess", "ResourceDetails"),
    ("WorkOrder", "Production"),
    ("WorkOrder", "QualityInspection"),
    ("Production", "ProductionStep"),
    ("ProductionStep", "MachineSetting"),
    ("Production", "ProductSpecification"),
    ("QualityInspection", "InspectionResult"),
    ("InspectionResult", "Measurement"),
    ("ResourceDetails", "Machine"),
    ("ResourceDetails", "Material"),
    ("ResourceDetails", "ResourceSpecification"),
    ("ProductSpecification", "ResourceSpecification"),
}


@pytest.fixture(scope="session")
def ontology() -> Ontology:
    return load_ontology([OWL])


def test_iri_concepts_and_edges(ontology: Ontology) -> None:
    assert ontology.iri == IRI
    assert set(ontology.graph.edges) == EXPECTED_EDGES
    assert ontology.concepts == {c for edge in EXPECTED_EDGES for c in edge}
    assert len(ontology.concepts) == 13
    assert ontology.roots() == {"ProductionProcess"}
    assert ontology.iri_of("WorkOrder") == f"{IRI}#WorkOrder"
    assert ontology.labels["MachineSetting"] == "Machine setting"
    assert check(ontology) == []


@pytest.mark.parametrize(
    ("concept", "block"),
    [
        (
            "WorkOrder",
            {
                "WorkOrder",
                "Production",
                "QualityInspection",
                "ProductionStep",
                "MachineSetting",
                "ProductSpecification",
                "ResourceSpecification",
                "InspectionResult",
                "Measurement",
            },
        ),
        ("ResourceDetails", {"ResourceDetails", "Machine", "Material", "ResourceSpecification"}),
        ("QualityInspection", {"QualityInspection", "InspectionResult", "Measurement"}),
        (
            "Production",
            {
                "Production",
                "ProductionStep",
                "MachineSetting",
                "ProductSpecification",
                "ResourceSpecification",
            },
        ),
        ("Measurement", {"Measurement"}),
        ("ResourceSpecification", {"ResourceSpecification"}),
    ],
)
def test_maximum_conceptual_blocks(ontology: Ontology, concept: str, block: set[str]) -> None:
    assert ontology.block(concept) == block
    assert ontology.descendants(concept) == block - {concept}


def test_two_parents_and_navigation(ontology: Ontology) -> None:
    assert ontology.parents("ResourceSpecification") == {"ResourceDetails", "ProductSpecification"}
    assert ontology.children("ProductionProcess") == {"WorkOrder", "ResourceDetails"}
    assert ontology.contains("WorkOrder", "ResourceSpecification")
    assert ontology.contains("ResourceDetails", "ResourceSpecification")
    assert ontology.contains("Machine", "Machine")
    assert not ontology.contains("Machine", "ResourceDetails")
    assert not ontology.contains("QualityInspection", "Production")
    assert ontology.path("WorkOrder", "Measurement") == (
        "WorkOrder",
        "QualityInspection",
        "InspectionResult",
        "Measurement",
    )
    assert ontology.path("Machine", "WorkOrder") == ()
    assert ontology.resolve(f"{IRI}#Machine") == "Machine"
    assert ontology.resolve("Nope") is None


def test_unknown_concept_is_an_ontology_error(ontology: Ontology) -> None:
    with pytest.raises(OntologyError, match="unknown concept 'Invoice'"):
        ontology.block("Invoice")


def test_each_load_uses_its_own_world() -> None:
    import owlready2

    before = len(list(owlready2.default_world.ontologies))
    first, second = load_ontology([OWL]), load_ontology([OWL])
    assert first is not second and first.concepts == second.concepts
    assert len(list(owlready2.default_world.ontologies)) == before


def _owl(
    tmp_path: Path,
    body: str,
    name: str = "o.owl",
    iri: str = "http://x.example/o",
    imports: str = "",
) -> Path:
    path = tmp_path / name
    path.write_text(
        '<?xml version="1.0"?>\n'
        '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"\n'
        '  xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"\n'
        '  xmlns:owl="http://www.w3.org/2002/07/owl#">\n'
        f'<owl:Ontology rdf:about="{iri}">{imports}</owl:Ontology>\n{body}\n</rdf:RDF>\n',
        encoding="utf-8",
    )
    return path


def _cls(name: str, *parents: str, ns: str = "http://x.example/o#") -> str:
    subs = "".join(f'<rdfs:subClassOf rdf:resource="{ns}{p}"/>' for p in parents)
    return f'<owl:Class rdf:about="{ns}{name}">{subs}</owl:Class>'


def test_cycle_and_orphan_load_but_check_reports_them(tmp_path: Path) -> None:
    body = _cls("A") + _cls("B", "A", "C") + _cls("C", "B") + _cls("Lonely")
    onto = load_ontology([_owl(tmp_path, body)])
    problems = check(onto)
    assert any(p.startswith("containment cycle: B ⊑ C ⊑ B") for p in problems), problems
    assert "orphan concept: Lonely has no super- or sub-concept" in problems


def test_imports_resolve_among_given_files_only(tmp_path: Path) -> None:
    base_ns = "http://x.example/base#"
    base = _owl(tmp_path, _cls("Root", ns=base_ns), name="base.owl", iri="http://x.example/base")
    ext_body = _cls("Leaf", "Root", ns=base_ns).replace(
        f"{base_ns}Leaf", "http://x.example/ext#Leaf"
    )
    ext = _owl(
        tmp_path,
        ext_body,
        name="ext.owl",
        iri="http://x.example/ext",
        imports='<owl:imports rdf:resource="http://x.example/base"/>',
    )
    onto = load_ontology([ext, base])  # imported file listed after the importer
    assert onto.iri == "http://x.example/ext"
    assert set(onto.graph.edges) == {("Root", "Leaf")}
    with pytest.raises(OntologyError, match=r"ext\.owl: imports http://x\.example/base"):
        load_ontology([ext])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'>", "malformed XML"),
        ('<?xml version="1.0"?><!DOCTYPE rdf:RDF [<!ENTITY a "b">]><rdf:RDF/>', "DTDs"),
        ("<html/>", "neither rdf:RDF nor owl:Ontology"),
        (
            "<rdf:RDF xmlns:rdf='http://www.w3.org/1999/02/22-rdf-syntax-ns#'/>",
            "exactly one owl:Ontology",
        ),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "broken.owl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(OntologyError, match=message) as info:
        load_ontology([path])
    assert "broken.owl" in str(info.value)


def test_missing_file_and_empty_list(tmp_path: Path) -> None:
    with pytest.raises(OntologyError, match=r"missing\.owl"):
        load_ontology([tmp_path / "missing.owl"])
    with pytest.raises(OntologyError, match="no ontology file"):
        load_ontology([])


def test_duplicate_local_names_are_refused(tmp_path: Path) -> None:
    body = _cls("Item") + _cls("Item", ns="http://other.example/x#")
    with pytest.raises(OntologyError, match="share the id Item"):
        load_ontology([_owl(tmp_path, body)])


def test_local_name() -> None:
    assert local_name("http://a.example/o#C") == "C"
    assert local_name("http://a.example/o/C") == "C"


@st.composite
def dags(draw: st.DrawFn) -> Ontology:
    n = draw(st.integers(min_value=1, max_value=12))
    names = [f"C{i}" for i in range(n)]
    edges = draw(
        st.sets(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]),
            max_size=30,
        )
    )
    return Ontology.from_edges(
        iri="http://x.example/h", concepts=names, edges=[(names[a], names[b]) for a, b in edges]
    )


@given(dags())
def test_block_is_reflexive_transitive_closure(onto: Ontology) -> None:
    for c in onto.concepts:
        assert onto.block(c) == {c} | nx.descendants(onto.graph, c)
        for d in onto.block(c):
            assert onto.contains(c, d)
            assert onto.block(d) <= onto.block(c)
            assert onto.path(c, d)[0] == c and onto.path(c, d)[-1] == d
    assert not any(p.startswith("containment cycle") for p in check(onto))


def test_cli_show_prints_tree_and_writes_dot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dot = tmp_path / "o.dot"
    code = admin_cli.cmd_ontology_show(argparse.Namespace(ontology=[OWL], dot=dot))
    out = capsys.readouterr().out.splitlines()
    assert code == 0
    assert out[1] == "ProductionProcess — Production process"
    assert "        MachineSetting — Machine setting" in out
    assert sum("ResourceSpecification" in line for line in out) == 2
    text = dot.read_text(encoding="utf-8")
    assert text.startswith("digraph ontology {") and '"ProductSpecification" -> ' in text
    assert text.count("->") == len(EXPECTED_EDGES)


def test_cli_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert admin_cli.cmd_ontology_check(argparse.Namespace(ontology=[OWL])) == 0
    bad = _owl(tmp_path, _cls("A") + _cls("B", "A") + _cls("Lonely"))
    assert admin_cli.cmd_ontology_check(argparse.Namespace(ontology=[bad])) == 1
    assert "orphan concept: Lonely" in capsys.readouterr().out
