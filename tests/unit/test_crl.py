"""Certificate revocation lists: signing, loading, and refusing revoked certificates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from xdn import certs
from xdn.errors import CertificateError, UsageError

NOW = datetime(2026, 6, 1, tzinfo=UTC)
WEEK = timedelta(days=7)


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("test-ca", now=NOW)


@pytest.fixture(scope="module")
def alice(ca: tuple[bytes, bytes]) -> bytes:
    pem, _ = certs.issue(*ca, name="alice", role="subscriber", now=NOW)
    return pem


def _serial(pem: bytes) -> int:
    return certs.credential_from_pem(pem).serial


def test_round_trip_lists_the_revoked_serials(ca: tuple[bytes, bytes], alice: bytes) -> None:
    revoked = [(_serial(alice), NOW), (12345, NOW - timedelta(days=1))]
    crl = certs.create_crl(*ca, revoked, now=NOW, next_update=NOW + WEEK)
    assert crl.startswith(b"-----BEGIN X509 CRL-----")
    assert certs.load_crl(crl, ca[0], at=NOW + timedelta(hours=1)) == {_serial(alice), 12345}


def test_an_empty_crl_revokes_nothing(ca: tuple[bytes, bytes]) -> None:
    crl = certs.create_crl(*ca, [], now=NOW, next_update=NOW + WEEK)
    assert certs.load_crl(crl, ca[0], at=NOW) == frozenset()


def test_crl_from_another_ca_is_refused(ca: tuple[bytes, bytes]) -> None:
    other = certs.create_ca("test-ca", now=NOW)  # same name, different key
    forged = certs.create_crl(*other, [], now=NOW, next_update=NOW + WEEK)
    with pytest.raises(CertificateError, match="invalid CA signature"):
        certs.load_crl(forged, ca[0], at=NOW)
    renamed = certs.create_ca("mallory-ca", now=NOW)
    foreign = certs.create_crl(*renamed, [], now=NOW, next_update=NOW + WEEK)
    with pytest.raises(CertificateError, match="not issued by the trusted CA"):
        certs.load_crl(foreign, ca[0], at=NOW)


def test_stale_and_future_crls_are_refused(ca: tuple[bytes, bytes]) -> None:
    crl = certs.create_crl(*ca, [], now=NOW, next_update=NOW + WEEK)
    with pytest.raises(CertificateError, match="stale"):
        certs.load_crl(crl, ca[0], at=NOW + WEEK + timedelta(seconds=1))
    with pytest.raises(CertificateError, match="not valid yet"):
        certs.load_crl(crl, ca[0], at=NOW - timedelta(hours=1))


def test_garbage_is_a_certificate_error(ca: tuple[bytes, bytes]) -> None:
    with pytest.raises(CertificateError, match=r"not a PEM X\.509 CRL"):
        certs.load_crl(b"-----BEGIN X509 CRL-----\nAAAA\n", ca[0], at=NOW)
    crl = bytearray(certs.create_crl(*ca, [(7, NOW)], now=NOW, next_update=NOW + WEEK))
    crl[100] ^= 0x01  # flip a bit inside the base64 body
    with pytest.raises(CertificateError):
        certs.load_crl(bytes(crl), ca[0], at=NOW)


def test_misuse_is_a_usage_error(ca: tuple[bytes, bytes]) -> None:
    with pytest.raises(UsageError, match="after its issue time"):
        certs.create_crl(*ca, [], now=NOW, next_update=NOW)
    with pytest.raises(UsageError, match="timezone-aware"):
        certs.create_crl(*ca, [], now=NOW.replace(tzinfo=None), next_update=NOW + WEEK)


def test_revoked_certificate_is_refused(ca: tuple[bytes, bytes], alice: bytes) -> None:
    crl = certs.create_crl(*ca, [(_serial(alice), NOW)], now=NOW, next_update=NOW + WEEK)
    revoked = certs.load_crl(crl, ca[0], at=NOW)
    with pytest.raises(CertificateError, match="certificate of 'alice' was revoked"):
        certs.verify_certificate(alice, ca[0], at=NOW, role="subscriber", revoked=revoked)
    bob, _ = certs.issue(*ca, name="bob", role="subscriber", now=NOW)
    assert certs.verify_certificate(bob, ca[0], at=NOW, revoked=revoked).name == "bob"
    assert certs.verify_certificate(alice, ca[0], at=NOW).name == "alice"  # no CRL given
