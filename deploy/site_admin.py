"""Client of a site's ``xdn.wire.v1.Admin`` service: its status and subscribers, as plain values.

Asks one site over mutual TLS with the caller's certificate; the site decides what that
certificate may see (a site, an auditor or an admin: everything; a publisher: counts; a
subscriber: its own row — see ``docs/operations.md``). The answers are converted here, at the
edge, from protobuf to frozen values, so callers (the web console) never touch generated types.
A refusal (``PERMISSION_DENIED``, ``UNAUTHENTICATED``) is a :class:`~xdn.errors.PeerError`;
any other failure (site down, timeout, TLS handshake) an :class:`~xdn.errors.XdnError` whose
message says what the site or gRPC said, with a hint when a certificate looks wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc

from xdn.errors import PeerError, UsageError, XdnError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, handshake_hint
from xdn.wire.v1 import admin_pb2 as pb
from xdn.wire.v1 import admin_pb2_grpc

__all__ = [
    "MAX_ROWS",
    "DownlinkState",
    "SiteReport",
    "SubscriberPage",
    "SubscriberState",
    "fetch_status",
    "fetch_subscribers",
]

MAX_ROWS = 1000  # what a site answers in one page at most


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberState:
    """One subscriber registered at a site: its grants by publisher and its queue."""

    name: str
    grants: Mapping[str, tuple[str, ...]]
    queue_depth: int
    connected: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class DownlinkState:
    """A site below this one."""

    site: str
    block: str
    connected: bool
    members: int
    queue_depth: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteReport:
    """What a site says of itself (``view`` is ``"full"`` or ``"publisher"``: counts only)."""

    site: str
    block: str
    view: str
    root: bool = False
    uplink_address: str = ""
    uplink_connected: bool = False
    subscribers_total: int = 0
    subscribers: tuple[SubscriberState, ...] = ()
    downlinks: tuple[DownlinkState, ...] = ()
    policies: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    neighbours: tuple[str, ...] = ()
    queued_total: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SubscriberPage:
    """One page of a site's subscribers; ``next_after`` is ``""`` on the last page."""

    subscribers: tuple[SubscriberState, ...]
    total: int
    next_after: str


def _subscriber(row: Any) -> SubscriberState:
    return SubscriberState(
        name=row.name,
        grants={g.publisher: tuple(g.concepts) for g in row.grants},
        queue_depth=row.queue_depth,
        connected=row.connected,
    )


def _report(s: Any) -> SiteReport:
    return SiteReport(
        site=s.site,
        block=s.block,
        view=s.view,
        root=s.uplink.root,
        uplink_address=s.uplink.address,
        uplink_connected=s.uplink.connected,
        subscribers_total=s.subscribers_total,
        subscribers=tuple(_subscriber(r) for r in s.subscribers),
        downlinks=tuple(
            DownlinkState(
                site=d.site,
                block=d.block,
                connected=d.connected,
                members=d.members,
                queue_depth=d.queue_depth,
            )
            for d in s.downlinks
        ),
        policies={p.publisher: (p.version, p.digest) for p in s.policies},
        neighbours=tuple(n.address for n in s.neighbours),
        queued_total=s.queued_total,
    )


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_ROWS:
        raise UsageError(f"limit {limit}: between 1 and {MAX_ROWS} rows")


async def _ask(address: str, tls: TlsFiles, method: str, request: Any, timeout: float) -> Any:
    try:
        async with grpc.aio.secure_channel(
            address, channel_credentials(tls), options=CHANNEL_OPTIONS
        ) as channel:
            stub = admin_pb2_grpc.AdminStub(channel)
            return await getattr(stub, method)(request, timeout=timeout)
    except grpc.aio.AioRpcError as exc:
        code, details = exc.code(), exc.details() or ""
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            raise PeerError(f"{address}: {code.name}: {details}") from None
        hint = handshake_hint(details)
        raise XdnError(f"{address}: {code.name}: {hint or details}") from None


async def fetch_status(
    address: str, tls: TlsFiles, *, limit: int = 100, timeout: float = 10.0
) -> SiteReport:
    """The status of the site at ``address`` (``HOST:PORT``), with its first ``limit``
    subscribers by name."""
    _check_limit(limit)
    status = await _ask(
        address, tls, "Status", pb.SiteStatusRequest(subscriber_limit=limit), timeout
    )
    return _report(status)


async def fetch_subscribers(
    address: str, tls: TlsFiles, *, after: str = "", limit: int = 100, timeout: float = 10.0
) -> SubscriberPage:
    """One page of the subscribers of the site at ``address``, after the name ``after``."""
    _check_limit(limit)
    page = await _ask(
        address, tls, "Subscribers", pb.SubscribersRequest(limit=limit, after=after), timeout
    )
    return SubscriberPage(
        subscribers=tuple(_subscriber(r) for r in page.subscribers),
        total=page.total,
        next_after=page.next_after,
    )
