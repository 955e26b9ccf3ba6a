"""The publisher encodes a document into files of its state directory (streamed) or memory
(parsed): the same bytes either way, the files gone once framed or once encoding fails, what a
crash left cleared, and a file that cannot be written a UsageError naming it."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from test_wire_write import CERT, PRODUCTION, concept_keys, deterministic, job_args

from publisher.staging import Body, Staging, read_document
from xdn.errors import UsageError
from xdn.mapping import load_mapping
from xdn.paths import REPO_ROOT
from xdn.wire_write import DisseminationWriter

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
MAPPING = load_mapping(REPO_ROOT / "ontology" / "mappings" / "production-dept.toml", PRODUCTION)


def _staged(
    path: Path, staging: Staging, streaming: bool | None, keys: Callable[[frozenset[str]], Any]
) -> Body:
    document = read_document(path, MAPPING, staging, streaming=streaming)
    encoded = document.encode(**job_args("production-dept", keys(document.concepts), []))
    try:
        return encoded.frame(provenance=b"<p> .\n", publisher_certificate=CERT)
    finally:
        encoded.discard()


def test_staged_documents_are_the_same_bytes_either_way_and_their_files_go(
    tmp_path: Path,
) -> None:
    staging = Staging(tmp_path / "outgoing")
    with deterministic():
        streamed = _staged(SAMPLE, staging, None, lambda c: concept_keys("production-dept", c))
        assert [p.suffix for p in staging.folder.iterdir()] == [".records"]  # (read in place)
        parsed = _staged(SAMPLE, staging, False, lambda c: concept_keys("production-dept", c))
    assert streamed.read(0, len(streamed)) == parsed.read(0, len(parsed))
    assert streamed.read(5, 9) == parsed.read(0, len(parsed))[5:9]
    streamed.delete()
    streamed.delete()  # (again: nothing happens)
    assert not any(staging.folder.iterdir())


def test_an_encoding_that_fails_leaves_no_file(tmp_path: Path) -> None:
    staging = Staging(tmp_path / "outgoing")
    with pytest.raises(UsageError, match="no group key"):
        _staged(SAMPLE, staging, None, lambda c: concept_keys("production-dept", c - {"Material"}))
    assert not any(staging.folder.iterdir())


@pytest.mark.parametrize("step", ["add", "body"])
def test_a_document_that_cannot_be_written_is_a_usage_error(tmp_path: Path, step: str) -> None:
    staging = Staging(tmp_path / "outgoing")
    full = OSError(errno.ENOSPC, "No space left on device")
    with mock.patch.object(DisseminationWriter, step, side_effect=full), pytest.raises(
        UsageError, match=r"cannot write the encoded document .*: No space left on device"
    ):
        _staged(SAMPLE, staging, None, lambda c: concept_keys("production-dept", c))
    assert not any(staging.folder.iterdir())


def test_staging_clears_what_an_earlier_run_left(tmp_path: Path) -> None:
    staging = Staging(tmp_path / "outgoing")
    for name in ("a.records", "b.dissemination"):
        (staging.folder / name).write_bytes(b"left")
    assert Staging(staging.folder).clear() == 2
    assert not any(staging.folder.iterdir())


def test_a_document_gone_between_its_passes_is_not_a_failure_to_write(tmp_path: Path) -> None:
    staging = Staging(tmp_path / "outgoing")
    document = tmp_path / "doc.xml"
    document.write_bytes(SAMPLE.read_bytes())
    read = read_document(document, MAPPING, staging)
    document.unlink()
    with pytest.raises(FileNotFoundError):
        keys = concept_keys("production-dept", read.concepts)
        read.encode(**job_args("production-dept", keys, []))
    assert not any(staging.folder.iterdir())
