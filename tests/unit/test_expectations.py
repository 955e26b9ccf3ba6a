"""deploy.expectations.read_received: what a subscriber has recorded, read while it writes."""

from __future__ import annotations

import json
from pathlib import Path

from deploy.expectations import read_received


def _line(document: str) -> str:
    return json.dumps({"publisher": "p", "document": document, "fragments": {"x#1": "C"}}) + "\n"


def test_a_line_still_being_written_is_not_read_yet(tmp_path: Path) -> None:
    whole = _line("a")
    (tmp_path / "received.jsonl").write_text(whole + _line("b")[:20])
    (tmp_path / "refused.jsonl").write_text('{"document": "c"}\n{"docu')
    assert read_received(tmp_path) == ({("p", "a"): {"x#1": "C"}}, 1)
    (tmp_path / "received.jsonl").write_text(whole + _line("b"))  # the line finished
    assert set(read_received(tmp_path)[0]) == {("p", "a"), ("p", "b")}


def test_nothing_recorded_yet(tmp_path: Path) -> None:
    assert read_received(tmp_path) == ({}, 0)
