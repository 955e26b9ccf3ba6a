"""``xdn site status --tree``: a site and every site below it, as text or JSON.

The walk and its checks are :func:`deploy.site_tree.walk`; this module only renders the
:class:`~deploy.site_tree.TreeSite` it returns (pure functions, :func:`tree_lines` and
:func:`tree_json`) and sets the exit code: 0 when every site answered and nothing disagrees,
1 otherwise (the tree is printed either way).
"""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import dataclass
from typing import Any

from cli.admin._site_status import status_json, uplink_text
from deploy.site_admin import SiteProbe, SiteReport
from deploy.site_tree import TreeSite, walk
from xdn.errors import UsageError
from xdn.grpc_tls import TlsFiles
from xdn.identity import person

__all__ = ["TreeCounts", "print_tree", "tree_counts", "tree_json", "tree_lines"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeCounts:
    sites: int
    unreachable: int
    disagreeing: int

    @property
    def healthy(self) -> bool:
        return not (self.unreachable or self.disagreeing)

    def __str__(self) -> str:
        return (
            f"{self.sites} site(s): {self.sites - self.unreachable} answered, "
            f"{self.unreachable} unreachable, {self.disagreeing} with disagreements"
        )


def tree_counts(root: TreeSite) -> TreeCounts:
    """How many sites the tree shows (each once), how many did not answer or disagree."""
    shown = [s for s in root.sites() if not s.repeated]
    return TreeCounts(
        sites=len(shown),
        unreachable=sum(1 for s in shown if s.report is None),
        disagreeing=sum(1 for s in root.sites() if s.disagreements),
    )


def _headline(site: TreeSite) -> str:
    where = f"{site.name} at {site.address or '(no address)'}"
    s = site.report
    if site.repeated:
        return f"{where}: already shown above (not asked again)"
    if s is None:
        return f"{where}: UNREACHABLE: {site.error}"
    if s.view != "full":
        return f"{where}: block {s.block} ({s.view} view: no links or queues shown)"
    return f"{where}: block {s.block}, uplink {uplink_text(s)}"


def _subscribers(s: SiteReport) -> str:
    rows = s.subscribers
    shown = "" if len(rows) == s.subscribers_total else f"the first {len(rows)}: "
    connected = sum(1 for r in rows if r.connected)
    deepest = max(rows, key=lambda r: r.queue_depth, default=None)
    queue = (
        f"; deepest queue: {person(deepest.name)} {deepest.queue_depth}"
        if deepest is not None and deepest.queue_depth
        else ""
    )
    return (
        f"subscribers {s.subscribers_total} ({shown}{connected} connected{queue}); "
        f"{s.queued_total} deliveries queued at the site"
    )


def _details(site: TreeSite, uplink: str) -> list[str]:
    out = []
    if site.listed is not None:
        d = site.listed
        out.append(
            f"link from {uplink}: {'connected' if d.connected else 'not connected'}, "
            f"{d.members} member(s) behind it, {d.queue_depth} queued for it"
        )
    if site.report is not None and site.report.view == "full" and not site.repeated:
        out.append(_subscribers(site.report))
    out.extend(f"DISAGREES: {d}" for d in site.disagreements)
    return out


def tree_lines(root: TreeSite) -> list[str]:
    """The tree as text, one site a headline with its details below, downlinks indented."""
    out: list[str] = []

    def render(site: TreeSite, head: str, body: str, uplink: str) -> None:
        out.append(head + _headline(site))
        bar = "│  " if site.below else "   "
        out.extend(body + bar + line for line in _details(site, uplink))
        for i, child in enumerate(site.below):
            last = i == len(site.below) - 1
            render(
                child,
                body + ("└─ " if last else "├─ "),
                body + ("   " if last else "│  "),
                site.name,
            )

    render(root, "", "", "")
    return out


def tree_json(site: TreeSite) -> dict[str, Any]:
    """The tree as JSON: each site with how it is listed, its status, what disagrees."""
    d, p = site.listed, site.proven
    return {
        "site": site.name,
        "address": site.address,
        "listed": None
        if d is None
        else {
            "site": d.site,
            "block": d.block,
            "connected": d.connected,
            "members": d.members,
            "queue_depth": d.queue_depth,
        },
        "status": None if site.report is None else status_json(site.report),
        "unreachable": site.error or None,
        "proven": None if p is None else {"site": p.name, "block": p.block, "address": p.address},
        "disagreements": list(site.disagreements),
        "repeated": site.repeated,
        "below": [tree_json(child) for child in site.below],
    }


def print_tree(args: argparse.Namespace, tls: TlsFiles) -> int:
    """``xdn site status --tree``: walk, print, and say whether all is well (exit code)."""
    from deploy.site_admin import probe_site

    if args.max_sites < 1:
        raise UsageError(f"--max-sites {args.max_sites}: at least 1")

    async def probe(address: str) -> SiteProbe:
        return await probe_site(address, tls, limit=args.limit, timeout=args.timeout)

    root = asyncio.run(walk(args.connect, probe, max_sites=args.max_sites))
    counts = tree_counts(root)
    if args.json:
        print(
            json.dumps(
                {
                    "tree": tree_json(root),
                    "sites": counts.sites,
                    "unreachable": counts.unreachable,
                    "disagreeing": counts.disagreeing,
                },
                indent=2,
            )
        )
    else:
        print("\n".join([*tree_lines(root), "", str(counts)]))
    return 0 if counts.healthy else 1
