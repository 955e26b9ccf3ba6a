"""Fuzz targets for every gRPC request a site accepts, through the real servicers.

One target per RPC of the Disseminator, Dht and Admin services. The fuzzed bytes go where a
caller's bytes go: the request deserializer the site registers (for the Disseminator service,
the lenient one of :mod:`disseminator.intake`, with the size limits and the memory budget),
then the handler, with a call context whose peer is a certificate of the fuzz PKI.
The handler runs against a real root site (:class:`~disseminator.node.SiteNode` with a SQLite
store on tmpfs, the production ontology and policy) and a real DHT node on an in-memory
network, so conversion (:mod:`xdn.wireconv`, :mod:`disseminator.dht._convert`), validation
(leases, receipts, interest updates) and the core behind them are all exercised.

A streaming call gets its messages from one input split on :data:`SEPARATOR`; once the last
message was read (the caller half-closes) the handler runs until it waits, then the call is
cancelled, as a caller that hangs up. The outcome a caller may see is a reply, or a status the
handler chose (``context.abort``): anything else escaping the handler is a finding (gRPC would
answer ``UNKNOWN`` and log a traceback), and so is a status of ``UNKNOWN`` or ``INTERNAL``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from fuzz_targets import NOW, pki, production_ontology, scratch_dir, target

from xdn.wire.v1 import admin_pb2, dht_pb2
from xdn.wire.v1 import dissemination_pb2 as pb

SEPARATOR = b"\x00XDN\x00"  # between the messages of a client stream
MAX_STREAM_MESSAGES = 16
SETTLE_STEPS = 64  # loop turns a streaming handler gets after the caller half-closed


class Refusal(Exception):
    """What ``context.abort`` raises: the status the handler chose (an expected outcome)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code


class _Context:
    """The parts of ``grpc.aio.ServicerContext`` the servicers use."""

    def __init__(self, peer_pem: bytes) -> None:
        self._pem = peer_pem

    def auth_context(self) -> dict[str, list[bytes]]:
        return {"x509_pem_cert": [self._pem]}

    def peer(self) -> str:
        return "ipv4:127.0.0.1:40000"

    def invocation_metadata(self) -> tuple[()]:
        return ()

    def time_remaining(self) -> None:
        return None

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return False

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        pass

    def set_code(self, code: grpc.StatusCode) -> None:
        pass

    def set_details(self, details: str) -> None:
        pass

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()):  # type: ignore[no-untyped-def]
        if code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL):
            raise AssertionError(f"handler answered {code.name}: {details}")
        raise Refusal(code, details)


class _Server:
    """Collects the handlers ``add_*_to_server`` registers, by service and method."""

    def __init__(self) -> None:
        self.handlers: dict[tuple[str, str], grpc.RpcMethodHandler] = {}
        self.full_names: dict[str, str] = {}  # service → its full name (package included)

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        short = service.rsplit(".", 1)[-1]
        self.full_names[short] = service
        for method, handler in handlers.items():
            self.handlers[short, method] = handler


LOG_BYTES = 4 << 20  # the site's provenance log is started afresh past this (tmpfs is memory)


def _bounded_log(path: Any, *, node_uri: str, cert_pem: bytes) -> Any:
    """The site's provenance log, emptied whenever it passes :data:`LOG_BYTES`: a campaign
    routes hundreds of thousands of documents, and nothing here reads the log back."""
    from xdn import provenance

    class BoundedLog(provenance.ProvenanceLog):
        def append_raw(self, nquads: bytes) -> int:
            if self.path.stat().st_size > LOG_BYTES:
                self.close()
                self.path.unlink()
                self.__init__(self.path, node_uri=node_uri, cert_pem=cert_pem)  # type: ignore[misc]
            return super().append_raw(nquads)

    return BoundedLog(path, node_uri=node_uri, cert_pem=cert_pem)


@dataclass(frozen=True, slots=True)
class _Site:
    loop: asyncio.AbstractEventLoop
    handlers: dict[tuple[str, str], grpc.RpcMethodHandler]
    full_names: dict[str, str]


@functools.cache
def site() -> _Site:
    """One root site d1 (ProductionProcess) with its three services, built once a process:
    its handlers are called in-process, on a loop of its own (not made current: tests around
    us keep theirs)."""
    server = _Server()
    build_site(server, name="site")
    return _Site(
        loop=asyncio.new_event_loop(), handlers=server.handlers, full_names=server.full_names
    )


