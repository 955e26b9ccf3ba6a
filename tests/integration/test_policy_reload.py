"""A signed policy change reaches live subscriptions without restarting any site."""

from __future__ import annotations

import json
import re
import shutil
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, SAMPLE_DOCUMENTS, LocalNetwork, wait_until
from xdn import crypto
from xdn.errors import UsageError
from xdn.ontology import load_ontology
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


# ---- live narrowing, widening and ending ---------------------------------------------------
DENY_MACHINE_SETTINGS_TO_CRED1 = """
[[rule]]
id = "N1"
effect = "deny"
concept = "MachineSetting"
inherit = true
when = { subject = { OU = "Cred1" } }
"""


def _put_policy(network: LocalNetwork, publisher: str, text: str, version: int) -> None:
    """Install ``text`` as ``publisher``'s signed policy, at ``version``, on every site."""
    path = network.workdir / "policies" / f"{publisher}.toml"
    path.write_text(re.sub(r"^version = \d+$", f"version = {version}", text, flags=re.M))
    key = crypto.load_private_key_pem((network.certs / f"{publisher}.key").read_bytes())
    signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))
    reloads = {s: network.full_output(s).count("policies reloaded") for s in network.sites}
    for site in network.sites:
        network.signal_site(site, signal.SIGHUP)

    def reloaded() -> bool:
        return all(
            network.full_output(s).count("policies reloaded") > n for s, n in reloads.items()
        )

    assert wait_until(reloaded), [network.output(s) for s in network.sites]


def _document(network: LocalNetwork, name: str) -> Path:
    path = network.workdir / f"{name}.xml"
    shutil.copyfile(SAMPLE_DOCUMENTS["production-dept"], path)
    return path


def _record(network: LocalNetwork, name: str, document: str) -> dict[str, object]:
    assert wait_until(lambda: any(r["document"] == document for r in network.received(name)))
    return next(r for r in network.received(name) if r["document"] == document)


def test_narrowing_widening_and_ending_a_live_subscription_lose_nothing(
    network: LocalNetwork,
) -> None:
    original = (network.workdir / "policies" / "production-dept.toml").read_text()
    network.start_subscriber("alice", extra=("--heartbeat", "60"))  # frozen ≠ dead, below
    network.wait_subscribed("alice")
    full = expected_deliveries(
        network, load_ontology([ONTOLOGY]), "alice",
        {"production-dept": [SAMPLE_DOCUMENTS["production-dept"]]},
    )
    [everything] = [{k.replace("production-dept-order", "{doc}"): c for k, c in f.items()}
                    for f in full.values()]
    assert "MachineSetting" in everything.values()

    def fragments(document: str, *, without: str = "") -> dict[str, str]:
        return {k.format(doc=document): c for k, c in everything.items() if c != without}

    network.publish("production-dept", [_document(network, "before")], wait_for=("alice",))
    assert _record(network, "alice", "before")["fragments"] == fragments("before")

    # Narrowing: the deny reaches alice's live stream, in order; the next document lacks
    # MachineSetting and she expects exactly that.
    _put_policy(network, "production-dept", original + DENY_MACHINE_SETTINGS_TO_CRED1, 2)
    assert wait_until(lambda: "grants changed" in network.output("alice"))
    subscription = json.loads((network.inbox("alice") / "subscription.json").read_text())
    assert "MachineSetting" not in subscription["grants"]["production-dept"]
    network.publish("production-dept", [_document(network, "narrowed")], wait_for=("alice",))
    assert _record(network, "alice", "narrowed")["fragments"] == fragments(
        "narrowed", without="MachineSetting"
    )

    # Widening back.
    _put_policy(network, "production-dept", original, 3)
    assert wait_until(lambda: network.output("alice").count("grants changed") == 2)
    network.publish("production-dept", [_document(network, "widened")], wait_for=("alice",))
    assert _record(network, "alice", "widened")["fragments"] == fragments("widened")

    # Ending, with a document still queued for her: it arrives, then the subscription ends.
    network.signal_subscriber("alice", signal.SIGSTOP)
    try:
        routed = network.metric("d2", "xdn_documents_routed_total")
        network.publish("production-dept", [_document(network, "queued")], wait_for=("alice",))
        assert wait_until(lambda: network.metric("d2", "xdn_documents_routed_total") > routed)
        _put_policy(network, "production-dept", original.replace('"Cred1"', '"Cred9"'), 4)
    finally:
        network.signal_subscriber("alice", signal.SIGCONT)
    assert wait_until(lambda: not network.subscriber_running("alice"))
    assert _record(network, "alice", "queued")["fragments"] == fragments("queued")
    output = network.output("alice")
    assert "subscription ended by the site: no policy grants it anything any more" in output
    assert read_received(network.inbox("alice"))[1] == 0  # nothing refused along the way


