"""No caller can stall a site: each limit refuses its abuse, and the sites keep serving.

One real three-site network (mutual TLS, port 0) is shared by the module, its sites configured
with small ``[limits]`` so that each abuse is cheap to send; alice (Cred1) is subscribed at d2
throughout. Each test abuses one limit over raw ``grpc.aio`` calls — as carol (a subscriber),
d4 (a site certificate for a sub-block of d1's) or production-dept (a publisher) — and asserts
``RESOURCE_EXHAUSTED`` with a message naming the limit and its value, then that every site still
answers its health check and alice's subscriber still runs. The last test publishes and checks
alice receives the document: the sites still serve an honest subscriber.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deploy.network import LocalNetwork, SiteSpec
from deploy.pki import Party, issue_party
from tests.integration.networks import serving_alice
from tests.integration.raw_calls import (
    TIMEOUT,
    issue_spare_site,
    site_channel,
    spare_site_hello,
    stream_error,
)
from xdn import certs, crypto, identity, lease
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

pytestmark = [pytest.mark.integration, pytest.mark.long]

SERVICE = "xdn.wire.v1.Disseminator"
MIB = 1024 * 1024
LIMITS = {
    "subscribe_concepts": 4,
    "interest_members": 50,
    "link_members": 60,
    "streams_per_subscriber": 2,
    "streams_per_site": 2,
    "heartbeat_min_seconds": 0.1,
    "heartbeat_max_seconds": 30,
    "stream_message_bytes": 1 * MIB,
    "memory_bytes": 2 * MIB,
    "document_bytes": 2 * MIB,  # (at most memory_bytes)
}


class _LimitedNetwork(LocalNetwork):
    """The default network, every site with the small :data:`LIMITS`."""

    def site_config(self, site: SiteSpec, *, port: int = 0) -> Path:
        path = super().site_config(site, port=port)
        table = "".join(f"{key} = {value!r}\n" for key, value in LIMITS.items())
        path.write_text(path.read_text() + f"\n[limits]\n{table}")
        return path


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    network = _LimitedNetwork(
        tmp_path_factory.mktemp("limits") / "net", site_settings={"drain_seconds": 1}
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    now = datetime.now(UTC)
    issue_party(network.certs, Party(name="carol", role="subscriber",
                                     attributes={"OU": "Cred1"}), now=now)
    issue_spare_site(network)  # d4: a site certificate no running site uses
    with serving_alice(network):
        yield network


# ---- helpers -------------------------------------------------------------------------------
def _assert_refused(error: grpc.aio.AioRpcError, *fragments: str) -> None:
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    for fragment in fragments:
        assert fragment in (error.details() or ""), error.details()


async def _health(network: LocalNetwork, site: str) -> int:
    async with site_channel(network, site, "d1") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE), timeout=TIMEOUT
        )
    return int(reply.status)


def _assert_serving(network: LocalNetwork) -> None:
    for site in network.sites:
        assert asyncio.run(_health(network, site)) == health_pb2.HealthCheckResponse.SERVING
    assert network.subscriber_running("alice"), network.output("alice")


def _subscribe(*concepts: str) -> pb.ClientMessage:
    return pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=list(concepts)))


def _interest(members: list[pb.Member], *, more: bool = False) -> pb.LinkMessage:
    return pb.LinkMessage(interest=pb.InterestUpdate(members=members, more=more))


def _fake_members(count: int, prefix: str) -> list[pb.Member]:
    return [
        pb.Member(subscriber=f"{prefix}{i}", certificate=f"not a certificate {prefix}{i}".encode())
        for i in range(count)
    ]


# ---- Subscribe -----------------------------------------------------------------------------
def test_too_many_concepts_in_one_subscribe_are_refused(net: LocalNetwork) -> None:
    concepts = ["WorkOrder", "ResourceDetails", "ProductionProcess", "Production", "Nope"]
    error, replies = asyncio.run(stream_error(net, "d2", "carol", "Subscribe",
                                              [_subscribe(*concepts)]))
    _assert_refused(error, "names 5 concepts", "subscribe_concepts = 4")
    assert replies == []
    _assert_serving(net)


def test_a_concept_named_twice_is_invalid(net: LocalNetwork) -> None:
    error, _ = asyncio.run(stream_error(net, "d2", "carol", "Subscribe",
                                        [_subscribe("WorkOrder", "WorkOrder")]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "concept 'WorkOrder' is named twice" in (error.details() or "")


def test_an_oversized_subscribe_is_refused_before_it_is_parsed(net: LocalNetwork) -> None:
    """The measured attack: millions of concepts in one request (here ~1.2 MiB of them)."""
    huge = _subscribe(*(["WorkOrder"] * 120_000))
    assert huge.ByteSize() > LIMITS["stream_message_bytes"]
    started = time.monotonic()
    error, _ = asyncio.run(stream_error(net, "d2", "carol", "Subscribe", [huge]))
    _assert_refused(error, "xdn.wire.v1.ClientMessage of", "stream_message_bytes = 1048576")
    assert time.monotonic() - started < TIMEOUT / 2
    _assert_serving(net)


# ---- streams per certificate ----------------------------------------------------------------
async def _over_stream_limit(
    network: LocalNetwork, site: str, name: str, method: str, opening: Any,
) -> grpc.aio.AioRpcError:
    """Hold the limit's worth of silent streams open; return how one more is refused."""
    async with site_channel(network, site, name) as channel:
        stub = pb_grpc.DisseminatorStub(channel)
        never = asyncio.Event()

        async def silent() -> AsyncIterator[Any]:
            await never.wait()
            yield opening  # never reached

        limit = LIMITS["streams_per_subscriber" if method == "Subscribe" else "streams_per_site"]
        held = [getattr(stub, method)(silent(), timeout=3 * TIMEOUT) for _ in range(limit)]
        try:
            await asyncio.gather(*(call.wait_for_connection() for call in held))
            # The held streams may not be counted yet: the caller retries (_wait_refused).
            error, _ = await stream_error(network, site, name, method, [opening])
        finally:
            for call in held:
                call.cancel()
    return error


