"""Publishers' policy-change notices over the network: a signed policy change takes a concept
from alice (at d2) and gives one to bob; each gets the publisher's signed notice with its new
entitlement, over its stream, and verifies it; each notice is listed once in the inbox of the
site serving the subscriber (and of the root site d1), served to its subscriber in every media
type, and not to the other subscriber (403)."""

from __future__ import annotations

import re
import shutil
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import pyoxigraph as ox
import pytest

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, wait_until
from tests.integration.test_linked_data import Client
from tests.integration.test_policy_reload import _put_policy
from xdn import certs, crypto, provenance
from xdn import linked_data as ld
from xdn.policy import sign_policy, signature_path
from xdn.policy_notices import read_policy_notice

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
GRANT_BOB = """
[[rule]]
id = "B1"
effect = "grant"
concept = "Material"
when = { subject = { OU = "Cred2" }, role = "subscriber" }
"""
GRANT_BOB_MORE = """
[[rule]]
id = "B2"
effect = "grant"
concept = "Machine"
when = { subject = { OU = "Cred2" }, role = "subscriber" }
"""
DENY_ALICE = """
[[rule]]
id = "N1"
effect = "deny"
concept = "MachineSetting"
inherit = true
when = { subject = { OU = "Cred1" } }
"""


def _document(network: LocalNetwork, name: str) -> Path:
    path = network.workdir / f"{name}.xml"
    shutil.copyfile(SAMPLE_DOCUMENTS[PUBLISHER], path)
    return path


def _publish(network: LocalNetwork, name: str) -> None:
    network.publish(PUBLISHER, [_document(network, name)], wait_for=("alice",))


def _client(network: LocalNetwork, who: str, site: str) -> Client:
    client = Client(network, who)
    client.base = network.web_url(site)
    return client


def _policy_notices(network: LocalNetwork, who: str, site: str) -> list[str]:
    """The policy-notice URIs of ``site``'s inbox listed to ``who``, page after page."""
    client, target, found = _client(network, who, site), "/inbox/", []
    while target:
        status, headers, body = client.request("GET", target, Accept="application/n-quads")
        assert status == 200, body
        found += [q.object.value for q in ox.parse(body, format=ox.RdfFormat.N_QUADS)
                  if q.predicate.value == ld.LDP + "contains" and "/inbox/policy-" in
                  q.object.value]
        target = ld.parse_links(headers.get_all("Link") or ()).get("next", "")
    return found


def _rows(network: LocalNetwork, site: str) -> list[tuple[object, ...]]:
    """The policy notices' rows of ``site``'s inbox and their readers (its store, read-only)."""
    path = network.workdir / "state" / site / "site.sqlite"
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT n.id, n.sender, r.party FROM notifications AS n LEFT JOIN "
            "notification_readers AS r ON r.notification = n.seq WHERE n.receipt = 3"
        ).fetchall()
    finally:
        db.close()


def _noticed(network: LocalNetwork, who: str) -> list[str]:
    return re.findall(rf"{who}: (policy v3 of {PUBLISHER}: you .*)", network.output(who))


def test_a_policy_change_reaches_alice_and_bob_as_signed_notices_in_their_inboxes(
    network: LocalNetwork, capsys: pytest.CaptureFixture[str]
) -> None:
    original = (network.workdir / "policies" / f"{PUBLISHER}.toml").read_text()
    _put_policy(network, PUBLISHER, original + GRANT_BOB, 2)  # bob gets Material
    served_by = {}
    for who in ("alice", "bob"):
        network.start_subscriber(who)
        served_by[who] = str(network.wait_subscribed(who)["served_by"])
    _publish(network, "before")  # the entitlements of v2, as the key service last signed them
    assert "policy v2" not in network.output("alice")  # nothing changed for anyone yet

    _put_policy(network, PUBLISHER, original + GRANT_BOB + GRANT_BOB_MORE + DENY_ALICE, 3)
    _publish(network, "after")
    assert wait_until(lambda: bool(_noticed(network, "alice")) and bool(
        _noticed(network, "bob")), 60), (network.output("alice"), network.output("bob"))
    assert _noticed(network, "alice") == [f"policy v3 of {PUBLISHER}: you lose MachineSetting"]
    assert _noticed(network, "bob") == [f"policy v3 of {PUBLISHER}: you gain Machine"]

    # Each verified it and kept it: the publisher's signature, under the CA alone, for them.
    verifier = provenance.ChainVerifier((network.certs / "ca.pem").read_bytes())
    kept = {}
    for who in ("alice", "bob"):
        data = (network.inbox(who) / "policy-notices.nq").read_bytes()
        notice = read_policy_notice(data, verifier, at=datetime.now(UTC))
        assert notice.change.subscriber == certs.node_uri(who)
        assert notice.publisher.name == PUBLISHER and notice.change.previous_version == 2
        kept[who] = notice

    # Listed once in the inbox of the subscriber's site, and of the root site, as the subscriber
    # and as the publisher; the other subscriber sees none of it, and gets 403 reading it.
    for who, other in (("alice", "bob"), ("bob", "alice")):
        site = served_by[who]
        uri = f"{certs.node_uri(site)}inbox/{kept[who].notification_id}"
        assert wait_until(lambda: _policy_notices(network, who, site) == [uri], 30), (  # noqa: B023
            _policy_notices(network, who, site), _rows(network, site), network.output(site)
        )
        assert _policy_notices(network, PUBLISHER, site).count(uri) == 1
        assert uri not in _policy_notices(network, other, site)  # (its own may be there)
        path = urlsplit(uri).path
        for media_type in ("application/n-quads", "application/trig", "application/ld+json",
                           "text/html"):
            status, headers, body = _client(network, who, site).request(
                "GET", path, Accept=media_type
            )
            assert status == 200 and headers["Content-Type"].startswith(media_type), body
            if media_type == "application/n-quads":
                assert body == kept[who].to_nquads()
        status, _, body = _client(network, other, site).request(
            "GET", path, Accept="application/n-quads"
        )
        assert status == 403, body
        root = f"{certs.node_uri('d1')}inbox/{kept[who].notification_id}"
        assert _policy_notices(network, who, "d1").count(root) == 1

    # xdn inbox list, as alice, at d2: her notice, once.
    from cli.main import main

    capsys.readouterr()
    who = ["--web", network.web_url("d2"), "--certs", str(network.certs), "--name", "alice"]
    assert main(["inbox", "list", *who]) == 0
    assert capsys.readouterr().out.split().count(
        f"{certs.node_uri('d2')}inbox/{kept['alice'].notification_id}"
    ) == 1
    assert network.metric("d2", "xdn_policy_notices_refused_total") == 0


