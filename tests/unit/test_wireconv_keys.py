"""Key messages read from the wire: the routing fields sites read must match the signed content."""

from __future__ import annotations

import pytest

from xdn import crypto
from xdn.errors import ProtocolError, SignatureError
from xdn.lkh import GroupController, Signed, seal_document_keys
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import (
    document_keys_from_pb,
    document_keys_to_pb,
    rekey_from_pb,
    rekey_to_pb,
)

PUB, CONCEPT, MEMBER = "production-dept", "WorkOrder", "carol"
SIGNATURE, CERTIFICATE = b"signature", b"certificate"  # never verified here


def _rekey() -> pb.GroupRekey:
    change = GroupController(publisher=PUB, concept=CONCEPT).join(["a", "b"])
    signed = Signed(message=change.message, signature=SIGNATURE, certificate=CERTIFICATE)
    return rekey_to_pb(signed)


def _document_keys() -> pb.DocumentKeys:
    grant = seal_document_keys(
        publisher=PUB, concept=CONCEPT, member=MEMBER, keys={"k": b"\x01" * 32},
        public_key=crypto.generate_private_key().public_key(),
    )
    return document_keys_to_pb(Signed(message=grant, signature=SIGNATURE, certificate=CERTIFICATE))


def test_genuine_key_messages_read_back() -> None:
    assert rekey_from_pb(_rekey()).message.concept == CONCEPT
    assert document_keys_from_pb(_document_keys()).message.member == MEMBER


@pytest.mark.parametrize(("field", "value"), [("concept", "Invoice"), ("epoch", 9)])
def test_a_relabelled_rekey_is_refused(field: str, value: object) -> None:
    message = _rekey()
    setattr(message, field, value)
    with pytest.raises(ProtocolError, match="routing fields"):
        rekey_from_pb(message)


def test_document_keys_routed_to_another_member_are_refused() -> None:
    message = _document_keys()
    message.subscriber = "mallory"
    with pytest.raises(ProtocolError, match="routing fields"):
        document_keys_from_pb(message)


def test_unsigned_document_keys_are_refused() -> None:
    message = _document_keys()
    message.ClearField("publisher_certificate")
    with pytest.raises(SignatureError, match="is not signed"):
        document_keys_from_pb(message)