def build_site(server: Any, *, name: str) -> None:
    """A root site d1 (ProductionProcess) whose three services register with ``server`` (a
    real ``grpc.aio.Server`` or :class:`_Server`): the production ontology and policy, an
    in-memory SQLite store (the same SQL as on disk, no file system per input), a provenance
    log on tmpfs, a DHT node on an in-memory network. ``name``: its scratch directory."""
    from disseminator.admin_service import AdminService, add_admin_to_server
    from disseminator.dht import add_dht_to_server
    from disseminator.dht._records import CaRecordVerifier, SiteCredentials
    from disseminator.dht.testing import MemoryNetwork
    from disseminator.intake import add_to_server
    from disseminator.node import SiteIdentity, SiteNode
    from disseminator.server import DisseminatorService
    from disseminator.store import Store
    from xdn import certs, crypto, provenance
    from xdn.grpc_tls import TlsFiles
    from xdn.paths import REPO_ROOT
    from xdn.policy import PolicyEngine, PolicySet, parse_policy

    ontology = production_ontology()
    tls = TlsFiles(cert_pem=pki("d1.pem"), key_pem=pki("d1.key"), ca_pem=pki("ca.pem"))
    signer = provenance.Signer(
        node_uri=certs.node_uri("d1"),
        private_key=crypto.load_private_key_pem(tls.key_pem),
        certificate=tls.cert_pem,
    )
    policy = (REPO_ROOT / "policies" / "production-dept.toml").read_bytes()
    state = scratch_dir() / name
    state.mkdir(exist_ok=True)
    node = SiteNode(
        site=SiteIdentity(
            name="d1", block="ProductionProcess", uplink=None, tls=tls, signer=signer
        ),
        ontology=ontology,
        engine=PolicyEngine(PolicySet.of(ontology, [parse_policy(policy, ontology)])),
        store=Store(":memory:", durable=False),
        log_sink=_bounded_log(state / "d1.nq", node_uri=signer.node_uri, cert_pem=tls.cert_pem),
        clock=lambda: NOW,
    )
    network = MemoryNetwork(
        ontology=ontology, verifier=CaRecordVerifier(ca_pem=tls.ca_pem), clock=lambda: NOW
    )
    dht = network.add_node(
        credentials=SiteCredentials.from_pem(tls.cert_pem, tls.key_pem), address="d1.test:7000"
    )
    add_to_server(DisseminatorService(node), server)
    add_dht_to_server(server, dht)
    add_admin_to_server(server, AdminService(node, uplink_connected=lambda: True, dht=dht))


@functools.cache
def _context(peer: str) -> _Context:
    return _Context(pki(f"{peer}.pem"))


async def _requests(messages: list[Any], read_all: asyncio.Event) -> AsyncIterator[Any]:
    for message in messages:
        yield message
    read_all.set()  # the caller half-closes


async def _settle_then_cancel(call: asyncio.Task[Any], read_all: asyncio.Event) -> None:
    """Let a streaming handler run until the caller's stream ended and it waits; hang up."""
    reading = asyncio.ensure_future(read_all.wait())
    await asyncio.wait((call, reading), return_when=asyncio.FIRST_COMPLETED)
    for _ in range(SETTLE_STEPS):
        if call.done():
            break
        await asyncio.sleep(0)
    reading.cancel()
    if not call.done():
        call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        if not call.cancelled():
            raise


async def _collect(replies: AsyncIterator[Any]) -> None:
    async for _ in replies:
        pass


def _call(service: str, method: str, peer: str, data: bytes) -> None:
    here = site()
    handler = here.handlers[service, method]
    context = _context(peer)
    parse = handler.request_deserializer
    if not handler.request_streaming:
        request = parse(data)
        call = handler.unary_unary(request, context)
        here.loop.run_until_complete(call)
        return
    messages = [parse(part) for part in data.split(SEPARATOR, MAX_STREAM_MESSAGES)]
    read_all = asyncio.Event()
    requests = _requests(messages, read_all)
    if handler.response_streaming:
        running = _collect(handler.stream_stream(requests, context))
    else:
        running = handler.stream_unary(requests, context)
    task = here.loop.create_task(running)
    here.loop.run_until_complete(_settle_then_cancel(task, read_all))


RPCS: dict[str, tuple[str, str, str]] = {
    # target: (service, method, the caller's certificate)
    "grpc_publish": ("Disseminator", "Publish", "production-dept"),
    "grpc_publish_parts": ("Disseminator", "PublishParts", "production-dept"),
    "grpc_membership": ("Disseminator", "GetMembership", "production-dept"),
    "grpc_subscribe": ("Disseminator", "Subscribe", "alice"),
    "grpc_link": ("Disseminator", "Link", "d2"),
    "grpc_unsubscribe": ("Disseminator", "Unsubscribe", "alice"),
    "grpc_receipts": ("Disseminator", "Receipts", "d2"),
    "grpc_notices": ("Disseminator", "Notices", "alice"),
    "grpc_get_receipts": ("Disseminator", "GetReceipts", "production-dept"),
    "dht_ping": ("Dht", "Ping", "d2"),
    "dht_find_node": ("Dht", "FindNode", "d2"),
    "dht_find_value": ("Dht", "FindValue", "d2"),
    "dht_store": ("Dht", "Store", "d2"),
    "admin_status": ("Admin", "Status", "production-dept"),
    "admin_subscribers": ("Admin", "Subscribers", "production-dept"),
}


def _register(name: str, service: str, method: str, peer: str) -> None:
    def run(data: bytes) -> None:
        _call(service, method, peer, data)

    run.__doc__ = f"{service}.{method} as {peer} calls it."
    target(name, expected=(Refusal,), setup=site)(run)


