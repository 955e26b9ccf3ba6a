"""What a document's mapping leaves out of every view, counted the same way whether the
publisher streams the document or parses it (issue #20)."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.staging import Staging, read_document
from xdn.codec import can_stream
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

ONTO = REPO_ROOT / "ontology"


@pytest.mark.parametrize(
    ("publisher", "sample"),
    [("production-dept", "production-dept-order.xml"), ("qa-company", "qa-company-report.xml")],
)
def test_streamed_and_parsed_documents_agree(tmp_path: Path, publisher: str, sample: str) -> None:
    mapping = load_mapping(
        ONTO / "mappings" / f"{publisher}.toml", load_ontology([ONTO / "production.owl"])
    )
    staging = Staging(tmp_path / "outgoing")
    parsed = read_document(ONTO / "samples" / sample, mapping, staging, streaming=False)
    assert parsed.unpublished.elements > 0 and parsed.unpublished.attributes > 0
    if can_stream(mapping):
        streamed = read_document(ONTO / "samples" / sample, mapping, staging, streaming=True)
        assert streamed.unpublished == parsed.unpublished


def test_qa_report_counts(tmp_path: Path) -> None:
    mapping = load_mapping(
        ONTO / "mappings" / "qa-company.toml", load_ontology([ONTO / "production.owl"])
    )
    document = read_document(
        ONTO / "samples" / "qa-company-report.xml", mapping, Staging(tmp_path / "o")
    )
    left = document.unpublished
    assert (left.elements, left.attributes) == (8, 5)
    assert left.paths[:4] == (
        "/qa:InspectionReport/@reportId", "/qa:InspectionReport/@issued",
        "/qa:InspectionReport/@language", "/qa:InspectionReport",
    )
