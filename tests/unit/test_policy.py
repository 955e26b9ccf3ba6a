"""Policy documents: parsing, errors naming file and line, consistency, signing, PolicySet."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import xdn.policy
from xdn import crypto
from xdn.certs import Credential
from xdn.errors import PolicyError, UsageError
from xdn.ontology import Ontology, load_ontology
from xdn.policy import (
    Condition,
    Policy,
    PolicyEngine,
    PolicySet,
    Rule,
    auth_list,
    check_rules,
    load_policy,
    load_signed_policy,
    parse_policy,
    revalidate,
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


@pytest.fixture(scope="session")
def ontology() -> Ontology:
    return load_ontology([OWL])


@pytest.fixture(scope="session")
def policies(ontology: Ontology) -> PolicySet:
    return PolicySet.of(ontology, [load_policy(PD, ontology), load_policy(QA, ontology)])


def cred(ou: str = "Cred1", **subject: str) -> Credential:
    return Credential(
        name=f"user-{ou}",
        subject={"CN": (f"user-{ou}",), "OU": (ou,), **{k: (v,) for k, v in subject.items()}},
        issuer={"CN": ("xdn-ca",), "O": ("xdn development CA",)},
        role="subscriber",
        serial=7,
        not_before=NOW - timedelta(days=1),
        not_after=NOW + timedelta(days=1),
        fingerprint="ab" * 32,
    )


def test_public_api_is_pinned() -> None:
    assert sorted(xdn.policy.__all__) == sorted(
        [
            "NAME_FIELDS",
            "ROLES",
            "After",
            "Authorization",
            "Change",
            "ChangeSet",
            "ConceptSet",
            "Condition",
            "Effect",
            "Grant",
            "Impact",
            "Policy",
            "PolicyEngine",
            "PolicySet",
            "Reason",
            "Rule",
            "RuleDiff",
            "SubscriberChange",
            "auth_list",
            "check_rules",
            "impacts",
            "load_policy",
            "load_signed_policy",
            "parse_policy",
            "representatives",
            "revalidate",
            "rule_diff",
            "sign_policy",
            "signature_path",
            "verify_policy_file",
        ]
    )
    for name in xdn.policy.__all__:
        assert getattr(xdn.policy, name) is not None
        module = getattr(getattr(xdn.policy, name), "__module__", "xdn.policy._")
        assert module.startswith(("xdn.policy._", "typing")), (name, module)


def test_policy_files_load(policies: PolicySet) -> None:
    pd, qa = policies.policies["production-dept"], policies.policies["qa-company"]
    assert (pd.version, pd.ontology, [r.id for r in pd.rules]) == (1, IRI, ["R1", "C1", "C2"])
    assert [(r.id, r.requires) for r in qa.rules] == [("R0", ()), ("R2", ("ResourceDetails",))]
    assert len(pd.digest) == 64 and pd.digest != qa.digest
    assert pd.warnings == () and qa.warnings == ()
    assert pd.where("C1") == f"{PD}:24" and pd.where() == str(PD)


HEAD = f'[policy]\npublisher = "p"\nversion = 1\nontology = "{IRI}"\n'
GRANT = (
    '[[rule]]\nid = "R1"\neffect = "grant"\nconcept = "WorkOrder"\nwhen = { role = "subscriber" }\n'
)


def _rule(rid: str, effect: str, concept: str, ou: str, extra: str = "") -> str:
    return (
        f'[[rule]]\nid = "{rid}"\neffect = "{effect}"\nconcept = "{concept}"\n{extra}'
        f'when = {{ subject = {{ OU = "{ou}" }} }}\n'
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[policy\nversion = 1\n", r"^p\.toml:1: malformed TOML"),
        (HEAD + GRANT + "inherit = yes\n", r"^p\.toml:10: malformed TOML"),
        (HEAD + GRANT.replace("WorkOrder", "Invoice"), r"^p\.toml:8: rule R1: unknown concept"),
        (HEAD + GRANT + "colour = 1\n", r"^p\.toml:10: rule R1: unknown key\(s\): colour"),
        (HEAD.replace("version", "revision"), r"^p\.toml:3: unknown key\(s\) in \[policy\]"),
        (HEAD.replace("version = 1\n", ""), r"^p\.toml:1: \[policy\] is missing 'version'"),
        (HEAD.replace("version = 1", "version = 0"), r"^p\.toml:3: .*positive integer"),
        (HEAD.replace("version = 1", 'version = "1"'), "'version' must be a positive integer"),
        (HEAD.replace('"p"', '""'), r"^p\.toml:2: .*'publisher' must be a non-empty string"),
        (HEAD.replace(IRI, "http://other.example/o"), r"^p\.toml:4: written for ontology"),
        ("[[rule]]\nid = 'x'\n", r"^p\.toml: missing \[policy\] table"),
        (HEAD + GRANT.replace('effect = "grant"\n', ""), r"^p\.toml:5: rule R1: missing field"),
        (HEAD + GRANT.replace('"grant"', '"allow"'), r"^p\.toml:7: .*effect must be 'grant'"),
        (HEAD + GRANT + GRANT, r"^p\.toml:11: rule R1: duplicate rule id \(first at line 5\)"),
        (
            HEAD + GRANT.replace('role = "subscriber"', 'subject = { UO = "x" }'),
            r"^p\.toml:9: rule R1: unknown subject field 'UO'",
        ),
        (HEAD + GRANT.replace('role = "subscriber"', 'role = "admin"'), "when.role must be"),
        (HEAD + GRANT.replace('{ role = "subscriber" }', "{}"), "'when' must be a non-empty"),
        (
            HEAD + GRANT.replace('role = "subscriber"', 'time = "now"'),
            r"unknown key\(s\) in 'when'",
        ),
        (HEAD + GRANT + 'inherit = "yes"\n', r"^p\.toml:10: .*'inherit' must be true or false"),
        (HEAD + GRANT + "max_instances = 0\n", "'max_instances' must be a positive integer"),
        (
            HEAD + GRANT.replace('"grant"', '"deny"') + 'requires = "Machine"\n',
            r"^p\.toml:10: rule R1: deny rules take no requires",
        ),
        (
            HEAD + GRANT + 'requires = "Machine"\n',
            r"^p\.toml:5: rule R1: requires Machine, which no grant rule of this policy grants",
        ),
        (HEAD + GRANT + 'inherit = true\nrequires = "Production"\n', "implication cycle: R1"),
        (
            HEAD
            + _rule("A", "grant", "Machine", "x", 'requires = "Material"\n')
            + _rule("B", "grant", "Material", "x", 'requires = "Machine"\n'),
            r"^p\.toml:5: rule A: implication cycle: A → B → A",
        ),
        (HEAD + GRANT + "after = 3\n", "'after' must be a table"),
        (HEAD + GRANT + 'after = { concept = "Machine", publisher = "" }\n', "after.publisher"),
        ("rule = 3\n" + HEAD, r"'rule' must be an array"),
        (HEAD + "[extra]\n", r"unknown top-level key\(s\): extra"),
        ("rule = [3]\n" + HEAD, r"\[\[rule\]\] #1 is not a table"),
        (b"\xff\xfe".decode("latin-1"), "malformed TOML"),
        (HEAD + 'valid_until = "tomorrow"\n', r"^p\.toml:5: .*'valid_until' must be a date-time"),
        (HEAD + "valid_until = 2026-01-01T00:00:00\n", "date-time with offset"),
    ],
)
def test_bad_policies_name_file_and_line(ontology: Ontology, text: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy(text.encode(), ontology, source="p.toml")


def test_non_utf8_and_missing_file(ontology: Ontology, tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="not UTF-8"):
        parse_policy(b"\xff\xfe", ontology, source="p.toml")
    with pytest.raises(PolicyError, match=r"missing\.toml: cannot read"):
        load_policy(tmp_path / "missing.toml", ontology)


def test_concepts_by_full_iri_and_lists_of_values(ontology: Ontology) -> None:
    text = HEAD + (
        f'[[rule]]\nid = "G"\neffect = "grant"\nconcept = "{IRI}#Machine"\n'
        'when = { subject = { OU = ["A", "B"], "2.5.4.12" = "Boss" } }\n'
    )
    policy = parse_policy(text.encode(), ontology, source="p.toml")
    assert policy.rules[0].concept == "Machine"
    assert policy.rules[0].when.subject == (("OU", {"A", "B"}), ("title", {"Boss"}))


# ----------------------------------------------------------------------------- validity


def test_valid_until(ontology: Ontology) -> None:
    text = (HEAD + "valid_until = 2025-12-31T23:59:59Z\n" + GRANT).encode()
    policy = parse_policy(text, ontology, source="p.toml", at=NOW)
    assert policy.valid_until == datetime(2025, 12, 31, 23, 59, 59, tzinfo=UTC)
    assert not policy.expired(NOW) and policy.expired(datetime(2026, 1, 1, tzinfo=UTC))
    late = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(PolicyError, match=r"^p\.toml:5: policy expired at 2025-12-31T23:59:59"):
        parse_policy(text, ontology, source="p.toml", at=late)
    holder = dataclasses.replace(cred(), not_after=late + timedelta(days=1))
    result = auth_list(holder, policy, ontology, at=late)
    assert result.concepts == set() and "expired" in result.notes[0]
    assert auth_list(holder, policy, ontology, at=NOW).concepts == {"WorkOrder"}


# ----------------------------------------------------------------------------- consistency


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (  # the same concept granted and denied for the same condition set
            _rule("G", "grant", "Machine", "X") + _rule("D", "deny", "Machine", "X"),
            r"^p\.toml:5: rule G: contradictory rules: everything it grants \(Machine\) is "
            r"denied to the same credentials by D \(deny wins\)",
        ),
        (  # a deny under a weaker condition (it holds for every credential the grant matches)
            '[[rule]]\nid = "G"\neffect = "grant"\nconcept = "QualityInspection"\n'
            'inherit = true\nwhen = { subject = { OU = "X" }, role = "subscriber" }\n'
            + '[[rule]]\nid = "D"\neffect = "deny"\nconcept = "WorkOrder"\ninherit = true\n'
            'when = { role = "subscriber" }\n'
            + '[[rule]]\nid = "G2"\neffect = "grant"\nconcept = "Machine"\n'
            'when = { subject = { OU = "X" }, role = "subscriber" }\n',
            "rule G: contradictory rules",
        ),
        (  # an implication whose premise is always denied
            _rule("G", "grant", "ResourceDetails", "Y", "inherit = true\n")
            + _rule("I", "grant", "Measurement", "X", 'requires = "Machine"\n')
            + _rule("D", "deny", "Machine", "X"),
            r"rule I: requires Machine, but deny rule\(s\) D deny it to every credential",
        ),
    ],
)
def test_contradictory_rules_are_errors(ontology: Ontology, rules: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy((HEAD + rules).encode(), ontology, source="p.toml")


PP_BLOCK = {
    "ProductionProcess", "WorkOrder", "Production", "ProductionStep", "MachineSetting",
    "ProductSpecification", "ResourceSpecification", "QualityInspection", "InspectionResult",
    "Measurement", "ResourceDetails", "Machine", "Material",
}


def test_a_grant_requiring_a_concept_of_its_own_block_applies_when_another_rule_grants_it(
    ontology: Ontology,
) -> None:
    """Issue #12 item 5: B's block holds ResourceDetails, but A grants it: no cycle."""
    rules = _rule("A", "grant", "ResourceDetails", "X", "inherit = true\n") + (
        '[[rule]]\nid = "B"\neffect = "grant"\nconcept = "ProductionProcess"\n'
        'inherit = true\nrequires = "ResourceDetails"\nwhen = { subject = { O = "Acme" } }\n'
    )
    policy = parse_policy((HEAD + rules).encode(), ontology, source="p.toml")
    both = auth_list(cred("X", O="Acme"), policy, ontology, at=NOW).concepts
    assert both == PP_BLOCK
    engine = PolicyEngine(PolicySet.of(ontology, [policy]))
    assert engine.auth_list(cred("X", O="Acme"), NOW).concepts == PP_BLOCK
    only_b = auth_list(cred("Y", O="Acme"), policy, ontology, at=NOW)
    assert only_b.concepts == set()  # least fixed point: B cannot grant its own premise
    assert "B does not apply: ResourceDetails not granted" in only_b.notes
    only_a = auth_list(cred("X"), policy, ontology, at=NOW).concepts
    assert only_a == {"ResourceDetails", "Machine", "Material", "ResourceSpecification"}


