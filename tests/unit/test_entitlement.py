"""The publisher-signed entitlement: what a policy grants a certificate whatever sites observe.

Pure part: which concepts stateful rules govern, the evaluation, the signature. Subscriber part:
the measured attack — a site that drops a granted concept *and* leaves it out of the grants it
reports — is flagged, and so is a forged, foreign or stale entitlement.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from tests.unit import sequence_fixtures
from tests.unit.sequence_fixtures import (
    GROUP_KEY,
    NOW,
    PUBLISHER,
    alice_session,
    concepts_of,
    restricted,
    signed_checkpoint,
)
from xdn import certs, crypto
from xdn.certs import Credential
from xdn.completeness import (
    Checkpoint,
    Entitlement,
    entitlement_of,
    sign_checkpoint,
    sign_entitlement,
    stateful_concepts,
)
from xdn.errors import SignatureError
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import parse_policy
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import checkpoint_to_pb, entitlement_from_pb, entitlement_to_pb

IRI = "http://xdn.example.org/ontology/production"
POLICY = f"""[policy]
publisher = "p"
version = 3
ontology = "{IRI}"

[[rule]]
id = "R1"
effect = "grant"
concept = "Production"
inherit = true
when = {{ subject = {{ OU = "A" }} }}

[[rule]]
id = "R2"
effect = "grant"
concept = "Machine"
after = {{ publisher = "p", concept = "WorkOrder" }}
when = {{ subject = {{ OU = "A" }} }}

[[rule]]
id = "R3"
effect = "grant"
concept = "Material"
max_instances = 2
when = {{ subject = {{ OU = "A" }} }}

