"""Both organisations' schemas, samples and mappings; bad mappings and hostile samples fail."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from lxml import etree

from cli import admin as admin_cli
from xdn import xmlsafe
from xdn.errors import HostileXmlError, MappingError
from xdn.mapping import (
    Mapping,
    load_mapping,
    map_document,
    parse_mapping,
    unmapped_elements,
    unpublished,
)
from xdn.ontology import Ontology, load_ontology

REPO = Path(__file__).resolve().parents[2]
ONTO = REPO / "ontology"
SCHEMAS = ("production-dept", "qa-company")
SAMPLES = {"production-dept": "production-dept-order.xml", "qa-company": "qa-company-report.xml"}


@pytest.fixture(scope="session")
def ontology() -> Ontology:
    return load_ontology([ONTO / "production.owl"])


@pytest.fixture(scope="session")
def mappings(ontology: Ontology) -> dict[str, Mapping]:
    return {s: load_mapping(ONTO / "mappings" / f"{s}.toml", ontology) for s in SCHEMAS}


def _sample(schema: str) -> etree._ElementTree:
    return xmlsafe.parse_file(ONTO / "samples" / SAMPLES[schema])


def _local(element: etree._Element) -> str:
    return str(etree.QName(element).localname)


@pytest.mark.parametrize("schema", SCHEMAS)
def test_sample_is_valid_against_its_schema(schema: str) -> None:
    xsd = etree.XMLSchema(etree.parse(str(ONTO / "schemas" / f"{schema}.xsd")))
    tree = _sample(schema)
    assert xsd.validate(tree), xsd.error_log
    assert 2_000 < (ONTO / "samples" / SAMPLES[schema]).stat().st_size < 16_000


def test_mapping_metadata(mappings: dict[str, Mapping]) -> None:
    pd = mappings["production-dept"]
    assert pd.publisher_schema == "production-dept"
    assert dict(pd.namespaces) == {"pd": "urn:example:production-dept"}
    assert pd.ontology_iri == "http://xdn.example.org/ontology/production"
    assert len(pd.concepts) == 13
    assert mappings["qa-company"].namespaces["qa"] == "urn:example:qa-company"


def test_every_concept_appears_across_the_two_samples(
    mappings: dict[str, Mapping], ontology: Ontology
) -> None:
    seen = {n.concept for s in SCHEMAS for n in map_document(_sample(s), mappings[s])}
    assert seen == ontology.concepts


PD_EXPECTED = [  # (element, concept) of the production sample, in document order (first order)
    ("ProcessPlan", "ProductionProcess"),
    ("Order", "WorkOrder"),
    ("Manufacturing", "Production"),
    ("Spec", "ProductSpecification"),
    ("ResourceSpec", "ResourceSpecification"),
    ("Step", "ProductionStep"),
    ("Setting", "MachineSetting"),
    ("Setting", "MachineSetting"),
    ("Step", "ProductionStep"),
]


def test_document_order_and_nesting(mappings: dict[str, Mapping]) -> None:
    tree = _sample("production-dept")
    nodes = map_document(tree, mappings["production-dept"])
    assert [(_local(n.element), n.concept) for n in nodes[: len(PD_EXPECTED)]] == PD_EXPECTED
    positions = [n.element.sourceline for n in nodes]
    assert positions == sorted(positions)
    setting = next(n.element for n in nodes if n.concept == "MachineSetting")
    assert [_local(a) for a in setting.iterancestors()][:3] == ["Step", "Manufacturing", "Order"]
    assert len(nodes) == 25
    assert map_document(tree.getroot(), mappings["production-dept"])[0].element is nodes[0].element


@pytest.mark.parametrize(
    ("schema", "skeleton"),
    [
        ("production-dept", ["WorkOrders", "Header", "Issuer", "Batch", "ExportedBy", "Summary"]),
        (
            "qa-company",
            [
                "InspectionReport",
                "Lab",
                "Name",
                "Accreditation",
                "Contact",
                "Signature",
                "SignedBy",
                "Role",
            ],
        ),
    ],
)
def test_unmapped_elements_are_the_skeleton(
    mappings: dict[str, Mapping], schema: str, skeleton: list[str]
) -> None:
    tree = _sample(schema)
    nodes = map_document(tree, mappings[schema])
    assert [_local(e) for e in unmapped_elements(tree, nodes)] == skeleton


def _parse(text: str, ontology: Ontology) -> Mapping:
    return parse_mapping(text.encode(), ontology, source="m.toml", schema="m")


GOOD_NS = '[namespaces]\npd = "urn:example:production-dept"\n'


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (GOOD_NS + '[concepts]\nInvoice = ["//pd:Order"]\n', r"m\.toml:4: concept 'Invoice'"),
        (
            GOOD_NS + '[concepts]\nWorkOrder = ["//pd:Order["]\n',
            r"m\.toml:4: concept WorkOrder: XPath '//pd:Order\['",
        ),
        (GOOD_NS + '[concepts]\nWorkOrder = ["//zz:Order"]\n', "Undefined namespace prefix"),
        (GOOD_NS + '[concepts]\nWorkOrder = ["count(//pd:Order)"]\n', "does not select elements"),
        (GOOD_NS + "[concepts]\nWorkOrder = []\n", "expected a list of XPath"),
        (GOOD_NS + '[concepts]\nWorkOrder = ["//pd:Order", 3]\n', "is not an XPath"),
        (GOOD_NS + '[concepts]\nWorkOrder = "//pd:Order"\n[extra]\n', "unknown top-level key"),
        ('[namespaces]\n[concepts]\nWorkOrder = ["//Order"]\n', "non-empty table"),
        (GOOD_NS, r"\[concepts\] must be"),
        (GOOD_NS + "[concepts\nWorkOrder = 1\n", r"m\.toml:3: malformed TOML"),
    ],
)
def test_bad_mappings(ontology: Ontology, text: str, message: str) -> None:
    with pytest.raises(MappingError, match=message):
        _parse(text, ontology)


def test_full_iri_and_single_string_are_accepted(ontology: Ontology) -> None:
    iri = "http://xdn.example.org/ontology/production#WorkOrder"
    mapping = _parse(GOOD_NS + f'[concepts]\n"{iri}" = "/pd:WorkOrders/pd:Order"\n', ontology)
    assert [r.concept for r in mapping.rules] == ["WorkOrder"]
    assert len(map_document(_sample("production-dept"), mapping)) == 2


def test_one_element_two_concepts_is_an_error(ontology: Ontology) -> None:
    text = GOOD_NS + '[concepts]\nWorkOrder = ["//pd:Order"]\nProduction = ["/*/pd:Order[1]"]\n'
    with pytest.raises(MappingError, match="Order> at line 15 is mapped to both"):
        map_document(_sample("production-dept"), _parse(text, ontology))


def test_same_concept_twice_is_one_node(ontology: Ontology) -> None:
    text = GOOD_NS + '[concepts]\nWorkOrder = ["//pd:Order", "/pd:WorkOrders/pd:Order"]\n'
    assert len(map_document(_sample("production-dept"), _parse(text, ontology))) == 2


@pytest.mark.parametrize("expr", ["//pd:Order/@id", "//pd:DueDate/text()", "//comment()"])
def test_non_elements_are_refused(ontology: Ontology, expr: str) -> None:
    mapping = _parse(GOOD_NS + f'[concepts]\nWorkOrder = ["{expr}"]\n', ontology)
    with pytest.raises(MappingError, match="only elements can be mapped"):
        map_document(_sample("production-dept"), mapping)


def test_missing_mapping_file(ontology: Ontology, tmp_path: Path) -> None:
    with pytest.raises(MappingError, match=r"nope\.toml: cannot read"):
        load_mapping(tmp_path / "nope.toml", ontology)


def test_map_document_type_check(mappings: dict[str, Mapping]) -> None:
    with pytest.raises(TypeError):
        map_document("<pd:WorkOrders/>", mappings["production-dept"])


HOSTILE = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;">]>
<pd:WorkOrders xmlns:pd="urn:example:production-dept">&lol2;</pd:WorkOrders>"""


