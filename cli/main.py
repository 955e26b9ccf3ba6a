"""The ``xdn`` command: the composition root.

The one module that reaches into every package (deploy, disseminator, publisher, subscriber,
audit and this package's own admin and codec commands): each contributes subcommands through a
``register(subparsers)`` function, listed here explicitly. Subcommand modules import their heavy
dependencies (grpc, Spark) inside the command function, so ``xdn --help`` stays fast.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence

from audit import cli as audit_cli
from cli import admin as admin_cli
from cli import codec as codec_cli
from console import cli as console_cli
from deploy import certs_cli, cluster_cli, demo_cli
from disseminator import cli as disseminator_cli
from publisher import cli as publisher_cli
from subscriber import cli as subscriber_cli
from xdn import __version__
from xdn.errors import PeerError, XdnError
from xdn.grpc_fork import disable_grpc_fork_handlers

__all__ = ["main"]

# Order is the order of ``xdn --help``: the story first, then each actor's commands.
_COMMAND_MODULES = (
    demo_cli,
    certs_cli,
    cluster_cli,
    disseminator_cli,
    publisher_cli,
    subscriber_cli,
    admin_cli,
    codec_cli,
    audit_cli,
    console_cli,
)

_DESCRIPTION = """\
xdn: an encrypted XML publish/subscribe dissemination network.

Publishers encrypt each concept-labelled part of an XML document with that concept's group key;
disseminator daemons route the parts to exactly the subscribers a policy authorises, without
being able to read them; subscribers decrypt and verify; every hop signs provenance that
`xdn audit` verifies with Spark.

Start with `xdn demo` (a three-site network on loopback, end to end)."""


class _JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message (and exception)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class _QuietCancelledRequests(logging.Filter):
    """Drop grpc.aio's debug traceback of a request iterator cancelled at shutdown.

    Ending a stream (Ctrl-C, ``xdn unsubscribe``, ``--max-documents``) cancels the iterator that
    writes our side of it; grpc.aio logs that as an exception with a traceback at DEBUG. It is
    the normal way a stream ends, not an error.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name != "grpc.aio._call":
            return True
        # grpc.aio formats the traceback into the message (no exc_info): its last line names
        # the exception.
        text = record.getMessage().rstrip()
        return not (
            text.startswith("Client request_iterator raised exception")
            and text.endswith("CancelledError")
        )


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="xdn", description=_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"xdn {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)"
    )
    parser.add_argument(
        "--log-json", action="store_true", help="structured logs: one JSON object per line"
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in _COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``xdn``; return the process exit code."""
    disable_grpc_fork_handlers()  # before any subcommand loads grpc
    parser = build_parser()
    args = parser.parse_args(argv)
    level = {0: logging.WARNING, 1: logging.INFO}.get(args.verbose, logging.DEBUG)
    handler = logging.StreamHandler()
    handler.setFormatter(
        _JsonFormatter()
        if args.log_json
        else logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s")
    )
    handler.addFilter(_QuietCancelledRequests())
    logging.basicConfig(level=level, handlers=[handler])
    if args.verbose < 2:  # gRPC's own C-core lines (TLS handshakes...) only with -vv
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # a file named on the command line or in a config
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"xdn: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 1
    except PeerError as exc:
        print(f"xdn: refused: {exc}{_hint(exc)}", file=sys.stderr)
        return 2
    except XdnError as exc:
        print(f"xdn: error: {exc}{_hint(exc)}", file=sys.stderr)
        return 1


def _hint(exc: Exception) -> str:
    """What is likely wrong when the error tells of a TLS handshake failed over a certificate
    (a line to add), else nothing."""
    from xdn.grpc_tls import handshake_hint  # (loads grpc: only once something failed)

    hint = handshake_hint(str(exc))
    return "" if hint is None or hint in str(exc) else f"\nxdn: hint: {hint}"


if __name__ == "__main__":
    sys.exit(main())
