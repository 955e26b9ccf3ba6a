"""A signed policy change reaches live subscriptions without restarting any site."""

from __future__ import annotations

import signal

import pytest

from deploy.network import LocalNetwork, wait_until
from xdn import crypto
from xdn.policy import sign_policy, signature_path

pytestmark = pytest.mark.integration


def _rewrite_policy(network: LocalNetwork, publisher: str, old: str, new: str) -> None:
    path = network.workdir / "policies" / f"{publisher}.toml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new).replace("version = 1", "version = 2"))
    key = crypto.load_private_key_pem((network.certs / f"{publisher}.key").read_bytes())
    signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))


def test_revoking_a_grant_forces_unsubscription_at_once(network: LocalNetwork) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    # Cred1 becomes Cred9: no rule of production-dept grants alice anything any more.
    _rewrite_policy(network, "production-dept", 'OU = "Cred1"', 'OU = "Cred9"')
    for site in network.sites:
        network.signal_site(site, signal.SIGHUP)
    assert wait_until(lambda: not network.subscriber_running("alice"), 20)
    assert "subscription ended by the site: no policy grants it anything" in network.output(
        "alice"
    )
    assert "policies reloaded" in network.output("d2")


def test_an_unsigned_policy_change_is_refused_and_nothing_changes(
    network: LocalNetwork,
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    path = network.workdir / "policies" / "production-dept.toml"
    path.write_text(path.read_text().replace('OU = "Cred1"', 'OU = "Cred9"'))  # not re-signed
    network.signal_site("d2", signal.SIGHUP)
    assert wait_until(lambda: "policy reload refused" in network.output("d2"), 20)
    assert "does not verify" in network.output("d2")
    assert network.subscriber_running("alice")
