"""The production ontology loads into the expected DAG; bad ontology files fail clearly."""

from __future__ import annotations

import argparse
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli import admin as admin_cli
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
    problems = [str(p) for p in check(onto)]
    assert any("containment cycle: B ⊒ C ⊒ B" in p for p in problems), problems
    assert any(p.endswith("orphan concept: Lonely has no super- or sub-concept") for p in problems)


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
    assert not any(p.kind == "cycle" for p in check(onto))


def test_cli_show_prints_tree_and_writes_dot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dot = tmp_path / "o.dot"
    code = admin_cli.cmd_ontology_show(
        argparse.Namespace(ontology=[OWL], dot=dot, svg=None, png=None)
    )
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


# ----------------------------------------------------------------------------- formats

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL_NS = "http://www.w3.org/2002/07/owl#"


def _owlxml(tmp_path: Path, name: str, iri: str, body: str, imports: str = "") -> Path:
    path = tmp_path / name
    path.write_text(
        '<?xml version="1.0"?>\n'
        f'<Ontology xmlns="{OWL_NS}" xml:base="{iri}" ontologyIRI="{iri}">\n'
        f'  <Prefix name="owl" IRI="{OWL_NS}"/>\n'
        f'  <Prefix name="rdfs" IRI="{RDFS}"/>\n'
        f'  <Prefix name="x" IRI="{iri}#"/>\n'
        f"{imports}{body}</Ontology>\n",
        encoding="utf-8",
    )
    return path


