"""Replay the fuzz corpus and every past finding through its target (seconds, in `make test`).

The seeds are replayed twice: as committed (signed under a PKI since discarded) and made afresh
under this process's PKI (:func:`fuzz_seeds.all_seeds`), which the signature checks accept.

Each file under ``corpus/<target>/`` and ``regressions/<target>/`` must give what the target
allows: a normal return or one of its typed errors (:mod:`fuzz_targets`). A regression file is
an input a campaign (``make fuzz``) once found crashing; it stays here so the fix stays.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from fuzz_seeds import all_seeds
from fuzz_targets import CORPUS_DIR, REGRESSIONS_DIR, load_all

TARGETS = load_all()
pytestmark = pytest.mark.fuzz


def _inputs() -> list[object]:
    found = []
    for folder in (CORPUS_DIR, REGRESSIONS_DIR):
        for path in sorted(folder.glob("*/*")):
            found.append(
                pytest.param(path, id=f"{path.parent.parent.name}/{path.parent.name}/{path.name}")
            )
    return found


def test_every_target_has_seeds() -> None:
    seeded = {p.name for p in CORPUS_DIR.iterdir() if any(p.iterdir())}
    assert seeded == set(TARGETS)


def test_every_regression_names_a_target() -> None:
    assert {p.name for p in REGRESSIONS_DIR.iterdir()} <= set(TARGETS)


@pytest.mark.parametrize("path", _inputs())
def test_input_gives_a_reply_or_a_typed_error(path: Path) -> None:
    fuzz_target = TARGETS[path.parent.name]
    fuzz_target.setup()
    with contextlib.suppress(fuzz_target.expected):
        fuzz_target.run(path.read_bytes())


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fresh_seeds_give_a_reply_or_a_typed_error(name: str) -> None:
    fuzz_target = TARGETS[name]
    fuzz_target.setup()
    seeds = all_seeds()[name]
    assert seeds
    for data in seeds.values():
        with contextlib.suppress(fuzz_target.expected):
            fuzz_target.run(data)
