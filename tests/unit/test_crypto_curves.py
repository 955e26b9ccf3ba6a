"""Both curves xdn accepts, P-256 (the default) and P-384, and the curve a CA gives its keys.

Signatures use the hash of the key's curve, HPKE the KEM and KDF of the recipient's curve; a
key on any other curve is refused with a message naming the accepted ones. A CA's curve is the
curve of every key it issues, and a whole provenance chain signed on P-384 verifies as one on
P-256 does.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from cli.main import main
from deploy.pki import Party, ensure_ca, issue_party
from xdn import certs, crypto
from xdn.errors import DecryptError, SignatureError, UsageError
from xdn.provenance import (
    ChainVerifier,
    ContentFacts,
    LeafRanges,
    Signer,
    message_uri,
    originate,
    relay,
)

NOW = datetime(2026, 3, 1, tzinfo=UTC)
DATA = b"what the publisher signed"


@pytest.mark.parametrize(("curve", "hash_type", "other"), [
    ("P-256", hashes.SHA256, hashes.SHA384),
    ("P-384", hashes.SHA384, hashes.SHA256),
])  # fmt: skip
def test_a_signature_uses_the_hash_of_its_keys_curve(
    curve: str, hash_type: type[hashes.HashAlgorithm], other: type[hashes.HashAlgorithm]
) -> None:
    key = crypto.generate_private_key(curve)
    assert crypto.curve_of(key) == curve
    signature = crypto.sign(key, DATA)
    crypto.verify(key.public_key(), signature, DATA)
    key.public_key().verify(signature, DATA, ec.ECDSA(hash_type()))  # the library agrees
    with pytest.raises(InvalidSignature):
        key.public_key().verify(signature, DATA, ec.ECDSA(other()))
    with pytest.raises(SignatureError):
        crypto.verify(key.public_key(), signature, DATA + b"!")
    with pytest.raises(SignatureError):  # another key on the same curve
        crypto.verify(crypto.generate_private_key(curve).public_key(), signature, DATA)


def test_a_signature_made_on_one_curve_does_not_verify_under_the_other() -> None:
    signature = crypto.sign(crypto.generate_private_key("P-256"), DATA)
    with pytest.raises(SignatureError):
        crypto.verify(crypto.generate_private_key("P-384").public_key(), signature, DATA)


@pytest.mark.parametrize("curve", sorted(crypto.CURVES))
def test_hpke_seals_to_a_key_on_either_curve_and_only_that_key_opens(curve: str) -> None:
    key = crypto.generate_private_key(curve)
    sealed = crypto.hpke_seal(key.public_key(), b"group key", info=b"ctx")
    assert crypto.hpke_open(key, sealed, info=b"ctx") == b"group key"
    enc_bytes = {"P-256": 65, "P-384": 97}[curve]  # the uncompressed ephemeral point
    assert len(sealed) == enc_bytes + len(b"group key") + 16
    for wrong in (crypto.generate_private_key(curve), crypto.generate_private_key(
            "P-384" if curve == "P-256" else "P-256")):  # fmt: skip
        with pytest.raises(DecryptError):
            crypto.hpke_open(wrong, sealed, info=b"ctx")
    with pytest.raises(DecryptError):
        crypto.hpke_open(key, sealed, info=b"another context")


def test_keys_on_other_curves_are_refused_with_the_accepted_ones_named() -> None:
    p521 = ec.generate_private_key(ec.SECP521R1())
    pem = p521.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())  # fmt: skip
    with pytest.raises(UsageError, match="private key must be ECDSA P-256 or P-384"):
        crypto.load_private_key_pem(pem)
    public = p521.public_key().public_bytes(crypto.PEM, crypto.SPKI)
    with pytest.raises(UsageError, match="public key must be ECDSA P-256 or P-384"):
        crypto.load_public_key_pem(public)
    with pytest.raises(UsageError, match="unknown curve 'P-521'; choose P-256 or P-384"):
        crypto.generate_private_key("P-521")
    with pytest.raises(UsageError, match="curve secp521r1; xdn accepts ECDSA P-256 or P-384"):
        crypto.sign(p521, DATA)  # type: ignore[arg-type]


@pytest.mark.parametrize("curve", sorted(crypto.CURVES))
def test_a_ca_issues_keys_and_crls_on_its_own_curve(curve: str) -> None:
    ca = certs.create_ca("ca", now=NOW, curve=curve)
    assert certs.curve_of_certificate(ca[0]) == curve
    cert, key = certs.issue(*ca, name="alice", role="subscriber", now=NOW)
    assert certs.curve_of_certificate(cert) == curve
    assert crypto.curve_of(crypto.load_private_key_pem(key)) == curve
    assert certs.verify_certificate(cert, ca[0], at=NOW).name == "alice"
    crl = certs.create_crl(*ca, revoked=[(7, NOW)], now=NOW, next_update=NOW + timedelta(days=1))
    assert certs.read_crl(crl, ca[0]).serials == frozenset({7})


def test_the_default_curve_is_p256() -> None:
    assert crypto.DEFAULT_CURVE == "P-256"
    assert certs.curve_of_certificate(certs.create_ca("ca", now=NOW)[0]) == "P-256"


def test_certs_init_takes_the_curve_and_an_existing_ca_keeps_its_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["certs", "init", "--dir", str(tmp_path), "--curve", "P-384"]) == 0
    assert "(P-384)" in capsys.readouterr().out
    assert main(["certs", "init", "--dir", str(tmp_path)]) == 0  # already there: unchanged
    assert "(P-384)" in capsys.readouterr().out
    files = issue_party(tmp_path, Party(name="alice", role="subscriber"), now=NOW)
    assert certs.curve_of_certificate(files.cert.read_bytes()) == "P-384"
    other = ensure_ca(tmp_path / "fresh", now=NOW)
    assert certs.curve_of_certificate(other.read_bytes()) == "P-256"


def test_a_provenance_chain_signed_on_p384_verifies() -> None:
    ca = certs.create_ca("ca", now=NOW - timedelta(days=1), curve="P-384")

    def signer(name: str, role: str) -> Signer:
        attributes = {certs.BLOCK_FIELD: "Order"} if role == "site" else {}
        cert, key = certs.issue(*ca, name=name, role=role, attributes=attributes, now=NOW)
        return Signer(node_uri=certs.node_uri(name), certificate=cert,
                      private_key=crypto.load_private_key_pem(key))  # fmt: skip

    content = ContentFacts(document_id="d", publisher="acme", manifest_root=bytes(32),
                           leaf_count=4)  # fmt: skip
    acme_uri, d1_uri = (message_uri(certs.node_uri(n), "d", "v1") for n in ("acme", "d1"))
    first = originate(signer("acme", "publisher"), message_uri=acme_uri,
                      recipient_uri=certs.node_uri("d1"), content=content, timestamp_ms=1)
    second = relay(first, signer("d1", "site"), message_uri=d1_uri,
                   recipient_uri=certs.node_uri("d2"), leaves=LeafRanges(((0, 4),)),
                   timestamp_ms=2)  # fmt: skip
    chain = ChainVerifier(ca[0]).verify(second, at=NOW)
    assert [c.name for c in chain.signers] == ["acme", "d1"]
    with pytest.raises(SignatureError):  # the same chain under a P-256 CA of the same name
        ChainVerifier(certs.create_ca("ca", now=NOW)[0]).verify(second, at=NOW)
