"""``xdn site status|subscribers --connect HOST:PORT``: what a site says of itself.

Both ask the site's ``xdn.wire.v1.Admin`` service through :mod:`deploy.site_admin` over mutual
TLS with the certificate named by ``--certs``/``--name``; the site decides what that
certificate may see (a site, an auditor or an admin: everything; a publisher: its policy
version and subscriber count; a subscriber: its own row — see :mod:`disseminator.admin`). A
refusal is printed as the site gave it (exit 2). ``status`` prints a summary with the first
``--limit`` subscribers; ``status --tree`` the site and every site below it
(:mod:`cli.admin._site_tree`); ``subscribers`` prints one page (``--limit``, ``--after``) and
the ``--after`` of the next. ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdn.errors import UsageError

if TYPE_CHECKING:
    from deploy.site_admin import SiteReport, SubscriberState

__all__ = [
    "cmd_site_status",
    "cmd_site_subscribers",
    "register_actions",
    "status_json",
    "subscriber_json",
]


def register_actions(sub: Any) -> None:
    """Add ``status`` and ``subscribers`` to ``xdn site``."""
    p = sub.add_parser(
        "status",
        help="a site's block, uplink, downlinks, subscribers, policies, DHT neighbours",
        description="Ask a site (its gRPC port) for its status: block, uplink, downlinks, "
        "subscribers with their grants and queue depths (the first --limit), policy versions "
        "in force and DHT neighbours. A site, auditor or admin certificate sees everything; a "
        "publisher its own policy version and subscriber count; a subscriber is refused. "
        "--tree: the site and every site below it, each asked at the address its uplink "
        "gives, each answer checked against the others (exit 1 when a site is unreachable "
        "or disagrees).",
    )
    _common(p)
    p.add_argument(
        "--tree",
        action="store_true",
        help="also ask every site below this one (downlinks, theirs, …)",
    )
    p.add_argument(
        "--max-sites",
        type=int,
        default=200,
        metavar="N",
        help="with --tree: ask at most N sites (default 200)",
    )
    p.set_defaults(func=cmd_site_status)
    p = sub.add_parser(
        "subscribers",
        help="a site's subscribers, their grants and queue depths (paged)",
        description="One page of a site's subscribers by name: grants, queue depth, whether "
        "connected. --after NAME continues after a page (the last line says how). A "
        "subscriber certificate sees only its own row; a publisher is refused.",
    )
    _common(p)
    p.add_argument(
        "--after",
        default="",
        metavar="NAME",
        help="start after this subscriber name (from the previous page)",
    )
    p.set_defaults(func=cmd_site_subscribers)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect", required=True, metavar="HOST:PORT", help="the site's gRPC port")
    p.add_argument("--name", required=True, help="your certificate's name (NAME.pem)")
    p.add_argument(
        "--certs",
        type=Path,
        required=True,
        help="directory with NAME.pem, NAME.key and the network's ca.pem",
    )
    p.add_argument(
        "--limit", type=int, default=100, help="subscriber rows to show (1 to 1000, default 100)"
    )
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the site")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _tls(args: argparse.Namespace) -> Any:
    from xdn.grpc_tls import TlsFiles

    if not 1 <= args.limit <= 1000:
        raise UsageError(f"--limit {args.limit}: between 1 and 1000 rows")
    try:
        return TlsFiles.from_dir(args.certs, args.name)
    except OSError as exc:
        raise UsageError(f"cannot read {exc.filename}: {exc.strerror}") from None


def subscriber_json(r: SubscriberState) -> dict[str, Any]:
    """The JSON form of a subscriber row."""
    return {
        "name": r.name,
        "queue_depth": r.queue_depth,
        "connected": r.connected,
        "grants": {p: list(c) for p, c in r.grants.items()},
    }


def status_json(s: SiteReport) -> dict[str, Any]:
    """The JSON form of a site's status (what its view shows)."""
    out: dict[str, Any] = {
        "site": s.site,
        "block": s.block,
        "view": s.view,
        "subscribers_total": s.subscribers_total,
        "policies": {p: {"version": v, "digest": d} for p, (v, d) in s.policies.items()},
    }
    if s.view == "full":
        out |= {
            "address": s.address,
            "uplink": {
                "address": s.uplink_address,
                "connected": s.uplink_connected,
                "root": s.root,
            },
            "downlinks": [
                {
                    "site": d.site,
                    "block": d.block,
                    "connected": d.connected,
                    "members": d.members,
                    "queue_depth": d.queue_depth,
                    "address": d.address,
                }
                for d in s.downlinks
            ],
            "subscribers": [subscriber_json(r) for r in s.subscribers],
            "neighbours": [{"node_id": n.node_id, "address": n.address} for n in s.neighbours],
            "queued_total": s.queued_total,
        }
    return out


