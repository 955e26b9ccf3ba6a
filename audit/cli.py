"""``xdn audit LOGDIR... --ca CA.pem --out DIR [--master URL] [cluster options]``."""

from __future__ import annotations

import argparse
import os
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
        help="log files or directories (local paths or Spark-readable URIs); in directories "
        "only provenance logs are read (*.nq, *.nq.gz, rotated), other files are skipped",
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
        "--master",
        default="local[*]",
        metavar="URL",
        help="Spark master: local[N], spark://HOST:PORT, yarn, k8s://… (default: %(default)s)",
    )
    cluster = parser.add_argument_group(
        "Spark session",
        "see docs/audit.md for clusters; --executor-python, --driver-memory and --conf apply "
        "when the audit starts Spark, not to a session already running",
    )
    cluster.add_argument(
        "--executor-python",
        default=os.environ.get("PYSPARK_PYTHON", sys.executable),
        metavar="PATH",
        help="Python the executors run; it must have xdn's dependencies installed "
        "(default: $PYSPARK_PYTHON, else this interpreter: %(default)s)",
    )
    cluster.add_argument(
        "--driver-memory",
        metavar="SIZE",
        help="heap of the driver JVM, e.g. 4g (it cannot change a JVM already running)",
    )
    cluster.add_argument(
        "--partitions",
        type=int,
        metavar="N",
        help="shuffle and input partitions (default: the cluster's cores, or one per "
        "64 MiB of logs when that is more)",
    )
    cluster.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any Spark setting, repeatable (e.g. spark.executor.memory=4g, "
        "spark.kubernetes.container.image=…)",
    )
    cluster.add_argument(
        "--progress-every",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="seconds between progress lines on stderr (default: %(default)s)",
    )
    parser.set_defaults(func=_run)


def _progress(line: str) -> None:
    print(f"audit: {line}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from audit.cluster import SessionOptions, parse_conf  # import pyspark: only when it runs
    from audit.job import run_audit

    try:
        ca_pem = args.ca.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read CA certificate {args.ca}: {exc.strerror}") from None
    if args.progress_every <= 0:
        raise UsageError("--progress-every must be positive")
    session = SessionOptions(
        master=args.master,
        executor_python=args.executor_python,
        driver_memory=args.driver_memory,
        partitions=args.partitions,
        conf=parse_conf(args.conf),
    )
    summary = run_audit(
        args.logdirs,
        ca_pem=ca_pem,
        out_dir=args.out,
        session=session,
        progress=_progress,
        progress_every_s=args.progress_every,
    )
    for failure in summary.failures:
        print(f"FAILED {failure.graph or '-'} ({failure.node or '-'}): {failure.reason}")
    print(f"report: {args.out / 'report.html'}")
    return 0 if summary.ok else 1
