"""Bad input against a running network: every abuse gets a typed status, the sites keep serving.

One real three-site network (mutual TLS, port 0) is shared by the module, with alice (Cred1)
subscribed at d2 throughout. Each test calls the ``Disseminator`` RPCs directly with
``grpc.aio`` over mutual TLS — malformed and oversized protobuf, calls under the wrong
certificate, unknown concepts, protocol violations, a certificate from another CA — asserts the
status code and that the message says what was wrong, then checks that every site still answers
its health check and alice's subscriber is still running. The last test publishes after all of
that and checks alice receives exactly what her policy grants: nothing was lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork
from deploy.pki import Party, issue_party
from tests.integration.networks import serving_alice
from tests.integration.raw_calls import site_channel, stream_error
from xdn import certs
from xdn.grpc_tls import MAX_MESSAGE_BYTES, TlsFiles
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration

SERVICE = "xdn.wire.v1.Disseminator"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
TIMEOUT = 10.0


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    """The default network, plus carol (Cred1, raw-stream abuser), alice subscribed at d2."""
    network = LocalNetwork(tmp_path_factory.mktemp("bad-input") / "net")
    network.workdir.mkdir(parents=True)
    network.prepare()
    issue_party(
        network.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
        now=datetime.now(UTC),
    )
    # A publisher the CA certifies but no site's configuration names.
    issue_party(network.certs, Party(name="rogue-dept", role="publisher"), now=datetime.now(UTC))
    with serving_alice(network):
        yield network


# ---- helpers -------------------------------------------------------------------------------
def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _call_error(
    network: LocalNetwork, site: str, name: str,
    call: Callable[[pb_grpc.DisseminatorStub], Any], **kwargs: Any,
) -> grpc.aio.AioRpcError:
    """Make one unary call that must fail; return its error."""
    async with site_channel(network, site, name, **kwargs) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await call(pb_grpc.DisseminatorStub(channel))
    return info.value


async def _health(network: LocalNetwork, site: str) -> int:
    async with site_channel(network, site, "d1") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=SERVICE), timeout=TIMEOUT
        )
    return int(reply.status)


def _assert_serving(network: LocalNetwork) -> None:
    """Every site answers SERVING over mutual TLS and alice's subscriber is still connected."""
    for site in network.sites:
        assert _run(_health(network, site)) == health_pb2.HealthCheckResponse.SERVING, site
    assert network.subscriber_running("alice"), network.output("alice")


def _site_output(network: LocalNetwork, site: str) -> str:
    return (network.workdir / f"{site}.out").read_text(errors="replace")


def _publish_request(*, publisher: str, concept: str = "WorkOrder") -> pb.PublishRequest:
    fragment = pb.Fragment(
        fragment_id="bad-doc#0", document_id="bad-doc", publisher=publisher, concept=concept,
        position=0, parent=-1, epoch=1, key_name="k", cipher_value=b"\x00" * 28,
    )
    manifest = pb.Manifest(document_id="bad-doc", publisher=publisher, version=1, leaf_count=1)
    return pb.PublishRequest(
        dissemination=pb.Dissemination(manifest=manifest, fragments=[fragment])
    )


# ---- malformed and oversized messages ------------------------------------------------------
GARBAGE = {
    "truncated": b"\x0a\x10abc",  # field 1, length 16, only three bytes follow
    "endless-varint": b"\xff" * 16,  # a varint tag that never ends
    "unclosed-group": b"\x0b",  # start group, never ended
    "stray-end-group": b"\x0c",  # end group without a start
}


async def _raw_call(network: LocalNetwork, method: str, garbage: bytes) -> grpc.aio.AioRpcError:
    """Send undecodable bytes to ``method`` (unary Publish or the Subscribe stream)."""
    async with site_channel(network, "d2" if method == "Subscribe" else "d1",
                        "carol" if method == "Subscribe" else "production-dept") as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            if method == "Publish":
                publish = channel.unary_unary(
                    f"/{SERVICE}/Publish",
                    request_serializer=lambda b: b, response_deserializer=lambda b: b,
                )
                await publish(garbage, timeout=TIMEOUT)
            else:
                subscribe = channel.stream_stream(
                    f"/{SERVICE}/Subscribe",
                    request_serializer=lambda b: b, response_deserializer=lambda b: b,
                )
                async for _ in subscribe(iter([garbage]), timeout=TIMEOUT):
                    pass
    return info.value


