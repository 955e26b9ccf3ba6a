"""Table-driven decision vectors (tests/vectors/policy_decisions.toml), Figure 2 included.

Each vector is checked against the reference :func:`auth_list` and the cached
:class:`PolicyEngine`, which must agree on concepts, denials and limits.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from xdn.certs import Credential
from xdn.ontology import Ontology, load_ontology
from xdn.policy import Policy, PolicyEngine, PolicySet, auth_list, load_policy, parse_policy

REPO = Path(__file__).resolve().parents[2]
VECTORS = REPO / "tests" / "vectors" / "policy_decisions.toml"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
VALIDITY = {
    "current": (datetime(2025, 1, 1, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)),
    "expired": (datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 5, 31, tzinfo=UTC)),
    "not-yet": (datetime(2025, 6, 2, tzinfo=UTC), datetime(2030, 1, 1, tzinfo=UTC)),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Vector:
    """One decision vector, as read from the TOML file."""

    name: str
    policy: str
    credential: Credential
    at: datetime
    disseminated: frozenset[tuple[str, str]]
    instances: dict[str, int]
    expect: frozenset[str]
    expect_denied: frozenset[str] | None
    expect_limits: tuple[tuple[str, int], ...] | None
    expect_note: str | None


def _fields(raw: dict[str, str | list[str]]) -> dict[str, tuple[str, ...]]:
    """A name as written in the vector file: a field is one value or a list of values."""
    return {k: (v,) if isinstance(v, str) else tuple(v) for k, v in raw.items()}


def _credential(raw: dict[str, Any]) -> Credential:
    not_before, not_after = VALIDITY[raw.get("valid", "current")]
    return Credential(
        name="vector",
        subject=_fields({"CN": "vector", **raw.get("subject", {})}),
        issuer=_fields(raw.get("issuer", {"CN": "xdn-ca", "O": "xdn development CA"})),
        role=raw.get("role", "subscriber"),
        serial=1,
        not_before=not_before,
        not_after=not_after,
        fingerprint="00" * 32,
    )


def load_vectors(path: Path, ontology: Ontology) -> tuple[dict[str, Policy], list[Vector]]:
    """The policies and cases of a vector file."""
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    policies = {}
    for raw in doc["policy"]:
        if "file" in raw:
            policies[raw["name"]] = load_policy(REPO / raw["file"], ontology)
        else:
            policies[raw["name"]] = parse_policy(
                raw["text"].encode(), ontology, source=f"vector policy {raw['name']}"
            )
    cases = [
        Vector(
            name=raw["name"],
            policy=raw["policy"],
            credential=_credential(raw["credential"]),
            at=raw.get("at", NOW),
            disseminated=frozenset(tuple(pair) for pair in raw.get("disseminated", [])),
            instances=dict(raw.get("instances", {})),
            expect=frozenset(raw["expect"]),
            expect_denied=frozenset(raw["expect_denied"]) if "expect_denied" in raw else None,
            expect_limits=(
                tuple(tuple(x) for x in raw["expect_limits"]) if "expect_limits" in raw else None
            ),
            expect_note=raw.get("expect_note"),
        )
        for raw in doc["case"]
    ]
    return policies, cases


ONTOLOGY = load_ontology([REPO / "ontology" / "production.owl"])
POLICIES, CASES = load_vectors(VECTORS, ONTOLOGY)


def test_the_vector_file_covers_figure_2_and_every_rule_kind() -> None:
    names = " ".join(case.name for case in CASES)
    for needle in ("Figure 2, R1", "Figure 2, R2", "temporal", "separation of duty", "deny"):
        assert needle in names
    assert len(CASES) >= 20


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_reference_decision(case: Vector) -> None:
    result = auth_list(
        case.credential,
        POLICIES[case.policy],
        ONTOLOGY,
        at=case.at,
        disseminated=case.disseminated,
        instances=case.instances,
    )
    assert result.concepts == case.expect
    if case.expect_denied is not None:
        assert result.denied == case.expect_denied
    if case.expect_limits is not None:
        assert result.limits == case.expect_limits
    if case.expect_note is not None:
        assert any(case.expect_note in note for note in result.notes), result.notes
    assert {g.concept for g in result.explain if g.effect == "grant"} == result.concepts


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_engine_decision(case: Vector) -> None:
    policy = POLICIES[case.policy]
    engine = PolicyEngine(PolicySet.of(ONTOLOGY, [policy]), disseminated=case.disseminated)
    for _ in range(2):  # the second lookup is served from the cache
        result = engine.auth_list(case.credential, case.at, instances=case.instances)
        assert result.concepts == case.expect
        if case.expect_denied is not None:
            assert result.denied == case.expect_denied
        if case.expect_limits is not None:
            assert result.limits == case.expect_limits
