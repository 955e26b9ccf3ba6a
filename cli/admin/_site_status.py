"""``xdn site status|subscribers --connect HOST:PORT``: what a site says of itself.

Both ask the site's ``xdn.wire.v1.Admin`` service over mutual TLS with the certificate named
by ``--certs``/``--name``; the site decides what that certificate may see (a site, an auditor
or an admin: everything; a publisher: its policy version and subscriber count; a subscriber:
its own row — see :mod:`disseminator.admin`). A refusal is printed as the site gave it (exit
2). ``status`` prints a summary with the first ``--limit`` subscribers; ``subscribers`` prints
one page (``--limit``, ``--after``) and the ``--after`` of the next. ``--json`` for scripts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

from xdn.errors import PeerError, UsageError, XdnError

__all__ = ["cmd_site_status", "cmd_site_subscribers", "register_actions"]


def register_actions(sub: Any) -> None:
    """Add ``status`` and ``subscribers`` to ``xdn site``."""
    p = sub.add_parser(
        "status", help="a site's block, uplink, downlinks, subscribers, policies, DHT neighbours",
        description="Ask a site (its gRPC port) for its status: block, uplink, downlinks, "
        "subscribers with their grants and queue depths (the first --limit), policy versions "
        "in force and DHT neighbours. A site, auditor or admin certificate sees everything; a "
        "publisher its own policy version and subscriber count; a subscriber is refused.",
    )
    _common(p)
    p.set_defaults(func=cmd_site_status)
    p = sub.add_parser(
        "subscribers", help="a site's subscribers, their grants and queue depths (paged)",
        description="One page of a site's subscribers by name: grants, queue depth, whether "
        "connected. --after NAME continues after a page (the last line says how). A "
        "subscriber certificate sees only its own row; a publisher is refused.",
    )
    _common(p)
    p.add_argument("--after", default="", metavar="NAME",
                   help="start after this subscriber name (from the previous page)")
    p.set_defaults(func=cmd_site_subscribers)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect", required=True, metavar="HOST:PORT", help="the site's gRPC port")
    p.add_argument("--name", required=True, help="your certificate's name (NAME.pem)")
    p.add_argument("--certs", type=Path, required=True,
                   help="directory with NAME.pem, NAME.key and the network's ca.pem")
    p.add_argument("--limit", type=int, default=100,
                   help="subscriber rows to show (1 to 1000, default 100)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the site")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _call(args: argparse.Namespace, method: str, request: Any) -> Any:
    import grpc

    from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
    from xdn.wire.v1 import admin_pb2_grpc

    if not 1 <= args.limit <= 1000:
        raise UsageError(f"--limit {args.limit}: between 1 and 1000 rows")
    tls = TlsFiles.from_dir(args.certs, args.name)

    async def ask() -> Any:
        async with grpc.aio.secure_channel(
            args.connect, channel_credentials(tls), options=CHANNEL_OPTIONS
        ) as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            return await getattr(stub, method)(request, timeout=args.timeout)

    try:
        return asyncio.run(ask())
    except grpc.aio.AioRpcError as exc:
        code, details = exc.code(), exc.details() or ""
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            raise PeerError(f"{args.connect}: {code.name}: {details}") from None
        raise XdnError(f"{args.connect}: {code.name}: {details}") from None


def _row(r: Any) -> dict[str, Any]:
    return {
        "name": r.name, "queue_depth": r.queue_depth, "connected": r.connected,
        "grants": {g.publisher: list(g.concepts) for g in r.grants},
    }


def status_json(s: Any) -> dict[str, Any]:
    """The JSON form of a ``SiteStatus``."""
    out: dict[str, Any] = {
        "site": s.site, "block": s.block, "view": s.view,
        "subscribers_total": s.subscribers_total,
        "policies": {p.publisher: {"version": p.version, "digest": p.digest}
                     for p in s.policies},
    }
    if s.view == "full":
        out |= {
            "uplink": {"address": s.uplink.address, "connected": s.uplink.connected,
                       "root": s.uplink.root},
            "downlinks": [
                {"site": d.site, "block": d.block, "connected": d.connected,
                 "members": d.members, "queue_depth": d.queue_depth}
                for d in s.downlinks
            ],
            "subscribers": [_row(r) for r in s.subscribers],
            "neighbours": [{"node_id": n.node_id.hex(), "address": n.address}
                           for n in s.neighbours],
            "queued_total": s.queued_total,
        }
    return out


def cmd_site_status(args: argparse.Namespace) -> int:
    """``xdn site status``."""
    from xdn.wire.v1 import admin_pb2 as pb

    s = _call(args, "Status", pb.SiteStatusRequest(subscriber_limit=args.limit))
    data = status_json(s)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, soft_wrap=True)
    console.print(f"site {s.site} serving block {s.block} ({s.view} view, as {args.name})")
    if s.view == "full":
        up = s.uplink
        where = "none: a root site" if up.root else (up.address or "not found yet")
        state = "" if up.root else (" (connected)" if up.connected else " (not connected)")
        console.print(f"uplink: {where}{state}")
        console.print(f"queued deliveries: {s.queued_total}")
        links = Table(title=f"downlinks ({len(s.downlinks)})")
        for col in ("site", "block", "connected", "members", "queue"):
            links.add_column(col)
        for d in s.downlinks:
            links.add_row(d.site, d.block, "yes" if d.connected else "no", str(d.members),
                          str(d.queue_depth))
        console.print(links)
    console.print(f"subscribers: {s.subscribers_total}")
    if s.view == "full":
        console.print(_subscriber_table(s.subscribers, f"subscribers (first {len(s.subscribers)})"))
    policies = Table(title="policies in force")
    for col in ("publisher", "version", "digest"):
        policies.add_column(col)
    for p in s.policies:
        policies.add_row(p.publisher, str(p.version), p.digest[:16])
    console.print(policies)
    if s.view == "full":
        console.print(f"DHT neighbours ({len(s.neighbours)}): "
                      + (", ".join(n.address for n in s.neighbours) or "none"))
    return 0


def _subscriber_table(rows: Any, title: str) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for col in ("subscriber", "grants", "queue", "connected"):
        table.add_column(col)
    for r in rows:
        grants = "; ".join(f"{g.publisher}: {', '.join(g.concepts)}" for g in r.grants)
        table.add_row(r.name, grants or "-", str(r.queue_depth), "yes" if r.connected else "no")
    return table


def cmd_site_subscribers(args: argparse.Namespace) -> int:
    """``xdn site subscribers``."""
    from xdn.wire.v1 import admin_pb2 as pb

    page = _call(args, "Subscribers", pb.SubscribersRequest(limit=args.limit, after=args.after))
    if args.json:
        print(json.dumps({
            "subscribers": [_row(r) for r in page.subscribers], "total": page.total,
            "next_after": page.next_after,
        }, indent=2))
        return 0
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    console.print(_subscriber_table(
        page.subscribers, f"subscribers of {args.connect} ({len(page.subscribers)} of "
        f"{page.total})",
    ))
    if page.next_after:
        console.print(f"more: --after {page.next_after}")
    return 0
