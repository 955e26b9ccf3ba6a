"""What the xdn chain carried, read from :mod:`benchmarks.wire_tap` records: per link, the
messages of a time window split into one group per document.

A group ends with the message that completes a document on that link: a ``PublishRequest``
carrying a dissemination (whole, or the last of its ``Part`` messages), a ``Delivery`` of a
dissemination (whole, or its last part), or a ``ServerMessage`` holding such a delivery. What
comes between two documents (key messages, checkpoints, heartbeats) belongs to the next
document's group; what follows the last document, to the last group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.wire_tap import REQUEST, RESPONSE, Record
from xdn.wire.v1 import dissemination_pb2 as pb

__all__ = ["Link", "chain_links", "first_issue_ms", "link_groups"]

PUBLISH_METHODS = ("Publish", "PublishParts")


@dataclass(frozen=True, slots=True)
class Link:
    """Where one link's messages are recorded: ``site``'s tap, ``kind`` of ``methods``."""

    site: str
    kind: int
    methods: tuple[str, ...]


def chain_links(sites: Sequence[str]) -> list[Link]:
    """The links of publisher → sites[0] → … → subscriber, as the sites' taps saw them."""
    links = [Link(sites[0], REQUEST, PUBLISH_METHODS)]
    links += [Link(site, RESPONSE, ("Link",)) for site in sites[:-1]]
    links.append(Link(sites[-1], RESPONSE, ("Subscribe",)))
    return links


def _delivery_is_document(delivery: pb.Delivery, parts: list[bytes]) -> bool:
    body = delivery.WhichOneof("body")
    if body == "part":
        parts.append(delivery.part.data)
        if delivery.part.more:
            return False
        joined = pb.Delivery.FromString(b"".join(parts))
        parts.clear()
        return bool(joined.WhichOneof("body") == "dissemination")
    return bool(body == "dissemination")


def _completes_document(record: Record, parts: list[bytes]) -> bool:
    if record.method == "Publish":
        return bool(pb.PublishRequest.FromString(record.data).HasField("dissemination"))
    if record.method == "PublishParts":
        part = pb.Part.FromString(record.data)
        parts.append(part.data)
        if part.more:
            return False
        joined = pb.PublishRequest.FromString(b"".join(parts))
        parts.clear()
        return bool(joined.HasField("dissemination"))
    if record.method == "Link":
        return _delivery_is_document(pb.Delivery.FromString(record.data), parts)
    message = pb.ServerMessage.FromString(record.data)
    return message.WhichOneof("kind") == "delivery" and _delivery_is_document(
        message.delivery, parts
    )


def link_groups(
    records: Sequence[Record], link: Link, *, since_ns: int = 0, until_ns: int = 1 << 63
) -> list[list[Record]]:
    """The messages of ``link`` recorded in ``[since_ns, until_ns)``, one group per document."""
    groups: list[list[Record]] = []
    pending: list[Record] = []
    parts: list[bytes] = []
    for record in records:
        if record.kind != link.kind or record.method not in link.methods:
            continue
        if not since_ns <= record.at_ns < until_ns:
            continue
        pending.append(record)
        if _completes_document(record, parts):
            groups.append(pending)
            pending = []
    if pending and groups:
        groups[-1].extend(pending)
    return groups


def first_issue_ms(group: Sequence[Record]) -> int:
    """The manifest issue time of the document a publisher → site group carries."""
    parts: list[bytes] = []
    for record in group:
        if record.method == "Publish":
            request = pb.PublishRequest.FromString(record.data)
        elif record.method == "PublishParts":
            part = pb.Part.FromString(record.data)
            parts.append(part.data)
            if part.more:
                continue
            request, parts = pb.PublishRequest.FromString(b"".join(parts)), []
        else:
            continue
        if request.HasField("dissemination"):
            return int(request.dissemination.manifest.issued_at_ms)
    raise ValueError("no document in this group")
