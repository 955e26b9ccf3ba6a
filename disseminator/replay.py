"""What a site replays to one local subscriber from the documents it retains.

A site keeps each publisher's last documents (:class:`disseminator.store.Retained`). It replays
them, each restricted to the subscriber's grants and with a signed provenance hop of its own
(:meth:`disseminator.planning.Planner.retained`), in two cases:

* a new subscriber asks for the state at subscribe time: every retained document it may read;
* a subscriber found documents of a publisher's signed sequence missing (a gap): those it may
  read, then a note naming the ones this site no longer retains, so that the subscriber can
  report them as gaps instead of waiting.

These functions plan; the node commits what they return to the subscriber's queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

from disseminator.body_chunks import StoredBytes
from disseminator.planning import Planner, Received
from disseminator.routing import Registration
from disseminator.store import Append, Retained
from disseminator.stored_documents import retained_document
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["missing", "retained"]


def retained(
    documents: Iterable[Retained], planner: Planner, registration: Registration
) -> tuple[list[Append], list[bytes]]:
    """The deliveries (and provenance graphs) of the retained documents it may read."""
    appends, graphs = [], []
    for doc in documents:
        granted = registration.grants.get(doc.publisher, frozenset())
        planned = planner.retained(_read(doc), registration.subscriber, granted)
        if planned is not None:
            appends.append(planned[0])
            graphs.append(planned[1])
    return appends, graphs


def missing(
    documents: Iterable[Retained],
    planner: Planner,
    registration: Registration,
    publisher: str,
    wanted: Set[int],
) -> tuple[list[Append], list[bytes], set[int]]:
    """The deliveries of ``publisher``'s retained documents numbered ``wanted`` that
    ``registration`` may read, then an ``unavailable`` note naming the others.

    Returns:
        The deliveries, their provenance graphs, and the sequence numbers found.
    """
    subscriber = registration.subscriber
    granted = registration.grants.get(publisher, frozenset())
    appends, graphs, found = [], [], set()
    for doc in documents:
        if doc.publisher != publisher:
            continue
        diss = _read(doc)
        if diss.manifest.sequence not in wanted:
            continue
        planned = planner.retained(diss, subscriber, granted)
        if planned is not None:
            found.add(diss.manifest.sequence)
            appends.append(planned[0])
            graphs.append(planned[1])
    if unavailable := sorted(set(wanted) - found):
        note = pb.Missing(publisher=publisher, sequences=unavailable)
        appends.append(
            Append(
                kind="subscriber",
                name=subscriber,
                payload=pb.Delivery(unavailable=note).SerializeToString(),
            )
        )
    return appends, graphs, found


def _read(doc: Retained) -> Received:
    """A retained document as routing reads it: parsed, or (staged as its parts came, larger
    than memory should hold) found in its body, to be scanned."""
    if doc.body is not None and isinstance(doc.body.data, StoredBytes):
        return retained_document(doc)
    records: pb.DisseminationRecords = pb.DisseminationRecords.FromString(doc.payload)
    return records
