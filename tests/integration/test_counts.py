"""SEPA-style count invariants: P publishers, S subscribers, D documents, real sites.

Two publishers each publish D = 3 documents (their sample and two generated ones) to a running
three-site network with S = 4 subscribers — two credentials (Cred1, Cred2), each held by two
subscribers at different registration points (alice and carol register at d2; bob and dave ask
d3, which sends them on to its uplink d1). Then:

* every subscriber holds exactly the deliveries its policy grants (computed independently from
  the mappings and policies), with none refused and none duplicated: one ``received.jsonl``
  line and one view file per distinct (publisher, document, version);
* subscribers with the same credential hold the same deliveries, wherever they registered;
* unsubscription acknowledgements match: one ``unsubscribed at SITE`` per subscriber, naming
  the site it registered at and dropping no queued delivery (all were acknowledged), its
  subscriber process told the site ended the subscription; and a second unsubscribe of the
  same subscriber is refused with NOT_FOUND and a non-zero exit.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import expected_deliveries, read_received
from deploy.network import ONTOLOGY, LocalNetwork, SubscriberSpec, wait_until
from deploy.pki import Party, issue_party
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration

SAMPLES = {
    "production-dept": REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml",
    "qa-company": REPO_ROOT / "ontology" / "samples" / "qa-company-report.xml",
}
GENERATED_PER_PUBLISHER = 2
EXTRA_SUBSCRIBERS = (
    SubscriberSpec(name="carol", site="d2", attributes={"OU": "Cred1"}),
    SubscriberSpec(name="dave", site="d3", attributes={"OU": "Cred2"}),
)


def _documents(directory: Path) -> dict[str, list[Path]]:
    """D documents per publisher: its sample and generated ones (distinct seeds and names)."""
    directory.mkdir(parents=True, exist_ok=True)
    published: dict[str, list[Path]] = {}
    seed = 0
    for publisher, sample in SAMPLES.items():
        docs = [sample]
        for _ in range(GENERATED_PER_PUBLISHER):
            seed += 1
            path = directory / f"{publisher}-gen{seed}.xml"
            with open(path, "wb") as out:
                generate(publisher, 30_000, out, seed=seed)
            docs.append(path)
        published[publisher] = docs
    return published


def _unsubscribe(network: LocalNetwork, name: str, site: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", "unsubscribe", "--connect", network.address(site),
         "--name", name, "--certs", str(network.certs)],
        capture_output=True, text=True, check=False, timeout=60,
    )


@pytest.mark.long  # (~14 s: a dozen parties and many documents)
def test_p_publishers_s_subscribers_d_documents_give_exactly_the_expected_deliveries(
    network: LocalNetwork,
) -> None:
    now = datetime.now(UTC)
    for spec in EXTRA_SUBSCRIBERS:
        issue_party(
            network.certs,
            Party(name=spec.name, role="subscriber", attributes=spec.attributes), now=now,
        )
        network.subscribers[spec.name] = spec
    subscribers = sorted(network.subscribers)
    assert len(subscribers) == 4
    published = _documents(network.workdir / "documents")
    assert all(len(docs) == 1 + GENERATED_PER_PUBLISHER for docs in published.values())

    for name in subscribers:
        network.start_subscriber(name)
    served_by = {name: str(network.wait_subscribed(name)["served_by"]) for name in subscribers}
    # Cred1 fits d2's block; Cred2's grants reach beyond d3's, so d3 redirects to d1.
    assert served_by == {"alice": "d2", "carol": "d2", "bob": "d1", "dave": "d1"}

    for publisher, docs in published.items():
        network.publish(publisher, docs, wait_for=network.granted_subscribers(publisher))

    # Once a later marker is in, anything extra (a duplicate, a fragment beyond a grant) would
    # have arrived before it.
    for publisher, docs in published.items():
        docs.append(network.publish_marker(publisher))
    ontology = load_ontology([ONTOLOGY])
    expected = {n: expected_deliveries(network, ontology, n, published) for n in subscribers}
    for name in subscribers:
        assert expected[name], f"the policies grant {name} something"

    for name in subscribers:
        received, refused = read_received(network.inbox(name))
        assert refused == 0, (network.inbox(name) / "refused.jsonl").read_text()
        assert received == expected[name], name
        # No duplicates: one line and one view per distinct (publisher, document, version).
        records = network.received(name)
        identities = Counter((r["publisher"], r["document"], r["version"]) for r in records)
        assert [k for k, n in identities.items() if n > 1] == [], name
        assert len(records) == len(identities) == len(expected[name]), name
        assert {v for (_, _, v) in identities} == {1}, "each document was published once"
        views = sorted((network.inbox(name) / "views").rglob("*.xml"))
        assert len(views) == len(expected[name]), (name, views)
        # Fragment count: exactly the granted fragments of each document, each once.
        for record in records:
            fragments = record["fragments"]
            assert isinstance(fragments, dict)
            key = (str(record["publisher"]), str(record["document"]))
            assert len(fragments) == len(expected[name][key]), (name, key)

    # Same credential, same deliveries, wherever the subscriber registered.
    assert expected["alice"] == expected["carol"] and expected["bob"] == expected["dave"]
    assert expected["alice"] != expected["bob"]
    total = sum(len(f) for name in subscribers for f in expected[name].values())
    delivered = sum(
        len(fragments)
        for name in subscribers
        for r in network.received(name)
        if isinstance(fragments := r["fragments"], dict)
    )
    assert delivered == total

    # Unsubscription acknowledgements match: one per subscriber, from its registration site.
    assert wait_until(  # every delivery acknowledged: the sites' queues are empty
        lambda: all(network.metric(s, "xdn_queued_deliveries") == 0 for s in network.sites)
    )
    for name in subscribers:
        done = _unsubscribe(network, name, served_by[name])
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.count("unsubscribed at ") == 1, done.stdout
        assert done.stdout.count(f"unsubscribed at {served_by[name]} ") == 1, done.stdout
        assert done.stdout.startswith(f"{name}: "), done.stdout
        # Everything delivered had been acknowledged: nothing left in the queue to drop.
        assert "(0 queued deliveries dropped)" in done.stdout, done.stdout
    assert wait_until(lambda: not any(network.subscriber_running(n) for n in subscribers))
    for name in subscribers:
        assert "; subscription ended" in network.output(name), network.output(name)
    # ...and a second unsubscribe of the same subscriber is refused.
    for name in subscribers:
        again = _unsubscribe(network, name, served_by[name])
        assert again.returncode != 0, again.stdout
        assert "unsubscribed at" not in again.stdout
        message = again.stdout + again.stderr
        assert "NOT_FOUND" in message, message
        assert f"{name!r} (certificate {name}@" in message, message
        assert f"has no subscription at site {served_by[name]}" in message, message
