"""The house keeps its floors: imports point one way, and the core parses no arguments.

Read from the source (``ast``), so a lazy import inside a function counts as much as one at the
top of a module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from xdn.paths import REPO_ROOT

EDGES = ("cli", "deploy", "disseminator", "publisher", "subscriber", "audit", "console")
# Each actor's package builds on the core only, never on another actor's package.
ACTORS = ("disseminator", "publisher", "subscriber", "audit")


def imports(package: str) -> Iterator[tuple[Path, int, str]]:
    """(file, line, imported top-level name) for every import in ``package``'s modules."""
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield path, node.lineno, alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield path, node.lineno, node.module.split(".")[0]


def where(found: list[tuple[Path, int, str]]) -> list[str]:
    return [f"{path.relative_to(REPO_ROOT)}:{line} imports {name}" for path, line, name in found]


def test_the_core_imports_no_edge_package_and_parses_no_arguments() -> None:
    found = [hit for hit in imports("xdn") if hit[2] in (*EDGES, "argparse")]
    assert where(found) == []


def test_the_core_prints_nothing() -> None:
    calls = []
    for path in sorted((REPO_ROOT / "xdn").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        calls += [
            f"{path.relative_to(REPO_ROOT)}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        ]
    assert calls == []


@pytest.mark.parametrize("actor", ACTORS)
def test_an_actor_builds_on_the_core_not_on_another_actor(actor: str) -> None:
    others = set(EDGES) - {actor}
    found = [hit for hit in imports(actor) if hit[2] in others]
    assert where(found) == []


def test_the_command_line_registers_its_subcommands_explicitly() -> None:
    """No ``import_module`` by string: the import graph shows every subcommand."""
    text = (REPO_ROOT / "cli" / "main.py").read_text(encoding="utf-8")
    assert "import_module" not in text and "__import__" not in text
    from cli import main

    registered = {module.__name__ for module in main._COMMAND_MODULES}
    assert {"cli.admin", "cli.codec", "deploy.demo_cli", "audit.cli"} <= registered