def test_a_policy_cannot_roll_back_across_a_restart(network: LocalNetwork) -> None:
    policy = network.workdir / "policies" / "production-dept.toml"
    version_1 = (policy.read_bytes(), signature_path(policy).read_bytes())  # genuinely signed
    _put_policy(network, "production-dept", policy.read_text() + DENY_MACHINE_SETTINGS_TO_CRED1, 2)

    network.signal_site("d2", signal.SIGTERM)
    assert network.wait_site("d2") == 0
    policy.write_bytes(version_1[0])
    signature_path(policy).write_bytes(version_1[1])
    with pytest.raises(UsageError) as refused:
        network.restart_site("d2")
    message = str(refused.value)
    assert "version 1 of 'production-dept' would roll back version 2" in message
    assert "install version 2 or a newer one" in message


@pytest.mark.long  # (~16 s: it waits for the policy to expire)
def test_an_expiring_policy_ends_the_subscription_after_its_queue(network: LocalNetwork) -> None:
    """``valid_until`` passes while alice is connected: the site's timer ends her subscription
    (what was queued before still arrives), and she cannot subscribe again."""
    text = (network.workdir / "policies" / "production-dept.toml").read_text()
    until = (datetime.now(UTC) + timedelta(seconds=15)).strftime("%Y-%m-%dT%H:%M:%SZ")
    _put_policy(
        network, "production-dept",
        text.replace("version = 1\n", f"version = 1\nvalid_until = {until}\n"), 2,
    )
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    network.publish("production-dept", [_document(network, "while-valid")], wait_for=("alice",))
    _record(network, "alice", "while-valid")
    assert wait_until(lambda: not network.subscriber_running("alice"), 90)
    assert "subscription ended by the site: no policy grants it anything any more" in (
        network.output("alice")
    )
    assert datetime.now(UTC) >= datetime.fromisoformat(until)  # not before its time

    (network.inbox("alice") / "subscription.json").unlink()
    network.start_subscriber("alice")
    assert wait_until(lambda: not network.subscriber_running("alice"))
    assert "no policy grants" in network.output("alice").split("ended by the site")[-1]


def test_a_widening_reaches_a_subscriber_that_was_offline_across_a_site_restart(
    network: LocalNetwork,
) -> None:
    """alice is down while her grants widen, and d2 restarts too: when she comes back, the
    document routed before the change is checked by her old grants (it lacks MachineSetting,
    which she was not granted then), the one after by her new ones; she refuses nothing."""
    original = (network.workdir / "policies" / "production-dept.toml").read_text()
    _put_policy(network, "production-dept", original + DENY_MACHINE_SETTINGS_TO_CRED1, 2)
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    network.publish("production-dept", [_document(network, "first")], wait_for=("alice",))
    narrow = _record(network, "alice", "first")["fragments"]
    assert isinstance(narrow, dict) and "MachineSetting" not in narrow.values()
    network.stop_subscriber("alice")

    network.publish("production-dept", [_document(network, "old-grants")], wait_for=("alice",))
    _put_policy(network, "production-dept", original, 3)
    network.publish("production-dept", [_document(network, "new-grants")], wait_for=("alice",))
    network.signal_site("d2", signal.SIGTERM)
    assert network.wait_site("d2") == 0
    network.restart_site("d2")

    network.start_subscriber("alice")
    old = _record(network, "alice", "old-grants")["fragments"]
    new = _record(network, "alice", "new-grants")["fragments"]
    assert isinstance(old, dict) and isinstance(new, dict)
    assert sorted(old.values()) == sorted(narrow.values())
    assert "MachineSetting" in new.values()
    assert read_received(network.inbox("alice"))[1] == 0, network.output("alice")
    assert "grants changed" in network.output("alice")
