"""Policy documents, the auth_list engine (Figure 2 vectors, properties), signing and the CLI."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xdn import admin_cli, certs, crypto
from xdn.certs import Credential
from xdn.errors import PolicyError, UsageError
from xdn.ontology import Ontology, load_ontology
from xdn.policy import (
    Condition,
    Effect,
    Policy,
    PolicySet,
    Rule,
    auth_list,
    load_policy,
    load_signed_policy,
    parse_policy,
    sign_policy,
    signature_path,
    verify_policy_file,
)

REPO = Path(__file__).resolve().parents[2]
OWL = REPO / "ontology" / "production.owl"
PD = REPO / "policies" / "production-dept.toml"
QA = REPO / "policies" / "qa-company.toml"
IRI = "http://xdn.example.org/ontology/production"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
EFFECTS: tuple[Effect, ...] = ("grant", "deny")


@pytest.fixture(scope="session")
def ontology() -> Ontology:
    return load_ontology([OWL])


@pytest.fixture(scope="session")
def policies(ontology: Ontology) -> PolicySet:
    return PolicySet.of(ontology, [load_policy(PD, ontology), load_policy(QA, ontology)])


def cred(
    ou: str = "Cred1",
    *,
    role: str = "subscriber",
    issuer: dict[str, str] | None = None,
    valid: tuple[timedelta, timedelta] = (timedelta(days=-1), timedelta(days=1)),
    **subject: str,
) -> Credential:
    return Credential(
        name=f"user-{ou}",
        subject={"CN": f"user-{ou}", "OU": ou, "businessCategory": role, **subject},
        issuer=issuer or {"CN": "xdn-ca", "O": "xdn development CA"},
        role=role,
        serial=7,
        not_before=NOW + valid[0],
        not_after=NOW + valid[1],
        fingerprint="ab" * 32,
    )


WORK_ORDER_BLOCK = {
    "WorkOrder",
    "Production",
    "QualityInspection",
    "ProductionStep",
    "MachineSetting",
    "ProductSpecification",
    "ResourceSpecification",
    "InspectionResult",
    "Measurement",
}
RESOURCE_BLOCK = {"ResourceDetails", "Machine", "Material", "ResourceSpecification"}
QI_BLOCK = {"QualityInspection", "InspectionResult", "Measurement"}
EXPIRED = (timedelta(days=-30), timedelta(days=-1))
NOT_YET = (timedelta(days=1), timedelta(days=30))


@pytest.mark.parametrize(
    ("publisher", "credential", "expected"),
    [
        ("production-dept", cred("Cred1"), WORK_ORDER_BLOCK),  # Figure 2, R1
        ("qa-company", cred("Cred2"), RESOURCE_BLOCK | QI_BLOCK),  # Figure 2, R2
        ("production-dept", cred("Cred2"), set()),
        ("qa-company", cred("Cred1"), set()),
        (
            "production-dept",
            cred("Contractors"),  # deny MachineSetting wins over the block
            {"Production", "ProductionStep", "ProductSpecification", "ResourceSpecification"},
        ),
        ("production-dept", cred("Cred1", role="site"), set()),  # role condition
        ("production-dept", cred("cred1"), set()),  # exact, case-sensitive match
        ("production-dept", cred("Cred1", valid=EXPIRED), set()),
        ("qa-company", cred("Cred2", valid=NOT_YET), set()),
    ],
)
def test_decision_vectors(
    policies: PolicySet, publisher: str, credential: Credential, expected: set[str]
) -> None:
    assert policies.auth_lists(credential, NOW)[publisher] == expected


def test_validity_bounds_are_inclusive(policies: PolicySet) -> None:
    c = cred("Cred1")
    assert policies.auth_lists(c, c.not_after)["production-dept"] == WORK_ORDER_BLOCK
    assert policies.auth_lists(c, c.not_before)["production-dept"] == WORK_ORDER_BLOCK
    late = policies.authorizations(c, c.not_after + timedelta(seconds=1))["production-dept"]
    assert late.concepts == set() and late.explain == ()
    assert "is not valid at" in late.notes[0]


def _policy(ontology: Ontology, rules: str, publisher: str = "qa-company") -> Policy:
    head = f'[policy]\npublisher = "{publisher}"\nversion = 1\nontology = "{IRI}"\n'
    return parse_policy((head + rules).encode(), ontology, source="p.toml")


def _rule(rid: str, effect: str, concept: str, ou: str, extra: str = "") -> str:
    return (
        f'[[rule]]\nid = "{rid}"\neffect = "{effect}"\nconcept = "{concept}"\n{extra}'
        f'when = {{ subject = {{ OU = "{ou}" }} }}\n'
    )


def test_implication_needs_the_required_grant(ontology: Ontology) -> None:
    policy = _policy(
        ontology,
        _rule("R0", "grant", "ResourceDetails", "Other", "inherit = true\n")
        + _rule(
            "R2",
            "grant",
            "QualityInspection",
            "Cred2",
            'inherit = true\nrequires = "ResourceDetails"\n',
        ),
    )
    result = auth_list(cred("Cred2"), policy, ontology, at=NOW)
    assert result.concepts == set()
    assert result.notes == ("R2 does not apply: ResourceDetails not granted",)
    assert auth_list(cred("Other"), policy, ontology, at=NOW).concepts == RESOURCE_BLOCK


def test_deny_wins_also_over_implications(ontology: Ontology) -> None:
    policy = _policy(
        ontology,
        _rule("R0", "grant", "ResourceDetails", "Cred2", "inherit = true\n")
        + _rule(
            "R2",
            "grant",
            "QualityInspection",
            "Cred2",
            'inherit = true\nrequires = "ResourceDetails"\n',
        )
        + _rule("D1", "deny", "ResourceDetails", "Cred2"),
    )
    result = auth_list(cred("Cred2"), policy, ontology, at=NOW)
    assert result.concepts == RESOURCE_BLOCK - {"ResourceDetails"}
    assert result.denied == {"ResourceDetails"}
    assert [(g.rule, g.effect, g.concept) for g in result.explain if g.effect == "deny"] == [
        ("D1", "deny", "ResourceDetails")
    ]


def test_deny_with_inherit_removes_the_block(ontology: Ontology) -> None:
    policy = _policy(
        ontology,
        _rule("G", "grant", "WorkOrder", "X", "inherit = true\n")
        + _rule("D", "deny", "QualityInspection", "X", "inherit = true\n"),
    )
    assert auth_list(cred("X"), policy, ontology, at=NOW).concepts == WORK_ORDER_BLOCK - QI_BLOCK


def test_grant_without_inherit_is_the_concept_only(ontology: Ontology) -> None:
    policy = _policy(ontology, _rule("G", "grant", "WorkOrder", "X"))
    assert auth_list(cred("X"), policy, ontology, at=NOW).concepts == {"WorkOrder"}


def test_explain_names_rule_path_and_reason(policies: PolicySet) -> None:
    result = policies.authorizations(cred("Cred2"), NOW)["qa-company"]
    by_concept = {g.concept: g for g in result.explain}
    measurement = by_concept["Measurement"]
    assert (measurement.rule, measurement.effect) == ("R2", "grant")
    assert measurement.via == ("QualityInspection", "InspectionResult", "Measurement")
    assert measurement.because == ("ResourceDetails",)
    assert by_concept["ResourceSpecification"].via == ("ResourceDetails", "ResourceSpecification")
    assert {g.concept for g in result.explain} == result.concepts


def test_conditions_issuer_lists_and_all_fields(ontology: Ontology) -> None:
    rules = (
        '[[rule]]\nid = "G"\neffect = "grant"\nconcept = "Machine"\n'
        'when = { subject = { OU = ["A", "B"], O = "Acme" }, issuer = { O = "Good CA" } }\n'
    )
    policy = _policy(ontology, rules)
    good = {"O": "Good CA"}
    for credential, expected in [
        (cred("A", O="Acme", issuer=good), {"Machine"}),
        (cred("B", O="Acme", issuer=good), {"Machine"}),
        (cred("C", O="Acme", issuer=good), set()),
        (cred("A", issuer=good), set()),  # O missing
        (cred("A", O="Acme", issuer={"O": "Evil CA"}), set()),
    ]:
        assert auth_list(credential, policy, ontology, at=NOW).concepts == expected


def test_temporal_rule_waits_for_dissemination(ontology: Ontology) -> None:
    rules = _rule(
        "E1",
        "grant",
        "ResourceSpecification",
        "Auditors",
        'after = { publisher = "production-dept", concept = "ProductSpecification" }\n',
    )
    policy = _policy(ontology, rules)
    before = auth_list(cred("Auditors"), policy, ontology, at=NOW)
    assert before.concepts == set()
    assert "waits until ProductSpecification of production-dept" in before.notes[0]
    done = frozenset({("production-dept", "ProductSpecification")})
    after = auth_list(cred("Auditors"), policy, ontology, at=NOW, disseminated=done)
    assert after.concepts == {"ResourceSpecification"}


def test_separation_of_duty_limit_is_reported(ontology: Ontology) -> None:
    policy = _policy(
        ontology,
        _rule(
            "E2", "grant", "ProductSpecification", "Auditors", "inherit = true\nmax_instances = 1\n"
        ),
    )
    result = auth_list(cred("Auditors"), policy, ontology, at=NOW)
    assert result.limits == (("ProductSpecification", 1), ("ResourceSpecification", 1))


def test_misuse_is_refused(policies: PolicySet, ontology: Ontology) -> None:
    policy = policies.policies["qa-company"]
    with pytest.raises(UsageError, match="timezone-aware"):
        auth_list(cred(), policy, ontology, at=datetime(2025, 1, 1))
    other = Ontology.from_edges(iri="http://x.example/o", concepts=["A"], edges=[])
    with pytest.raises(UsageError, match=r"not http://x\.example/o"):
        auth_list(cred(), policy, other, at=NOW)


HEAD = f'[policy]\npublisher = "p"\nversion = 1\nontology = "{IRI}"\n'
GRANT = (
    '[[rule]]\nid = "R1"\neffect = "grant"\nconcept = "WorkOrder"\nwhen = { role = "subscriber" }\n'
)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[policy\nversion = 1\n", r"p\.toml:1: malformed TOML"),
        (HEAD + GRANT + "inherit = yes\n", r"p\.toml:10: malformed TOML"),
        (
            HEAD + GRANT.replace("WorkOrder", "Invoice"),
            r"p\.toml:6: rule R1: unknown concept 'Invoice'",
        ),
        (HEAD + GRANT + "colour = 1\n", r"rule R1: unknown key\(s\): colour"),
        (HEAD.replace("version", "revision"), r"unknown key\(s\) in \[policy\]: revision"),
        (HEAD.replace("version = 1\n", ""), r"\[policy\] is missing 'version'"),
        (HEAD.replace("version = 1", "version = 0"), "positive integer"),
        (HEAD.replace("version = 1", 'version = "1"'), "'version' must be a positive integer"),
        (HEAD.replace('"p"', '""'), "'publisher' must be a non-empty string"),
        (HEAD.replace(IRI, "http://other.example/o"), "written for ontology http://other"),
        ("[[rule]]\nid = 'x'\n", r"missing \[policy\] table"),
        (HEAD + GRANT.replace('effect = "grant"\n', ""), r"rule R1: missing field\(s\): effect"),
        (HEAD + GRANT.replace('"grant"', '"allow"'), "effect must be 'grant' or 'deny'"),
        (HEAD + GRANT + GRANT, "rule R1: duplicate rule id"),
        (
            HEAD + GRANT.replace('role = "subscriber"', 'subject = { ou = "x" }'),
            "unknown subject field 'ou'",
        ),
        (HEAD + GRANT.replace('role = "subscriber"', 'role = "admin"'), "when.role must be"),
        (HEAD + GRANT.replace('{ role = "subscriber" }', "{}"), "'when' must be a non-empty"),
        (
            HEAD + GRANT.replace('role = "subscriber"', 'time = "now"'),
            r"unknown key\(s\) in 'when'",
        ),
        (HEAD + GRANT + 'inherit = "yes"\n', "'inherit' must be true or false"),
        (HEAD + GRANT + "max_instances = 0\n", "'max_instances' must be a positive integer"),
        (
            HEAD + GRANT.replace('"grant"', '"deny"') + 'requires = "Machine"\n',
            "deny rules take no requires",
        ),
        (
            HEAD + GRANT + 'requires = "Machine"\n',
            "rule R1: requires Machine, which no grant rule of this policy grants",
        ),
        (HEAD + GRANT + 'inherit = true\nrequires = "Production"\n', "implication cycle: R1"),
        (
            HEAD
            + _rule("A", "grant", "Machine", "x", 'requires = "Material"\n')
            + _rule("B", "grant", "Material", "x", 'requires = "Machine"\n'),
            r"rule A: implication cycle: A → B → A",
        ),
        ("rule = 3\n" + HEAD, r"'rule' must be an array"),
        (HEAD + "[extra]\n", r"unknown top-level key\(s\): extra"),
        (b"\xff\xfe".decode("latin-1"), "malformed TOML"),
    ],
)
def test_bad_policies(ontology: Ontology, text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(text.encode(), ontology, source="p.toml")


def test_non_utf8_and_missing_file(ontology: Ontology, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not UTF-8"):
        parse_policy(b"\xff\xfe", ontology, source="p.toml")
    with pytest.raises(PolicyError, match=r"missing\.toml: cannot read"):
        load_policy(tmp_path / "missing.toml", ontology)


def test_policy_files_load(policies: PolicySet) -> None:
    pd, qa = policies.policies["production-dept"], policies.policies["qa-company"]
    assert (pd.version, pd.ontology, [r.id for r in pd.rules]) == (1, IRI, ["R1", "C1", "C2"])
    assert [(r.id, r.requires) for r in qa.rules] == [("R0", ()), ("R2", ("ResourceDetails",))]
    assert len(pd.digest) == 64 and pd.digest != qa.digest


def test_policy_set_rules(ontology: Ontology, policies: PolicySet) -> None:
    qa = policies.policies["qa-company"]
    with pytest.raises(PolicyError, match="second policy for 'qa-company'"):
        PolicySet.of(ontology, [qa, qa])
    with pytest.raises(PolicyError, match="does not supersede version 1"):
        policies.with_policy(qa)
    newer = Policy(publisher="qa-company", version=2, ontology=IRI, rules=())
    updated = policies.with_policy(newer)
    assert updated.auth_lists(cred("Cred2"), NOW)["qa-company"] == set()
    assert policies.auth_lists(cred("Cred2"), NOW)["qa-company"] == RESOURCE_BLOCK | QI_BLOCK


# ----------------------------------------------------------------------------- signing


@pytest.fixture(scope="module")
def publisher_key() -> crypto.PrivateKey:
    return crypto.generate_private_key()


def _signed_copy(tmp_path: Path, key: crypto.PrivateKey) -> Path:
    path = tmp_path / "qa-company.toml"
    path.write_bytes(QA.read_bytes())
    signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))
    return path


def test_sign_and_verify(
    tmp_path: Path, publisher_key: crypto.PrivateKey, ontology: Ontology
) -> None:
    path = _signed_copy(tmp_path, publisher_key)
    assert signature_path(path).name == "qa-company.toml.sig"
    assert verify_policy_file(path, publisher_key.public_key()) == QA.read_bytes()
    policy = load_signed_policy(path, ontology, publisher_key.public_key(), publisher="qa-company")
    assert policy.publisher == "qa-company"
    with pytest.raises(PolicyError, match="signed by 'production-dept'"):
        load_signed_policy(path, ontology, publisher_key.public_key(), publisher="production-dept")


@pytest.mark.parametrize("attack", ["edit", "truncate-sig", "garbage-sig", "other-key", "no-sig"])
def test_tampered_or_unsigned_policies_are_refused(
    tmp_path: Path, publisher_key: crypto.PrivateKey, attack: str
) -> None:
    path = _signed_copy(tmp_path, publisher_key)
    key = publisher_key.public_key()
    sig = signature_path(path)
    if attack == "edit":
        path.write_bytes(path.read_bytes().replace(b'"Cred2"', b'"Cred9"', 1))
    elif attack == "truncate-sig":
        sig.write_bytes(sig.read_bytes()[:40])
    elif attack == "garbage-sig":
        sig.write_bytes(b"not base64 at all!!\n")
    elif attack == "other-key":
        key = crypto.generate_private_key().public_key()
    else:
        sig.unlink()
    with pytest.raises(PolicyError, match=r"unsigned|does not verify"):
        verify_policy_file(path, key)


# ----------------------------------------------------------------------------- properties


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Ontology, Policy, Credential]:
    n = draw(st.integers(min_value=1, max_value=10))
    names = [f"C{i}" for i in range(n)]
    edges = draw(
        st.sets(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]),
            max_size=20,
        )
    )
    onto = Ontology.from_edges(
        iri="http://x.example/p", concepts=names, edges=[(names[a], names[b]) for a, b in edges]
    )
    rules = []
    for i in range(draw(st.integers(min_value=0, max_value=8))):
        effect: Effect = draw(st.sampled_from(EFFECTS))
        requires = (
            draw(st.lists(st.sampled_from(names), max_size=2, unique=True))
            if effect == "grant"
            else []
        )
        rules.append(
            Rule(
                id=f"R{i}",
                effect=effect,
                concept=draw(st.sampled_from(names)),
                inherit=draw(st.booleans()),
                requires=tuple(requires),
                when=Condition(subject=(("OU", frozenset({draw(st.sampled_from("ab"))})),)),
            )
        )
    policy = Policy(publisher="p", version=1, ontology=onto.iri, rules=tuple(rules))
    return onto, policy, cred(draw(st.sampled_from("ab")))


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_properties_inherit_deny_and_soundness(
    scenario: tuple[Ontology, Policy, Credential],
) -> None:
    onto, policy, credential = scenario
    result = auth_list(credential, policy, onto, at=NOW)
    matching = [r for r in policy.rules if r.when.matches(credential)]
    denied = set().union(*(r.covers(onto) for r in matching if r.effect == "deny"))
    granted_any = set().union(*(r.covers(onto) for r in matching if r.effect == "grant"))
    assert not result.concepts & denied  # deny wins
    assert result.denied == denied
    assert result.concepts <= granted_any  # nothing without a grant
    for rule in matching:  # R1: an unconditional inherit grant covers every sub-concept
        if rule.effect == "grant" and rule.inherit and not rule.requires:
            assert onto.block(rule.concept) - denied <= result.concepts
    for rule in matching:  # R2: an implication holds exactly when its premises hold
        if rule.effect == "grant" and set(rule.requires) <= result.concepts:
            assert rule.covers(onto) - denied <= result.concepts
    expired = cred(credential.subject["OU"], valid=EXPIRED)
    assert auth_list(expired, policy, onto, at=NOW).concepts == set()


# ----------------------------------------------------------------------------- CLI


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pki")
    ca_cert, ca_key = certs.create_ca("xdn-ca", now=NOW)
    files = {}
    for name, role, attributes in [
        ("qa-company", "publisher", {}),
        ("alice", "subscriber", {"OU": "Cred2"}),
    ]:
        cert, key = certs.issue(
            ca_cert, ca_key, name=name, role=role, attributes=attributes, now=NOW
        )
        (root / f"{name}.pem").write_bytes(cert)
        (root / f"{name}.key").write_bytes(key)
        files[name], files[f"{name}-key"] = root / f"{name}.pem", root / f"{name}.key"
    return files


def test_cli_sign_check_explain(
    tmp_path: Path, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "qa-company.toml"
    policy.write_bytes(QA.read_bytes())
    ns = argparse.Namespace
    assert (
        admin_cli.cmd_policy_sign(ns(policy=policy, key=pki["qa-company-key"], ontology=None)) == 0
    )
    assert signature_path(policy).exists()
    assert (
        admin_cli.cmd_policy_check(ns(policy=policy, verify=pki["qa-company"], ontology=None)) == 0
    )
    assert "signature verified: OK" in capsys.readouterr().out
    assert (
        admin_cli.cmd_policy_explain(ns(policy=policy, cert=pki["alice"], at=NOW, ontology=None))
        == 0
    )
    out = capsys.readouterr().out
    assert "publisher qa-company: InspectionResult, Machine, Material, Measurement" in out
    assert "by R2 via QualityInspection ⊒ InspectionResult ⊒ Measurement" in out
    assert "(because ResourceDetails is granted)" in out
    policy.write_bytes(policy.read_bytes() + b"\n# edited after signing\n")
    with pytest.raises(PolicyError, match="does not verify"):
        admin_cli.cmd_policy_check(ns(policy=policy, verify=pki["qa-company"], ontology=None))


def test_cli_sign_refuses_invalid_policy(tmp_path: Path, pki: dict[str, Path]) -> None:
    policy = tmp_path / "bad.toml"
    policy.write_text(HEAD + GRANT.replace("WorkOrder", "Invoice"), encoding="utf-8")
    with pytest.raises(PolicyError, match="unknown concept 'Invoice'"):
        admin_cli.cmd_policy_sign(
            argparse.Namespace(policy=policy, key=pki["qa-company-key"], ontology=None)
        )
    assert not signature_path(policy).exists()
