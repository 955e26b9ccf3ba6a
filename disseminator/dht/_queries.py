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
* :func:`choose_uplink` — the site serving the smallest block strictly containing ours
  (:func:`uplink_candidates`: all of them, nearest first).
* :func:`recheck_uplink` — whether a downlink linked to one uplink should move to another
  (a nearer one appeared, or the one in use is gone); :func:`is_fallback` — whether an uplink
  is farther than a parent of our block (no site serving a parent is known).

Every function re-checks containment against *our* ontology, so a record claiming a block
we do not know, or filed under the wrong key, is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from disseminator.dht._records import SiteRecord
from xdn.ontology import Ontology

__all__ = [
    "choose_uplink",
    "is_fallback",
    "newest_per_site",
    "recheck_uplink",
    "serving_keys",
    "serving_sites",
    "sites_within",
    "uplink_candidates",
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


def uplink_candidates(
    records: Iterable[SiteRecord], block: str, ontology: Ontology, *, now_ms: int
) -> list[SiteRecord]:
    """Live sites serving a block that strictly contains ``block``, nearest first."""
    return [r for r in serving_sites(records, block, ontology, now_ms=now_ms) if r.block != block]


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
    candidates = uplink_candidates(records, block, ontology, now_ms=now_ms)
    return candidates[0] if candidates else None


def is_fallback(block: str, uplink_block: str, ontology: Ontology) -> bool:
    """Whether an uplink serving ``uplink_block`` is farther than a parent of ``block``:
    no site serving a parent was found (none exists, or the view missed it)."""
    return uplink_block not in ontology.parents(block)


def recheck_uplink(
    candidates: Sequence[SiteRecord],
    *,
    current: str,
    connected: bool,
    ontology: Ontology,
) -> SiteRecord | None:
    """The uplink a downlink linked to ``current`` should move to; ``None``: stay.

    Args:
        candidates: :func:`uplink_candidates` now (nearest first).
        current: the uplink in use: its site name, or its address while it is not verified.
        connected: whether the link to it is up.

    It moves to the nearest candidate when that one serves a strictly smaller block than the
    uplink in use (a nearer ancestor appeared: a fallback ends), or when the uplink in use is
    no longer listed (withdrawn, expired) and the link is down. A site of a block of the same
    size is no reason to move, nor is an uplink that is down but still listed (it restarts).
    """
    if not candidates:
        return None
    best = candidates[0]
    held = [r for r in candidates if current in (r.site, r.address)]
    if not held:
        return None if connected else best
    if len(ontology.block(best.block)) < len(ontology.block(held[0].block)):
        return best
    return None