@pytest.mark.parametrize("method", ["Publish", "Subscribe"])
@pytest.mark.parametrize("garbage", list(GARBAGE.values()), ids=list(GARBAGE))
def test_malformed_protobuf_is_refused_and_the_site_survives(
    net: LocalNetwork, method: str, garbage: bytes
) -> None:
    error = _run(_raw_call(net, method, garbage))
    assert error.code() not in (grpc.StatusCode.OK, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert "are not a valid protobuf message" in (error.details() or "")
    _assert_serving(net)


@pytest.mark.parametrize("method", ["Publish", "Subscribe"])
def test_malformed_protobuf_gets_a_typed_status(net: LocalNetwork, method: str) -> None:
    error = _run(_raw_call(net, method, GARBAGE["truncated"]))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_oversized_message_is_refused(net: LocalNetwork) -> None:
    request = _publish_request(publisher="production-dept")
    request.dissemination.fragments[0].cipher_value = b"\x00" * (MAX_MESSAGE_BYTES + 1024)
    assert request.ByteSize() > MAX_MESSAGE_BYTES
    bigger = (
        ("grpc.max_send_message_length", 2 * MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    )
    error = _run(_call_error(
        net, "d1", "production-dept",
        lambda stub: stub.Publish(request, timeout=30), options=bigger,
    ))
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in (error.details() or "")
    _assert_serving(net)


# ---- Publish -------------------------------------------------------------------------------
def test_publish_by_a_subscriber_certificate_is_unauthenticated(net: LocalNetwork) -> None:
    error = _run(_call_error(
        net, "d1", "carol",
        lambda stub: stub.Publish(_publish_request(publisher="carol"), timeout=TIMEOUT),
    ))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "role 'subscriber', expected 'publisher'" in (error.details() or "")
    _assert_serving(net)


def test_publish_under_another_publishers_name_is_denied(net: LocalNetwork) -> None:
    error = _run(_call_error(
        net, "d1", "production-dept",
        lambda stub: stub.Publish(_publish_request(publisher="qa-company"), timeout=TIMEOUT),
    ))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'production-dept' may not publish as 'qa-company'" in (error.details() or "")
    _assert_serving(net)


def test_publish_of_an_unknown_concept_is_invalid(net: LocalNetwork) -> None:
    request = _publish_request(publisher="production-dept", concept="NoSuchConcept")
    error = _run(_call_error(
        net, "d1", "production-dept", lambda stub: stub.Publish(request, timeout=TIMEOUT)
    ))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown concept" in (error.details() or "")
    _assert_serving(net)


def test_publish_of_nothing_is_invalid(net: LocalNetwork) -> None:
    error = _run(_call_error(
        net, "d1", "production-dept",
        lambda stub: stub.Publish(pb.PublishRequest(), timeout=TIMEOUT),
    ))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "neither a document nor keys" in (error.details() or "")
    _assert_serving(net)


def test_publish_at_a_site_that_is_not_a_root_fails_with_a_redirect_to_its_uplink(
    net: LocalNetwork,
) -> None:
    error = _run(_call_error(
        net, "d2", "production-dept",
        lambda stub: stub.Publish(_publish_request(publisher="production-dept"), timeout=TIMEOUT),
    ))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "site d2 is not a root site" in (error.details() or "")
    assert ("xdn-redirect", net.address("d1")) in tuple(error.trailing_metadata() or ())
    _assert_serving(net)


def test_publish_by_a_publisher_the_site_does_not_know_fails_precondition(
    net: LocalNetwork,
) -> None:
    error = _run(_call_error(
        net, "d1", "rogue-dept",
        lambda stub: stub.Publish(_publish_request(publisher="rogue-dept"), timeout=TIMEOUT),
    ))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "enforces no policy of publisher 'rogue-dept'" in (error.details() or "")
    _assert_serving(net)


def test_membership_says_where_the_site_stands_for_the_publisher(net: LocalNetwork) -> None:
    async def standing(site: str, name: str) -> pb.SiteStanding:
        async with site_channel(net, site, name) as channel:
            reply = await pb_grpc.DisseminatorStub(channel).GetMembership(
                pb.MembershipRequest(publisher=name), timeout=TIMEOUT
            )
        assert reply.site == site
        return reply.standing

    assert _run(standing("d1", "production-dept")) == pb.SiteStanding(
        root=True, policy_version=1
    )
    assert _run(standing("d2", "production-dept")) == pb.SiteStanding(
        root=False, policy_version=1, uplink=net.address("d1")
    )
    assert _run(standing("d1", "rogue-dept")) == pb.SiteStanding(root=True, policy_version=0)


def test_document_keys_in_another_publishers_name_are_invalid(net: LocalNetwork) -> None:
    grant = pb.DocumentKeys(publisher="qa-company", concept="WorkOrder", subscriber="alice",
                            sealed=b"XLG1")
    request = pb.PublishRequest(document_keys=[grant])
    error = _run(_call_error(
        net, "d1", "production-dept", lambda stub: stub.Publish(request, timeout=TIMEOUT)
    ))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "names another publisher" in (error.details() or "")
    _assert_serving(net)


def test_get_membership_of_another_publisher_is_denied(net: LocalNetwork) -> None:
    error = _run(_call_error(
        net, "d1", "production-dept",
        lambda stub: stub.GetMembership(
            pb.MembershipRequest(publisher="qa-company"), timeout=TIMEOUT
        ),
    ))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "own membership" in (error.details() or "")
    _assert_serving(net)


# ---- Subscribe, Unsubscribe, Link -----------------------------------------------------------
def test_subscribe_stream_not_starting_with_subscribe_request_is_invalid(
    net: LocalNetwork,
) -> None:
    first_ack = [pb.ClientMessage(ack=pb.Ack(sequence=1))]
    error, replies = _run(stream_error(net, "d2", "carol", "Subscribe", first_ack))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must start with a SubscribeRequest" in (error.details() or "")
    assert replies == []
    # Nothing at all: our half-close is the first thing the site reads.
    error, replies = _run(stream_error(net, "d2", "carol", "Subscribe", [], half_close=True))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert replies == []
    _assert_serving(net)


def test_subscribe_for_an_unknown_concept_is_invalid(net: LocalNetwork) -> None:
    request = [pb.ClientMessage(subscribe=pb.SubscribeRequest(concepts=["NoSuchConcept"]))]
    error, replies = _run(stream_error(net, "d2", "carol", "Subscribe", request))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "unknown concept 'NoSuchConcept'" in (error.details() or "")
    assert replies == []
    _assert_serving(net)


def test_link_from_a_subscriber_certificate_is_unauthenticated(net: LocalNetwork) -> None:
    hello = [pb.LinkMessage(hello=pb.LinkHello(site="d2", block="WorkOrder"))]
    error, replies = _run(stream_error(net, "d1", "carol", "Link", hello))
    assert error.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "role 'subscriber', expected 'site'" in (error.details() or "")
    assert replies == []
    _assert_serving(net)


def test_link_for_a_block_the_certificate_does_not_authorise_is_denied(
    net: LocalNetwork,
) -> None:
    # d3 is a genuine site, but the CA authorised it for ResourceDetails only.
    hello = [pb.LinkMessage(hello=pb.LinkHello(site="d3", block="WorkOrder"))]
    error, replies = _run(stream_error(net, "d1", "d3", "Link", hello))
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "'d3' may serve block 'ResourceDetails' (its certificate), not 'WorkOrder'" in (
        error.details() or ""
    )
    assert replies == []
    _assert_serving(net)


def test_unsubscribe_without_a_subscription_is_not_found(net: LocalNetwork) -> None:
    # bob holds no subscription anywhere in this network.
    error = _run(_call_error(
        net, "d2", "bob", lambda stub: stub.Unsubscribe(pb.UnsubscribeRequest(), timeout=TIMEOUT)
    ))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    bob = _member_id(net, "bob")
    assert f"'bob' (certificate {bob}) has no subscription at site d2" in (error.details() or "")
    _assert_serving(net)


def test_client_certificate_from_another_ca_fails_the_handshake(net: LocalNetwork) -> None:
    """A rogue CA's 'alice' cannot even connect, let alone unsubscribe the real alice."""
    now = datetime.now(UTC)
    rogue_ca, rogue_key = certs.create_ca("rogue CA", now=now)
    cert, key = certs.issue(
        rogue_ca, rogue_key, name="alice", role="subscriber", attributes={"OU": "Cred1"}, now=now
    )
    tls = TlsFiles(cert_pem=cert, key_pem=key, ca_pem=(net.certs / "ca.pem").read_bytes())
    error = _run(_call_error(
        net, "d2", "alice",
        lambda stub: stub.Unsubscribe(pb.UnsubscribeRequest(), timeout=TIMEOUT), tls=tls,
    ))
    assert error.code() == grpc.StatusCode.UNAVAILABLE
    _assert_serving(net)


async def _bogus_ack(network: LocalNetwork) -> tuple[list[Any], grpc.StatusCode, str]:
    """Subscribe as carol, acknowledge a sequence never sent, keep our side open.

    Returns the replies and the final status and details. The call's deadline is long: a
    status other than DEADLINE_EXCEEDED is the site's doing.
    """
    subscribed, ended = asyncio.Event(), asyncio.Event()

    async def requests() -> AsyncIterator[pb.ClientMessage]:
        yield pb.ClientMessage(subscribe=pb.SubscribeRequest())
        await subscribed.wait()  # the site has registered carol
        yield pb.ClientMessage(ack=pb.Ack(sequence=10**9))
        await ended.wait()  # keep our side open: only the site may end it

    replies: list[Any] = []
    async with site_channel(network, "d2", "carol") as channel:
        call = pb_grpc.DisseminatorStub(channel).Subscribe(requests(), timeout=3 * TIMEOUT)
        try:
            async for reply in call:
                replies.append(reply)
                subscribed.set()
        except grpc.aio.AioRpcError as exc:
            code, details = exc.code(), exc.details() or ""
        else:
            code, details = await call.code(), await call.details() or ""
        finally:
            ended.set()
    return replies, code, details


def test_path_refresh_of_a_group_not_granted_ends_the_stream(net: LocalNetwork) -> None:
    messages = [
        pb.ClientMessage(subscribe=pb.SubscribeRequest()),
        pb.ClientMessage(
            refresh=pb.PathRefresh(publisher="qa-company", concept="QualityInspection")
        ),
    ]
    error, replies = _run(stream_error(net, "d2", "carol", "Subscribe", messages))
    assert replies and replies[0].WhichOneof("kind") == "subscribed"
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    carol = _member_id(net, "carol")
    assert f"path refresh of qa-company/QualityInspection asked by {carol!r}" in (
        error.details() or ""
    )
    _assert_serving(net)


def _member_id(network: LocalNetwork, name: str) -> str:
    """Who ``name``'s certificate is to sites: its member id, not its common name."""
    return certs.credential_from_pem(TlsFiles.from_dir(network.certs, name).cert_pem).member_id


def test_ack_of_a_sequence_never_sent_ends_the_stream(net: LocalNetwork) -> None:
    replies, code, _ = _run(_bogus_ack(net))
    assert replies and replies[0].WhichOneof("kind") == "subscribed"
    assert replies[0].subscribed.subscriber == _member_id(net, "carol")
    assert code == grpc.StatusCode.INVALID_ARGUMENT  # the site ended it, not our deadline
    assert "acknowledgement of 1000000000, but only 0 were sent" in _site_output(net, "d2")
    _assert_serving(net)


def test_ack_of_a_sequence_never_sent_is_reported_to_the_subscriber(net: LocalNetwork) -> None:
    _, code, details = _run(_bogus_ack(net))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "acknowledgement of 1000000000" in details


# ---- nothing lost -------------------------------------------------------------------------
def test_after_the_abuse_alice_still_receives_exactly_her_grant(net: LocalNetwork) -> None:
    _assert_serving(net)
    net.publish("production-dept", [SAMPLE], wait_for=("alice",))
    published = [SAMPLE, net.publish_marker("production-dept", ["alice"])]
    expected = expected_deliveries(
        net, load_ontology([ONTOLOGY]), "alice", {"production-dept": published}
    )
    assert len(expected) == 2
    received, refused = read_received(net.inbox("alice"))
    assert (received, refused) == (expected, 0)
    lines = (net.inbox("alice") / "received.jsonl").read_text().splitlines()
    assert len(lines) == 2, [json.loads(line)["document"] for line in lines]



def test_refused_calls_are_counted_in_the_metrics(net: LocalNetwork) -> None:
    import urllib.request

    _run(_raw_call(net, "Publish", GARBAGE["truncated"]))
    port = (net.workdir / "state" / "d1" / "metrics_port").read_text().strip()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    counted = [
        line for line in text.splitlines()
        if line.startswith('xdn_refused_calls_total{reason="ProtocolError"}')
    ]
    assert counted and float(counted[0].split()[-1]) >= 1
    assert "xdn_queued_deliveries" in text
