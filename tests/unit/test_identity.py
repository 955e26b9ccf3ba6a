"""Member ids name certificates: namesakes and re-issued certificates are different members."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from xdn import certs, identity

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("Test CA", now=NOW)


def _issue(ca: tuple[bytes, bytes], name: str) -> certs.Credential:
    cert_pem, _key = certs.issue(ca[0], ca[1], name=name, role="subscriber", now=NOW)
    return certs.credential_from_pem(cert_pem)


def test_two_certificates_with_one_common_name_are_two_members(ca: tuple[bytes, bytes]) -> None:
    first, second = _issue(ca, "alice"), _issue(ca, "alice")
    assert first.name == second.name == "alice"
    assert first.member_id != second.member_id
    assert identity.person(first.member_id) == identity.person(second.member_id) == "alice"


def test_a_member_id_keeps_the_name_and_the_fingerprint_prefix(ca: tuple[bytes, bytes]) -> None:
    credential = _issue(ca, "bob@example.org")
    name, prefix = identity.split_member_id(credential.member_id)
    assert name == "bob@example.org"
    assert credential.fingerprint.startswith(prefix)
    assert len(prefix) == identity.FINGERPRINT_DIGITS


@pytest.mark.parametrize("text", ["alice", "alice@", "alice@" + "g" * 32, "alice@" + "a" * 31])
def test_text_that_is_not_a_member_id_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a member id"):
        identity.split_member_id(text)
    assert identity.person(text) == text


def test_a_fingerprint_must_be_sha256_hex() -> None:
    with pytest.raises(ValueError, match="64 lower-case hex"):
        identity.member_id("alice", "AB" * 32)
