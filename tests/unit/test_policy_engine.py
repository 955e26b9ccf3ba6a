"""PolicyEngine: cached decisions, live subscriptions and the ChangeSets of every change."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from xdn.certs import Credential
from xdn.errors import PolicyError, UsageError
from xdn.ontology import Ontology, load_ontology
from xdn.policy import (
    Change,
    ChangeSet,
    ConceptSet,
    Policy,
    PolicyEngine,
    PolicySet,
    auth_list,
    load_policy,
    parse_policy,
)

REPO = Path(__file__).resolve().parents[2]
IRI = "http://xdn.example.org/ontology/production"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
QI_BLOCK = {"QualityInspection", "InspectionResult", "Measurement"}
RESOURCE_BLOCK = {"ResourceDetails", "Machine", "Material", "ResourceSpecification"}


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([REPO / "ontology" / "production.owl"])


@pytest.fixture
def policies(ontology: Ontology) -> PolicySet:
    return PolicySet.of(
        ontology,
        [
            load_policy(REPO / "policies" / f"{p}.toml", ontology)
            for p in ("production-dept", "qa-company")
        ],
    )


def cred(ou: str, *, days: int = 30, **subject: str) -> Credential:
    return Credential(
        name=f"user-{ou}",
        subject={"CN": (f"user-{ou}",), "OU": (ou,), **{k: (v,) for k, v in subject.items()}},
        issuer={"CN": ("xdn-ca",), "O": ("xdn development CA",)},
        role="subscriber",
        serial=1,
        not_before=NOW - timedelta(days=1),
        not_after=NOW + timedelta(days=days),
        fingerprint="cd" * 32,
    )


def _policy(
    ontology: Ontology,
    body: str,
    *,
    version: int = 1,
    publisher: str = "qa-company",
    head: str = "",
) -> Policy:
    text = (
        f'[policy]\npublisher = "{publisher}"\nversion = {version}\nontology = "{IRI}"\n{head}'
        + body
    )
    return parse_policy(text.encode(), ontology, source=f"{publisher}-v{version}.toml")


def _rule(rid: str, concept: str, ou: str, extra: str = "", effect: str = "grant") -> str:
    return (
        f'[[rule]]\nid = "{rid}"\neffect = "{effect}"\nconcept = "{concept}"\n{extra}'
        f'when = {{ subject = {{ OU = "{ou}" }} }}\n'
    )


def test_cached_decisions_equal_the_reference(policies: PolicySet) -> None:
    engine = PolicyEngine(policies)
    for ou in ("Cred1", "Cred2", "Contractors", "Nobody"):
        holder = cred(ou)
        assert engine.auth_lists(holder, NOW) == policies.auth_lists(holder, NOW)
        for publisher in policies.policies:
            cached = engine.auth_list(holder, NOW, publisher=publisher)
            full = engine.explain(holder, NOW, publisher=publisher)
            assert (cached.concepts, cached.denied, cached.limits) == (
                full.concepts,
                full.denied,
                full.limits,
            )
            assert cached.explain == () and (full.explain or not full.concepts)
    before = engine.evaluations
    engine.auth_list(cred("Cred1", O="Other"), NOW, publisher="production-dept")
    assert engine.evaluations == before  # same profile as Cred1: shared
    late = engine.auth_list(cred("Cred1"), NOW + timedelta(days=90), publisher="production-dept")
    assert late.concepts == set() and "not valid" in late.notes[0]


def test_misuse(policies: PolicySet) -> None:
    engine = PolicyEngine(policies)
    with pytest.raises(UsageError, match="name the publisher"):
        engine.auth_list(cred("Cred1"), NOW)
    with pytest.raises(UsageError, match="no policy of publisher 'x'"):
        engine.auth_list(cred("Cred1"), NOW, publisher="x")
    with pytest.raises(UsageError, match="not subscribed"):
        engine.grants("ghost")
    engine.subscribe("a", cred("Cred1"), at=NOW)
    with pytest.raises(UsageError, match="already subscribed"):
        engine.subscribe("a", cred("Cred1"), at=NOW)
    with pytest.raises(UsageError, match="not valid"):
        engine.subscribe("b", cred("Cred1"), at=NOW + timedelta(days=60))


def test_subscribe_and_unsubscribe_report_gains_and_losses(policies: PolicySet) -> None:
    engine = PolicyEngine(policies)
    joined = engine.subscribe("bob", cred("Cred2"), at=NOW)
    assert joined.gained() == {"bob": {"qa-company": RESOURCE_BLOCK | QI_BLOCK}}
    assert [c.reason for c in joined.changes] == ["subscribe"]
    assert engine.grants("bob") == {
        "production-dept": set(),
        "qa-company": RESOURCE_BLOCK | QI_BLOCK,
    }
    assert len(engine) == 1 and "bob" in engine and engine.subscribers == {"bob"}
    left = engine.unsubscribe("bob")
    assert left.lost() == {"bob": {"qa-company": RESOURCE_BLOCK | QI_BLOCK}}
    assert "bob" not in engine


def test_policy_change_touches_only_affected_profiles(
    policies: PolicySet, ontology: Ontology
) -> None:
    engine = PolicyEngine(policies)
    for name, ou in [
        ("a1", "Cred1"),
        ("a2", "Cred1"),
        ("b1", "Cred2"),
        ("b2", "Cred2"),
        ("x", "Auditors"),
    ]:
        engine.subscribe(name, cred(ou), at=NOW)
    qa = policies.policies["qa-company"]
    v2 = _policy(
        ontology,
        _rule("R0", "ResourceDetails", "Cred2", "inherit = true\n")
        + _rule("A1", "Machine", "Auditors"),
        version=2,
    )
    changes = engine.apply(v2, at=NOW)
    assert changes.lost() == {"b1": {"qa-company": QI_BLOCK}, "b2": {"qa-company": QI_BLOCK}}
    assert changes.gained() == {"x": {"qa-company": {"Machine"}}}
    assert {c.reason for c in changes.changes} == {"policy"}
    assert len(changes.changes) == 2 and len(changes) == 3  # b1 and b2 share one group
    assert changes.reevaluated == 3 and changes.evaluations == 2  # a1, a2 untouched
    assert engine.policies.policies["qa-company"] is v2 and qa is not v2
    assert (
        engine.grants("a1")["production-dept"]
        == policies.auth_lists(cred("Cred1"), NOW)["production-dept"]
    )


def test_refused_updates_leave_the_engine_unchanged(
    policies: PolicySet, ontology: Ontology
) -> None:
    engine = PolicyEngine(policies)
    engine.subscribe("b", cred("Cred2"), at=NOW)
    before = engine.grants("b")
    stale = dataclasses.replace(policies.policies["qa-company"], rules=(), digest="edited")
    with pytest.raises(PolicyError, match="does not supersede"):
        engine.apply(stale, at=NOW)
    expired = _policy(ontology, "", version=5, head="valid_until = 2025-01-01T00:00:00Z\n")
    with pytest.raises(PolicyError, match="expired"):
        engine.apply(expired, at=NOW)
    good = _policy(ontology, "", version=2, publisher="production-dept")
    with pytest.raises(PolicyError, match="does not supersede"):
        engine.apply([good, stale], at=NOW)
    assert engine.policies is policies and engine.grants("b") == before
    broken = Ontology.from_edges(
        iri=IRI,
        concepts=["ProductionProcess", "WorkOrder"],
        edges=[("ProductionProcess", "WorkOrder")],
    )
    with pytest.raises(PolicyError, match="not in the new ontology"):
        engine.apply(broken)
    assert engine.ontology is policies.ontology and engine.grants("b") == before


def test_policy_sets_add_and_remove_publishers(policies: PolicySet, ontology: Ontology) -> None:
    engine = PolicyEngine(PolicySet.of(ontology, [policies.policies["qa-company"]]))
    engine.subscribe("a", cred("Cred1"), at=NOW)
    engine.subscribe("b", cred("Cred2"), at=NOW)
    added = engine.apply(policies, at=NOW)
    assert set(added.gained()) == {"a"} and added.lost() == {}
    assert (
        engine.grants("a")["production-dept"]
        == policies.auth_lists(cred("Cred1"), NOW)["production-dept"]
    )
    removed = engine.apply(PolicySet.of(ontology, [policies.policies["production-dept"]]))
    assert removed.lost() == {"b": {"qa-company": RESOURCE_BLOCK | QI_BLOCK}}
    assert engine.grants("b") == {"production-dept": set()}
    assert engine.apply(engine.policies) == ChangeSet()


def test_reloading_unchanged_files_is_harmless(policies: PolicySet, ontology: Ontology) -> None:
    engine = PolicyEngine(policies)
    engine.subscribe("b", cred("Cred2"), at=NOW)
    again = [load_policy(REPO / "policies" / f"{p}.toml", ontology) for p in policies.policies]
    assert engine.apply(again, at=NOW) == ChangeSet()
    assert engine.apply(PolicySet.of(ontology, again), at=NOW) == ChangeSet()
    assert engine.policies.policies == policies.policies


def _grown(ontology: Ontology) -> Ontology:
    """The production ontology plus Calibration ⊑ InspectionResult, Tooling ⊑ Machine."""
    return Ontology.from_edges(
        iri=IRI,
        concepts=ontology.concepts,
        edges=[*ontology.graph.edges, ("InspectionResult", "Calibration"), ("Machine", "Tooling")],
    )


def test_ontology_change_re_evaluates_changed_blocks(policies: PolicySet) -> None:
    engine = PolicyEngine(policies)
    engine.subscribe("a", cred("Cred1"), at=NOW)
    engine.subscribe("b", cred("Cred2"), at=NOW)
    engine.subscribe("c", cred("Contractors"), at=NOW)
    changes = engine.apply(_grown(policies.ontology))
    assert changes.gained() == {
        "a": {"production-dept": {"Calibration"}},
        "b": {"qa-company": {"Calibration", "Tooling"}},
    }
    assert {c.reason for c in changes.changes} == {"ontology"}
    assert engine.ontology.contains("Machine", "Tooling")
    for name, ou in [("a", "Cred1"), ("b", "Cred2"), ("c", "Contractors")]:
        assert engine.grants(name) == engine.policies.auth_lists(cred(ou), NOW)
    both = PolicyEngine(policies)
    both.subscribe("a", cred("Cred1"), at=NOW)
    grown = engine.ontology
    newer = dataclasses.replace(policies.policies["qa-company"], version=2, digest="v2")
    together = both.apply(PolicySet.of(grown, [policies.policies["production-dept"], newer]))
    assert together.gained() == {"a": {"production-dept": {"Calibration"}}}
    assert both.ontology is grown and both.policies.policies["qa-company"].version == 2
    back = engine.apply(policies.ontology)
    assert back.lost() == {
        "a": {"production-dept": {"Calibration"}},
        "b": {"qa-company": {"Calibration", "Tooling"}},
    }


SOD = _rule(
    "E2", "ProductSpecification", "Auditors", "inherit = true\nmax_instances = 1\n"
) + _rule(
    "E1",
    "Machine",
    "Auditors",
    'after = { publisher = "production-dept", concept = "ProductSpecification" }\n',
)


def test_separation_of_duty_is_enforced_on_delivery(ontology: Ontology) -> None:
    engine = PolicyEngine(PolicySet.of(ontology, [_policy(ontology, SOD)]))
    engine.subscribe("aud", cred("Auditors"), at=NOW)
    engine.subscribe("aud2", cred("Auditors"), at=NOW)
    limits = engine.decision("aud", "qa-company").limits
    assert limits == (("ProductSpecification", 1), ("ResourceSpecification", 1))
    first = engine.record_delivery("aud", "qa-company", ["ProductSpecification"])
    assert first.lost() == {"aud": {"qa-company": {"ProductSpecification"}}}
    assert first.changes[0].reason == "delivery"
    assert engine.grants("aud")["qa-company"] == {"ResourceSpecification"}
    assert engine.grants("aud2")["qa-company"] == {"ProductSpecification", "ResourceSpecification"}
    assert engine.instances("aud", "qa-company") == {"ProductSpecification": 1}
    assert not engine.record_delivery("aud", "qa-company", ["ProductSpecification"])
    assert not engine.record_delivery("aud", "other-publisher", ["Machine"])
    # a new version that loosens the bound gives the concept back to exactly that subscriber
    looser = _policy(ontology, SOD.replace("max_instances = 1", "max_instances = 3"), version=2)
    regained = engine.apply(looser)
    assert regained.gained() == {"aud": {"qa-company": {"ProductSpecification"}}}


def test_temporal_rules_apply_once_disseminated(ontology: Ontology) -> None:
    engine = PolicyEngine(PolicySet.of(ontology, [_policy(ontology, SOD)]))
    engine.subscribe("aud", cred("Auditors"), at=NOW)
    assert "Machine" not in engine.grants("aud")["qa-company"]
    assert not engine.mark_disseminated("production-dept", ["Machine"])
    done = engine.mark_disseminated("production-dept", ["ProductSpecification"])
    assert done.gained() == {"aud": {"qa-company": {"Machine"}}}
    assert engine.disseminated == {
        ("production-dept", "Machine"),
        ("production-dept", "ProductSpecification"),
    }
    assert not engine.mark_disseminated("production-dept", ["ProductSpecification"])
    late = PolicyEngine(engine.policies, disseminated=engine.disseminated)
    assert late.auth_list(cred("Auditors"), NOW).concepts == engine.grants("aud")["qa-company"]


def test_advance_expires_credentials_and_policies(ontology: Ontology) -> None:
    until = "valid_until = 2025-07-01T00:00:00Z\n"
    policy = _policy(ontology, _rule("G", "Machine", "X"), head=until)
    engine = PolicyEngine(PolicySet.of(ontology, [policy]))
    engine.subscribe("short", cred("X", days=2), at=NOW)
    engine.subscribe("long", cred("X", days=90), at=NOW)
    assert not engine.advance(NOW + timedelta(days=1))
    gone = engine.advance(NOW + timedelta(days=3))
    assert gone.lost() == {"short": {"qa-company": {"Machine"}}}
    assert gone.changes[0].reason == "expiry" and "short" not in engine
    ended = engine.advance(datetime(2025, 7, 2, tzinfo=UTC))
    assert ended.lost() == {"long": {"qa-company": {"Machine"}}}
    assert engine.grants("long") == {"qa-company": set()}
    assert not engine.advance(datetime(2025, 7, 3, tzinfo=UTC))
    renewed = _policy(ontology, _rule("G", "Machine", "X"), version=2)
    assert engine.apply(renewed).gained() == {"long": {"qa-company": {"Machine"}}}


def test_new_condition_sets_find_their_subscribers(ontology: Ontology) -> None:
    engine = PolicyEngine(PolicySet.of(ontology, [_policy(ontology, _rule("G", "Machine", "X"))]))
    for i in range(20):
        engine.subscribe(f"s{i}", cred("X" if i % 2 else "Y", O=f"Org{i % 4}"), at=NOW)
    body = _rule("G", "Machine", "X") + (
        '[[rule]]\nid = "N"\neffect = "grant"\nconcept = "Material"\n'
        'when = { subject = { O = ["Org1", "Org2"] }, issuer = { O = "xdn development CA" } }\n'
    )
    changes = engine.apply(_policy(ontology, body, version=2))
    assert set(changes.gained()) == {f"s{i}" for i in range(20) if i % 4 in (1, 2)}
    assert changes.reevaluated == 10
    for i in range(20):
        expected = auth_list(
            cred("X" if i % 2 else "Y", O=f"Org{i % 4}"),
            engine.policies.policies["qa-company"],
            ontology,
            at=NOW,
        ).concepts
        assert engine.grants(f"s{i}")["qa-company"] == expected


def test_changes_name_concepts_lazily(policies: PolicySet, ontology: Ontology) -> None:
    engine = PolicyEngine(policies)
    engine.subscribe("b", cred("Cred2"), at=NOW)
    changes = engine.apply(_policy(ontology, _rule("R0", "Machine", "Cred2"), version=2))
    (change,) = changes.changes
    lost = change.lost
    assert isinstance(lost, ConceptSet) and not change.gained
    assert len(lost) == 6 and "Material" in lost and "Machine" not in lost and 3 not in lost
    assert lost == (RESOURCE_BLOCK | QI_BLOCK) - {"Machine"} and lost != {"Machine"}
    assert lost - {"Material"} == (RESOURCE_BLOCK | QI_BLOCK) - {"Machine", "Material"}
    assert isinstance(lost | {"X"}, frozenset) and hash(lost) == hash(frozenset(lost))
    assert lost.isdisjoint({"Machine"}) and not lost.isdisjoint(["Material"])
    assert repr(lost).startswith("ConceptSet(['InspectionResult'")


def test_change_sets() -> None:
    one = Change(
        publisher="p",
        subscribers=frozenset({"a", "b"}),
        gained=frozenset({"X"}),
        lost=frozenset(),
        reason="policy",
    )
    two = Change(
        publisher="p",
        subscribers=frozenset({"a"}),
        gained=frozenset({"Y"}),
        lost=frozenset({"X"}),
        reason="policy",
    )
    changes = ChangeSet(changes=(one,), reevaluated=2) + ChangeSet(changes=(two,), evaluations=1)
    assert bool(changes) and len(changes) == 3
    assert (changes.reevaluated, changes.evaluations) == (2, 1)
    assert [(c.subscriber, c.gained) for c in changes] == [("a", {"X"}), ("b", {"X"}), ("a", {"Y"})]
    assert changes.net() == {("a", "p"): ({"Y"}, set()), ("b", "p"): ({"X"}, set())}
    assert changes.gained() == {"a": {"p": {"Y"}}, "b": {"p": {"X"}}} and changes.lost() == {}
    undo = Change(
        publisher="p",
        subscribers=frozenset({"b"}),
        gained=frozenset(),
        lost=frozenset({"X"}),
        reason="policy",
    )
    assert (changes + ChangeSet(changes=(undo,))).net() == {("a", "p"): ({"Y"}, set())}
    assert not ChangeSet() and len(ChangeSet()) == 0
    with pytest.raises(ValueError, match="both gained and lost"):
        dataclasses.replace(one, lost=frozenset({"X"}))


# ---------------------------------------------------------------- expiry at every entry point
UNTIL = "valid_until = 2025-07-01T00:00:00Z\n"
AFTER_UNTIL = datetime(2025, 7, 2, tzinfo=UTC)


def _expiring(ontology: Ontology) -> PolicyEngine:
    policy = _policy(ontology, _rule("G", "Machine", "X"), head=UNTIL)
    engine = PolicyEngine(PolicySet.of(ontology, [policy]))
    engine.subscribe("s", cred("X", days=90), at=NOW)
    assert engine.advance(AFTER_UNTIL).lost() == {"s": {"qa-company": {"Machine"}}}
    return engine


def _agrees_with_auth_list(engine: PolicyEngine, holder: Credential, subscriber: str) -> None:
    assert engine.now is not None
    at_now = engine.auth_list(holder, engine.now, publisher="qa-company").concepts
    assert engine.grants(subscriber)["qa-company"] == at_now


def test_an_expired_policy_stays_expired_when_the_ontology_is_reloaded(
    ontology: Ontology,
) -> None:
    engine = _expiring(ontology)
    reloaded = load_ontology([REPO / "ontology" / "production.owl"])
    assert reloaded is not ontology
    changes = engine.apply(reloaded)
    assert not changes.gained()
    assert engine.grants("s") == {"qa-company": set()}
    _agrees_with_auth_list(engine, cred("X", days=90), "s")
    again = engine.apply(PolicySet.of(reloaded, engine.policies.policies.values()), at=AFTER_UNTIL)
    assert not again.gained() and engine.grants("s") == {"qa-company": set()}
    renewed = _policy(reloaded, _rule("G", "Machine", "X"), version=2)
    assert engine.apply(renewed).gained() == {"s": {"qa-company": {"Machine"}}}


def test_an_expired_policy_stays_expired_when_its_file_is_reloaded(ontology: Ontology) -> None:
    engine = _expiring(ontology)
    same = _policy(ontology, _rule("G", "Machine", "X"), head=UNTIL)  # parsed again
    assert not engine.apply(PolicySet.of(ontology, [same]))
    assert engine.grants("s") == {"qa-company": set()}
    assert not engine.mark_disseminated("qa-company", ["Machine"])
    assert not engine.record_delivery("s", "qa-company", ["Machine"])
    assert engine.grants("s") == {"qa-company": set()}


def test_subscribe_after_valid_until_grants_nothing_before_the_timer(ontology: Ontology) -> None:
    policy = _policy(ontology, _rule("G", "Machine", "X"), head=UNTIL)
    engine = PolicyEngine(PolicySet.of(ontology, [policy]))
    engine.subscribe("early", cred("X", days=90), at=NOW)
    late = engine.subscribe("late", cred("X", days=90), at=AFTER_UNTIL)  # no advance() before
    assert late.gained() == {}
    assert late.lost() == {"early": {"qa-company": {"Machine"}}}
    assert all(c.reason == "expiry" for c in late.changes)
    for subscriber in ("early", "late"):
        assert engine.grants(subscriber) == {"qa-company": set()}
        _agrees_with_auth_list(engine, cred("X", days=90), subscriber)
    assert engine.now == AFTER_UNTIL


def test_time_never_goes_back_and_a_late_start_is_honoured(ontology: Ontology) -> None:
    policy = _policy(ontology, _rule("G", "Machine", "X"), head=UNTIL)
    engine = PolicyEngine(PolicySet.of(ontology, [policy]), at=AFTER_UNTIL)
    assert not engine.subscribe("s", cred("X", days=90), at=NOW)  # NOW < now: taken as now
    assert engine.now == AFTER_UNTIL and engine.grants("s") == {"qa-company": set()}
    with pytest.raises(PolicyError, match="expired"):
        engine.apply(_policy(ontology, "", version=2, head=UNTIL))  # at defaults to now
    with pytest.raises(UsageError, match="timezone-aware"):
        engine.advance(datetime(2025, 1, 1))
