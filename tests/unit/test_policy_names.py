"""Name fields in conditions: several values per field, and OIDs ≡ their names (issue #12).

Certificates are real ones, issued by a test CA and read back with
:func:`xdn.certs.credential_from_pem`, so the whole path from DER to decision is exercised; each
decision is checked with the reference ``auth_list`` and with the cached engine.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from xdn import certs, names
from xdn.certs import Credential
from xdn.errors import PolicyError
from xdn.ontology import Ontology, load_ontology
from xdn.policy import Condition, Policy, PolicyEngine, PolicySet, auth_list, parse_policy

REPO = Path(__file__).resolve().parents[2]
IRI = "http://xdn.example.org/ontology/production"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
HEAD = f'[policy]\npublisher = "p"\nversion = 1\nontology = "{IRI}"\n\n'


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([REPO / "ontology" / "production.owl"])


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("test-ca", now=NOW)


def issued(ca: tuple[bytes, bytes], **attributes: str | tuple[str, ...]) -> Credential:
    pem, _ = certs.issue(*ca, name="u", role="subscriber", attributes=attributes, now=NOW)
    return certs.credential_from_pem(pem)


def policy(ontology: Ontology, *rules: str) -> Policy:
    return parse_policy((HEAD + "\n".join(rules)).encode(), ontology, source="p.toml")


def rule(rid: str, when: str, effect: str = "grant", concept: str = "WorkOrder") -> str:
    return (
        f'[[rule]]\nid = "{rid}"\neffect = "{effect}"\nconcept = "{concept}"\n'
        f"inherit = true\nwhen = {when}\n"
    )


def decide(ontology: Ontology, pol: Policy, holder: Credential) -> frozenset[str]:
    """The reference decision, after checking the cached engine agrees."""
    reference = auth_list(holder, pol, ontology, at=NOW).concepts
    assert PolicyEngine(PolicySet.of(ontology, [pol])).auth_list(holder, NOW).concepts == (
        reference
    )
    return reference


WORK_ORDER = 9  # concepts in WorkOrder's block


# ----------------------------------------------------------------- several values per field
def test_certificates_keep_every_value_of_a_field(ca: tuple[bytes, bytes]) -> None:
    holder = issued(ca, OU=("Interns", "Staff"))
    assert holder.subject["OU"] == ("Interns", "Staff")
    assert holder.subject["CN"] == ("u",) and holder.name == "u"
    assert holder.role == "subscriber"
    assert "OU=Interns, OU=Staff" in certs.describe_fields(holder.subject)


def test_a_deny_matches_any_value(ontology: Ontology, ca: tuple[bytes, bytes]) -> None:
    pol = policy(
        ontology,
        rule("G", '{ subject = { OU = "Staff" } }'),
        rule("D", '{ subject = { OU = "Interns" } }', effect="deny", concept="QualityInspection"),
    )
    for order in (("Interns", "Staff"), ("Staff", "Interns")):
        granted = decide(ontology, pol, issued(ca, OU=order))
        assert "Production" in granted and "QualityInspection" not in granted, order
    assert "QualityInspection" in decide(ontology, pol, issued(ca, OU="Staff"))


def test_a_grant_matches_any_value(ontology: Ontology, ca: tuple[bytes, bytes]) -> None:
    pol = policy(ontology, rule("G", '{ subject = { OU = "Cred1" }, role = "subscriber" }'))
    for order in (("Cred1", "Staff"), ("Staff", "Cred1")):
        assert len(decide(ontology, pol, issued(ca, OU=order))) == WORK_ORDER, order
    assert decide(ontology, pol, issued(ca, OU=("Staff", "Other"))) == set()


def test_issuer_fields_match_any_value_too(ontology: Ontology) -> None:
    pol = policy(ontology, rule("G", '{ issuer = { O = "Root" } }'))
    holder = Credential(
        name="u",
        subject={"CN": ("u",)},
        issuer={"O": ("Intermediate", "Root")},
        role="subscriber",
        serial=1,
        not_before=NOW,
        not_after=NOW,
        fingerprint="",
    )
    assert len(decide(ontology, pol, holder)) == WORK_ORDER


def test_engine_live_subscribers_are_found_by_any_value(
    ontology: Ontology, ca: tuple[bytes, bytes]
) -> None:
    """A rule added later finds a subscriber through its second value (registry postings)."""
    first = policy(ontology, rule("G", '{ subject = { OU = "Other" } }'))
    engine = PolicyEngine(PolicySet.of(ontology, [first]))
    engine.subscribe("s", issued(ca, OU=("Interns", "Staff")), at=NOW)
    second = parse_policy(
        (
            HEAD.replace("version = 1", "version = 2") + rule("D", '{ subject = { OU = "Staff" } }')
        ).encode(),
        ontology,
        source="p2.toml",
    )
    changes = engine.apply(second, at=NOW)
    assert len(changes.gained()["s"]["p"]) == WORK_ORDER
    assert len(engine.grants("s")["p"]) == WORK_ORDER


# ------------------------------------------------------------------------ OIDs and names
@pytest.mark.parametrize("field", ["2.5.4.12", "title", "TITLE"])
@pytest.mark.parametrize("issued_as", ["title", "2.5.4.12"])
def test_oid_and_name_are_the_same_field(
    ontology: Ontology, ca: tuple[bytes, bytes], field: str, issued_as: str
) -> None:
    pol = policy(ontology, rule("G", f'{{ subject = {{ "{field}" = "Engineer" }} }}'))
    holder = issued(ca, **{issued_as: "Engineer"})
    assert holder.subject["title"] == ("Engineer",)
    assert len(decide(ontology, pol, holder)) == WORK_ORDER
    assert decide(ontology, pol, issued(ca, title="Intern")) == set()


@pytest.mark.parametrize(
    ("field", "canonical"),
    [
        ("2.5.4.11", "OU"),
        ("organizationalUnitName", "OU"),
        ("2.5.4.3", "CN"),
        ("commonName", "CN"),
        ("2.5.4.5", "serialNumber"),
        ("1.2.840.113549.1.9.1", "emailAddress"),
        ("2.5.4.7", "L"),
        ("localityName", "L"),
        ("1.3.6.1.4.1.99999.1", "1.3.6.1.4.1.99999.1"),
    ],
)
def test_every_spelling_names_one_field(field: str, canonical: str) -> None:
    assert names.canonical_field(field) == canonical
    condition = Condition(subject=((field, frozenset({"x"})),))
    assert condition.subject == ((canonical, frozenset({"x"})),)


def test_a_name_attribute_cryptography_knows_matches_by_oid(
    ontology: Ontology, ca: tuple[bytes, bytes]
) -> None:
    pol = policy(ontology, rule("G", '{ subject = { "2.5.4.5" = "42" } }'))
    holder = issued(ca, serialNumber="42")
    assert holder.subject["serialNumber"] == ("42",)
    assert len(decide(ontology, pol, holder)) == WORK_ORDER


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ('{ subject = { Titel = "x" } }', r"^p\.toml:11: rule G: unknown subject field 'Titel'"),
        ('{ issuer = { "2.5" = "x", nope = "y" } }', r"^p\.toml:11: .*unknown issuer field 'nope'"),
        ('{ subject = { "3.1.2" = "x" } }', r"^p\.toml:11: .*unknown subject field '3\.1\.2'"),
        (
            '{ subject = { OU = "a", "2.5.4.11" = "b" } }',
            r"^p\.toml:11: .*'OU' and '2\.5\.4\.11' are the same field \(OU\)",
        ),
    ],
)
def test_unknown_or_repeated_fields_are_errors_with_file_and_line(
    ontology: Ontology, when: str, message: str
) -> None:
    with pytest.raises(PolicyError, match=message):
        policy(ontology, rule("G", when))
