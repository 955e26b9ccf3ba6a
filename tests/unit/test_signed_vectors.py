"""Known answers for signed statements (tests/vectors/signed_statements.toml).

The bytes a lease, a checkpoint and an entitlement sign are part of the protocol: a signature
made by one version must verify in the next. These vectors pin them, with one signature each
made when they were recorded.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest

from xdn import crypto, lease
from xdn.completeness import Checkpoint, Entitlement, SignedCheckpoint, SignedEntitlement
from xdn.errors import SignatureError

VECTORS = Path(__file__).resolve().parents[1] / "vectors" / "signed_statements.toml"


@pytest.fixture(scope="module")
def vectors() -> dict[str, Any]:
    with VECTORS.open("rb") as source:
        return tomllib.load(source)


def _hex(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


def _key(vectors: dict[str, Any]) -> crypto.PublicKey:
    return crypto.load_public_key_pem(vectors["public_key"].strip().encode())


def _lease(case: dict[str, Any]) -> lease.Lease:
    return lease.Lease(
        member=case["member"], site=case["site"], block=case["block"],
        concepts=tuple(case["concepts"]), issued_at=case["issued_at"],
        expires_at=case["expires_at"], leave=case["leave"],
    )


@pytest.mark.parametrize("name", ["lease", "leave"])
def test_lease_statement_bytes(vectors: dict[str, Any], name: str) -> None:
    case = vectors[name]
    statement = _lease(case)
    assert statement.to_bytes() == _hex(case["signed"])
    assert lease.Lease.from_bytes(_hex(case["signed"])) == statement


def test_lease_signature_and_wire_form(vectors: dict[str, Any]) -> None:
    case = vectors["lease"]
    statement, signature = _lease(case), _hex(case["signature"])
    crypto.verify(_key(vectors), signature, statement.to_bytes())
    signed = lease.SignedLease(lease=statement, signature=signature)
    assert signed.to_bytes() == _hex(case["wire"])
    assert lease.SignedLease.from_bytes(_hex(case["wire"])) == signed


def test_checkpoint_bytes_and_signature(vectors: dict[str, Any]) -> None:
    case = vectors["checkpoint"]
    checkpoint = Checkpoint(
        publisher=case["publisher"], issued_at_ms=case["issued_at_ms"],
        sequence=case["sequence"], latest=case["latest"], policy_version=case["policy_version"],
    )
    assert checkpoint.signed_bytes() == _hex(case["signed"])
    SignedCheckpoint(checkpoint=checkpoint, signature=_hex(case["signature"])).verify(
        _key(vectors)
    )


def _entitlement(case: dict[str, Any]) -> Entitlement:
    return Entitlement(
        publisher=case["publisher"], subscriber=case["subscriber"],
        certificate=case["certificate"], policy_version=case["policy_version"],
        issued_at_ms=case["issued_at_ms"], valid_until_ms=case["valid_until_ms"],
        concepts=frozenset(case["concepts"]), conditional=frozenset(case["conditional"]),
    )


def test_entitlement_bytes_and_signature(vectors: dict[str, Any]) -> None:
    case = vectors["entitlement"]
    entitlement = _entitlement(case)
    assert entitlement.signed_bytes() == _hex(case["signed"])
    SignedEntitlement(entitlement=entitlement, signature=_hex(case["signature"])).verify(
        _key(vectors)
    )


def test_recorded_signature_binds_the_statement(vectors: dict[str, Any]) -> None:
    case = vectors["entitlement"]
    other = _entitlement({**case, "policy_version": case["policy_version"] + 1})
    with pytest.raises(SignatureError):
        SignedEntitlement(entitlement=other, signature=_hex(case["signature"])).verify(
            _key(vectors)
        )
