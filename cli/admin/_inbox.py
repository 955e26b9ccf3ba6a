"""``xdn inbox list|show|post``: a site's LDN inbox over HTTPS (docs/linked-data.md).

``list`` prints the URI of every notification the inbox contains (its ``ldp:contains``,
following the pages' ``rel="next"`` links; ``--first-page`` for the first only),
``show`` one notification (TriG by default, or ``--as`` another offered type), ``post`` sends
a notification file (its media type from ``--type`` or its extension) and prints where the
inbox put it. Requests go to ``--web`` with mutual TLS (:mod:`deploy.web_client`), or to the
site resolved through ``--via`` (any site's endpoint): the site a notification URI names, or
``--site NAME`` for ``list`` and ``post`` (without it, the site whose endpoint ``--via`` is).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from cli.admin._web import client_for, web_args
from deploy.web_client import WebClient
from xdn.errors import PeerError, UsageError

__all__ = ["cmd_inbox_list", "cmd_inbox_post", "cmd_inbox_show", "register"]

_BY_EXTENSION = {
    ".jsonld": "application/ld+json",
    ".json": "application/ld+json",
    ".ttl": "text/turtle",
    ".nq": "application/n-quads",
    ".trig": "application/trig",
}
_LDP_CONTAINS = "http://www.w3.org/ns/ldp#contains"


def register(subparsers: Any) -> None:
    """Add ``inbox`` and its actions."""
    group = subparsers.add_parser(
        "inbox", help="list, show or post notifications of a site's LDN inbox (HTTPS)",
        description="A site's Linked Data Notifications inbox, over mutual TLS.",
    )
    sub = group.add_subparsers(dest="inbox_command", metavar="ACTION", required=True)
    p = sub.add_parser("list", help="the URI of every notification in the inbox")
    p.add_argument("--first-page", action="store_true",
                   help="only the first page (the inbox's own listing), not the pages after")
    p.add_argument("--max-pages", type=int, default=100_000, metavar="N",
                   help="stop with an error past N pages (default 100000)")
    web_args(p)
    _site_arg(p)
    p.set_defaults(func=cmd_inbox_list)
    p = sub.add_parser("show", help="one notification's statements")
    p.add_argument("notification", metavar="URI", help="its URI, URL or path (/inbox/ID)")
    p.add_argument("--as", dest="media_type", default="application/trig",
                   help="the media type to ask for (default application/trig)")
    web_args(p)
    p.set_defaults(func=cmd_inbox_show)
    p = sub.add_parser("post", help="send a notification; print where the inbox put it")
    p.add_argument("file", type=Path, metavar="FILE", help="the notification ('-' for stdin)")
    p.add_argument("--type", dest="media_type", choices=sorted(set(_BY_EXTENSION.values())),
                   help="its media type (default: from the file's extension)")
    web_args(p)
    _site_arg(p)
    p.set_defaults(func=cmd_inbox_post)


def _site_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--site", metavar="NAME",
        help="with --via: the site whose inbox to use, found through --via (default: the "
        "site whose endpoint --via is)",
    )


def _client(args: argparse.Namespace, node: str | None = None) -> WebClient:
    site = getattr(args, "site", None)
    if site and not args.via:
        raise UsageError("--site names a site to find through --via; with --web, give its URL")
    return client_for(args, node or site)


def cmd_inbox_list(args: argparse.Namespace) -> int:
    """``xdn inbox list``: one notification URI a line, oldest first, page after page."""
    client = _client(args)
    target: str | None = "/inbox/"
    seen: set[str] = set()
    pages = 0
    while target is not None:
        if target in seen or pages >= args.max_pages:
            raise PeerError(
                f"the inbox's pages do not end ({pages} read, then {target}): a loop, or "
                "more than --max-pages"
            )
        seen.add(target)
        pages += 1
        contained, target = _page(client, target)
        for uri in contained:
            print(uri)
        if args.first_page:
            break
    return 0


def _page(client: WebClient, target: str) -> tuple[list[str], str | None]:
    """The notifications a page of the inbox lists, and the target of its next page."""
    import pyoxigraph as ox

    from xdn import linked_data as ld

    reply = client.request("GET", target, accept="application/n-quads")
    try:
        quads = ox.parse(reply.body, format=ox.RdfFormat.N_QUADS)
        contained = [q.object.value for q in quads if q.predicate.value == _LDP_CONTAINS]
    except SyntaxError as exc:
        raise PeerError(f"the inbox listing is not N-Quads: {exc}") from None
    following = ld.parse_links(reply.links).get("next")
    return contained, None if following is None else urljoin(client.url(target), following)


def cmd_inbox_show(args: argparse.Namespace) -> int:
    """``xdn inbox show``: the notification, as the site serves it."""
    node = args.notification if "://" in args.notification else None
    if args.via and node is None:
        raise UsageError("with --via, give the notification's URI (https://NAME.xdn.example/"
                         "inbox/ID): it names the site to ask")
    reply = _client(args, node).request("GET", args.notification, accept=args.media_type)
    sys.stdout.write(reply.body.decode("utf-8", "replace"))
    return 0


def cmd_inbox_post(args: argparse.Namespace) -> int:
    """``xdn inbox post``: send FILE; print the new notification's URL."""
    media_type = args.media_type or _BY_EXTENSION.get(args.file.suffix.lower())
    if media_type is None:
        raise UsageError(
            f"cannot tell the media type of {args.file}: give --type (or name it "
            f"{', '.join(sorted(_BY_EXTENSION))})"
        )
    try:
        body = sys.stdin.buffer.read() if str(args.file) == "-" else args.file.read_bytes()
    except OSError as exc:
        raise UsageError(f"{args.file}: cannot read: {exc.strerror}") from None
    client = _client(args)
    reply = client.request("POST", "/inbox/", body=body, content_type=media_type)
    print(client.url(reply.location or "/inbox/"))
    return 0
