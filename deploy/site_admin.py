"""Client of a site's ``xdn.wire.v1.Admin`` service: its status and subscribers, as plain values.

Asks one site over mutual TLS with the caller's certificate; the site decides what that
certificate may see (a site, an auditor or an admin: everything; a publisher: counts; a
subscriber: its own row — see ``docs/operations.md``). The answers are converted here, at the
edge, from protobuf to frozen values, so callers (the web console) never touch generated types.
A refusal (``PERMISSION_DENIED``, ``UNAUTHENTICATED``) is a :class:`~xdn.errors.PeerError`;
any other failure (site down, timeout, TLS handshake) an :class:`~xdn.errors.XdnError` whose
message says what the site or gRPC said, with a hint when a certificate looks wrong.

A site's answer is its own word. :func:`probe_site` adds what can be checked: on the same
channel it pings the site's DHT service with a fresh nonce, and the answer — signed with the
site's key under a site certificate of the network CA (:func:`disseminator.dht.verify_ping_proof`)
— proves which site answers there, the block its certificate lets it serve and the address it
announces (:class:`ProvenSite`), to hold the status against (:mod:`deploy.site_tree`).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc

from disseminator.dht import PingProof, verify_ping_proof
from xdn import certs
from xdn.errors import PeerError, UsageError, XdnError
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials, handshake_hint
from xdn.wire.v1 import admin_pb2 as pb
from xdn.wire.v1 import admin_pb2_grpc, dht_pb2, dht_pb2_grpc

__all__ = [
    "MAX_ROWS",
    "DownlinkState",
    "NeighbourState",
    "ProvenSite",
    "SiteProbe",
    "SiteReport",
    "SubscriberPage",
    "SubscriberState",
    "fetch_status",
    "fetch_subscribers",
    "probe_site",
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
    address: str = ""  # its gRPC address, from its DHT record as the site found it ("": none)


@dataclass(frozen=True, slots=True, kw_only=True)
class NeighbourState:
    """A contact of the site's DHT routing table."""

    node_id: str  # hex
    address: str


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
    neighbours: tuple[NeighbourState, ...] = ()
    queued_total: int = 0
    address: str = ""  # the gRPC address it announces in the DHT ("": none, or not shown)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProvenSite:
    """Who answers at an address, as its signed ping proves: the name and block of its site
    certificate (checked under the network CA) and the address it announces."""

    name: str
    block: str
    address: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteProbe:
    """A site's status and, unless ``proof_error`` says why not, who proved to answer."""

    report: SiteReport
    proven: ProvenSite | None
    proof_error: str = ""


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
                address=d.address,
            )
            for d in s.downlinks
        ),
        policies={p.publisher: (p.version, p.digest) for p in s.policies},
        neighbours=tuple(
            NeighbourState(node_id=n.node_id.hex(), address=n.address) for n in s.neighbours
        ),
        queued_total=s.queued_total,
        address=s.address,
    )


def _check_limit(limit: int) -> None:
    if not 1 <= limit <= MAX_ROWS:
        raise UsageError(f"limit {limit}: between 1 and {MAX_ROWS} rows")


@asynccontextmanager
async def _channel(address: str, tls: TlsFiles) -> AsyncIterator[grpc.aio.Channel]:
    """A channel to ``address``; gRPC failures on it become our errors (module docstring)."""
    try:
        async with grpc.aio.secure_channel(
            address, channel_credentials(tls), options=CHANNEL_OPTIONS
        ) as channel:
            yield channel
    except grpc.aio.AioRpcError as exc:
        code, details = exc.code(), exc.details() or ""
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
            raise PeerError(f"{address}: {code.name}: {details}") from None
        hint = handshake_hint(details)
        raise XdnError(f"{address}: {code.name}: {hint or details}") from None


async def _ask(address: str, tls: TlsFiles, method: str, request: Any, timeout: float) -> Any:
    async with _channel(address, tls) as channel:
        return await getattr(admin_pb2_grpc.AdminStub(channel), method)(request, timeout=timeout)


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


async def _prove(channel: grpc.aio.Channel, ca_pem: bytes, timeout: float) -> ProvenSite:
    """Ping the DHT service on ``channel`` with a fresh nonce; check the signed answer."""
    nonce = os.urandom(32)
    reply = await dht_pb2_grpc.DhtStub(channel).Ping(
        dht_pb2.DhtPingRequest(nonce=nonce), timeout=timeout
    )
    try:
        proof = PingProof(
            address=reply.address,
            certificate_pem=bytes(reply.certificate_pem),
            signature=bytes(reply.signature),
        )
    except (TypeError, ValueError, XdnError) as exc:
        raise PeerError(f"malformed ping answer: {exc}") from None
    verify_ping_proof(proof, nonce=nonce, ca_pem=ca_pem, at=datetime.now(UTC))
    credential = certs.credential_from_pem(proof.certificate_pem)
    return ProvenSite(name=credential.name, block=credential.block, address=proof.address)


async def probe_site(
    address: str, tls: TlsFiles, *, limit: int = 100, timeout: float = 10.0
) -> SiteProbe:
    """The status of the site at ``address`` and the proof of who answers there.

    Raises:
        PeerError, XdnError: the status could not be had (as :func:`fetch_status`). A failed
            proof does not raise: ``proof_error`` says why it failed.
    """
    _check_limit(limit)
    async with _channel(address, tls) as channel:
        status = await admin_pb2_grpc.AdminStub(channel).Status(
            pb.SiteStatusRequest(subscriber_limit=limit), timeout=timeout
        )
        report = _report(status)
        try:
            proven = await _prove(channel, tls.ca_pem, timeout)
        except grpc.aio.AioRpcError as exc:
            return SiteProbe(
                report=report, proven=None, proof_error=f"{exc.code().name}: {exc.details()}"
            )
        except PeerError as exc:
            return SiteProbe(report=report, proven=None, proof_error=str(exc))
    return SiteProbe(report=report, proven=proven)
