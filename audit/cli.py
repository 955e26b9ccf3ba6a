"""``xdn audit LOGDIR... --ca CA.pem --out DIR [--crl CRL.pem…] [--at TIME] [--clock-skew MS]
[--ontology O.owl --policy P.toml…] [--master URL] [cluster options]``."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime
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
    judging = parser.add_argument_group(
        "judging", "certificates are judged at the time each hop was signed (see docs/audit.md)"
    )
    judging.add_argument(
        "--crl",
        action="append",
        default=[],
        type=Path,
        metavar="CRL.pem",
        help="a CRL of the CA, repeatable: a hop signed or a delivery made after a revocation "
        "is a failure",
    )
    judging.add_argument(
        "--at",
        type=_timestamp,
        metavar="TIME",
        help="audit as of TIME (ISO 8601, e.g. 2026-11-01T00:00:00Z): CRLs issued later are "
        "not used (default: now)",
    )
    judging.add_argument(
        "--ontology",
        action="append",
        default=[],
        type=Path,
        metavar="O.owl",
        help="the ontology the policies are written for (repeatable, as `xdn policy check`)",
    )
    judging.add_argument(
        "--policy",
        action="append",
        default=[],
        type=Path,
        metavar="P.toml",
        help="a publisher's signed policy version (its .sig beside it), repeatable: every "
        "version in force during the logs; each delivery is judged by concept under the "
        "version in force then, and every entitled subscriber must have received each "
        "document version",
    )
    judging.add_argument(
        "--clock-skew",
        type=int,
        metavar="MS",
        help="how many ms a hop may be stamped before the hop it wraps (default: 2000)",
    )
    incremental = parser.add_argument_group(
        "incremental audits", "parse each log once: save what this run parsed, start from it next"
    )
    incremental.add_argument(
        "--save-parquet",
        type=Path,
        metavar="DIR",
        help="save every parsed log line of this run (with those of --from-parquet) as Parquet",
    )
    incremental.add_argument(
        "--from-parquet",
        action="append",
        default=[],
        metavar="DIR",
        help="lines an earlier run saved with --save-parquet, audited with the LOGDIRs, which "
        "should then hold only the logs (or rotations) written since (repeatable)",
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


def _timestamp(text: str) -> datetime:
    """``--at``: an ISO 8601 time; one without a zone is UTC."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from None


def _progress(line: str) -> None:
    print(f"audit: {line}", file=sys.stderr, flush=True)


def _run(args: argparse.Namespace) -> int:
    from audit.cluster import SessionOptions, parse_conf  # import pyspark: only when it runs
    from audit.faults import CLOCK_SKEW_MS
    from audit.job import run_audit

    ca_pem = _read(args.ca, "CA certificate")
    crl_pems = [_read(path, "CRL") for path in args.crl]
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
        at=args.at,
        crl_pems=crl_pems,
        clock_skew_ms=CLOCK_SKEW_MS if args.clock_skew is None else args.clock_skew,
        ontology_paths=args.ontology,
        policy_paths=args.policy,
        from_parquet=args.from_parquet,
        save_parquet=args.save_parquet,
    )
    for failure in summary.failures:
        print(
            f"FAILED [{failure.kind or '-'}] {failure.graph or '-'} ({failure.node or '-'}): "
            f"{failure.reason}"
        )
    if (more := summary.failure_count - len(summary.failures)) > 0:
        print(f"… and {more:,} more failure(s): all are in {args.out / 'failures.csv'}")
    print(f"report: {args.out / 'report.html'}")
    return 0 if summary.ok else 1
