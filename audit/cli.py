"""``xdn audit LOGDIR... --ca CA.pem --out DIR [--master URL]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from xdn.errors import UsageError

__all__ = ["register"]


def register(subparsers: Any) -> None:
    """Add the ``audit`` subcommand to an ``argparse`` subparsers object.

    Its ``func(args)`` returns the exit code: 0 when every chain verifies, 1 otherwise.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help="verify provenance logs with Spark and report",
        description="Verify every signature chain in the provenance logs, reconstruct each "
        "fragment's path and write Parquet tables plus report.html.",
    )
    parser.add_argument(
        "logdirs",
        nargs="+",
        metavar="LOGDIR",
        help="log files or directories (local paths or Spark-readable URIs)",
    )
    parser.add_argument(
        "--ca", required=True, type=Path, metavar="CA.pem", help="the network CA certificate"
    )
    parser.add_argument(
        "--out",
        required=True,
        type=Path,
        metavar="DIR",
        help="output directory for tables and report.html",
    )
    parser.add_argument(
        "--master", default="local[*]", metavar="URL", help="Spark master (default: %(default)s)"
    )
    parser.set_defaults(func=_run)


def _progress(line: str) -> None:
    print(f"audit: {line}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from audit.job import run_audit  # imports pyspark: only when the command runs

    try:
        ca_pem = args.ca.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read CA certificate {args.ca}: {exc.strerror}") from None
    summary = run_audit(
        args.logdirs, ca_pem=ca_pem, out_dir=args.out, master=args.master, progress=_progress
    )
    for failure in summary.failures:
        print(f"FAILED {failure.graph or '-'} ({failure.node or '-'}): {failure.reason}")
    print(f"report: {args.out / 'report.html'}")
    return 0 if summary.ok else 1