def _nt(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("# an N-Triples ontology\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


def _triple(s: str, p: str, o: str) -> str:
    return f"<{s}> <{p}> {o if o.startswith(chr(34)) else f'<{o}>'} ."


def test_owl_xml_loads(tmp_path: Path) -> None:
    iri = "http://x.example/w"
    body = (
        '  <Declaration><Class IRI="#Top"/></Declaration>\n'
        '  <Declaration><Class abbreviatedIRI="x:Mid"/></Declaration>\n'
        f'  <Declaration><Class IRI="{iri}#Leaf"/></Declaration>\n'
        '  <SubClassOf><Class abbreviatedIRI="x:Mid"/><Class IRI="#Top"/></SubClassOf>\n'
        '  <SubClassOf><Class IRI="#Leaf"/><Class IRI="#Mid"/></SubClassOf>\n'
        '  <AnnotationAssertion><AnnotationProperty abbreviatedIRI="rdfs:label"/>'
        '<IRI>#Leaf</IRI><Literal xml:lang="en">A leaf</Literal></AnnotationAssertion>\n'
    )
    onto = load_ontology([_owlxml(tmp_path, "w.owx", iri, body)])
    assert onto.iri == iri
    assert set(onto.graph.edges) == {("Top", "Mid"), ("Mid", "Leaf")}
    assert onto.labels["Leaf"] == "A leaf" and onto.iri_of("Mid") == f"{iri}#Mid"
    assert check(onto) == []
    assert str(onto.locations["Mid"]) == f"{tmp_path / 'w.owx'}:7"
    assert onto.edge_locations[("Mid", "Leaf")].line == 10


def test_n_triples_loads(tmp_path: Path) -> None:
    iri = "http://x.example/n"
    lines = [
        _triple(iri, RDF + "type", OWL_NS + "Ontology"),
        _triple(f"{iri}#A", RDF + "type", OWL_NS + "Class"),
        _triple(f"{iri}#B", RDF + "type", OWL_NS + "Class"),
        _triple(f"{iri}#B", RDFS + "subClassOf", f"{iri}#A"),
        _triple(f"{iri}#B", RDFS + "label", '"Bee"@en'),
        "",
        "# a comment",
    ]
    onto = load_ontology([_nt(tmp_path, "n.nt", lines)])
    assert (onto.iri, set(onto.graph.edges), onto.labels["B"]) == (iri, {("A", "B")}, "Bee")
    assert onto.edge_locations[("A", "B")].line == 5
    sniffed = tmp_path / "n.data"
    sniffed.write_bytes((tmp_path / "n.nt").read_bytes())
    assert set(load_ontology([sniffed]).graph.edges) == {("A", "B")}


def test_imports_across_three_formats(tmp_path: Path) -> None:
    base_ns = "http://x.example/base#"
    base = _owl(tmp_path, _cls("Root", ns=base_ns), name="base.owl", iri="http://x.example/base")
    mid_iri = "http://x.example/mid"
    mid = _owlxml(
        tmp_path,
        "mid.owx",
        mid_iri,
        f'  <Declaration><Class IRI="#Part"/></Declaration>\n'
        f'  <SubClassOf><Class IRI="#Part"/><Class IRI="{base_ns}Root"/></SubClassOf>\n',
        imports="  <Import>http://x.example/base</Import>\n",
    )
    top_iri = "http://x.example/top"
    top = _nt(
        tmp_path,
        "top.nt",
        [
            _triple(top_iri, RDF + "type", OWL_NS + "Ontology"),
            _triple(top_iri, OWL_NS + "imports", mid_iri),
            _triple(f"{top_iri}#Piece", RDF + "type", OWL_NS + "Class"),
            _triple(f"{top_iri}#Piece", RDFS + "subClassOf", f"{mid_iri}#Part"),
        ],
    )
    onto = load_ontology([top, base, mid])
    assert onto.iri == top_iri
    assert set(onto.graph.edges) == {("Root", "Part"), ("Part", "Piece")}
    assert onto.block("Root") == {"Root", "Part", "Piece"}
    assert check(onto) == []
    with pytest.raises(OntologyError, match=r"top\.nt:3: imports http://x\.example/mid"):
        load_ontology([top, base])


def test_import_cycles_and_duplicates_are_refused(tmp_path: Path) -> None:
    a = _owl(
        tmp_path,
        "",
        name="a.owl",
        iri="http://x.example/a",
        imports='<owl:imports rdf:resource="http://x.example/b"/>',
    )
    b = _owl(
        tmp_path,
        "",
        name="b.owl",
        iri="http://x.example/b",
        imports='<owl:imports rdf:resource="http://x.example/a"/>',
    )
    with pytest.raises(OntologyError, match="imports form a cycle"):
        load_ontology([a, b])
    copy = tmp_path / "copy.owl"
    copy.write_bytes(a.read_bytes())
    with pytest.raises(OntologyError, match=r"copy\.owl: ontology http://x\.example/a also in"):
        load_ontology([a, copy])


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.nt", "<http://x.example/n> <p> .\n", r"bad\.nt:1: not an N-Triples statement"),
        ("two.nt", "# no ontology\n", r"two\.nt: expected exactly one owl:Ontology, found 0"),
        ("bin.nt", "\udcff", r"bin\.nt: not UTF-8"),
        (
            "rel.nt",
            f"<rel> <{RDF}type> <{OWL_NS}Ontology> .\n",
            r"rel\.nt:1: ontology has no absolute IRI",
        ),
        (
            "bad.owx",
            f'<Ontology xmlns="{OWL_NS}" ontologyIRI="http://x.example/w">\n'
            '<Declaration><Class abbreviatedIRI="nope:A"/></Declaration></Ontology>',
            r"bad\.owx:2: owlready2 cannot load it",
        ),
    ],
)
def test_bad_files_in_other_formats(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content.encode("utf-8", errors="surrogateescape"))
    with pytest.raises(OntologyError, match=message):
        load_ontology([path])


# ----------------------------------------------------------------------------- check


