"""verify_delivery: every check of decode that needs no key, for deliveries kept unopened.

The same tampering that decode refuses is refused here, without any key; GCM tags are the one
thing left for decode (an altered ciphertext passes here: its leaf hash is checked, not its tag,
so it is refused as soon as the ciphertext hash differs from the signed leaf).
"""

from __future__ import annotations

import dataclasses

import pytest
from test_codec_tamper import CONCEPTS, OTHER_SIGNER, PUBLISHER, SIGNER, encode_doc, steps

from xdn.codec import EncodedDocument, select, sign_manifest, verify_delivery
from xdn.errors import DecryptError


@pytest.fixture(scope="module")
def encoded() -> EncodedDocument:
    return encode_doc()


def _refused(delivery: object, **options: object) -> None:
    with pytest.raises(DecryptError, match="fragment could not be decrypted or verified"):
        verify_delivery(delivery, publisher_key=SIGNER.public_key(), **options)  # type: ignore[arg-type]


def test_a_genuine_delivery_passes_without_keys(encoded: EncodedDocument) -> None:
    manifest = verify_delivery(
        select(encoded, ["Production", "Step"]),
        publisher_key=SIGNER.public_key(),
        concepts=["Production", "Step"],
        seen={(PUBLISHER, "doc-42"): 6},
    )
    assert manifest == encoded.manifest


def test_a_manifest_signed_by_another_key_is_refused(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    forged = sign_manifest(encoded.manifest, OTHER_SIGNER)
    _refused(dataclasses.replace(delivery, signed_manifest=forged))


def test_an_altered_ciphertext_is_refused_by_its_leaf_hash(encoded: EncodedDocument) -> None:
    delivery = select(encoded, CONCEPTS)
    index = steps(delivery)[0]
    fragment = delivery.fragments[index]
    flipped = fragment.cipher_value[:-1] + bytes([fragment.cipher_value[-1] ^ 1])  # (altered)
    altered = dataclasses.replace(fragment, cipher_value=flipped)
    fragments = (*delivery.fragments[:index], altered, *delivery.fragments[index + 1 :])
    _refused(dataclasses.replace(delivery, fragments=fragments))


def test_a_replay_and_an_incomplete_delivery_are_refused(encoded: EncodedDocument) -> None:
    _refused(select(encoded, CONCEPTS), seen={(PUBLISHER, "doc-42"): 7})
    _refused(select(encoded, ["Production"]), concepts=["Production", "Step"])
    delivery = select(encoded, ["Production", "Step"])
    _refused(dataclasses.replace(delivery, proofs=()))


def test_misuse_is_a_type_error(encoded: EncodedDocument) -> None:
    with pytest.raises(TypeError):
        verify_delivery(encoded, publisher_key=SIGNER.public_key())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        verify_delivery(select(encoded, CONCEPTS), publisher_key=SIGNER.public_key(),
                        concepts="Step")
