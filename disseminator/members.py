"""A registration's two other forms: its row in the site's store and its wire form.

A site keeps each registration (a local subscriber, or a member behind a downlink) durably as
a :class:`disseminator.store.StoredRegistration`, and reports it as a ``Member`` — to its uplink,
with every publisher's grants, and to a publisher's key service, with that publisher's part
only (one publisher never learns what another grants).
"""

from __future__ import annotations

from collections.abc import Iterable

from disseminator.refresh import Group
from disseminator.routing import Registration
from disseminator.store import StoredRegistration
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["from_stored", "to_pb_member", "to_stored"]


def to_stored(kind: str, owner: str, reg: Registration, seen_ms: int) -> StoredRegistration:
    """The store's row of ``reg`` (``kind``/``owner``: a local subscriber, or behind a link)."""
    return StoredRegistration(
        kind=kind, owner=owner, subscriber=reg.subscriber, certificate=reg.certificate,
        grants={p: sorted(c) for p, c in reg.grants.items()}, seen_ms=seen_ms, lease=reg.lease,
    )


def to_pb_member(
    reg: Registration, refresh: Iterable[Group] = (), *, publisher: str | None = None
) -> pb.Member:
    """The wire form of a registration, with the path refreshes its subscriber asks for.

    Args:
        publisher: only this publisher's grants and refreshes (what its key service may see);
            ``None``: every publisher's (for the uplink, which routes for all of them).
    """
    def shown(p: str) -> bool:
        return publisher is None or p == publisher

    asked: dict[str, list[str]] = {}
    for p, concept in sorted(refresh):
        if shown(p):
            asked.setdefault(p, []).append(concept)
    return pb.Member(
        subscriber=reg.subscriber,
        certificate=reg.certificate,
        grants=[
            pb.Grant(publisher=p, concepts=sorted(c))
            for p, c in sorted(reg.grants.items())
            if shown(p)
        ],
        refresh=[pb.Grant(publisher=p, concepts=c) for p, c in asked.items()],
        lease=reg.lease,
    )


def from_stored(stored: StoredRegistration) -> Registration:
    """The registration a store row holds."""
    return Registration(
        subscriber=stored.subscriber,
        certificate=stored.certificate,
        grants={p: frozenset(c) for p, c in stored.grants.items()},
        lease=stored.lease,
    )
