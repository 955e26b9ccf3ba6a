"""Protobuf ↔ domain conversion for the Dht service: the only DHT module touching ``dht_pb2``.

Every ``*_from_pb`` function validates as it converts and raises
:class:`~disseminator.dht.DhtProtocolError` (or its subclass :class:`InvalidRecordError` for a
record) naming what is wrong, so malformed or oversized input never reaches the core.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from google.protobuf.message import DecodeError

from disseminator.dht._errors import DhtProtocolError, InvalidRecordError
from disseminator.dht._ids import Contact, NodeId, check_address
from disseminator.dht._proof import PingProof
from disseminator.dht._records import SiteRecord
from disseminator.dht._transport import ValueReply
from xdn.wire.v1 import dht_pb2 as pb

__all__ = [
    "MAX_CONTACTS",
    "MAX_RECORDS",
    "contact_from_pb",
    "contact_to_pb",
    "contacts_from_pb",
    "contacts_to_pb",
    "node_id_from_pb",
    "proof_from_pb",
    "proof_to_pb",
    "record_from_bytes",
    "record_from_pb",
    "record_to_bytes",
    "record_to_pb",
    "sender_address_from_pb",
    "value_reply_from_pb",
    "value_reply_to_pb",
]

MAX_CONTACTS = 64
MAX_RECORDS = 256


def node_id_from_pb(data: bytes, what: str) -> NodeId:
    """A 32-byte id field."""
    try:
        return NodeId.from_bytes(bytes(data))
    except ValueError as exc:
        raise DhtProtocolError(f"{what}: {exc}") from None


def sender_address_from_pb(address: str) -> str | None:
    """The caller's listening address; ``None`` when it sent none (not a DHT node)."""
    if not address:
        return None
    try:
        return check_address(address)
    except ValueError as exc:
        raise DhtProtocolError(f"sender_address: {exc}") from None


def contact_to_pb(contact: Contact) -> Any:
    return pb.DhtContact(node_id=contact.node_id.to_bytes(), address=contact.address)


def contact_from_pb(message: Any) -> Contact:
    node_id = node_id_from_pb(message.node_id, "contact node_id")
    try:
        return Contact(node_id=node_id, address=message.address)
    except ValueError as exc:
        raise DhtProtocolError(f"contact: {exc}") from None


def contacts_from_pb(messages: Sequence[Any]) -> tuple[Contact, ...]:
    if len(messages) > MAX_CONTACTS:
        raise DhtProtocolError(f"{len(messages)} contacts in one reply, more than {MAX_CONTACTS}")
    return tuple(contact_from_pb(m) for m in messages)


def record_to_pb(record: SiteRecord) -> Any:
    return pb.DhtSiteRecord(
        site=record.site,
        address=record.address,
        block=record.block,
        issued_at_ms=record.issued_at_ms,
        expires_at_ms=record.expires_at_ms,
        certificate_pem=record.certificate_pem,
        signature=record.signature,
        web=record.web,
    )


def record_from_pb(message: Any) -> SiteRecord:
    try:
        return SiteRecord(
            site=message.site,
            address=message.address,
            block=message.block,
            issued_at_ms=message.issued_at_ms,
            expires_at_ms=message.expires_at_ms,
            certificate_pem=bytes(message.certificate_pem),
            signature=bytes(message.signature),
            web=message.web,
        )
    except (TypeError, ValueError) as exc:
        raise InvalidRecordError(f"malformed site record: {exc}") from None


def record_to_bytes(record: SiteRecord) -> bytes:
    """A record's serialized wire form (what a node archives)."""
    data: bytes = record_to_pb(record).SerializeToString()
    return data


def record_from_bytes(data: bytes) -> SiteRecord:
    """Raises:
    InvalidRecordError: the bytes are not a well-formed record."""
    try:
        message = pb.DhtSiteRecord.FromString(data)
    except DecodeError:
        raise InvalidRecordError("malformed archived site record") from None
    return record_from_pb(message)


def value_reply_to_pb(reply: ValueReply) -> Any:
    return pb.DhtFindValueResponse(
        records=[record_to_pb(r) for r in reply.records],
        contacts=[contact_to_pb(c) for c in reply.contacts],
    )


def value_reply_from_pb(message: Any) -> ValueReply:
    if len(message.records) > MAX_RECORDS:
        raise DhtProtocolError(
            f"{len(message.records)} records in one reply, more than {MAX_RECORDS}"
        )
    records = []
    for item in message.records:
        try:
            records.append(record_from_pb(item))
        except InvalidRecordError:
            continue  # one malformed record does not spoil the others; they are all checked
    return ValueReply(records=tuple(records), contacts=contacts_from_pb(message.contacts))


def contacts_to_pb(contacts: Iterable[Contact]) -> Any:
    return pb.DhtFindNodeResponse(contacts=[contact_to_pb(c) for c in contacts])


def proof_to_pb(proof: PingProof) -> Any:
    return pb.DhtPingResponse(
        address=proof.address, certificate_pem=proof.certificate_pem, signature=proof.signature
    )


def proof_from_pb(message: Any) -> PingProof:
    try:
        return PingProof(
            address=message.address,
            certificate_pem=bytes(message.certificate_pem),
            signature=bytes(message.signature),
        )
    except (TypeError, ValueError) as exc:
        raise DhtProtocolError(f"malformed ping answer: {exc}") from None
