"""``xdn site resolve NAME|URI --via URL``: where a site's HTTPS endpoint is, and why to believe it.

(``xdn site status`` and ``xdn site subscribers`` are in :mod:`cli.admin._site_status`.)

A node URI (``https://NAME.xdn.example/``) is a name, not an address. Any site's endpoint
answers ``GET /nodes/NAME`` with NAME's signed DHT record as it finds it; this command checks
that record here — signed by NAME under a site certificate of the network CA, live — and
prints what it says (:func:`deploy.web_client.resolve`). A site that answers a forged,
altered, stale or someone else's record is refused with the reason, so the site asked is
trusted with nothing. The other commands that take ``--via`` resolve the same way.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cli.admin import _site_status
from deploy.web_client import WebClient, node_name, resolve
from xdn.errors import UsageError

__all__ = ["cmd_site_resolve", "register"]


def register(subparsers: Any) -> None:
    """Add ``site`` and its actions."""
    group = subparsers.add_parser(
        "site", help="a site's status and subscribers; find a site's endpoint (DHT record)",
        description="Sites of the network, as their signed DHT records describe them.",
    )
    sub = group.add_subparsers(dest="site_command", metavar="ACTION", required=True)
    p = sub.add_parser(
        "resolve", help="where a site's HTTPS endpoint is: its DHT record, checked here",
        description="Ask any site's endpoint (--via) for a site's signed DHT record, check it "
        "against the network CA (signature, certificate, name, expiry) and print where the "
        "site's HTTPS endpoint and gRPC port are. A forged or someone else's record is "
        "refused.",
    )
    p.add_argument("site", metavar="NAME|URI",
                   help="the site's name, or a node URI of it (https://NAME.xdn.example/…)")
    p.add_argument("--via", required=True, metavar="URL",
                   help="any site's HTTPS endpoint, e.g. https://127.0.0.1:8443/")
    p.add_argument("--name", required=True, help="your certificate's name (NAME.pem)")
    p.add_argument("--certs", type=Path, required=True,
                   help="directory with NAME.pem, NAME.key and the network's ca.pem")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(func=cmd_site_resolve)
    _site_status.register_actions(sub)


def cmd_site_resolve(args: argparse.Namespace) -> int:
    """``xdn site resolve``: the checked record, for a person (or ``--json``)."""
    name = node_name(args.site)
    try:
        ca_pem = (args.certs / "ca.pem").read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {args.certs / 'ca.pem'}: {exc.strerror}") from None
    via = WebClient(args.via, certs=args.certs, name=args.name)
    found = resolve(via, name, ca_pem=ca_pem, now=datetime.now(UTC))
    if args.json:
        print(json.dumps({
            "site": found.site, "endpoint": found.endpoint, "address": found.address,
            "block": found.block, "issued": found.issued.isoformat(),
            "expires": found.expires.isoformat(), "certificate_serial": f"{found.serial:x}",
            "via": found.via,
        }, indent=2))
        return 0
    print(f"site {found.site} (https://{found.site}.xdn.example/)")
    print(f"  linked data: {found.endpoint} (inbox {found.endpoint}inbox/)")
    print(f"  gRPC: {found.address}")
    print(f"  block: {found.block}")
    print(f"  record: issued {found.issued:%Y-%m-%d %H:%M:%S}Z, expires "
          f"{found.expires:%Y-%m-%d %H:%M:%S}Z")
    print(f"  checked: signed by {found.site} under its site certificate (serial "
          f"{found.serial:x}), issued by the network CA; found through {found.via}")
    return 0