def test_implications_requiring_each_other_are_fine_when_a_third_rule_starts_them(
    ontology: Ontology,
) -> None:
    rules = (
        _rule("A", "grant", "Machine", "X", 'requires = "Material"\n')
        + _rule("B", "grant", "Material", "X", 'requires = "Machine"\n')
        + _rule("C", "grant", "Machine", "Starter")
    )
    policy = parse_policy((HEAD + rules).encode(), ontology, source="p.toml")
    assert auth_list(cred("X"), policy, ontology, at=NOW).concepts == set()
    holder = dataclasses.replace(cred("X"), subject={"OU": ("X", "Starter")})
    assert auth_list(holder, policy, ontology, at=NOW).concepts == {"Machine", "Material"}


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        (  # its own block is the only provider
            _rule("B", "grant", "ProductionProcess", "X", 'inherit = true\nrequires = "Machine"\n'),
            r"^p\.toml:5: rule B: implication cycle: B → B: it requires what only its own grant",
        ),
        (  # a cycle another dead rule depends on is reported at the cycle
            _rule("Z", "grant", "Measurement", "X", 'requires = "Machine"\n')
            + _rule("A", "grant", "Machine", "X", 'requires = "Material"\n')
            + _rule("B", "grant", "Material", "X", 'requires = "Machine"\n'),
            r"^p\.toml:11: rule A: implication cycle: A → B → A, and no other rule grants",
        ),
        (  # the only provider is for another role
            '[[rule]]\nid = "S"\neffect = "grant"\nconcept = "Machine"\n'
            'when = { role = "site" }\n'
            '[[rule]]\nid = "U"\neffect = "grant"\nconcept = "Material"\n'
            'requires = "Machine"\nwhen = { role = "subscriber" }\n',
            r"rule U: requires Machine, which no grant rule for the same role can give",
        ),
    ],
)
def test_unsatisfiable_implications_are_errors(
    ontology: Ontology, rules: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        parse_policy((HEAD + rules).encode(), ontology, source="p.toml")


def test_partial_overlaps_are_warnings_or_fine(ontology: Ontology) -> None:
    carve_out = _rule("G", "grant", "Production", "X", "inherit = true\n") + _rule(
        "D", "deny", "MachineSetting", "X"
    )
    assert parse_policy((HEAD + carve_out).encode(), ontology, source="p.toml").warnings == ()
    same_top = _rule("G", "grant", "Production", "X", "inherit = true\n") + _rule(
        "D", "deny", "Production", "X"
    )
    policy = parse_policy((HEAD + same_top).encode(), ontology, source="p.toml")
    assert len(policy.warnings) == 1
    assert policy.warnings[0].startswith("p.toml:5: rule G grants Production and rule D denies")
    repeat = _rule("A", "grant", "Machine", "X") + _rule("B", "grant", "Machine", "X")
    policy = parse_policy((HEAD + repeat).encode(), ontology, source="p.toml")
    assert policy.warnings == ("p.toml:10: rule B repeats rule A",)


def test_revalidate_against_a_new_ontology(ontology: Ontology, policies: PolicySet) -> None:
    qa = policies.policies["qa-company"]
    assert revalidate(qa, ontology).rules == qa.rules
    edges = [e for e in ontology.graph.edges if "Material" not in e]
    smaller = Ontology.from_edges(iri=IRI, concepts=ontology.concepts - {"Material"}, edges=edges)
    assert revalidate(qa, smaller).rules == qa.rules  # Material is only inside a block
    no_details = Ontology.from_edges(
        iri=IRI,
        concepts=ontology.concepts - {"ResourceDetails"},
        edges=[e for e in ontology.graph.edges if "ResourceDetails" not in e],
    )
    with pytest.raises(PolicyError, match=r"qa-company\.toml:13: rule R0: concept 'Resource"):
        revalidate(qa, no_details)
    other = Ontology.from_edges(iri="http://x.example/o", concepts=["A"], edges=[])
    with pytest.raises(PolicyError, match="written for ontology"):
        revalidate(qa, other)


def test_check_rules_accepts_programmatic_policies(ontology: Ontology) -> None:
    when = Condition(subject=(("OU", frozenset({"X"})),))
    rules = (Rule(id="G", effect="grant", concept="Machine", when=when),)
    policy = Policy(publisher="p", version=1, ontology=IRI, rules=rules)
    assert check_rules(policy, ontology) == policy
    bad = dataclasses.replace(
        policy, rules=(*rules, dataclasses.replace(rules[0], id="D", effect="deny"))
    )
    with pytest.raises(PolicyError, match=r"^<policy>: rule G: contradictory"):
        check_rules(bad, ontology)


def test_misuse_is_refused(policies: PolicySet, ontology: Ontology) -> None:
    policy = policies.policies["qa-company"]
    with pytest.raises(UsageError, match="timezone-aware"):
        auth_list(cred(), policy, ontology, at=datetime(2025, 1, 1))
    other = Ontology.from_edges(iri="http://x.example/o", concepts=["A"], edges=[])
    with pytest.raises(UsageError, match=r"not http://x\.example/o"):
        auth_list(cred(), policy, other, at=NOW)


def test_explanation_names_rules_and_paths(policies: PolicySet) -> None:
    result = policies.authorizations(cred("Cred2"), NOW)["qa-company"]
    by_concept = {g.concept: g for g in result.explain}
    measurement = by_concept["Measurement"]
    assert (measurement.rule, measurement.effect) == ("R2", "grant")
    assert measurement.via == ("QualityInspection", "InspectionResult", "Measurement")
    assert measurement.because == ("ResourceDetails",)
    assert by_concept["ResourceSpecification"].via == ("ResourceDetails", "ResourceSpecification")
    assert {g.concept for g in result.explain} == result.concepts
    quiet = auth_list(
        cred("Cred2"), policies.policies["qa-company"], policies.ontology, at=NOW, explain=False
    )
    assert quiet.explain == () and quiet.concepts == result.concepts


# ----------------------------------------------------------------------------- PolicySet


def test_policy_set_updates_are_all_or_nothing(ontology: Ontology, policies: PolicySet) -> None:
    pd, qa = policies.policies["production-dept"], policies.policies["qa-company"]
    with pytest.raises(PolicyError, match="second policy for 'qa-company'"):
        PolicySet.of(ontology, [qa, qa])
    with pytest.raises(PolicyError, match="does not supersede version 1"):
        policies.with_policy(dataclasses.replace(qa, rules=(), digest="replayed"))
    assert policies.with_policy(qa).policies["qa-company"] is qa  # the same file again: no-op
    newer_qa = dataclasses.replace(qa, version=2, rules=())
    stale_pd = dataclasses.replace(pd, version=1, digest="older")
    with pytest.raises(PolicyError, match="production-dept"):
        policies.updated([newer_qa, stale_pd])
    assert policies.policies["qa-company"] is qa  # nothing half-applied
    expired = dataclasses.replace(qa, version=3, valid_until=NOW - timedelta(days=1))
    with pytest.raises(PolicyError, match="expired"):
        policies.updated([expired], at=NOW)
    with pytest.raises(PolicyError, match="second policy"):
        policies.updated([newer_qa, newer_qa])
    updated = policies.updated([newer_qa], remove=["production-dept"])
    assert set(updated.policies) == {"qa-company"}
    assert updated.auth_lists(cred("Cred2"), NOW) == {"qa-company": frozenset()}
    with pytest.raises(UsageError, match="filed under"):
        PolicySet(ontology=ontology, policies={"x": qa})


def test_policy_set_state_per_publisher(ontology: Ontology) -> None:
    text = HEAD + _rule("E2", "grant", "Machine", "A", "max_instances = 1\n")
    policy = parse_policy(text.encode(), ontology, source="p.toml")
    pset = PolicySet.of(ontology, [policy])
    assert pset.auth_lists(cred("A"), NOW) == {"p": {"Machine"}}
    assert pset.auth_lists(cred("A"), NOW, instances={"p": {"Machine": 1}}) == {"p": set()}
    assert pset.auth_lists(cred("A"), NOW, instances={"other": {"Machine": 1}}) == {
        "p": {"Machine"}
    }


# ----------------------------------------------------------------------------- signing


@pytest.fixture(scope="module")
def publisher_key() -> crypto.PrivateKey:
    return crypto.generate_private_key()


def _signed_copy(tmp_path: Path, key: crypto.PrivateKey, source: Path = QA) -> Path:
    path = tmp_path / source.name
    path.write_bytes(source.read_bytes())
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


def test_signed_but_expired_policy_is_refused(
    tmp_path: Path, publisher_key: crypto.PrivateKey, ontology: Ontology
) -> None:
    source = tmp_path / "src" / "p.toml"
    source.parent.mkdir()
    source.write_text(HEAD + "valid_until = 2025-01-01T00:00:00Z\n" + GRANT, encoding="utf-8")
    path = _signed_copy(tmp_path, publisher_key, source)
    key = publisher_key.public_key()
    assert load_signed_policy(path, ontology, key).valid_until is not None
    with pytest.raises(PolicyError, match=r"p\.toml:5: policy expired"):
        load_signed_policy(path, ontology, key, at=NOW)


@pytest.mark.parametrize("attack", ["edit", "truncate-sig", "garbage-sig", "other-key", "no-sig"])
def test_tampered_or_unsigned_policies_are_refused(
    tmp_path: Path, publisher_key: crypto.PrivateKey, ontology: Ontology, attack: str
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
    with pytest.raises(PolicyError, match=r"qa-company\.toml.*(unsigned|does not verify)"):
        load_signed_policy(path, ontology, key)
