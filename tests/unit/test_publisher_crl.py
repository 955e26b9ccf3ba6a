"""The key service checks the CA's CRL before sealing a key to anyone a site lists.

A dishonest root lists a revoked subscriber in GetMembership (a fake membership here): the key
service does not take it for a member. It also refuses an older CRL and a CRL stale beyond the
grace.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from deploy.network import DEFAULT_PUBLISHERS, ONTOLOGY
from deploy.pki import Party, ensure_ca, issue_party, revoke_party, write_crl
from publisher.client import Publisher, PublisherSetup
from publisher.revocation import CrlFile
from xdn import certs, crypto, identity, lease
from xdn.errors import UsageError
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.policy import load_policy
from xdn.wire.v1 import dissemination_pb2 as pb

SPEC = DEFAULT_PUBLISHERS[0]


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    directory = tmp_path / "certs"
    now = datetime.now(UTC)
    ensure_ca(directory, now=now)
    issue_party(directory, Party(name=SPEC.name, role="publisher"), now=now)
    for name in ("alice", "carol"):  # same attributes: the policy grants both the same
        issue_party(directory, Party(name=name, role="subscriber", attributes={"OU": "Cred1"}),
                    now=now)
    write_crl(directory, now=now)
    return directory


class _DishonestRoot:
    """Lists every member it is given, revoked or not, with every concept of the ontology."""

    def __init__(self, members: list[pb.Member]) -> None:
        self.members = members

    async def GetMembership(self, request: Any, timeout: float) -> pb.Membership:
        return pb.Membership(members=self.members, site="d1")


def _member(pki: Path, name: str, concepts: frozenset[str]) -> pb.Member:
    """``name`` as a site lists it: member id, certificate, grants and her own current lease."""
    certificate = (pki / f"{name}.pem").read_bytes()
    member_id = certs.credential_from_pem(certificate).member_id
    signed = lease.sign(
        lease.issue(
            member=member_id, site="d1", block="ProductionProcess", concepts=(),
            now_ms=lease.millis(datetime.now(UTC)), period_ms=3_600_000,
        ),
        crypto.load_private_key_pem((pki / f"{name}.key").read_bytes()),
    )
    return pb.Member(
        subscriber=member_id, certificate=certificate,
        grants=[pb.Grant(publisher=SPEC.name, concepts=sorted(concepts))],
        lease=signed.to_bytes(),
    )


def test_the_key_service_does_not_take_a_revoked_subscriber_for_a_member(
    pki: Path, tmp_path: Path
) -> None:
    ontology = load_ontology([ONTOLOGY])
    setup = PublisherSetup(
        name=SPEC.name, tls=TlsFiles.from_dir(pki, SPEC.name), ontology=ontology,
        mapping=load_mapping(SPEC.mapping, ontology), policy=load_policy(SPEC.policy, ontology),
        state_dir=tmp_path / "state", provenance_log=tmp_path / "p.nq",
        connect="127.0.0.1:9", crl=pki / "crl.pem",
    )
    everything = frozenset(ontology.concepts)

    async def scenario() -> tuple[list[str], list[str]]:
        publisher = Publisher(setup, warn=lambda _: None)
        try:
            publisher._stub = _DishonestRoot(  # type: ignore[assignment]
                [_member(pki, "alice", everything), _member(pki, "carol", everything)]
            )
            before = await publisher.members()
            revoke_party(pki, "alice", now=datetime.now(UTC))
            after = await publisher.members()
            return [identity.person(m) for m in before], [identity.person(m) for m in after]
        finally:
            await publisher.close()

    before, after = asyncio.run(scenario())
    assert before == ["alice", "carol"]
    assert after == ["carol"]  # alice is rekeyed out: she is sealed nothing new


def test_an_older_or_stale_crl_is_refused(pki: Path) -> None:
    ca = (pki / "ca.pem").read_bytes()
    now = datetime.now(UTC)
    older = (pki / "crl.pem").read_bytes()
    serial = revoke_party(pki, "alice", now=now)
    warnings: list[str] = []
    crl = CrlFile(pki / "crl.pem", ca, grace=timedelta(hours=1), warn=warnings.append)
    assert crl.revoked(now) == {serial}
    (pki / "crl.pem").write_bytes(older + b"\n")  # the CA's previous CRL, as a new file
    assert crl.revoked(now) == {serial}
    assert "is older than CRL number" in warnings[-1]
    held = crl.crl
    assert held is not None
    assert crl.revoked(held.next_update + timedelta(minutes=30)) == {serial}
    assert "the CRL is stale" in warnings[-1]
    with pytest.raises(UsageError, match="the CRL is stale"):
        crl.revoked(held.next_update + timedelta(hours=2))
    with pytest.raises(UsageError, match="cannot use the CRL"):
        CrlFile(pki / "missing.pem", ca).revoked(now)
    assert certs.read_crl(older, ca).number < held.number


def test_an_older_crl_is_refused_in_a_later_run_too(pki: Path, tmp_path: Path) -> None:
    ca = (pki / "ca.pem").read_bytes()
    now = datetime.now(UTC)
    kept = tmp_path / "state" / "crl-in-force.pem"
    older = (pki / "crl.pem").read_bytes()
    serial = revoke_party(pki, "alice", now=now)
    assert CrlFile(pki / "crl.pem", ca, kept=kept).revoked(now) == {serial}  # one run
    (pki / "crl.pem").write_bytes(older)  # the CA's previous CRL put back between runs
    warnings: list[str] = []
    later = CrlFile(pki / "crl.pem", ca, kept=kept, warn=warnings.append)  # the next run
    assert later.revoked(now) == {serial}
    assert "is older than CRL number" in warnings[-1]
