"""What sites and subscribers say to their user (issue #20): a CA mismatch and a revoked
certificate named as such, health for every served service, reflection under v1 and v1alpha."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2

from deploy.network import LocalNetwork, wait_until
from deploy.pki import Party, ensure_ca, issue_party
from tests.integration.raw_calls import site_channel

pytestmark = pytest.mark.integration


def _subscribe(network: LocalNetwork, certs: Path, name: str, out: Path) -> (
    subprocess.CompletedProcess[str]
):
    return subprocess.run(
        [sys.executable, "-m", "cli", "subscribe", "--connect", network.address("d2"),
         "--name", name, "--certs", str(certs), "--out", str(out / "inbox"),
         "--state-dir", str(out / "state")],
        capture_output=True, text=True, timeout=60, check=False,
    )


def test_health_and_reflection(network: LocalNetwork) -> None:
    async def check() -> tuple[dict[str, int], list[str]]:
        async with site_channel(network, "d1", "alice") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            statuses = {
                name: (await stub.Check(health_pb2.HealthCheckRequest(service=name))).status
                for name in ("", "xdn.wire.v1.Disseminator", "xdn.wire.v1.Dht",
                             "xdn.wire.v1.Admin")
            }
            call = channel.stream_stream(
                "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
                request_serializer=reflection_pb2.ServerReflectionRequest.SerializeToString,
                response_deserializer=reflection_pb2.ServerReflectionResponse.FromString,
            )
            replies = call(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
            names = [
                s.name async for reply in replies for s in reply.list_services_response.service
            ]
        return statuses, names

    statuses, names = asyncio.run(check())
    assert statuses == dict.fromkeys(statuses, health_pb2.HealthCheckResponse.SERVING)
    assert {"xdn.wire.v1.Disseminator", "xdn.wire.v1.Dht", "xdn.wire.v1.Admin",
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
            "grpc.reflection.v1.ServerReflection"} <= set(names)


def test_another_ca_is_named_at_once(network: LocalNetwork, tmp_path: Path) -> None:
    other = tmp_path / "other-certs"
    now = datetime.now(UTC)
    ensure_ca(other, now=now)
    issue_party(other, Party(name="alice", role="subscriber", attributes={"OU": "Cred1"}), now=now)
    done = _subscribe(network, other, "alice", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the site's certificate is not signed by the CA in --certs" in done.stderr
    assert "is this the cluster's CA?" in done.stderr
    assert "reconnecting" not in done.stdout
    assert "ssl_transport_security" not in done.stderr  # no gRPC core lines without -vv


def test_a_revoked_subscriber_is_told(network: LocalNetwork, tmp_path: Path) -> None:
    now = datetime.now(UTC)
    issue_party(network.certs, Party(name="carol", role="subscriber",
                                     attributes={"OU": "Cred1"}), now=now)
    revoke = subprocess.run(
        [sys.executable, "-m", "cli", "certs", "revoke", "--dir", str(network.certs),
         "--name", "carol"], capture_output=True, text=True, check=False,
    )
    assert revoke.returncode == 0, revoke.stderr
    assert wait_until(lambda: "CRL reloaded" in network.output("d2"))
    done = _subscribe(network, network.certs, "carol", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "your certificate (carol.pem in --certs) was revoked by the CA; the site" in done.stderr
    assert "Internal error from Core" not in done.stdout + done.stderr


def test_a_policy_reload_is_no_warning(network: LocalNetwork) -> None:
    network.signal_site("d1", signal.SIGHUP)
    assert wait_until(lambda: "site d1: policies reloaded" in network.output("d1"))
    assert "WARNING policies reloaded" not in network.output("d1")


def test_a_downlink_says_which_uplink_it_found(network: LocalNetwork) -> None:
    uplink = f"site d2: uplink at {network.address('d1')}"
    assert wait_until(lambda: uplink in network.output("d2")), network.output("d2")


def test_unsubscribe_ends_a_debugging_subscriber_cleanly(
    network: LocalNetwork, tmp_path: Path
) -> None:
    """``xdn -vv subscribe`` ended by ``xdn unsubscribe``: exit 0, a clean message, and no
    traceback among the debug lines."""
    out = tmp_path / "alice"
    subscriber = subprocess.Popen(
        [sys.executable, "-m", "cli", "-vv", "subscribe", "--connect", network.address("d2"),
         "--name", "alice", "--certs", str(network.certs), "--out", str(out / "inbox"),
         "--state-dir", str(out / "state")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert wait_until(lambda: (out / "inbox" / "subscription.json").exists()
                          or subscriber.poll() is not None)
        done = subprocess.run(
            [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address("d2"),
             "--name", "alice", "--certs", str(network.certs)],
            capture_output=True, text=True, timeout=60, check=False,
        )
        assert done.returncode == 0, done.stderr
        stdout, stderr = subscriber.communicate(timeout=30)
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.communicate()
    assert subscriber.returncode == 0, stdout + stderr
    assert f"alice: unsubscribed at {network.address('d2')}; subscription ended" in stdout
    assert "DEBUG" in stderr  # -vv was on
    assert "Traceback" not in stderr and "PERMISSION_DENIED" not in stdout + stderr
