"""``xdn disseminator serve``: run one site's disseminator daemon."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


def _serve(args: argparse.Namespace) -> int:
    import asyncio

    from disseminator.config import load_site_config
    from disseminator.daemon import serve
    from xdn.collector import tune_for_service

    config = load_site_config(args.config)
    tune_for_service()
    print(f"site {config.name}: serving block {config.block} (config {args.config})", flush=True)
    report = asyncio.run(serve(config))
    print(f"site {config.name}: stopped; {report.describe()}", flush=True)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn disseminator serve``."""
    parser = subparsers.add_parser(
        "disseminator",
        help="run a site's disseminator daemon",
        description="Disseminators route encrypted fragments down the concept DAG to "
        "authorised subscribers; they enforce policy but can read no content.",
    )
    sub = parser.add_subparsers(dest="disseminator_command", metavar="ACTION", required=True)
    serve = sub.add_parser(
        "serve",
        help="run until SIGTERM/SIGINT",
        description="Serve one site. With listen port 0 the bound port is written to "
        "STATE_DIR/port. Stops gracefully on SIGTERM or Ctrl-C.",
    )
    serve.add_argument(
        "--config", type=Path, required=True,
        help="site TOML (example: deploy/sites/d1.toml; every key: docs/operations.md)",
    )
    serve.set_defaults(func=_serve)