def uplink_text(s: SiteReport) -> str:
    """``127.0.0.1:5001 (connected)``, ``none: a root site``, …"""
    if s.root:
        return "none: a root site"
    return (s.uplink_address or "not found yet") + (
        " (connected)" if s.uplink_connected else " (not connected)"
    )


def cmd_site_status(args: argparse.Namespace) -> int:
    """``xdn site status``."""
    if args.tree:
        from cli.admin._site_tree import print_tree

        return print_tree(args, _tls(args))
    from deploy.site_admin import fetch_status

    s = asyncio.run(fetch_status(args.connect, _tls(args), limit=args.limit, timeout=args.timeout))
    if args.json:
        print(json.dumps(status_json(s), indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"site {s.site} serving block {s.block} ({s.view} view, as {args.name})")
    if s.view == "full":
        console.print(f"uplink: {uplink_text(s)}")
        console.print(f"queued deliveries: {s.queued_total}")
        links = Table(title=f"downlinks ({len(s.downlinks)})")
        for col in ("site", "block", "connected", "members", "queue", "address"):
            links.add_column(col)
        for d in s.downlinks:
            links.add_row(
                d.site,
                d.block,
                "yes" if d.connected else "no",
                str(d.members),
                str(d.queue_depth),
                d.address or "unknown",
            )
        console.print(links)
    console.print(f"subscribers: {s.subscribers_total}")
    if s.view == "full":
        console.print(_subscriber_table(s.subscribers, f"subscribers (first {len(s.subscribers)})"))
    policies = Table(title="policies in force")
    for col in ("publisher", "version", "digest"):
        policies.add_column(col)
    for publisher, (version, digest) in s.policies.items():
        policies.add_row(publisher, str(version), digest[:16])
    console.print(policies)
    if s.view == "full":
        console.print(
            f"DHT neighbours ({len(s.neighbours)}): "
            + (", ".join(n.address for n in s.neighbours) or "none")
        )
    return 0


def _subscriber_table(rows: tuple[SubscriberState, ...], title: str) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for col in ("subscriber", "grants", "queue", "connected"):
        table.add_column(col)
    for r in rows:
        grants = "; ".join(f"{p}: {', '.join(c)}" for p, c in r.grants.items())
        table.add_row(r.name, grants or "-", str(r.queue_depth), "yes" if r.connected else "no")
    return table


def cmd_site_subscribers(args: argparse.Namespace) -> int:
    """``xdn site subscribers``."""
    from deploy.site_admin import fetch_subscribers

    page = asyncio.run(
        fetch_subscribers(
            args.connect, _tls(args), after=args.after, limit=args.limit, timeout=args.timeout
        )
    )
    if args.json:
        print(
            json.dumps(
                {
                    "subscribers": [subscriber_json(r) for r in page.subscribers],
                    "total": page.total,
                    "next_after": page.next_after,
                },
                indent=2,
            )
        )
        return 0
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    console.print(
        _subscriber_table(
            page.subscribers,
            f"subscribers of {args.connect} ({len(page.subscribers)} of {page.total})",
        )
    )
    if page.next_after:
        console.print(f"more: --after {page.next_after}")
    return 0
