"""``crypto.Aead``: AES-256-GCM under one key for many messages, in the form ``aead_encrypt``
and ``aead_decrypt`` use (``IV ‖ ciphertext ‖ tag``), with IVs drawn from the CSPRNG in bulk."""

from __future__ import annotations

import pytest

from xdn import crypto
from xdn.errors import DecryptError, UsageError

KEY = bytes(range(32))


def test_it_writes_what_aead_encrypt_writes_for_the_same_iv() -> None:
    iv = b"\x07" * crypto.IV_BYTES
    assert crypto.Aead(KEY).encrypt(b"<a>x</a>", iv=iv) == crypto.aead_encrypt(
        KEY, b"<a>x</a>", iv=iv
    )


def test_each_opens_what_the_other_seals() -> None:
    cipher = crypto.Aead(KEY)
    assert crypto.aead_decrypt(KEY, cipher.encrypt(b"one")) == b"one"
    assert cipher.decrypt(crypto.aead_encrypt(KEY, b"two")) == b"two"


def test_every_message_gets_a_fresh_iv_across_refills() -> None:
    cipher = crypto.Aead(KEY)
    blobs = [cipher.encrypt(b"") for _ in range(3 * 256 + 5)]  # (several draws of IVs)
    ivs = {blob[: crypto.IV_BYTES] for blob in blobs}
    assert len(ivs) == len(blobs)
    assert all(cipher.decrypt(blob) == b"" for blob in blobs)


@pytest.mark.parametrize("cut", [0, 1, crypto.GCM_OVERHEAD - 1])
def test_a_short_blob_is_the_opaque_error(cut: int) -> None:
    with pytest.raises(DecryptError):
        crypto.Aead(KEY).decrypt(crypto.aead_encrypt(KEY, b"")[:cut])


def test_a_flipped_bit_or_another_key_is_the_opaque_error() -> None:
    blob = bytearray(crypto.Aead(KEY).encrypt(b"payload"))
    blob[-1] ^= 1
    with pytest.raises(DecryptError):
        crypto.Aead(KEY).decrypt(bytes(blob))
    with pytest.raises(DecryptError):
        crypto.Aead(bytes(32)).decrypt(crypto.Aead(KEY).encrypt(b"payload"))


def test_misuse_is_refused() -> None:
    with pytest.raises(UsageError, match="32 bytes"):
        crypto.Aead(b"short")
    with pytest.raises(UsageError, match="12 bytes"):
        crypto.Aead(KEY).encrypt(b"", iv=b"\x00" * 8)
