"""``xdn publish`` against real sites says whom a document reached, and refuses to publish
into the void: at a site that is not a root, as a publisher the sites do not know, or with an
older policy than the one the sites enforce (docs/network.md, "Publishing")."""

from __future__ import annotations

import shutil
import signal
from datetime import UTC, datetime

import pytest

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, wait_until
from deploy.pki import Party, issue_party
from xdn import crypto
from xdn.policy import sign_policy, signature_path

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
SAMPLE = SAMPLE_DOCUMENTS[PUBLISHER]


def _documents(network: LocalNetwork, subscriber: str) -> list[str]:
    return [str(r["document"]) for r in network.received(subscriber)]


def test_the_output_says_whom_a_document_reached_none_being_no_error(
    network: LocalNetwork,
) -> None:
    alone = network.run_publish(PUBLISHER, [SAMPLE])
    assert alone.returncode == 0, alone.stderr
    assert (
        "no subscriber is granted any of its concepts now; d1 retains it for subscribers who "
        "join later"
    ) in alone.stdout
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    out = network.publish(PUBLISHER, [SAMPLE], wait_for=("alice",), extra=("--again",))
    assert "published production-dept-order v2:" in out
    assert "reached 1 subscriber (1 destination at d1)" in out  # alice, behind the link to d2


def test_publishing_at_a_site_that_is_not_a_root_is_refused(network: LocalNetwork) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    refused = network.run_publish(PUBLISHER, [SAMPLE], site="d2")
    assert refused.returncode == 1
    assert "published" not in refused.stdout
    assert "site d2 is not a root site" in refused.stderr
    assert f"its uplink is {network.address('d1')}" in refused.stderr
    # Nothing of it reached alice (d2 is her site): a later marker arrives alone.
    marker = network.publish_marker(PUBLISHER, ["alice"])
    assert _documents(network, "alice") == [marker.stem]


def test_publishing_as_a_publisher_the_sites_do_not_know_is_refused(
    network: LocalNetwork,
) -> None:
    issue_party(network.certs, Party(name="rogue-dept", role="publisher"), now=datetime.now(UTC))
    policy = network.workdir / "policies" / "rogue-dept.toml"
    policy.write_text(
        (network.workdir / "policies" / f"{PUBLISHER}.toml")
        .read_text()
        .replace(f'publisher = "{PUBLISHER}"', 'publisher = "rogue-dept"')
    )
    key = crypto.load_private_key_pem((network.certs / "rogue-dept.key").read_bytes())
    signature_path(policy).write_bytes(sign_policy(policy.read_bytes(), key))  # its own, signed
    refused = network.run_publish("rogue-dept", [SAMPLE], policy=policy)
    assert refused.returncode == 1
    assert "published" not in refused.stdout
    assert "site d1 enforces no policy of publisher 'rogue-dept'" in refused.stderr
    assert "[[publisher]]" in refused.stderr


def test_publishing_with_an_older_policy_than_the_sites_is_refused_unless_allowed(
    network: LocalNetwork,
) -> None:
    current = network.workdir / "policies" / f"{PUBLISHER}.toml"
    older = network.workdir / "old-policies" / current.name
    older.parent.mkdir()
    shutil.copyfile(current, older)
    shutil.copyfile(signature_path(current), signature_path(older))  # version 1, signed
    current.write_text(current.read_text().replace("version = 1", "version = 2"))
    key = crypto.load_private_key_pem((network.certs / f"{PUBLISHER}.key").read_bytes())
    signature_path(current).write_bytes(sign_policy(current.read_bytes(), key))
    network.signal_site("d1", signal.SIGHUP)
    assert wait_until(lambda: "policies reloaded" in network.output("d1"), 30), network.output(
        "d1"
    )

    refused = network.run_publish(PUBLISHER, [SAMPLE], policy=older)
    assert refused.returncode == 1
    assert "published" not in refused.stdout
    assert "site d1 enforces version 2 of production-dept's policy" in refused.stderr
    assert "evaluates version 1" in refused.stderr and "--allow-older-policy" in refused.stderr

    allowed = network.run_publish(
        PUBLISHER, [SAMPLE], policy=older, extra=("--allow-older-policy",)
    )
    assert allowed.returncode == 0, allowed.stderr
    assert "published production-dept-order v1:" in allowed.stdout
    assert "xdn: warning: site d1 enforces version 2" in allowed.stderr

    current_run = network.run_publish(PUBLISHER, [SAMPLE])
    assert current_run.returncode == 0, current_run.stderr
    assert "warning" not in current_run.stderr