def test_a_subscriber_certificate_holds_at_most_its_streams(net: LocalNetwork) -> None:
    """The measured attack: streams that never send their first message."""
    error = _wait_refused(lambda: asyncio.run(
        _over_stream_limit(net, "d2", "carol", "Subscribe", _subscribe())
    ))
    _assert_refused(error, "subscriber certificate already holds 2 open Subscribe streams",
                    "streams_per_subscriber = 2")
    _assert_serving(net)


def test_a_site_certificate_holds_at_most_its_link_streams(net: LocalNetwork) -> None:
    error = _wait_refused(lambda: asyncio.run(
        _over_stream_limit(net, "d1", "d4", "Link", spare_site_hello())
    ))
    _assert_refused(error, "site certificate already holds 2 open Link streams",
                    "streams_per_site = 2")
    _assert_serving(net)


def _wait_refused(attempt: Any) -> grpc.aio.AioRpcError:
    """The held streams may reach the site after the probe does: try again within a deadline."""
    deadline = time.monotonic() + 3 * TIMEOUT
    while True:
        error: grpc.aio.AioRpcError = attempt()
        if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED or time.monotonic() > deadline:
            return error


# ---- heartbeats ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("interval_ms", "limit"),
    [(300_000, "heartbeat_max_seconds = 30"), (20, "heartbeat_min_seconds = 0.1")],
)
def test_a_heartbeat_interval_out_of_bounds_is_refused(
    net: LocalNetwork, interval_ms: int, limit: str
) -> None:
    """The measured attack: a 5-minute heartbeat holding a silent stream for 15 minutes."""
    beat = pb.ClientMessage(heartbeat=pb.Heartbeat(interval_ms=interval_ms))
    error, replies = asyncio.run(stream_error(net, "d2", "carol", "Subscribe",
                                              [_subscribe(), beat]))
    _assert_refused(error, f"announces an interval of {interval_ms / 1000:g}s", limit)
    assert replies and replies[0].WhichOneof("kind") == "subscribed"
    _assert_serving(net)


# ---- a downlink's interest -------------------------------------------------------------------
def test_too_many_members_in_one_interest_update_are_refused(net: LocalNetwork) -> None:
    """The measured attack: one InterestUpdate listing 40,000 members (here 51)."""
    error, _ = asyncio.run(stream_error(net, "d1", "d4", "Link",
                                        [spare_site_hello(), _interest(_fake_members(51, "m"))]))
    _assert_refused(error, "lists 51 members", "interest_members = 50", "chunks")
    _assert_serving(net)


def test_too_many_members_behind_one_link_are_refused(net: LocalNetwork) -> None:
    chunks = [_interest(_fake_members(50, "a"), more=True), _interest(_fake_members(11, "b"))]
    error, _ = asyncio.run(stream_error(net, "d1", "d4", "Link", [spare_site_hello(), *chunks]))
    _assert_refused(error, "link_members = 60")
    _assert_serving(net)


