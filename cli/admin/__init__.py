"""Administrator subcommands: ``ontology``, ``mapping``, ``policy``, ``provenance``,
``inbox`` and ``generate``.

Each leaf subcommand sets ``func`` to a function of the parsed namespace returning an exit
code. Errors are raised as :class:`~xdn.errors.XdnError` and printed by ``cli.main.main``. Heavy
imports (owlready2, lxml) happen inside the command functions so ``xdn --help`` stays fast.
This is an edge package: it reads files and the clock (when ``--at`` is not given) and runs
Graphviz; the modules it drives stay pure.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from cli.admin import _inbox, _ontology, _policy, _provenance, _site
from cli.admin._common import DEFAULT_ONTOLOGY
from cli.admin._ontology import cmd_mapping_test, cmd_ontology_check, cmd_ontology_show
from cli.admin._policy import (
    cmd_policy_check,
    cmd_policy_diff,
    cmd_policy_explain,
    cmd_policy_sign,
    explain_lines,
)
from xdn.errors import UsageError
from xdn.paths import REPO_ROOT

__all__ = [
    "DEFAULT_ONTOLOGY",
    "REPO_ROOT",
    "cmd_generate",
    "cmd_mapping_test",
    "cmd_ontology_check",
    "cmd_ontology_show",
    "cmd_policy_check",
    "cmd_policy_diff",
    "cmd_policy_explain",
    "cmd_policy_sign",
    "explain_lines",
    "parse_size",
    "register",
]

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(|B|KB|KIB|K|MB|MIB|M|GB|GIB|G)", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    """``"10MB"`` → bytes (K, M, G are powers of 1024; ``KiB`` and ``KB`` alike)."""
    match = _SIZE.fullmatch(text.strip())
    if not match:
        raise UsageError(f"cannot read size {text!r}; write e.g. 512KB, 10MB or 1GB")
    value = float(match.group(1)) * _UNITS[match.group(2)[:1].upper()]
    if value < 1:
        raise UsageError(f"size {text!r} is not positive")
    return int(value)


def register(subparsers: Any) -> None:
    """Add the administrator subcommands to the ``xdn`` parser."""
    _ontology.register(subparsers)
    _policy.register(subparsers)
    _provenance.register(subparsers)
    _inbox.register(subparsers)
    _site.register(subparsers)
    p = subparsers.add_parser("generate", help="generate a realistic enterprise XML document")
    p.add_argument("--schema", choices=("production-dept", "qa-company"), required=True)
    p.add_argument("--size", type=parse_size, default=parse_size("1MB"), help="e.g. 10MB")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fragments", type=int, metavar="N", help="about N mapped elements")
    p.add_argument("--out", type=Path, required=True, metavar="FILE", help="'-' for stdout")
    p.set_defaults(func=cmd_generate)


def cmd_generate(args: argparse.Namespace) -> int:
    """``xdn generate``: write a deterministic document of about ``--size`` bytes."""
    from deploy.docgen import generate

    if args.fragments is not None and args.fragments < 1:
        raise UsageError("--fragments must be positive")
    if str(args.out) == "-":
        generate(
            args.schema, args.size, sys.stdout.buffer, seed=args.seed, fragments_hint=args.fragments
        )
        return 0
    try:
        with args.out.open("wb") as out:
            written = generate(
                args.schema, args.size, out, seed=args.seed, fragments_hint=args.fragments
            )
    except OSError as exc:
        raise UsageError(f"{args.out}: cannot write: {exc.strerror}") from None
    print(f"wrote {written} bytes of {args.schema} XML to {args.out}")
    return 0
