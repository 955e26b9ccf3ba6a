"""The console's public names, and what registering ``xdn console`` loads (nothing heavy)."""

from __future__ import annotations

import subprocess
import sys

import console


def test_every_public_name_resolves_and_nothing_else_does() -> None:
    assert sorted(console.__all__) == sorted(set(console.__all__))
    for name in console.__all__:
        assert getattr(console, name).__module__.startswith("console._"), name
    try:
        console.nothing_here  # noqa: B018
    except AttributeError as exc:
        assert "no attribute 'nothing_here'" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_registering_the_command_loads_neither_grpc_nor_aiohttp() -> None:
    probe = (
        "import sys, console.cli; "
        "print(sorted(m for m in ('grpc', 'aiohttp', 'owlready2') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"