def test_hostile_sample_is_refused_by_mapping_test(tmp_path: Path) -> None:
    doc = tmp_path / "evil.xml"
    doc.write_bytes(HOSTILE)
    args = argparse.Namespace(
        doc=doc, mapping=ONTO / "mappings" / "production-dept.toml", ontology=None
    )
    with pytest.raises(HostileXmlError, match=r"evil\.xml"):
        admin_cli.cmd_mapping_test(args)


def test_cli_mapping_test_lists_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(
        doc=ONTO / "samples" / SAMPLES["qa-company"],
        mapping=ONTO / "mappings" / "qa-company.toml",
        ontology=None,
    )
    assert admin_cli.cmd_mapping_test(args) == 0
    out = capsys.readouterr().out
    assert "qa:InspectionReport  not published" in out
    assert "qa:Reading  → Measurement" in out
    assert "14 mapped element(s)\n" in out
    assert (
        "8 element(s) and 5 attribute(s) outside every mapped element are not published (in no "
        "view): /qa:InspectionReport/@reportId, /qa:InspectionReport/@issued, "
        "/qa:InspectionReport/@language, /qa:InspectionReport, /qa:InspectionReport/qa:Lab/@site, "
        "..."
    ) in out
    assert "(no concept)" not in out


def test_unpublished_counts_what_no_view_holds(ontology: Ontology) -> None:
    mapping = parse_mapping(
        b'[namespaces]\nd = "urn:d"\n[concepts]\nWorkOrder = ["/d:r/d:order"]\n', ontology,
        source="t.toml", schema="t",
    )
    tree = etree.fromstring(
        b'<r xmlns="urn:d" plant="HH" v="2"><head a="1"><x/></head>'
        b'<order id="o"><kept k="1"/></order></r>'
    )
    nodes = map_document(tree, mapping)
    left = unpublished(tree, nodes, mapping, first=4)
    assert (left.elements, left.attributes) == (3, 3)  # r, head, x; plant, v, a (not id, k)
    assert left.paths == ("/d:r/@plant", "/d:r/@v", "/d:r", "/d:r/d:head/@a")
    assert left.describe().endswith("/d:r/d:head/@a, ...")
    everything = parse_mapping(
        b'[namespaces]\nd = "urn:d"\n[concepts]\nWorkOrder = ["/d:r"]\n', ontology,
        source="t.toml", schema="t",
    )
    assert not unpublished(tree, map_document(tree, everything), everything)
