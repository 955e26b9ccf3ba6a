"""Identity is the certificate: a namesake or a re-issued certificate is another member.

Two CA-issued certificates may carry the same common name. Sites and key services key queues,
registrations and groups by member id (name plus certificate fingerprint, :mod:`xdn.identity`),
so a namesake cannot drain, acknowledge or end another's subscription, cannot evict her from
her groups, and a certificate re-issued after a theft joins as a new member, which rekeys the
old one out.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from deploy.network import LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn import certs
from xdn.grpc_tls import TlsFiles
from xdn.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
PUBLISHER = "production-dept"
ALICE = {"OU": "Cred1"}  # the default network's alice: granted production-dept's concepts


def _xdn(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args], capture_output=True, text=True, check=False
    )


def _namesake(network: LocalNetwork, name: str, site: str) -> str:
    """A subscriber ``name`` of the network holding a new certificate for CN ``alice``."""
    folder = network.workdir / f"certs-{name}"
    folder.mkdir()
    shutil.copy(network.certs / "ca.pem", folder / "ca.pem")
    shutil.copy(network.certs / "ca.key", folder / "ca.key")
    issue_party(folder, Party(name="alice", role="subscriber", attributes=ALICE),
                now=datetime.now(UTC))
    (folder / "ca.key").unlink()  # the CA stays the network's; only the namesake's key is here
    network.subscribers[name] = SubscriberSpec(
        name=name, site=site, attributes=ALICE, common_name="alice", certs=folder.name
    )
    return _member_id(folder, "alice")


def _member_id(folder: object, name: str) -> str:
    tls = TlsFiles.from_dir(folder, name)  # type: ignore[arg-type]
    return certs.credential_from_pem(tls.cert_pem).member_id


def _documents(network: LocalNetwork, subscriber: str) -> list[str]:
    return [str(r["document"]) for r in network.received(subscriber)]


def _publish(network: LocalNetwork, document_id: str, *wait_for: str) -> str:
    return network.publish(PUBLISHER, [SAMPLE], wait_for=wait_for, extra=("--id", document_id))


def test_a_namesake_neither_drains_nor_evicts_nor_unsubscribes_another(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    _publish(network, "doc-1", "alice")
    assert wait_until(lambda: _documents(network, "alice") == ["doc-1"])
    network.stop_subscriber("alice")  # offline: her durable queue keeps what comes next
    _publish(network, "doc-2")

    # A namesake at alice's site gets a queue of her own: what was queued for alice is not hers.
    twin = _namesake(network, "twin", site="d2")
    network.start_subscriber("twin")
    assert network.wait_subscribed("twin")["subscriber"] == "alice"
    _publish(network, "doc-3", "alice")
    assert wait_until(lambda: "doc-3" in _documents(network, "twin"))
    assert _documents(network, "twin") == ["doc-3"]

    # A namesake at the root joins the groups beside alice, not instead of her.
    _namesake(network, "rooted", site="d1")
    network.start_subscriber("rooted")
    network.wait_subscribed("rooted")
    _publish(network, "doc-4", "alice")
    assert wait_until(lambda: "doc-4" in _documents(network, "rooted"))

    # The namesake's Unsubscribe ends the namesake's subscription only.
    done = _xdn("unsubscribe", "--connect", network.address("d2"), "--name", "alice",
                "--certs", str(network.workdir / "certs-twin"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "unsubscribed at d2" in done.stdout
    _publish(network, "doc-5", "alice")

    # alice, back, receives everything queued for her, in order, and opens it: still a member.
    network.start_subscriber("alice")
    assert wait_until(
        lambda: _documents(network, "alice") == ["doc-1", "doc-2", "doc-3", "doc-4", "doc-5"]
    ), network.output("alice")
    assert "alice: refused" not in network.output("alice")
    assert twin != _member_id(network.certs, "alice")


def test_a_reissued_certificate_joins_as_a_new_member_and_the_old_one_is_rekeyed_out(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    _publish(network, "doc-1", "alice")
    assert wait_until(lambda: _documents(network, "alice") == ["doc-1"])
    stolen = _member_id(network.certs, "alice")

    # Her device is stolen: the certificate is revoked and a new one issued under the same name.
    done = _xdn("certs", "revoke", "--dir", str(network.certs), "--name", "alice")
    assert done.returncode == 0, done.stderr
    assert wait_until(lambda: not network.subscriber_running("alice"), timeout=30)
    issue_party(network.certs, Party(name="alice", role="subscriber", attributes=ALICE),
                now=datetime.now(UTC))
    assert _member_id(network.certs, "alice") != stolen
    network.start_subscriber("alice")
    network.wait_subscribed("alice")

    output = _publish(network, "doc-2", "alice")
    rekeyed = output.split("rekeyed: ", 1)[1].split(",")[0]
    assert rekeyed != "none", output  # the stolen certificate's keys open nothing new
    assert wait_until(lambda: _documents(network, "alice") == ["doc-1", "doc-2"])
