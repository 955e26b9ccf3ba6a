"""The certificates the abuse benchmark floods sites with are refused, each for its own reason.

One real three-site network, alice (Cred1) subscribed at d2, and the four bad certificates of
:func:`benchmarks.bench_abuse.issue_flood_certificates` issued before the sites start (so they
load the CRL that revokes one). Each test opens Subscribe calls exactly as the flooder does
(:func:`benchmarks.bench_abuse.refused_subscribe`: a new channel, a new handshake) and asserts
how the site refused it: in the TLS handshake (another CA's certificate, an expired one: the
client sees only ``UNAVAILABLE``, the site's log says why) or by the servicer
(``UNAUTHENTICATED`` naming the revocation or the wrong role, counted in
``xdn_refused_calls_total``). Afterwards alice still receives what is published.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import grpc
import pytest

from benchmarks.bench_abuse import (
    flood_credentials,
    issue_flood_certificates,
    refusal,
    refused_subscribe,
)
from deploy.network import LocalNetwork, wait_until
from deploy.pki import Party, issue_party
from tests.integration.networks import serving_alice
from xdn.grpc_tls import TlsFiles

pytestmark = pytest.mark.integration

SITES = ("d2", "d1")
# Why the site's TLS refuses the handshake, as its log says.
HANDSHAKE_REFUSALS = {
    "foreign-ca": "CERTIFICATE_VERIFY_FAILED: unable to get local issuer certificate",
    "expired": "CERTIFICATE_VERIFY_FAILED: certificate has expired",
}
# What the servicer answers, whole.
SERVICER_REFUSALS = {
    "revoked": "certificate of 'revoked-sub' was revoked",
    "wrong-role": "certificate of 'stray-site' has role 'site', expected 'subscriber'",
}


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    network = LocalNetwork(tmp_path_factory.mktemp("refused-certificates") / "net")
    network.workdir.mkdir(parents=True)
    network.prepare()
    issue_flood_certificates(network.certs, now=datetime.now(UTC))
    issue_party(network.certs, Party(name="carol", role="subscriber", attributes={"OU": "Cred1"}),
                now=datetime.now(UTC))  # a good certificate: the control
    # (GRPC_VERBOSITY=INFO: the sites log why a handshake failed)
    with serving_alice(network, site_env={"GRPC_VERBOSITY": "INFO"}):
        yield network


def _subscribe(network: LocalNetwork, site: str, kind: str) -> tuple[grpc.StatusCode, str]:
    tls = flood_credentials(network.certs)[kind]
    return asyncio.run(refused_subscribe(network.address(site), tls))


def test_the_flooders_call_sees_a_good_certificate_accepted(net: LocalNetwork) -> None:
    """The control: what the flooder counts as refused is not every call it makes."""
    tls = TlsFiles.from_dir(net.certs, "carol")
    code, details = asyncio.run(refused_subscribe(net.address("d2"), tls))

    assert refusal(code, details) == "accepted"
    assert details.startswith("subscribed as ")


def _unauthenticated(network: LocalNetwork, site: str) -> float:
    return network.metric(site, "xdn_refused_calls_total", reason="unauthenticated")


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("kind", list(HANDSHAKE_REFUSALS))
def test_the_handshake_refuses_another_cas_and_expired_certificates(
    net: LocalNetwork, kind: str, site: str
) -> None:
    code, details = _subscribe(net, site, kind)

    assert code == grpc.StatusCode.UNAVAILABLE, details
    assert refusal(code, details) == "handshake"
    assert wait_until(lambda: HANDSHAKE_REFUSALS[kind] in net.full_output(site), timeout=10)


@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("kind", list(SERVICER_REFUSALS))
def test_the_site_refuses_revoked_and_wrong_role_certificates(
    net: LocalNetwork, kind: str, site: str
) -> None:
    counted = _unauthenticated(net, site)

    code, details = _subscribe(net, site, kind)

    assert code == grpc.StatusCode.UNAUTHENTICATED
    assert details == SERVICER_REFUSALS[kind]
    assert refusal(code, details) == kind
    assert wait_until(lambda: _unauthenticated(net, site) == counted + 1, timeout=10)


def test_alice_still_receives_after_every_kind_is_refused(net: LocalNetwork) -> None:
    ends = {(kind, site): refusal(*_subscribe(net, site, kind))
            for kind in (*HANDSHAKE_REFUSALS, *SERVICER_REFUSALS) for site in SITES}
    assert "accepted" not in ends.values(), ends

    net.publish_marker("production-dept", ["alice"])
    assert net.subscriber_running("alice"), net.output("alice")