[[rule]]
id = "R4"
effect = "grant"
concept = "QualityInspection"
requires = ["Machine"]
when = {{ subject = {{ OU = "A" }} }}
"""


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([REPO_ROOT / "ontology" / "production.owl"])


def _credential(ou: str = "A") -> Credential:
    return Credential(
        name="alice", subject={"CN": ("alice",), "OU": (ou,)}, issuer={"CN": ("ca",)},
        role="subscriber", serial=7, not_before=NOW - timedelta(days=1),
        not_after=NOW + timedelta(days=1), fingerprint="cd" * 32,
    )


def test_stateful_rules_govern_their_concepts_and_what_depends_on_them(
    ontology: Ontology,
) -> None:
    policy = parse_policy(POLICY.encode(), ontology, source="p.toml")
    assert stateful_concepts(policy, ontology) == {"Machine", "Material", "QualityInspection"}
    entitlement = entitlement_of(_credential(), policy, ontology, at=NOW)
    assert entitlement.concepts == {
        "Production", "ProductSpecification", "ResourceSpecification", "ProductionStep",
        "MachineSetting",
    }
    assert entitlement.conditional == {"Machine", "Material", "QualityInspection"}
    assert (entitlement.publisher, entitlement.subscriber, entitlement.policy_version) == (
        "p", _credential().member_id, 3,
    )
    assert entitlement.valid_until_ms == int(_credential().not_after.timestamp() * 1000)
    nothing = entitlement_of(_credential("B"), policy, ontology, at=NOW)
    assert nothing.concepts == nothing.conditional == frozenset()


def test_the_shipped_policy_entitles_whole_blocks_minus_denials(ontology: Ontology) -> None:
    text = (REPO_ROOT / "policies" / "production-dept.toml").read_bytes()
    policy = parse_policy(text, ontology, source="production-dept.toml")
    assert stateful_concepts(policy, ontology) == frozenset()
    cred1 = entitlement_of(_credential("Cred1"), policy, ontology, at=NOW)
    assert cred1.concepts == ontology.block("WorkOrder") and cred1.conditional == frozenset()
    contractors = entitlement_of(_credential("Contractors"), policy, ontology, at=NOW)
    assert contractors.concepts == ontology.block("Production") - {"MachineSetting"}


def test_every_altered_entitlement_field_is_refused() -> None:
    key = crypto.generate_private_key()
    entitlement = Entitlement(
        publisher="p", subscriber="alice", certificate="cd" * 32, policy_version=3,
        issued_at_ms=5, valid_until_ms=9, concepts=frozenset({"A"}),
        conditional=frozenset({"B"}),
    )
    message = entitlement_to_pb(sign_entitlement(entitlement, key), publisher_certificate=b"x")
    entitlement_from_pb(message).verify(key.public_key())
    for field, value in [
        ("publisher", "q"), ("subscriber", "bob"), ("certificate", "ef" * 32),
        ("policy_version", 4), ("issued_at_ms", 6), ("valid_until_ms", 10),
    ]:
        altered = pb.Entitlement()
        altered.CopyFrom(message)
        setattr(altered, field, value)
        with pytest.raises(SignatureError):
            entitlement_from_pb(altered).verify(key.public_key())
    for repeated in ("concepts", "conditional"):
        altered = pb.Entitlement()
        altered.CopyFrom(message)
        getattr(altered, repeated).append("C")
        with pytest.raises(SignatureError):
            entitlement_from_pb(altered).verify(key.public_key())
    with pytest.raises(ValueError, match="both granted and conditional"):
        Entitlement(
            publisher="p", subscriber="a", certificate="c", policy_version=1, issued_at_ms=1,
            valid_until_ms=2, concepts=frozenset({"A"}), conditional=frozenset({"A"}),
        )


# ---- at the subscriber: the measured attack ----------------------------------------------------
pki = sequence_fixtures.pki
documents = sequence_fixtures.documents


def _entitlement(
    pki: dict[str, tuple[bytes, bytes]], concepts: list[str], *, version: int = 1,
    for_certificate: bytes | None = None, signer: str = PUBLISHER,
) -> pb.Entitlement:
    holder = certs.credential_from_pem(for_certificate or pki["alice"][0])
    entitlement = Entitlement(
        publisher=PUBLISHER, subscriber=holder.member_id, certificate=holder.fingerprint,
        policy_version=version, issued_at_ms=int(NOW.timestamp() * 1000),
        valid_until_ms=int((NOW + timedelta(days=1)).timestamp() * 1000),
        concepts=frozenset(concepts),
    )
    cert_pem, key_pem = pki[signer]
    signed = sign_entitlement(entitlement, crypto.load_private_key_pem(key_pem))
    return entitlement_to_pb(signed, publisher_certificate=cert_pem)


def _without(
    pki: dict[str, tuple[bytes, bytes]], message: pb.Dissemination, concept: str
) -> pb.Dissemination:
    """What a site that drops ``concept`` delivers (its range proofs travel per concept; its
    signed hop names the leaves it forwards)."""
    return restricted(pki, message, [f.fragment_id for f in message.fragments
                                     if f.concept != concept])


def test_a_site_dropping_a_granted_concept_and_its_grant_is_flagged(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    concepts = concepts_of(documents[0])
    dropped = concepts[0]
    session = alice_session(tmp_path, pki, [c for c in concepts if c != dropped])
    try:
        assert session.on_dissemination(_without(pki, documents[0], dropped), 1)
        assert session.report.withheld == 0, "before the entitlement: the site's word only"
        session.on_entitlement(_entitlement(pki, concepts), 2)
        assert session.report.withheld == 1  # the grants the site reports lack one
        assert session.on_dissemination(_without(pki, documents[1], dropped), 3)
        assert session.report.withheld == 2  # and so does the document
        gaps = [json.loads(line) for line in (tmp_path / "out" / "gaps.jsonl").open()]
        assert [(g["document"], g["concepts"]) for g in gaps] == [
            (None, [dropped]), ("order-2 v1", [dropped]),
        ]
        assert session.completeness.tracker.following(PUBLISHER) == set(concepts)
        received = (tmp_path / "out" / "received.jsonl").read_text().splitlines()
        assert json.loads(received[-1])["withheld"] == [dropped]
        # An honest delivery of everything is not flagged.
        session.keyring.put(PUBLISHER, dropped, 1, GROUP_KEY)
        assert session.on_dissemination(documents[2], 4)
        assert session.report.withheld == 2
    finally:
        session.close()


def test_forged_foreign_and_stale_entitlements(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    concepts = concepts_of(documents[0])
    session = alice_session(tmp_path, pki, concepts)
    try:
        forged = _entitlement(pki, concepts)
        forged.concepts.append("Invented")
        session.on_entitlement(forged, 1)
        session.on_entitlement(_entitlement(pki, concepts, for_certificate=pki[PUBLISHER][0]), 2)
        session.on_entitlement(_entitlement(pki, concepts, signer="alice"), 3)
        refused = (tmp_path / "out" / "refused.jsonl").read_text().splitlines()
        assert len(refused) == 3
        assert session.completeness.entitled(PUBLISHER, 0) == frozenset()
        now_ms = int(NOW.timestamp() * 1000)
        session.on_checkpoint(signed_checkpoint(pki, dict.fromkeys(concepts, 1)), 4)
        assert session.completeness.unvouched(now_ms, 60_000) == {
            PUBLISHER: "no current signed entitlement received"
        }
        session.on_entitlement(_entitlement(pki, concepts, version=1), 5)
        assert session.completeness.unvouched(now_ms, 60_000) == {}
        signed = sign_checkpoint(
            Checkpoint(
                publisher=PUBLISHER, issued_at_ms=now_ms, sequence=1,
                latest=dict.fromkeys(concepts, 1), policy_version=2,
            ),
            crypto.load_private_key_pem(pki[PUBLISHER][1]),
        )
        session.on_checkpoint(checkpoint_to_pb(signed, publisher_certificate=pki[PUBLISHER][0]), 6)
        assert session.completeness.unvouched(now_ms, 60_000) == {
            PUBLISHER: "signed entitlement is for policy v1, in force: v2"
        }
        assert session.report.withheld == 0
    finally:
        session.close()
