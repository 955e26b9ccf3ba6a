"""A site relays the CA-signed CRL it has in force to its local subscribers (issue #13).

Subscribers check it themselves (see test_subscriber_refusals); the site only passes it on: in
``Subscribed`` (``node.crl_pem``) and, when it reloads its CRL, as a queued RevocationList.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import test_grant_changes
from test_grant_changes import POLICY, _queue, _Site, _subscribed

from deploy.pki import write_crl

ontology, site = test_grant_changes.ontology, test_grant_changes.site  # its fixtures


def test_a_reloaded_crl_is_queued_to_local_subscribers_once(site: _Site) -> None:
    node = site.node(site.policies(POLICY, 1))
    now = datetime.now(UTC)
    first = write_crl(site.tmp / "certs", now=now).read_bytes()
    assert node.relay_crl(first, queue=False) == 0  # at start-up: given in Subscribed only
    assert node.crl_pem == first
    _subscribed(site, node)
    assert _queue(node) == []
    second = write_crl(site.tmp / "certs", now=now + timedelta(seconds=5)).read_bytes()
    assert node.relay_crl(second) == 1
    assert node.relay_crl(second) == 0  # unchanged: not queued again
    [(_, delivery)] = _queue(node)
    assert delivery.WhichOneof("body") == "revocation_list"
    assert delivery.revocation_list.crl == second == node.crl_pem
