"""Generated documents are valid, mappable, deterministic, streamed and about the right size."""

from __future__ import annotations

import argparse
import io
from pathlib import Path
from typing import BinaryIO, cast

import pytest
from lxml import etree

from cli import admin as admin_cli
from deploy.docgen import MAX_TEXT_PIECE, SCHEMAS, generate
from xdn import xmlsafe
from xdn.errors import UsageError
from xdn.mapping import Mapping, load_mapping, map_document
from xdn.ontology import Ontology, load_ontology

ONTO = Path(__file__).resolve().parents[2] / "ontology"


@pytest.fixture(scope="session")
def ontology() -> Ontology:
    return load_ontology([ONTO / "production.owl"])


@pytest.fixture(scope="session")
def schemas() -> dict[str, etree.XMLSchema]:
    return {s: etree.XMLSchema(etree.parse(str(ONTO / "schemas" / f"{s}.xsd"))) for s in SCHEMAS}


@pytest.fixture(scope="session")
def mappings(ontology: Ontology) -> dict[str, Mapping]:
    return {s: load_mapping(ONTO / "mappings" / f"{s}.toml", ontology) for s in SCHEMAS}


def _make(schema: str, size: int, seed: int = 1, hint: int | None = None) -> bytes:
    out = io.BytesIO()
    written = generate(schema, size, out, seed=seed, fragments_hint=hint)
    assert written == len(out.getvalue())
    return out.getvalue()


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("size", [1, 1024, 10_000, 200_000, 2_000_000])
def test_valid_mappable_and_sized(
    schema: str, size: int, schemas: dict[str, etree.XMLSchema], mappings: dict[str, Mapping]
) -> None:
    data = _make(schema, size)
    tree = xmlsafe.parse_bytes(data, source=f"{schema}-{size}")
    assert schemas[schema].validate(tree), schemas[schema].error_log
    nodes = map_document(tree, mappings[schema])
    assert nodes
    if size >= 10_000:
        assert size <= len(data) <= size + 8_192
        assert {n.concept for n in nodes} == mappings[schema].concepts
    else:
        assert len(data) <= 4_096


@pytest.mark.parametrize("schema", SCHEMAS)
def test_deterministic_per_seed(schema: str) -> None:
    assert _make(schema, 30_000, seed=5) == _make(schema, 30_000, seed=5)
    assert _make(schema, 30_000, seed=5) != _make(schema, 30_000, seed=6)


@pytest.mark.parametrize("schema", SCHEMAS)
@pytest.mark.parametrize("hint", [40, 400])
def test_fragments_hint_steers_fragment_count(
    schema: str, hint: int, mappings: dict[str, Mapping], schemas: dict[str, etree.XMLSchema]
) -> None:
    data = _make(schema, 1_000_000, hint=hint)
    tree = xmlsafe.parse_bytes(data)
    assert schemas[schema].validate(tree), schemas[schema].error_log
    count = len(map_document(tree, mappings[schema]))
    assert hint / 2 <= count <= hint * 2, count
    plain = len(map_document(xmlsafe.parse_bytes(_make(schema, 1_000_000)), mappings[schema]))
    assert count < plain / 5
    assert max(len(e.text or "") for e in tree.iter()) <= MAX_TEXT_PIECE


class _Recorder(io.RawIOBase):
    def __init__(self) -> None:
        self.sizes: list[int] = []

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.sizes.append(len(data))
        return len(data)


def test_output_is_streamed_in_small_writes() -> None:
    recorder = _Recorder()
    total = generate("production-dept", 3_000_000, cast(BinaryIO, recorder), seed=2)
    assert sum(recorder.sizes) == total
    assert max(recorder.sizes) < 300_000
    assert len(recorder.sizes) > 10


@pytest.mark.parametrize(
    ("schema", "size", "hint"),
    [("invoices", 1000, None), ("qa-company", 0, None), ("qa-company", 1000, 0)],
)
def test_bad_arguments(schema: str, size: int, hint: int | None) -> None:
    with pytest.raises(ValueError):
        generate(schema, size, io.BytesIO(), seed=0, fragments_hint=hint)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("512", 512),
        ("1KB", 1024),
        ("10MB", 10 * 1024**2),
        ("1.5 GiB", 3 * 1024**3 // 2),
        ("2k", 2048),
        ("7b", 7),
    ],
)
def test_parse_size(text: str, value: int) -> None:
    assert admin_cli.parse_size(text) == value


@pytest.mark.parametrize("text", ["", "MB", "-1KB", "10 TB", "0"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(UsageError):
        admin_cli.parse_size(text)


def test_cli_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "doc.xml"
    args = argparse.Namespace(schema="qa-company", size=50_000, seed=9, fragments=None, out=out)
    assert admin_cli.cmd_generate(args) == 0
    assert out.read_bytes() == _make("qa-company", 50_000, seed=9)
    assert f"to {out}" in capsys.readouterr().out
