"""From site records to answers about the dissemination topology (pure, ontology-driven).

Design decision (docs/dht.md): a site announces itself under the key of its *block concept
only*, not under every concept of its block. The root site's block is the whole ontology, so
announcing under every concept would cost it one lookup and ``k`` stores per concept on every
republish; announcing once costs one lookup whatever the block. The price is paid by queries,
and it is small: the sites serving concept C are exactly the sites whose block concept is C or
an ancestor of C, so :func:`serving_keys` lists those concepts (the ontology is shallow: a
handful of keys) and the node looks them all up in parallel — one lookup's latency.

* :func:`serving_sites` — sites whose block contains C (C ∈ block(site)).
* :func:`sites_within` — sites whose block concept lies inside block(C) (downlink candidates).
* :func:`choose_uplink` — the site serving the smallest block strictly containing ours.

Every function re-checks containment against *our* ontology, so a record claiming a block
we do not know, or filed under the wrong key, is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable

from disseminator.dht._records import SiteRecord
from xdn.ontology import Ontology

__all__ = [
    "choose_uplink",
    "newest_per_site",
    "serving_keys",
    "serving_sites",
    "sites_within",
]


def serving_keys(concept: str, ontology: Ontology) -> frozenset[str]:
    """Block concepts of every site that could serve ``concept``: it and its ancestors."""
    return ontology.ancestors(concept) | {concept}


def newest_per_site(records: Iterable[SiteRecord]) -> dict[str, SiteRecord]:
    """The most recently issued record of each site."""
    newest: dict[str, SiteRecord] = {}
    for record in records:
        held = newest.get(record.site)
        if held is None or record.issued_at_ms > held.issued_at_ms:
            newest[record.site] = record
    return newest


def _by_block_size(records: Iterable[SiteRecord], ontology: Ontology) -> list[SiteRecord]:
    return sorted(records, key=lambda r: (len(ontology.block(r.block)), r.block, r.site))


def _live_known(records: Iterable[SiteRecord], ontology: Ontology, now_ms: int) -> list[SiteRecord]:
    newest = newest_per_site(records)
    return [
        r for r in newest.values() if r.live_at(now_ms) and ontology.resolve(r.block) == r.block
    ]


def serving_sites(
    records: Iterable[SiteRecord], concept: str, ontology: Ontology, *, now_ms: int
) -> list[SiteRecord]:
    """Live sites whose block contains ``concept``, smallest block first."""
    live = _live_known(records, ontology, now_ms)
    hits = [r for r in live if ontology.contains(r.block, concept)]
    return _by_block_size(hits, ontology)


def sites_within(
    records: Iterable[SiteRecord], concept: str, ontology: Ontology, *, now_ms: int
) -> list[SiteRecord]:
    """Live sites whose block concept is ``concept`` or contained in it, smallest first."""
    live = _live_known(records, ontology, now_ms)
    hits = [r for r in live if ontology.contains(concept, r.block)]
    return _by_block_size(hits, ontology)


def choose_uplink(
    records: Iterable[SiteRecord],
    block: str,
    ontology: Ontology,
    *,
    now_ms: int,
) -> SiteRecord | None:
    """The site serving the smallest block that strictly contains ``block``.

    Ties (two sites with blocks of the same size) go to the smaller block concept id, then the
    smaller site name, so every node picks the same uplink.
    """
    candidates = [
        r for r in serving_sites(records, block, ontology, now_ms=now_ms) if r.block != block
    ]
    return candidates[0] if candidates else None
