"""A site reads a local subscriber's certificate fingerprint once per registration.

Routing records what each reached subscriber's certificate received (:meth:`SiteNode._history`)
for every document; the fingerprint comes from :class:`disseminator.fingerprints.Fingerprints`,
not from reading the certificate again. A real :class:`SiteNode` (real certificates, store and
production policy) counts the reads of each certificate.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.pki import Party, ensure_ca, issue_party
from disseminator.fingerprints import Fingerprints
from disseminator.node import SiteNode
from disseminator.planning import DocumentPlan
from disseminator.routing import Registration
from tests.unit.site_fixtures import site_node
from xdn import certs

PUBLISHER = "production-dept"


def _clock() -> datetime:
    return datetime.now(UTC)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SiteNode]:
    site = site_node(tmp_path, "d2", "WorkOrder", _clock)
    try:
        yield site
    finally:
        site.store.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[bytes]:
    """How often each certificate is read (``certs.credential_from_pem``) from now on."""
    counted: Counter[bytes] = Counter()
    read = certs.credential_from_pem

    def counting(cert_pem: bytes) -> certs.Credential:
        counted[cert_pem] += 1
        return read(cert_pem)

    monkeypatch.setattr(certs, "credential_from_pem", counting)
    return counted


def _alice_certificate(directory: Path) -> bytes:
    """A new certificate for alice (OU Cred1: the policy grants her WorkOrder)."""
    party = Party(name="alice", role="subscriber", attributes={"OU": "Cred1"})
    return issue_party(directory, party, now=_clock()).cert.read_bytes()


def _decided(node: SiteNode, pem: bytes) -> Registration:
    return Registration(subscriber="alice", certificate=pem, grants=node.grants(pem))


def _routed(node: SiteNode, n: int) -> dict[str, frozenset[str]]:
    """The history routing document ``n`` (one WorkOrder for alice) records."""
    plan = DocumentPlan(
        identity=(PUBLISHER, f"d{n}", 1), fragments=1, concepts=frozenset({"WorkOrder"}),
        delivered={"alice": {"WorkOrder"}},
    )
    return dict(node._history(plan).instances)


def test_a_registration_reads_its_certificate_once_for_every_document_routed(
    node: SiteNode, tmp_path: Path, reads: Counter[bytes]
) -> None:
    pem = _alice_certificate(tmp_path)
    decided = _decided(node, pem)
    reads.clear()  # (deciding the registration read it: the servicer's part)
    node.register_local(decided, frozenset())
    histories = [_routed(node, n) for n in range(20)]
    assert reads[pem] == 1
    fingerprint = certs.credential_from_pem(pem).fingerprint
    assert histories == [{fingerprint: frozenset({"WorkOrder"})}] * 20


def test_registered_again_with_a_new_certificate_its_new_fingerprint_is_recorded(
    node: SiteNode, tmp_path: Path, reads: Counter[bytes]
) -> None:
    old = _alice_certificate(tmp_path)
    node.register_local(_decided(node, old), frozenset())
    assert set(_routed(node, 1)) == {certs.credential_from_pem(old).fingerprint}

    new = _alice_certificate(tmp_path)  # reissued: another key, another fingerprint
    assert new != old
    decided = _decided(node, new)
    reads.clear()
    node.register_local(decided, frozenset())
    histories = [_routed(node, n) for n in range(2, 12)]
    assert reads[new] == 1
    assert reads[old] == 0
    assert {fp for h in histories for fp in h} == {certs.credential_from_pem(new).fingerprint}


def test_a_subscriber_that_leaves_leaves_no_fingerprint_behind(
    node: SiteNode, tmp_path: Path
) -> None:
    node.register_local(_decided(node, _alice_certificate(tmp_path)), frozenset())
    assert "alice" in node._fingerprints
    node.unregister_local("alice")
    assert "alice" not in node._fingerprints
    node.register_local(_decided(node, _alice_certificate(tmp_path)), frozenset())
    node._end_after_queue("alice", "no policy grants it anything any more")
    assert "alice" not in node._fingerprints
    assert len(node._fingerprints) == 0


def test_a_recovered_registration_is_read_once_at_recovery(
    tmp_path: Path, reads: Counter[bytes]
) -> None:
    first = site_node(tmp_path, "d2", "WorkOrder", _clock)
    pem = _alice_certificate(tmp_path)
    first.register_local(_decided(first, pem), frozenset())
    first.store.close()
    reads.clear()
    again = site_node(tmp_path, "d2", "WorkOrder", _clock)  # same store: alice is recovered
    try:
        histories = [_routed(again, n) for n in range(10)]
        assert reads[pem] == 1
        assert histories == [{certs.credential_from_pem(pem).fingerprint: {"WorkOrder"}}] * 10
    finally:
        again.store.close()


def test_an_entry_counts_only_for_the_certificate_it_was_read_from(tmp_path: Path) -> None:
    ensure_ca(tmp_path, now=_clock())
    fingerprints = Fingerprints()
    first, second = _alice_certificate(tmp_path), _alice_certificate(tmp_path)
    fingerprints.remember("alice", first, "remembered")
    assert fingerprints.of("alice", first) == "remembered"
    assert fingerprints.of("alice", second) == certs.credential_from_pem(second).fingerprint
    assert fingerprints.of("bob", first) == certs.credential_from_pem(first).fingerprint
    assert len(fingerprints) == 2