def test_check_names_file_and_line_for_every_kind(tmp_path: Path) -> None:
    ns = "http://x.example/o#"
    body = "\n".join(
        [
            _cls("Top"),
            _cls("A", "Top"),
            _cls("B", "A", "C"),
            _cls("C", "B"),
            _cls("D", "Typo"),
            _cls("E", "Nothing", ns=OWL_NS).replace(f"{OWL_NS}E", f"{ns}E"),
            _cls("F", "E"),
            _cls("G", "Left", "Right"),
            _cls("Left", "Top") + _cls("Right", "Top"),
            f'<rdf:Description rdf:about="{ns}Left"><owl:disjointWith rdf:resource="{ns}Right"/>'
            "</rdf:Description>",
            _cls("Lonely"),
        ]
    )
    path = _owl(tmp_path, body)
    problems = check(load_ontology([path]))
    by_kind: dict[str, list[str]] = {}
    for problem in problems:
        by_kind.setdefault(problem.kind, []).append(str(problem))
    where = str(path)
    assert by_kind["cycle"] == [f"{where}:9: containment cycle: B ⊒ C ⊒ B"]
    assert by_kind["unknown"] == [
        f"{where}:10: unknown reference: Typo (super-concept of D) is not declared as a class "
        "in any loaded file"
    ]
    assert by_kind["unsatisfiable"] == [
        f"{where}:11: unsatisfiable concept: E is contained in owl:Nothing",
        f"{where}:12: unsatisfiable concept: F is contained in owl:Nothing (via E)",
        f"{where}:13: unsatisfiable concept: G is contained in both Left and Right, which are "
        "disjoint",
    ]
    assert by_kind["orphan"] == [f"{where}:16: orphan concept: Lonely has no super- or sub-concept"]
    assert [p.kind for p in problems] == sorted(
        (p.kind for p in problems),
        key=["cycle", "unknown", "unsatisfiable", "orphan", "roots"].index,
    )


def test_check_all_disjoint_classes(tmp_path: Path) -> None:
    ns = "http://x.example/o#"
    body = (
        _cls("Top")
        + _cls("A", "Top")
        + _cls("B", "Top")
        + _cls("AB", "A", "B")
        + '<owl:AllDisjointClasses><owl:members rdf:parseType="Collection">'
        f'<rdf:Description rdf:about="{ns}A"/><rdf:Description rdf:about="{ns}B"/>'
        "</owl:members></owl:AllDisjointClasses>"
    )
    onto = load_ontology([_owl(tmp_path, body)])
    assert onto.disjoint == {frozenset({"A", "B"})}
    assert [p.message for p in check(onto)] == [
        "unsatisfiable concept: AB is contained in both A and B, which are disjoint"
    ]


def test_several_roots(tmp_path: Path) -> None:
    onto = load_ontology([_owl(tmp_path, _cls("A") + _cls("B", "A") + _cls("C") + _cls("D", "C"))])
    assert [str(p) for p in check(onto)] == ["several root concepts: A, C"]


# ----------------------------------------------------------------------------- rendering


def test_svg_is_a_layered_drawing(ontology: Ontology) -> None:
    from lxml import etree

    from xdn.ontology import svg_text

    svg = etree.fromstring(svg_text(ontology).encode())
    ns = {"s": "http://www.w3.org/2000/svg"}
    boxes = {t.get("data-concept"): float(t.get("y", "0")) for t in svg.iterfind(".//s:text", ns)}
    assert set(boxes) == ontology.concepts
    assert len(svg.findall(".//s:path[@marker-end]", ns)) == ontology.graph.number_of_edges()
    for parent, child in ontology.graph.edges:  # every child drawn below its parents
        assert boxes[child] > boxes[parent]
    assert boxes["ResourceSpecification"] > boxes["ProductSpecification"]


def test_svg_of_a_cyclic_ontology_still_renders(tmp_path: Path) -> None:
    from xdn.ontology import svg_text

    onto = load_ontology([_owl(tmp_path, _cls("A") + _cls("B", "A", "C") + _cls("C", "B"))])
    text = svg_text(onto)
    assert text.count("<rect") == 3 and 'stroke-dasharray="4 3"' in text


def test_public_api_is_pinned() -> None:
    import xdn.ontology

    assert sorted(xdn.ontology.__all__) == [
        "Location",
        "Ontology",
        "Problem",
        "ProblemKind",
        "check",
        "dot_text",
        "load_ontology",
        "local_name",
        "svg_text",
        "tree_lines",
    ]
    for name in xdn.ontology.__all__:
        assert getattr(xdn.ontology, name) is not None
