"""Grant changes of local subscribers, carried in queue order.

Theory of operation. A policy update (or a re-registration asking for other concepts) changes
what a registered subscriber may receive while deliveries routed under its old grants may still
be queued for it. A subscriber checks every document for completeness against its grants, so
the change travels *in* its queue: a ``GrantsChanged`` delivery (previous and new grants)
separates what was routed under the old grants from what is routed under the new ones, and the
subscriber switches when it applies that delivery.

When the policy grants a subscriber nothing any more, its registration stops receiving new
documents at once, a ``SubscriptionEnded`` delivery closes its queue, and the site ends the
subscription once that is acknowledged: what was routed to it before the change still reaches
it. The ending survives a restart: the registration is kept under the kind :data:`ENDING`, and
the ``SubscriptionEnded`` delivery left in its queue says why and where the queue ends.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from disseminator.routing import Registration
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["ENDING", "Ending", "end_of_queue", "grants_changed", "subscription_ended"]

ENDING = "ending"  # the stored kind of a registration whose queue is being drained to its end


@dataclass(frozen=True, slots=True, kw_only=True)
class Ending:
    """A subscription that ends once its last delivery (``sequence``) is acknowledged."""

    registration: Registration  # with the grants its queued deliveries were routed by
    sequence: int
    reason: str


def _wire(grants: Mapping[str, Iterable[str]]) -> list[pb.Grant]:
    return [pb.Grant(publisher=p, concepts=sorted(c)) for p, c in sorted(grants.items())]


def grants_changed(
    previous: Mapping[str, Iterable[str]], grants: Mapping[str, Iterable[str]], reason: str
) -> bytes:
    """The queued delivery announcing a subscriber's new grants."""
    change = pb.GrantsChanged(previous=_wire(previous), grants=_wire(grants), reason=reason)
    return bytes(pb.Delivery(grants_changed=change).SerializeToString())


def subscription_ended(reason: str) -> bytes:
    """The queued delivery that closes an ended subscription's queue."""
    return bytes(pb.Delivery(ended=pb.SubscriptionEnded(reason=reason)).SerializeToString())


def end_of_queue(pending: Iterable[tuple[int, bytes]]) -> tuple[int, str] | None:
    """``(sequence, reason)`` of the ``SubscriptionEnded`` delivery among ``pending``, if any."""
    for seq, payload in pending:
        delivery = pb.Delivery.FromString(payload)
        if delivery.WhichOneof("body") == "ended":
            return seq, delivery.ended.reason
    return None
