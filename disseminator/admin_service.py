"""The ``xdn.wire.v1.Admin`` gRPC service: a site's status, as :mod:`disseminator.admin` allows.

The edge: it checks the caller's certificate (network CA, CRL, validity; any role), gathers the
site's facts from the live node (routing table, queue cursors, connected streams, policies in
force), its uplink and its DHT routing table, lets :mod:`disseminator.admin` decide and cut,
and converts the answer to protobuf. For a caller who sees the full status, each downlink's
gRPC address is looked up in the DHT (its signed record, verified by the lookup), all at once
and within :data:`ADDRESS_LOOKUP_S`: a downlink not found in time is answered without one.
That is how ``xdn site status --tree`` finds the sites below this one.

Refusals: ``UNAUTHENTICATED`` for a certificate that does not check, ``PERMISSION_DENIED``
for one that may not see what it asked for, ``INVALID_ARGUMENT`` for a bad limit.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable, Iterable

import grpc

from disseminator.admin import (
    MAX_LIMIT,
    AdminRefused,
    DownlinkRow,
    Neighbour,
    SiteFacts,
    SiteStatusView,
    SubscriberRow,
    UplinkState,
    Viewer,
    status_for,
    subscribers_for,
    viewer_of,
)
from disseminator.dht import DhtNode
from disseminator.intake import add_lenient
from disseminator.node import SiteNode
from disseminator.routing import Destination
from xdn import certs
from xdn.errors import CertificateError
from xdn.grpc_tls import peer_certificate
from xdn.identity import member_id
from xdn.wire.v1 import admin_pb2 as pb
from xdn.wire.v1 import admin_pb2_grpc

__all__ = ["ADDRESS_LOOKUP_S", "ADMIN_SERVICE_NAME", "AdminService", "add_admin_to_server"]

log = logging.getLogger(__name__)

ADDRESS_LOOKUP_S = 3.0  # how long Status waits for the downlinks' DHT records

ADMIN_SERVICE_NAME = pb.DESCRIPTOR.services_by_name["Admin"].full_name


class AdminService(admin_pb2_grpc.AdminServicer):  # type: ignore[misc]
    """``Status`` and ``Subscribers`` of one site.

    Args:
        node: the site.
        uplink_connected: whether the link to the uplink is up now.
        dht: the site's DHT node (its routing table gives the neighbours), if any.
    """

    def __init__(
        self, node: SiteNode, *, uplink_connected: Callable[[], bool], dht: DhtNode | None,
    ) -> None:
        self._node = node
        self._uplink_connected = uplink_connected
        self._dht = dht

    async def Status(
        self, request: pb.SiteStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.SiteStatus:
        viewer = await self._viewer(context)
        limit = await _checked_limit(request.subscriber_limit, context)
        facts = self._facts()
        if viewer.full:
            facts = dataclasses.replace(facts, downlinks=await self._located(facts.downlinks))
        try:
            view = status_for(viewer, facts, limit=limit)
        except AdminRefused as exc:
            await _deny(context, viewer, exc)
        return _status_pb(view)

    async def _located(self, downlinks: tuple[DownlinkRow, ...]) -> tuple[DownlinkRow, ...]:
        """The downlinks with their gRPC addresses from their DHT records, as found within
        :data:`ADDRESS_LOOKUP_S` (all looked up at once)."""
        if self._dht is None or not downlinks:
            return downlinks
        found = await _addresses(self._dht, (d.site for d in downlinks))
        return tuple(dataclasses.replace(d, address=found.get(d.site, "")) for d in downlinks)

    async def Subscribers(
        self, request: pb.SubscribersRequest, context: grpc.aio.ServicerContext
    ) -> pb.SubscribersPage:
        viewer = await self._viewer(context)
        limit = await _checked_limit(request.limit, context)
        try:
            page = subscribers_for(viewer, self._facts(), after=request.after, limit=limit)
        except AdminRefused as exc:
            await _deny(context, viewer, exc)
        return pb.SubscribersPage(
            subscribers=[_row_pb(r) for r in page.subscribers], total=page.total,
            next_after=page.next_after,
        )

    async def _viewer(self, context: grpc.aio.ServicerContext) -> Viewer:
        try:
            credential = certs.verify_certificate(
                peer_certificate(context.auth_context()), self._node.site.tls.ca_pem,
                at=self._node.now(), revoked=self._node.revoked,
            )
            return viewer_of(
                credential.name, credential.role,
                member=member_id(credential.name, credential.fingerprint),
            )
        except CertificateError as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except AdminRefused as exc:
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))
        raise AssertionError("unreachable")  # context.abort raises

    def _facts(self) -> SiteFacts:
        node = self._node
        online = node.connected()
        links = node.table.links

        def depth(kind: str, name: str) -> int:
            last, acked = node.store.cursor(kind, name)
            return max(0, last - acked)

        def row(name: str) -> SubscriberRow:
            reg = node.table.local[name]
            return SubscriberRow(
                name=name, grants=dict(reg.grants), queue_depth=depth("subscriber", name),
                connected=Destination("subscriber", name) in online,
            )

        downlinks = tuple(
            DownlinkRow(
                site=site, block=node.link_block(site), members=len(links.get(site, {})),
                connected=Destination("link", site) in online, queue_depth=depth("link", site),
            )
            for site in sorted(set(links) | {d.name for d in online if d.kind == "link"})
        )
        standing_root = node.site.uplink is None and not node.ontology.parents(node.site.block)
        return SiteFacts(
            site=node.site.name, block=node.site.block,
            uplink=UplinkState(
                address=node.uplink_address or "", connected=self._uplink_connected(),
                root=standing_root,
            ),
            downlinks=downlinks,
            subscribers={name: reg.grants for name, reg in node.table.local.items()},
            row=row,
            policies={
                p: (policy.version, policy.digest)
                for p, policy in node.engine.policies.policies.items()
            },
            neighbours=tuple(
                Neighbour(node_id=c.node_id.to_bytes(), address=c.address)
                for c in (self._dht.table.contacts() if self._dht is not None else ())
            ),
            queued_total=node.store.queued_total(),
            address=_announced_address(self._dht),
        )


def _announced_address(dht: DhtNode | None) -> str:
    record = dht.announced if dht is not None else None
    return record.address if record is not None else ""


async def _addresses(dht: DhtNode, sites: Iterable[str]) -> dict[str, str]:
    """Site name → gRPC address of its live DHT record, for those found in time."""
    lookups = {site: asyncio.ensure_future(dht.find_site(site)) for site in sites}
    _, pending = await asyncio.wait(lookups.values(), timeout=ADDRESS_LOOKUP_S)
    for task in pending:
        task.cancel()
    found: dict[str, str] = {}
    for site, task in lookups.items():
        if task in pending:
            log.info("no DHT record of downlink %s found within %gs", site, ADDRESS_LOOKUP_S)
        elif (error := task.exception()) is not None:
            log.info("DHT lookup of downlink %s failed: %s", site, error)
        elif (record := task.result()) is not None:
            found[site] = record.address
    return found


async def _checked_limit(limit: int, context: grpc.aio.ServicerContext) -> int:
    if limit > MAX_LIMIT:
        await context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"limit {limit}: at most {MAX_LIMIT} rows a page"
        )
    return limit


async def _deny(context: grpc.aio.ServicerContext, viewer: Viewer, exc: AdminRefused) -> None:
    log.info("admin request of %s (%s) refused: %s", viewer.name, viewer.role, exc)
    await context.abort(grpc.StatusCode.PERMISSION_DENIED, str(exc))


def _row_pb(row: SubscriberRow) -> pb.AdminSubscriber:
    return pb.AdminSubscriber(
        name=row.name,
        grants=[
            pb.AdminGrant(publisher=p, concepts=sorted(c)) for p, c in sorted(row.grants.items())
        ],
        queue_depth=row.queue_depth, connected=row.connected,
    )


def _status_pb(view: SiteStatusView) -> pb.SiteStatus:
    out = pb.SiteStatus(
        site=view.site, block=view.block, view=view.view,
        downlinks=[
            pb.AdminDownlink(
                site=d.site, block=d.block, connected=d.connected, members=d.members,
                queue_depth=d.queue_depth, address=d.address,
            )
            for d in view.downlinks
        ],
        subscribers_total=view.subscribers_total,
        subscribers=[_row_pb(r) for r in view.subscribers],
        policies=[
            pb.AdminPolicyVersion(publisher=p, version=v, digest=d)
            for p, (v, d) in sorted(view.policies.items())
        ],
        neighbours=[pb.AdminNeighbour(node_id=n.node_id, address=n.address)
                    for n in view.neighbours],
        queued_total=view.queued_total, address=view.address,
    )
    if view.uplink is not None:
        out.uplink.CopyFrom(pb.AdminUplink(
            address=view.uplink.address, connected=view.uplink.connected, root=view.uplink.root,
        ))
    return out


def add_admin_to_server(server: grpc.aio.Server, service: AdminService) -> None:
    """Register the Admin service (before the server starts); a request that does not decode
    gets ``INVALID_ARGUMENT``."""
    add_lenient(admin_pb2_grpc.add_AdminServicer_to_server, service, server)


