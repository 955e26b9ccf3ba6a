"""What the endpoint serves, and the responses its routes share."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from aiohttp import web

from disseminator.dht import SiteRecord
from disseminator.messages import MessageArchive
from disseminator.notifications import Notifications
from disseminator.web._config import WebConfig
from xdn import certs
from xdn import linked_data as ld
from xdn.errors import PeerError
from xdn.notices import Notice
from xdn.receipts import Receipt

__all__ = [
    "CREDENTIAL",
    "NoRefusals",
    "NodeDirectory",
    "NoticeDesk",
    "ReceiptDesk",
    "Refusals",
    "WebSite",
    "negotiated",
    "text",
]

CREDENTIAL = web.RequestKey("credential", certs.Credential)  # the client's, checked


class ReceiptDesk(Protocol):
    """Where the inbox hands the receipts posted to it (the site's
    :class:`disseminator.receipts.SiteReceipts`)."""

    def read(self, data: bytes) -> Receipt:
        """Parse and verify a receipt chain (CPU work: run it on a worker thread)."""
        ...

    def from_subscriber(self, subscriber: str, data: bytes | Receipt) -> bool:
        """Accept local ``subscriber``'s receipt (logged, queued, listed); ``False``: known."""
        ...

    def refused(self, source: str, exc: PeerError, *, sender: str) -> None:
        """Count and log a refused receipt."""
        ...


class NoticeDesk(Protocol):
    """Where the inbox hands the failure notices posted to it (the site's
    :class:`disseminator.notices.SiteNotices`)."""

    def read(self, data: bytes) -> Notice:
        """Parse and verify a failure notice (CPU work: run it on a worker thread)."""
        ...

    def from_subscriber(self, credential: certs.Credential, data: bytes | Notice) -> bool:
        """Accept the notice of the subscriber of ``credential``; ``False``: known."""
        ...

    def refused(self, source: str, exc: PeerError, *, sender: str) -> None:
        """Count and log a refused notice."""
        ...


class NodeDirectory(Protocol):
    """Where the endpoint finds a site's signed record by its name (the site's
    :class:`disseminator.dht.DhtNode`)."""

    async def find_site(self, name: str) -> SiteRecord | None:
        """Site ``name``'s live record as the DHT holds it (our own for ourselves)."""
        ...


class Refusals(Protocol):
    """Where the endpoint counts what its limits refuse (the site's Prometheus metrics,
    :class:`disseminator.metrics.SiteMetrics`): what a flood costs shows on a dashboard, not
    only in one process's memory and its debug log."""

    def connection(self, reason: str) -> None:
        """A connection closed at accept, over the cap ``reason``: ``total``, ``per_address``."""
        ...

    def request(self, status: int, limit: str) -> None:
        """A request refused with ``status`` by ``limit`` (the ``[web]`` key that refused it:
        ``client_requests_per_second``, ``posts_in_flight``, ``request_seconds``,
        ``notification_bytes``, ``inbox_notifications``)."""
        ...


class NoRefusals:
    """Counts nothing (an endpoint without metrics)."""

    def connection(self, reason: str) -> None:
        """Nothing."""

    def request(self, status: int, limit: str) -> None:
        """Nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSite:
    """What the endpoint serves, and its seams (clocks, CRL in force, id minting, receipts)."""

    node_uri: str
    cert_pem: bytes
    notifications: Notifications
    messages: MessageArchive | None
    log_path: Path  # the site's provenance log, where the hops of its messages are
    config: WebConfig
    clock: Callable[[], datetime]
    revoked: Callable[[], frozenset[int]]
    new_id: Callable[[], str]
    receipts: ReceiptDesk | None = None  # None: receipts posted are generic notifications
    notices: NoticeDesk | None = None  # None: failure notices posted are generic ones
    monotonic: Callable[[], float] = time.monotonic  # seconds, for the clients' request rates
    refusals: Refusals = field(default_factory=NoRefusals)  # what the limits refuse, counted
    nodes: NodeDirectory | None = None  # None: GET /nodes/NAME answers 404 (no DHT)


def text(status: int, message: str) -> web.Response:
    """A plain-text answer (errors and refusals: the message names what is wrong)."""
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


def negotiated(
    request: web.Request, dataset: ld.Dataset, *, title: str, site: WebSite
) -> web.Response:
    """``dataset`` in the representation the request's ``Accept`` prefers (406 if none)."""
    media_type = ld.choose(request.headers.get("Accept"), ld.offers(dataset))
    body = ld.serialise(dataset, media_type, title=title, local_prefix=site.node_uri)
    response = web.Response(body=body, headers={"Vary": "Accept"})
    response.headers["Content-Type"] = ld.content_type(media_type)
    return response
