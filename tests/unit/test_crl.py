"""Certificate revocation lists: signing, loading, and refusing revoked certificates."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from xdn import certs
from xdn.errors import CertificateError, CrlRollbackError, UsageError

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


# ---- CRL facts, succession and freshness ---------------------------------------------------
HOUR = timedelta(hours=1)


def test_read_crl_gives_its_facts(ca: tuple[bytes, bytes], alice: bytes) -> None:
    pem = certs.create_crl(
        *ca, [(_serial(alice), NOW)], now=NOW, next_update=NOW + WEEK, number=42
    )
    crl = certs.read_crl(pem, ca[0])
    assert crl.serials == {_serial(alice)}
    assert (crl.number, crl.this_update, crl.next_update) == (42, NOW, NOW + WEEK)
    assert crl.pem == pem
    assert "CRL number 42" in crl.describe()
    # by default the number is the issue time in seconds: later CRLs number higher
    later = certs.read_crl(certs.create_crl(*ca, [], now=NOW + HOUR, next_update=NOW + WEEK), ca[0])
    assert later.number == int((NOW + HOUR).timestamp()) > int(NOW.timestamp())


def test_read_crl_refuses_what_load_crl_refuses_but_no_times(ca: tuple[bytes, bytes]) -> None:
    other = certs.create_ca("test-ca", now=NOW)
    with pytest.raises(CertificateError, match="invalid CA signature"):
        certs.read_crl(certs.create_crl(*other, [], now=NOW, next_update=NOW + WEEK), ca[0])
    # a stale CRL is still read: whoever holds it decides what staleness means
    stale = certs.create_crl(*ca, [], now=NOW - WEEK - WEEK, next_update=NOW - WEEK)
    assert certs.read_crl(stale, ca[0]).next_update == NOW - WEEK


def test_bad_crl_numbers_are_usage_errors(ca: tuple[bytes, bytes]) -> None:
    for bad in (-1, 2**159):
        with pytest.raises(UsageError, match="CRL number"):
            certs.create_crl(*ca, [], now=NOW, next_update=NOW + WEEK, number=bad)


def _crl(number: int, *, now: datetime = NOW, serials: frozenset[int] = frozenset()) -> certs.Crl:
    return certs.Crl(serials=serials, number=number, this_update=now, next_update=now + WEEK)


def test_an_older_crl_is_refused_naming_both_numbers() -> None:
    with pytest.raises(CrlRollbackError, match="CRL number 6 is older than CRL number 7"):
        certs.check_crl_succession(_crl(6), _crl(7), at=NOW)
    assert issubclass(CrlRollbackError, CertificateError)


def test_an_equal_or_newer_crl_is_accepted_even_stale() -> None:
    certs.check_crl_succession(_crl(7), None, at=NOW)
    certs.check_crl_succession(_crl(7), _crl(7), at=NOW)
    certs.check_crl_succession(_crl(8), _crl(7), at=NOW + WEEK + WEEK)  # stale, but newer


def test_a_crl_from_the_future_is_refused() -> None:
    with pytest.raises(CertificateError, match="not valid yet"):
        certs.check_crl_succession(_crl(8, now=NOW + HOUR), _crl(7), at=NOW)
    certs.check_crl_succession(_crl(8, now=NOW + timedelta(minutes=4)), _crl(7), at=NOW)


def test_freshness_fresh_stale_then_expired_after_the_grace() -> None:
    crl = _crl(1)
    assert certs.crl_freshness(crl, at=NOW, grace=HOUR) is certs.CrlFreshness.FRESH
    assert certs.crl_freshness(crl, at=NOW + WEEK, grace=HOUR) is certs.CrlFreshness.FRESH
    stale_at = NOW + WEEK + timedelta(seconds=1)
    assert certs.crl_freshness(crl, at=stale_at, grace=HOUR) is certs.CrlFreshness.STALE
    assert certs.crl_freshness(crl, at=NOW + WEEK + HOUR, grace=HOUR) is certs.CrlFreshness.STALE
    expired = NOW + WEEK + HOUR + timedelta(seconds=1)
    assert certs.crl_freshness(crl, at=expired, grace=HOUR) is certs.CrlFreshness.EXPIRED
    assert certs.crl_freshness(crl, at=stale_at, grace=timedelta(0)) is (
        certs.CrlFreshness.EXPIRED
    )


def test_crl_facts_are_validated() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        certs.Crl(serials=frozenset(), number=1, this_update=NOW.replace(tzinfo=None),
                  next_update=NOW + WEEK)
    with pytest.raises(ValueError, match="non-negative"):
        _crl(-1)
