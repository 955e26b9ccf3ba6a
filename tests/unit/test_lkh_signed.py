"""Signed key messages: only the publisher's key service can produce one a member accepts.

Every way a relaying site could change a rekey, an enrolment (join or path refresh) or a
document-key grant — any field, the signature, the certificate, the kind, another group — is
refused with a typed error before a member would use the message.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from xdn import certs, crypto
from xdn.errors import CertificateError, ProtocolError, SignatureError, UsageError
from xdn.lkh import (
    DocumentKeyGrant,
    Enrolment,
    GroupController,
    KeySigner,
    RekeyMessage,
    Signed,
    WrappedKey,
    seal_document_keys,
    signed_bytes,
    verify_key_message,
)

NOW = datetime.now(UTC)
PUB, OTHER, CONCEPT = "production-dept", "qa-company", "WorkOrder"
MEMBER_KEY = crypto.generate_private_key()

KeyMessage = RekeyMessage | Enrolment | DocumentKeyGrant


@pytest.fixture(scope="module")
def pki() -> dict[str, tuple[bytes, bytes]]:
    ca = certs.create_ca("test-ca", now=NOW)
    rogue_ca = certs.create_ca("test-ca", now=NOW)  # same name, other key
    return {
        "ca": ca,
        PUB: certs.issue(*ca, name=PUB, role="publisher", now=NOW),
        OTHER: certs.issue(*ca, name=OTHER, role="publisher", now=NOW),
        "subscriber-named-pub": certs.issue(*ca, name=PUB, role="subscriber", now=NOW),
        "rogue": certs.issue(*rogue_ca, name=PUB, role="publisher", now=NOW),
    }


def _signer(pki: dict[str, tuple[bytes, bytes]], name: str = PUB) -> KeySigner:
    cert_pem, key_pem = pki[name]
    return KeySigner(
        publisher=certs.credential_from_pem(cert_pem).name,
        private_key=crypto.load_private_key_pem(key_pem),
        certificate=cert_pem,
    )


def _rekey(concept: str = CONCEPT) -> RekeyMessage:
    group = GroupController.bulk(
        publisher=PUB, concept=concept, members=["a", "b", "c", "d"],
        rand=random.Random(1).randbytes,
    )
    return group.plan(leaves=["b"], rand=random.Random(2).randbytes).message


def _enrolment() -> Enrolment:
    group = GroupController(publisher=PUB, concept=CONCEPT)
    change = group.plan(joins=["alice"], rand=random.Random(3).randbytes)
    return change.enrolments({"alice": MEMBER_KEY.public_key()})[0]


def _grant() -> DocumentKeyGrant:
    return seal_document_keys(
        publisher=PUB, concept=CONCEPT, member="alice", keys={"k": b"\x01" * 32},
        public_key=MEMBER_KEY.public_key(),
    )


MESSAGES: dict[str, Callable[[], Any]] = {
    "rekey": _rekey, "enrolment": _enrolment, "document-keys": _grant
}


def _verify(signed: Signed[Any], pki: dict[str, tuple[bytes, bytes]]) -> KeyMessage:
    result: KeyMessage = verify_key_message(signed, ca_pem=pki["ca"][0], at=NOW)
    return result


def _flip(data: bytes) -> bytes:
    out = bytearray(data)
    out[len(out) // 2] ^= 0x01
    return bytes(out)


# ---- round trip ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_a_signed_message_round_trips_and_verifies(
    kind: str, pki: dict[str, tuple[bytes, bytes]]
) -> None:
    message = MESSAGES[kind]()
    signed = _signer(pki).sign(message)
    again = Signed.from_bytes(signed.to_bytes(), type(message))
    assert again == signed
    assert _verify(again, pki) == message
    assert kind in repr(signed.describe()) and "signature" not in repr(signed)


# ---- every field altered ---------------------------------------------------------------------
def _altered(message: KeyMessage) -> dict[str, KeyMessage]:
    """One copy of ``message`` per field, with that field changed (and the old signature)."""
    replace = dataclasses.replace
    common: dict[str, KeyMessage] = {
        "publisher": replace(message, publisher=OTHER),
        "concept": replace(message, concept="Invoice"),
    }
    if isinstance(message, RekeyMessage):
        w = message.wraps[0]
        return {
            **common,
            "epoch": replace(message, epoch=message.epoch + 1),
            "root": replace(message, root=(message.root or 0) + 1),
            "retired": replace(message, retired=message.retired[1:]),
            "wrap node": replace(message, wraps=(replace(w, node_id=w.node_id + 1),
                                                 *message.wraps[1:])),
            "wrap child": replace(message, wraps=(replace(w, wrapping_node_id=99),
                                                  *message.wraps[1:])),
            "wrap bytes": replace(message, wraps=(
                WrappedKey(node_id=w.node_id, wrapping_node_id=w.wrapping_node_id,
                           ciphertext=_flip(w.ciphertext)),
                *message.wraps[1:],
            )),
            "wraps dropped": replace(message, wraps=message.wraps[:-1]),
        }
    if isinstance(message, Enrolment):
        return {
            **common,
            "epoch": replace(message, epoch=message.epoch + 100),
            "member": replace(message, member="mallory"),
            "sealed": replace(message, sealed=_flip(message.sealed)),
        }
    return {
        **common,
        "member": replace(message, member="mallory"),
        "sealed": replace(message, sealed=_flip(message.sealed)),
    }


@pytest.mark.parametrize("kind", sorted(MESSAGES))
def test_every_altered_field_is_refused(kind: str, pki: dict[str, tuple[bytes, bytes]]) -> None:
    message = MESSAGES[kind]()
    signed = _signer(pki).sign(message)
    altered = _altered(message)
    assert len(altered) >= 4
    for field, changed in altered.items():
        assert changed != message, field
        forged = dataclasses.replace(signed, message=changed)
        with pytest.raises(SignatureError):
            _verify(forged, pki)
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(dataclasses.replace(signed, signature=_flip(signed.signature)), pki)
    with pytest.raises(SignatureError, match="does not verify"):
        _verify(dataclasses.replace(signed, signature=b"\x30\x00"), pki)


def test_the_signed_bytes_name_the_kind_and_every_header_field() -> None:
    rekey, enrolment, grant = _rekey(), _enrolment(), _grant()
    assert signed_bytes(rekey).startswith(b"xdn/lkh/key-message/v1")
    for message, kind in ((rekey, b"rekey"), (enrolment, b"enrolment"), (grant, b"document-keys")):
        data = signed_bytes(message)
        assert kind in data and message.to_bytes() in data
    assert b"alice" in signed_bytes(enrolment) and b"alice" in signed_bytes(grant)


def test_a_signature_does_not_move_to_another_kind(pki: dict[str, tuple[bytes, bytes]]) -> None:
    enrolment_signature = _signer(pki).sign(_enrolment()).signature
    grant = _signer(pki).sign(_grant())
    with pytest.raises(SignatureError):
        _verify(dataclasses.replace(grant, signature=enrolment_signature), pki)
    with pytest.raises(ProtocolError, match="'document-keys' was expected"):
        Signed.from_bytes(_signer(pki).sign(_enrolment()).to_bytes(), DocumentKeyGrant)


def test_a_rekey_of_another_concept_does_not_pass_for_this_one(
    pki: dict[str, tuple[bytes, bytes]],
) -> None:
    """A site replays the genuine signed rekey of concept A as a rekey of concept B."""
    other = _signer(pki).sign(_rekey(concept="Invoice"))
    assert _verify(other, pki).concept == "Invoice"
    relabelled = dataclasses.replace(other.message, concept=CONCEPT)
    with pytest.raises(SignatureError, match=f"rekey of {PUB}/{CONCEPT}"):
        _verify(dataclasses.replace(other, message=relabelled), pki)


# ---- certificates ----------------------------------------------------------------------------
def test_a_certificate_of_another_ca_is_refused(pki: dict[str, tuple[bytes, bytes]]) -> None:
    rogue = _signer(pki, "rogue").sign(_rekey())  # names PUB, signed by a look-alike CA
    with pytest.raises(CertificateError, match="invalid CA signature"):
        _verify(rogue, pki)


def test_a_subscriber_certificate_with_the_publishers_name_is_refused(
    pki: dict[str, tuple[bytes, bytes]],
) -> None:
    cert_pem, key_pem = pki["subscriber-named-pub"]
    message = _enrolment()
    forged = Signed(
        message=message,
        signature=crypto.sign(crypto.load_private_key_pem(key_pem), signed_bytes(message)),
        certificate=cert_pem,
    )
    with pytest.raises(CertificateError, match="expected 'publisher'"):
        _verify(forged, pki)


def test_another_publishers_certificate_is_refused(pki: dict[str, tuple[bytes, bytes]]) -> None:
    other_cert, other_key = pki[OTHER]
    message = _grant()
    by_other = Signed(
        message=message,
        signature=crypto.sign(crypto.load_private_key_pem(other_key), signed_bytes(message)),
        certificate=other_cert,
    )
    with pytest.raises(SignatureError, match=f"signed by '{OTHER}', not by its publisher"):
        _verify(by_other, pki)
    genuine = _signer(pki).sign(message)  # the genuine signature, the wrong certificate
    with pytest.raises(SignatureError):
        _verify(dataclasses.replace(genuine, certificate=other_cert), pki)
    other_signed = _signer(pki, OTHER).sign(dataclasses.replace(message, publisher=OTHER))
    with pytest.raises(SignatureError, match="does not verify"):  # its certificate, our name
        _verify(dataclasses.replace(by_other, signature=other_signed.signature,
                                    certificate=pki[PUB][0]), pki)


def test_an_expired_certificate_is_refused(pki: dict[str, tuple[bytes, bytes]]) -> None:
    signed = _signer(pki).sign(_rekey())
    with pytest.raises(CertificateError, match="not valid at"):
        verify_key_message(signed, ca_pem=pki["ca"][0], at=NOW + timedelta(days=400))


def test_a_garbage_certificate_is_refused(pki: dict[str, tuple[bytes, bytes]]) -> None:
    signed = _signer(pki).sign(_rekey())
    with pytest.raises(CertificateError):
        _verify(dataclasses.replace(signed, certificate=b"-----BEGIN CERTIFICATE-----\n"), pki)


# ---- misuse ----------------------------------------------------------------------------------
def test_the_signer_checks_its_credential_and_what_it_signs(
    pki: dict[str, tuple[bytes, bytes]],
) -> None:
    cert_pem, key_pem = pki[PUB]
    key = crypto.load_private_key_pem(key_pem)
    with pytest.raises(UsageError, match="not the 'publisher' certificate of 'production-dept'"):
        KeySigner(publisher=OTHER, private_key=key, certificate=cert_pem)
    with pytest.raises(UsageError, match="does not match"):
        KeySigner(publisher=PUB, private_key=crypto.generate_private_key(), certificate=cert_pem)
    with pytest.raises(UsageError, match="'subscriber' certificate"):
        KeySigner(publisher=PUB, private_key=key, certificate=pki["subscriber-named-pub"][0])
    with pytest.raises(UsageError, match="key service certificate"):
        KeySigner(publisher=PUB, private_key=key, certificate=b"not a certificate")
    with pytest.raises(UsageError, match="not 'qa-company'"):
        _signer(pki, OTHER).sign(_rekey())
    with pytest.raises(ValueError, match="signature must not be empty"):
        Signed(message=_rekey(), signature=b"", certificate=cert_pem)
    with pytest.raises(TypeError, match="not a key message"):
        Signed(message="rekey", signature=b"s", certificate=cert_pem)  # type: ignore[type-var]


@pytest.mark.parametrize("cut", [0, 3, 4, 10, 200, -1])
def test_a_truncated_signed_encoding_is_a_protocol_error(
    cut: int, pki: dict[str, tuple[bytes, bytes]]
) -> None:
    data = _signer(pki).sign(_rekey()).to_bytes()
    with pytest.raises(ProtocolError):
        Signed.from_bytes(data[:cut], RekeyMessage)
    with pytest.raises(ProtocolError):
        Signed.from_bytes(data + b"\x00", RekeyMessage)
