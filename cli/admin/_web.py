"""The command line's side of a site's linked-data endpoint: ``--web``/``--via``, ``--certs``,
``--name`` and the client they name (:mod:`deploy.web_client`)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from deploy.web_client import DEFAULT_MAX_BYTES, WebClient, node_name, resolve
from xdn.errors import UsageError

__all__ = ["client_for", "web_args"]


def web_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add ``--web`` or ``--via``, ``--certs`` and ``--name`` (who asks, and where)."""
    where = parser.add_mutually_exclusive_group(required=required)
    where.add_argument(
        "--web", metavar="URL",
        help="the HTTPS endpoint of the site to ask, e.g. https://127.0.0.1:8443/ (xdn cluster "
        "status prints it); a node URI's path is asked there",
    )
    where.add_argument(
        "--via", metavar="URL",
        help="any site's HTTPS endpoint: the site a node URI names is found through it (its "
        "DHT record, signed by that site and checked here against the CA) and asked at its own "
        "endpoint",
    )
    parser.add_argument("--name", required=required, help="your certificate's name (NAME.pem)")
    parser.add_argument(
        "--certs", type=Path, required=required,
        help="directory with NAME.pem, NAME.key and the network's ca.pem",
    )


def client_for(args: argparse.Namespace, node: str | None, *, quiet: bool = False) -> WebClient:
    """The client to ask about ``node`` (a node URI or a site name; ``None``: the site asked):
    at ``--web``, or at the endpoint of ``node`` resolved through ``--via`` (said on stderr
    unless ``quiet``)."""
    if not (args.certs and args.name and (args.web or args.via)):
        raise UsageError("give --web (or --via), --certs and --name")
    max_bytes = getattr(args, "max_bytes", DEFAULT_MAX_BYTES)
    if args.web:
        return WebClient(args.web, certs=args.certs, name=args.name, max_bytes=max_bytes)
    via = WebClient(args.via, certs=args.certs, name=args.name, max_bytes=max_bytes)
    if node is None:
        return via
    name = node_name(node)
    try:
        ca_pem = (args.certs / "ca.pem").read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.certs / 'ca.pem'}: {exc.strerror}") from None
    found = resolve(via, name, ca_pem=ca_pem, now=datetime.now(UTC))
    if not quiet:
        print(f"xdn: {found.describe()}", file=sys.stderr)
    return WebClient(found.endpoint, certs=args.certs, name=args.name, max_bytes=max_bytes,
                     server=name)
