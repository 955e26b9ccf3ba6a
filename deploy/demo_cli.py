"""``xdn demo``: run the whole story on loopback and check it."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def _summarise(result: object) -> None:
    from rich.console import Console
    from rich.table import Table

    from deploy.demo import DemoResult

    assert isinstance(result, DemoResult)
    table = Table(title="What each subscriber may see vs what it received")
    for column in ("subscriber", "documents", "fragments", "concepts", "unexpected",
                   "refused", "check"):
        table.add_column(column)
    for check in result.checks:
        allowed = {c for d in check.expected.values() for c in d.values()}
        received = {c for d in check.received.values() for c in d.values()}
        unexpected = sorted(received - allowed)
        table.add_row(
            check.subscriber,
            f"{len(check.received)}/{len(check.expected)}",
            f"{sum(map(len, check.received.values()))}/{sum(map(len, check.expected.values()))}",
            f"{len(received & allowed)}/{len(allowed)}",
            ", ".join(unexpected) or "none",
            str(check.refused),
            "[green]exact[/green]" if check.ok else "[red]MISMATCH[/red]",
        )
    console = Console()
    console.print(table)
    for check in result.checks:
        names = sorted({c for d in check.expected.values() for c in d.values()})
        console.print(f"{check.subscriber} may see: {', '.join(names)}")
    linked = "[green]ok[/green]" if result.linked_data_ok else "[red]FAILED[/red]"
    console.print(f"linked data (a message URI dereferenced, the publisher site's inbox): {linked}")
    verdict = "[green]all chains verified[/green]" if result.audit_ok else "[red]FAILED[/red]"
    console.print(f"audit: {verdict} — report {result.report}")


def _demo(args: argparse.Namespace) -> int:
    from deploy.demo import run_demo

    result = run_demo(args.workdir, audit=not args.no_audit, master=args.master)
    _summarise(result)
    print("demo: OK" if result.ok else "demo: FAILED (see the table above)")
    return 0 if result.ok else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn demo``."""
    parser = subparsers.add_parser(
        "demo",
        help="run a three-site network on loopback end to end and check it",
        description="Creates a PKI, starts three disseminators and two subscribers as real "
        "processes, publishes both organisations' documents, checks each subscriber received "
        "exactly what its policy allows, and audits all provenance with Spark.",
    )
    parser.add_argument(
        "--workdir", type=Path, default=Path("build/demo"), help="wiped and rebuilt (build/demo)"
    )
    parser.add_argument("--no-audit", action="store_true", help="skip the Spark audit")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    parser.set_defaults(func=_demo)
