"""From records to topology answers: sites serving a concept, downlinks, the uplink choice."""

from __future__ import annotations

import pytest

from disseminator.dht import (
    SiteRecord,
    choose_uplink,
    is_fallback,
    recheck_uplink,
    serving_keys,
    serving_sites,
    sites_within,
    uplink_candidates,
)
from disseminator.dht._queries import newest_per_site
from xdn.ontology import Ontology

# A DAG with multiple inheritance: Spec is inside both Resources and Production.
ONTO = Ontology.from_edges(
    iri="urn:test",
    concepts=[],
    edges=[
        ("Process", "Order"),
        ("Process", "Resources"),
        ("Order", "Production"),
        ("Order", "Inspection"),
        ("Production", "Spec"),
        ("Resources", "Spec"),
        ("Resources", "Machine"),
    ],
)
NOW = 1_000_000


def rec(
    site: str, block: str, *, issued: int = NOW - 10, expires: int = NOW + 60_000
) -> SiteRecord:
    return SiteRecord(
        site=site,
        address=f"{site}.test:7000",
        block=block,
        issued_at_ms=issued,
        expires_at_ms=expires,
        certificate_pem=b"-",
        signature=b"-",
    )


def test_serving_keys_are_the_concept_and_its_ancestors() -> None:
    assert serving_keys("Spec", ONTO) == {"Spec", "Production", "Resources", "Order", "Process"}
    assert serving_keys("Process", ONTO) == {"Process"}


def test_serving_sites_smallest_block_first() -> None:
    records = [
        rec("p", "Process"),
        rec("o", "Order"),
        rec("r", "Resources"),
        rec("i", "Inspection"),
    ]
    assert [r.site for r in serving_sites(records, "Spec", ONTO, now_ms=NOW)] == ["r", "o", "p"]
    assert [r.site for r in serving_sites(records, "Inspection", ONTO, now_ms=NOW)] == [
        "i",
        "o",
        "p",
    ]


def test_expired_withdrawn_and_unknown_blocks_are_ignored() -> None:
    records = [
        rec("old", "Order", issued=NOW - 100, expires=NOW),
        rec("gone", "Order", issued=NOW - 5, expires=NOW - 5),
        rec("weird", "NotAConcept"),
        rec("p", "Process"),
    ]
    assert [r.site for r in serving_sites(records, "Order", ONTO, now_ms=NOW)] == ["p"]


def test_only_the_newest_record_of_a_site_counts() -> None:
    moved = [rec("s", "Order", issued=NOW - 50), rec("s", "Production", issued=NOW - 20)]
    assert newest_per_site(moved)["s"].block == "Production"
    assert [r.site for r in serving_sites(moved, "Inspection", ONTO, now_ms=NOW)] == []


def test_sites_within_a_block() -> None:
    records = [rec("p", "Process"), rec("o", "Order"), rec("s", "Spec"), rec("m", "Machine")]
    assert [r.site for r in sites_within(records, "Order", ONTO, now_ms=NOW)] == ["s", "o"]
    assert [r.site for r in sites_within(records, "Resources", ONTO, now_ms=NOW)] == ["m", "s"]


@pytest.mark.parametrize(
    "block, sites, expected",
    [
        ("Production", ["p", "o"], "o"),  # the parent beats the grandparent
        ("Production", ["p"], "p"),  # no parent site: go further up
        ("Process", ["p", "o"], None),  # a root has no uplink
        ("Order", ["o", "o2"], None),  # a site with the same block is a sibling, not an uplink
        ("Spec", ["r", "o", "p"], "r"),  # multiple parents: Resources (3) is smaller than Order (4)
    ],
)
def test_choose_uplink(block: str, sites: list[str], expected: str | None) -> None:
    blocks = {"p": "Process", "o": "Order", "o2": "Order", "r": "Resources"}
    records = [rec(s, blocks[s]) for s in sites]
    uplink = choose_uplink(records, block, ONTO, now_ms=NOW)
    assert (uplink.site if uplink else None) == expected


def test_uplink_ties_are_broken_the_same_way_everywhere() -> None:
    records = [rec("b", "Order"), rec("a", "Order")]
    uplink = choose_uplink(records, "Production", ONTO, now_ms=NOW)
    assert uplink is not None and uplink.site == "a"
    uplink = choose_uplink(list(reversed(records)), "Production", ONTO, now_ms=NOW)
    assert uplink is not None and uplink.site == "a"


# ---- re-checking the uplink in use (issue #18, finding 1) ----------------------------------
def _candidates(*records: SiteRecord) -> list[SiteRecord]:
    return uplink_candidates(records, "Spec", ONTO, now_ms=NOW)


def test_uplink_candidates_are_nearest_first_and_the_choice_is_the_first() -> None:
    records = [rec("p", "Process"), rec("r", "Resources"), rec("o", "Order"), rec("s", "Spec")]
    assert [r.site for r in _candidates(*records)] == ["r", "o", "p"]
    assert choose_uplink(records, "Spec", ONTO, now_ms=NOW) == _candidates(*records)[0]


def test_a_fallback_moves_to_a_nearer_ancestor_once_it_appears() -> None:
    # Linked to the root "p" (a fallback: Process is no parent of Spec) while nothing nearer
    # was known: stay; once "r" is listed, move there, connected or not.
    assert is_fallback("Spec", "Process", ONTO) and not is_fallback("Spec", "Resources", ONTO)
    alone = _candidates(rec("p", "Process"))
    assert recheck_uplink(alone, current="p", connected=True, ontology=ONTO) is None
    both = _candidates(rec("p", "Process"), rec("r", "Resources"))
    for connected in (True, False):
        moved = recheck_uplink(both, current="p", connected=connected, ontology=ONTO)
        assert moved is not None and moved.site == "r"


def test_the_proper_uplink_is_kept_even_while_down_or_tied() -> None:
    both = _candidates(rec("p", "Process"), rec("r", "Resources"))
    # down, but still listed (it restarts): no move to a farther ancestor
    assert recheck_uplink(both, current="r", connected=False, ontology=ONTO) is None
    # a site of a block of the same size (ties go to the smaller name) is no reason to move
    tied = _candidates(rec("a", "Resources"), rec("r", "Resources"))
    assert [r.site for r in tied] == ["a", "r"]
    assert recheck_uplink(tied, current="r", connected=True, ontology=ONTO) is None


def test_an_uplink_no_longer_listed_is_left_only_when_its_link_is_down() -> None:
    others = _candidates(rec("p", "Process"))
    assert recheck_uplink(others, current="gone", connected=True, ontology=ONTO) is None
    moved = recheck_uplink(others, current="gone", connected=False, ontology=ONTO)
    assert moved is not None and moved.site == "p"
    assert recheck_uplink([], current="gone", connected=False, ontology=ONTO) is None


def test_the_uplink_in_use_is_recognised_by_its_address_before_it_is_verified() -> None:
    both = _candidates(rec("p", "Process"), rec("r", "Resources"))
    assert recheck_uplink(both, current="r.test:7000", connected=False, ontology=ONTO) is None
    moved = recheck_uplink(both, current="p.test:7000", connected=True, ontology=ONTO)
    assert moved is not None and moved.site == "r"