for _name, (_service, _method, _peer) in RPCS.items():
    _register(_name, _service, _method, _peer)


# ---- seeds ------------------------------------------------------------------------------


def _signed_lease(*, leave: bool) -> bytes:
    from xdn import certs, crypto, lease

    member = certs.credential_from_pem(pki("alice.pem")).member_id
    now_ms = int(NOW.timestamp() * 1000)
    issued = lease.issue(
        member=member,
        site="" if leave else "d1",
        block="" if leave else "ProductionProcess",
        concepts=() if leave else ("WorkOrder",),
        now_ms=now_ms,
        period_ms=3_600_000,
        leave=leave,
    )
    return lease.sign(issued, crypto.load_private_key_pem(pki("alice.key"))).to_bytes()


def _record() -> dht_pb2.DhtSiteRecord:
    return dht_pb2.DhtSiteRecord(
        site="d2",
        address="d2.test:7000",
        block="WorkOrder",
        issued_at_ms=int(NOW.timestamp() * 1000),
        expires_at_ms=int(NOW.timestamp() * 1000) + 1,
        certificate_pem=pki("d2.pem"),
        signature=b"\x30" * 8,
    )


def _stream(*messages: Any) -> bytes:
    return SEPARATOR.join(m.SerializeToString() for m in messages)


def seeds(encoded: Any, first: Any, hop: Any) -> dict[str, list[bytes]]:
    """A few valid requests per target (``encoded``: a document, ``first`` / ``hop``: its
    provenance as published and as relayed), written by ``make_seeds.py``."""
    from xdn.wireconv import dissemination_to_pb

    diss = dissemination_to_pb(
        encoded.signed_manifest,
        ((f, encoded.range_proofs[f.concept]) for f in encoded.fragments),
        provenance=first.to_nquads(),
        publisher_certificate=pki("production-dept.pem"),
    )
    publish = pb.PublishRequest(dissemination=diss, publish_id=b"p" * 16).SerializeToString()
    half = len(publish) // 2
    key = bytes(range(20))
    return {
        "grpc_publish": [publish, pb.PublishRequest(publish_id=b"x").SerializeToString()],
        "grpc_publish_parts": [
            _stream(
                pb.Part(data=publish[:half], size=len(publish), more=True),
                pb.Part(data=publish[half:]),
            ),
        ],
        "grpc_membership": [
            pb.MembershipRequest(publisher="production-dept", view=1, since=1).SerializeToString()
        ],
        "grpc_subscribe": [
            _stream(
                pb.ClientMessage(
                    subscribe=pb.SubscribeRequest(
                        concepts=["WorkOrder"], retained=True, lease=_signed_lease(leave=False)
                    )
                ),
                pb.ClientMessage(ack=pb.Ack(sequence=1, receipt=hop.to_nquads())),
                pb.ClientMessage(lease=_signed_lease(leave=False)),
            ),
            _stream(pb.ClientMessage(subscribe=pb.SubscribeRequest())),
        ],
        "grpc_link": [
            _stream(
                pb.LinkMessage(hello=pb.LinkHello(site="d2", block="WorkOrder")),
                pb.LinkMessage(
                    interest=pb.InterestUpdate(
                        members=[
                            pb.Member(
                                certificate=pki("alice.pem"), lease=_signed_lease(leave=False)
                            )
                        ],
                        view=7,
                        version=1,
                    )
                ),
                pb.LinkMessage(ack=pb.Ack(sequence=1, receipt=hop.to_nquads())),
            ),
        ],
        "grpc_unsubscribe": [
            pb.UnsubscribeRequest(leave=_signed_lease(leave=True)).SerializeToString(),
            pb.UnsubscribeRequest().SerializeToString(),
        ],
        "grpc_receipts": [pb.ReceiptBatch(receipts=[hop.to_nquads()]).SerializeToString()],
        "grpc_notices": [pb.NoticeBatch(notices=[hop.to_nquads()]).SerializeToString()],
        "grpc_get_receipts": [
            pb.ReceiptsRequest(publisher="production-dept", after=1, limit=5).SerializeToString()
        ],
        "dht_ping": [
            dht_pb2.DhtPingRequest(sender_address="d2.test:7000", nonce=key).SerializeToString()
        ],
        "dht_find_node": [
            dht_pb2.DhtFindNodeRequest(
                sender_address="d2.test:7000", target=bytes(32)
            ).SerializeToString()
        ],
        "dht_find_value": [
            dht_pb2.DhtFindValueRequest(
                sender_address="d2.test:7000", key=bytes(32)
            ).SerializeToString()
        ],
        "dht_store": [
            dht_pb2.DhtStoreRequest(
                sender_address="d2.test:7000", key=bytes(32), record=_record()
            ).SerializeToString()
        ],
        "admin_status": [admin_pb2.SiteStatusRequest(subscriber_limit=5).SerializeToString()],
        "admin_subscribers": [admin_pb2.SubscribersRequest(limit=3, after="a").SerializeToString()],
    }
