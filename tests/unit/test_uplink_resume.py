"""Resume points are per uplink: what was applied from one uplink never acknowledges anything
at another (each numbers its queue for us on its own)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.pki import Party, issue_party
from disseminator.node import SiteNode
from disseminator.uplink import Uplink, applied_counter
from tests.unit.site_fixtures import site_node
from xdn import certs
from xdn.grpc_tls import TlsFiles
from xdn.wire.v1 import dissemination_pb2 as pb


@pytest.fixture
def node(tmp_path: Path) -> SiteNode:
    return site_node(tmp_path, "d4", "Production", lambda: datetime.now(UTC))


def _site(directory: Path, name: str, block: str) -> certs.Credential:
    issue_party(directory, Party(
        name=name, role="site", hosts=("localhost",), attributes={certs.BLOCK_FIELD: block},
    ), now=datetime.now(UTC))
    return certs.credential_from_pem(TlsFiles.from_dir(directory, name).cert_pem)


def _identified(node: SiteNode, address: str, peer: certs.Credential) -> Uplink:
    uplink = Uplink(node, address)
    uplink.peer = peer  # (what _verify_peer sets from the signed ping before each connection)
    return uplink


def _applied(uplink: Uplink, sequence: int) -> None:
    uplink.resume_after()  # what a connection does first
    uplink._apply(pb.Delivery(sequence=sequence))  # (an empty delivery: skipped, but counted)


def test_a_resume_point_is_never_sent_to_another_uplink(node: SiteNode, tmp_path: Path) -> None:
    d2 = _site(tmp_path, "d2", "WorkOrder")
    d1 = _site(tmp_path, "d1", "ProductionProcess")
    at_d2 = _identified(node, "127.0.0.1:1002", d2)
    _applied(at_d2, 57)
    assert at_d2.resume_after() == 57
    # The site moves to d1: d1's queue for us has its own numbers; 57 would acknowledge
    # deliveries 1..57 there that were never applied here.
    at_d1 = _identified(node, "127.0.0.1:1001", d1)
    assert at_d1.resume_after() == 0
    _applied(at_d1, 3)
    # Back at d2 (at another address, too): it resumes where d2's own sequence stopped.
    back = _identified(node, "127.0.0.1:2002", d2)
    assert back.resume_after() == 57
    assert node.store.counter(applied_counter("d2")) == 57
    assert node.store.counter(applied_counter("d1")) == 3


def test_an_unidentified_uplink_is_known_by_its_address(node: SiteNode) -> None:
    first = Uplink(node, "127.0.0.1:1002")
    _applied(first, 9)
    assert Uplink(node, "127.0.0.1:1002").resume_after() == 9
    assert Uplink(node, "127.0.0.1:1001").resume_after() == 0


def test_the_single_counter_of_an_older_store_goes_to_the_first_uplink(
    node: SiteNode, tmp_path: Path
) -> None:
    node.store.commit_routing(document=None, appends=[], counter=("uplink_applied", 12))
    d2 = _site(tmp_path, "d2", "WorkOrder")
    assert _identified(node, "127.0.0.1:1002", d2).resume_after() == 12
    assert node.store.counter("uplink_applied") == 0  # adopted once, not by every uplink
    d1 = _site(tmp_path, "d1", "ProductionProcess")
    assert _identified(node, "127.0.0.1:1001", d1).resume_after() == 0