def _signed_elsewhere(network: LocalNetwork, text: str) -> Path:
    """``text`` signed by the publisher as its policy, in a folder of its own: the version the
    publisher holds before any site has it."""
    folder = network.workdir / "next-policy"
    folder.mkdir(exist_ok=True)
    path = folder / f"{PUBLISHER}.toml"
    path.write_text(text)
    key = crypto.load_private_key_pem((network.certs / f"{PUBLISHER}.key").read_bytes())
    signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))
    return path


def test_a_member_the_new_policy_takes_everything_from_is_told_before_its_subscription_ends(
    network: LocalNetwork,
) -> None:
    """Version 2 grants alice nothing. The publisher holds it before the sites do: its key
    service, which no longer counts her a member, signs her entitlement of v2 (nothing) with
    the notice that she loses everything, and her site, still serving her by v1, routes it to
    her. She verifies and keeps it; it is listed once in d2's and d1's inboxes, to her and the
    publisher. Then the sites load v2 and end her subscription, as before."""
    original = (network.workdir / "policies" / f"{PUBLISHER}.toml").read_text()
    network.start_subscriber("alice")
    assert network.wait_subscribed("alice")["served_by"] == "d2"
    _publish(network, "before")  # her entitlement of v1, as the key service last signed it

    taken = re.sub(r"^version = \d+$", "version = 2", original.replace('"Cred1"', '"Cred9"'),
                   flags=re.M)
    done = network.run_publish(
        PUBLISHER, [_document(network, "during")], policy=_signed_elsewhere(network, taken)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "still enforces version 1" in done.stdout + done.stderr
    said = rf"alice: (policy v2 of {PUBLISHER}: you lose everything \((.*)\))"
    assert wait_until(lambda: re.search(said, network.output("alice")) is not None, 60), (
        network.output("alice"), done.stdout, done.stderr
    )
    assert network.subscriber_running("alice")  # told while still subscribed

    data = (network.inbox("alice") / "policy-notices.nq").read_bytes()
    verifier = provenance.ChainVerifier((network.certs / "ca.pem").read_bytes())
    notice = read_policy_notice(data, verifier, at=datetime.now(UTC))
    assert notice.change.everything and not notice.change.gained
    assert notice.change.subscriber == certs.node_uri("alice")
    assert (notice.change.previous_version, notice.change.version) == (1, 2)
    assert "WorkOrder" in notice.change.lost
    shown = re.findall(said, network.output("alice"))
    assert shown == [(notice.summary(), ", ".join(sorted(notice.change.lost)))]  # once

    for site in ("d2", "d1"):
        uri = f"{certs.node_uri(site)}inbox/{notice.notification_id}"
        assert wait_until(lambda: _policy_notices(network, "alice", site) == [uri], 30), (  # noqa: B023
            _policy_notices(network, "alice", site), _rows(network, site)
        )
        assert _policy_notices(network, PUBLISHER, site).count(uri) == 1
        assert uri not in _policy_notices(network, "bob", site)

    # The sites load v2: her subscription ends as before, after the notice.
    _put_policy(network, PUBLISHER, taken, 2)
    assert wait_until(lambda: not network.subscriber_running("alice"), 30), network.output(
        "alice"
    )
    output = network.output("alice")
    ended = "subscription ended by the site: no policy grants it anything any more"
    assert ended in output
    assert output.index("you lose everything") < output.index(ended)
    assert network.metric("d2", "xdn_policy_notices_refused_total") == 0
