"""Rules that depend on history, end to end: ``after`` (temporal) and ``max_instances``.

Only the sites see what was disseminated and how many instances a subscriber received, so
these grants change while a subscriber is connected: the site narrows or widens its grants in
queue order, and the publisher's key service must follow (enrol a member once an ``after``
grant applies, drop it from the group once its budget is spent). The subscribers connect at the
root site d1, which routes every document of the publisher.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.expectations import read_received
from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn import crypto
from xdn.errors import UsageError
from xdn.policy import sign_policy, signature_path

pytestmark = [pytest.mark.integration, pytest.mark.long]  # (heavy multi-process scenarios)

HISTORY_RULES = """
[[rule]]
id = "T0"
effect = "grant"
concept = "ProductionStep"
inherit = true
when = { subject = { OU = "Cred7" }, role = "subscriber" }

[[rule]]
id = "T1"
description = "quality inspections, once a measurement has been published"
effect = "grant"
concept = "QualityInspection"
inherit = true
after = { concept = "Measurement" }
when = { subject = { OU = "Cred7" }, role = "subscriber" }

[[rule]]
id = "M0"
effect = "grant"
concept = "ProductSpecification"
inherit = true
when = { subject = { OU = "Cred8" }, role = "subscriber" }

[[rule]]
id = "M1"
description = "production steps of two orders at most"
effect = "grant"
concept = "ProductionStep"
inherit = true
max_instances = 2
when = { subject = { OU = "Cred8" }, role = "subscriber" }
"""


@pytest.fixture
def net(network: LocalNetwork) -> Iterator[LocalNetwork]:
    """The default network; production-dept's policy v2 adds the history rules; gina (Cred7)
    and henry (Cred8) may subscribe at d1."""
    path = network.workdir / "policies" / "production-dept.toml"
    text = re.sub(r"^version = \d+$", "version = 2", path.read_text(), flags=re.M)
    path.write_text(text + HISTORY_RULES)
    key = crypto.load_private_key_pem((network.certs / "production-dept.key").read_bytes())
    signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))
    for site in network.sites:
        network.signal_site(site, signal.SIGHUP)
    assert wait_until(
        lambda: all("policies reloaded" in network.full_output(s) for s in network.sites)
    )
    for name, ou in (("gina", "Cred7"), ("henry", "Cred8")):
        issue_party(
            network.certs, Party(name=name, role="subscriber", attributes={"OU": ou}),
            now=datetime.now(UTC),
        )
        network.subscribers[name] = SubscriberSpec(name=name, site="d1")
    yield network


def _publish(network: LocalNetwork, name: str, subscriber: str) -> str:
    """Publish a copy of the sample as document ``name``; return ``xdn publish``'s output."""
    document = network.workdir / f"{name}.xml"
    shutil.copyfile(SAMPLE_DOCUMENTS["production-dept"], document)
    return network.publish("production-dept", [document], wait_for=(subscriber,))


def _concepts(network: LocalNetwork, subscriber: str, document: str) -> set[str]:
    """The concepts of ``document`` that ``subscriber`` accepted (waits for it)."""
    def record() -> dict[str, object] | None:
        return next(
            (r for r in network.received(subscriber) if r["document"] == document), None
        )
    assert wait_until(lambda: record() is not None, 60), network.output(subscriber)
    fragments = record()["fragments"]  # type: ignore[index]
    assert isinstance(fragments, dict)
    return set(fragments.values())


STEP = {"ProductionStep", "MachineSetting"}
INSPECTION = {"QualityInspection", "InspectionResult", "Measurement"}
SPEC = {"ProductSpecification", "ResourceSpecification"}


def test_an_after_grant_applies_once_its_concept_was_disseminated(net: LocalNetwork) -> None:
    net.start_subscriber("gina")
    assert net.wait_subscribed("gina")["served_by"] == "d1"
    _publish(net, "first", "gina")  # routed before anything was disseminated: T0 only
    assert _concepts(net, "gina", "first") == STEP
    assert wait_until(lambda: "grants changed" in net.output("gina"))  # Measurement is out
    _publish(net, "second", "gina")  # the key service enrolled her for the inspections
    assert _concepts(net, "gina", "second") == STEP | INSPECTION
    assert read_received(net.inbox("gina"))[1] == 0
    assert "holding" not in net.output("gina")  # no document waited for keys

    # What was disseminated is durable: a new registration after a restart of d1 has it.
    grants = _subscribe_again(net, "gina")
    assert set(grants["production-dept"]) == STEP | INSPECTION


def test_a_spent_budget_delivers_the_spending_document_then_narrows(net: LocalNetwork) -> None:
    net.start_subscriber("henry")
    assert net.wait_subscribed("henry")["served_by"] == "d1"
    _publish(net, "one", "henry")
    _publish(net, "two", "henry")  # spends the budget of two: still delivered whole
    assert _concepts(net, "henry", "one") == SPEC | STEP
    assert _concepts(net, "henry", "two") == SPEC | STEP
    out = _publish(net, "three", "henry")
    assert "rekeyed: none" not in out  # henry left the production-step groups
    assert _concepts(net, "henry", "three") == SPEC
    assert read_received(net.inbox("henry"))[1] == 0

    # The budget belongs to the certificate: neither a new registration nor a restart of the
    # site gives it back.
    grants = _subscribe_again(net, "henry")
    assert set(grants["production-dept"]) == SPEC


def _subscribe_again(network: LocalNetwork, name: str) -> dict[str, list[str]]:
    """Unsubscribe ``name``, restart d1, subscribe again; return the new registration's grants."""
    network.stop_subscriber(name)
    done = subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address("d1"),
         "--name", name, "--certs", str(network.certs)],
        capture_output=True, text=True, check=False, timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    network.signal_site("d1", signal.SIGTERM)
    assert network.wait_site("d1") == 0
    network.restart_site("d1")
    (network.inbox(name) / "subscription.json").unlink()
    network.start_subscriber(name)
    grants = network.wait_subscribed(name)["grants"]
    assert isinstance(grants, dict)
    return grants


def test_the_key_service_refuses_an_unsigned_policy(net: LocalNetwork) -> None:
    """The key service decides with the document the sites enforce: signed, or nothing."""
    shutil.copyfile(
        net.workdir / "policies" / "production-dept.toml", net.workdir / "policies" / "edit.toml"
    )
    spec = net.publishers["production-dept"]
    net.publishers["production-dept"] = replace(spec, policy=Path("edit.toml"))
    try:
        with pytest.raises(UsageError, match=r"edit.toml: unsigned policy \(no edit.toml.sig\)"):
            net.publish("production-dept", [SAMPLE_DOCUMENTS["production-dept"]])
    finally:
        net.publishers["production-dept"] = spec