def test_one_certificate_under_two_names_is_invalid(net: LocalNetwork) -> None:
    """It used to kill the uplink's stream reader silently (a uniqueness error in the store)."""
    pem = (net.certs / "carol.pem").read_bytes()
    members = [pb.Member(subscriber="carol", certificate=pem),
               pb.Member(subscriber="carol2", certificate=pem)]
    error, _ = asyncio.run(stream_error(net, "d1", "d4", "Link",
                                        [spare_site_hello(), _interest(members)]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "lists one certificate twice" in (error.details() or "")
    _assert_serving(net)


def _carol_behind_d4(network: LocalNetwork) -> pb.Member:
    """carol as a downlink d4 lists her: member id, certificate, and her own lease naming d4."""
    pem = (network.certs / "carol.pem").read_bytes()
    member_id = certs.credential_from_pem(pem).member_id
    signed = lease.sign(
        lease.issue(
            member=member_id, site="d4", block="WorkOrder",
            now_ms=lease.millis(datetime.now(UTC)), period_ms=3_600_000,
        ),
        crypto.load_private_key_pem((network.certs / "carol.key").read_bytes()),
    )
    return pb.Member(subscriber=member_id, certificate=pem, lease=signed.to_bytes())


async def _members_after_chunks(network: LocalNetwork) -> set[str]:
    """Link as d4 with carol's membership in two chunks; return who d1 then lists behind it."""
    carol = _carol_behind_d4(network)
    stop = asyncio.Event()

    async def requests() -> AsyncIterator[pb.LinkMessage]:
        yield spare_site_hello()
        yield _interest(_fake_members(3, "x"), more=True)
        yield _interest([carol])
        await stop.wait()

    async with site_channel(network, "d1", "d4") as link, site_channel(network, "d1",
                                                              "production-dept") as pub:
        call = pb_grpc.DisseminatorStub(link).Link(requests(), timeout=3 * TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        names: set[str] = set()
        try:
            while "carol" not in names and time.monotonic() < deadline:
                reply = await pb_grpc.DisseminatorStub(pub).GetMembership(
                    pb.MembershipRequest(publisher="production-dept"), timeout=TIMEOUT
                )
                names = {identity.person(m.subscriber) for m in reply.members}
                await asyncio.sleep(0.1)
        finally:
            stop.set()
            call.cancel()
    return names


def test_an_interest_in_chunks_is_put_in_force_with_its_last_chunk(net: LocalNetwork) -> None:
    assert "carol" in asyncio.run(_members_after_chunks(net))
    _assert_serving(net)


# ---- memory budget ---------------------------------------------------------------------------
def _large_publish() -> pb.PublishRequest:
    """3 MiB of zeros: a gzip bomb when compressed, past the 2 MiB budget when not."""
    fragment = pb.Fragment(fragment_id="bomb#0", document_id="bomb", publisher="production-dept",
                           concept="WorkOrder", cipher_value=b"\x00" * (3 * MIB))
    manifest = pb.Manifest(document_id="bomb", publisher="production-dept", version=1)
    return pb.PublishRequest(
        dissemination=pb.Dissemination(manifest=manifest, fragments=[fragment])
    )


def _publish_error(
    net: LocalNetwork, compression: grpc.Compression | None
) -> grpc.aio.AioRpcError:
    async def publish() -> grpc.aio.AioRpcError:
        async with site_channel(net, "d1", "production-dept") as channel:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await pb_grpc.DisseminatorStub(channel).Publish(
                    _large_publish(), timeout=TIMEOUT, compression=compression
                )
        return info.value

    return asyncio.run(publish())


def test_a_compression_bomb_is_refused_before_it_is_inflated(net: LocalNetwork) -> None:
    """The measured attack: small gzip messages that inflate to tens of MiB each."""
    error = _publish_error(net, grpc.Compression.Gzip)
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED, error
    assert "gzip" in (error.details() or "").lower(), error.details()
    _assert_serving(net)


def test_a_large_message_past_the_memory_budget_is_refused(net: LocalNetwork) -> None:
    _assert_refused(_publish_error(net, None), "xdn.wire.v1.PublishRequest of 3.0 MiB",
                    "memory_bytes = 2097152", "send smaller messages")
    _assert_serving(net)


# ---- afterwards ------------------------------------------------------------------------------
def test_the_sites_still_serve_an_honest_subscriber(net: LocalNetwork) -> None:
    marker = net.publish_marker("production-dept", ["alice"])
    assert any(r["document"] == marker.stem for r in net.received("alice"))
