"""Development CA, issuance and certificate checks."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from xdn import certs
from xdn.errors import CertificateError, UsageError

NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("test-ca", now=NOW)


def test_issued_subscriber_carries_role_attributes_and_uri(ca: tuple[bytes, bytes]) -> None:
    pem, _ = certs.issue(*ca, name="alice", role="subscriber", attributes={"OU": "Cred1"}, now=NOW)
    credential = certs.verify_certificate(pem, ca[0], at=NOW, role="subscriber")
    assert credential.name == "alice"
    assert credential.subject["OU"] == ("Cred1",)
    assert credential.role == "subscriber"
    assert credential.uri == "https://alice.xdn.example/"
    assert credential.issuer["CN"] == ("test-ca",)


def test_certificate_from_another_ca_is_refused(ca: tuple[bytes, bytes]) -> None:
    other = certs.create_ca("test-ca", now=NOW)  # same name, different key
    pem, _ = certs.issue(*other, name="mallory", role="subscriber", now=NOW)
    with pytest.raises(CertificateError, match="invalid CA signature"):
        certs.verify_certificate(pem, ca[0], at=NOW)


def test_expired_and_not_yet_valid_are_refused(ca: tuple[bytes, bytes]) -> None:
    pem, _ = certs.issue(*ca, name="old", role="subscriber", now=NOW, days=1)
    with pytest.raises(CertificateError, match="not valid at"):
        certs.verify_certificate(pem, ca[0], at=NOW + timedelta(days=2))
    with pytest.raises(CertificateError, match="not valid at"):
        certs.verify_certificate(pem, ca[0], at=NOW - timedelta(days=1))


def test_a_site_certificate_names_its_block_and_only_a_site_one_does(
    ca: tuple[bytes, bytes],
) -> None:
    pem, _ = certs.issue(
        *ca, name="d2", role="site", attributes={certs.BLOCK_FIELD: "WorkOrder"}, now=NOW
    )
    assert certs.verify_certificate(pem, ca[0], at=NOW, role="site").block == "WorkOrder"
    with pytest.raises(UsageError, match="--block CONCEPT"):
        certs.issue(*ca, name="d2", role="site", now=NOW)
    with pytest.raises(UsageError, match="only a site certificate"):
        certs.issue(
            *ca, name="eve", role="subscriber", attributes={certs.BLOCK_FIELD: "WorkOrder"},
            now=NOW,
        )


def test_a_certificate_checked_before_is_still_checked_for_time_revocation_and_role(
    ca: tuple[bytes, bytes],
) -> None:
    # The CA signature check is cached; nothing that depends on the call may be.
    pem, _ = certs.issue(*ca, name="carol", role="subscriber", now=NOW, days=1)
    serial = certs.verify_certificate(pem, ca[0], at=NOW, role="subscriber").serial
    with pytest.raises(CertificateError, match="not valid at"):
        certs.verify_certificate(pem, ca[0], at=NOW + timedelta(days=2))
    with pytest.raises(CertificateError, match="revoked"):
        certs.verify_certificate(pem, ca[0], at=NOW, revoked=frozenset({serial}))
    with pytest.raises(CertificateError, match="expected 'publisher'"):
        certs.verify_certificate(pem, ca[0], at=NOW, role="publisher")


def test_wrong_role_is_refused(ca: tuple[bytes, bytes]) -> None:
    pem, _ = certs.issue(
        *ca, name="d1", role="site", attributes={certs.BLOCK_FIELD: "WorkOrder"},
        hosts=["127.0.0.1"], now=NOW,
    )
    with pytest.raises(CertificateError, match="expected 'publisher'"):
        certs.verify_certificate(pem, ca[0], at=NOW, role="publisher")


def test_garbage_is_a_certificate_error(ca: tuple[bytes, bytes]) -> None:
    with pytest.raises(CertificateError, match=r"not a PEM X\.509 certificate"):
        certs.verify_certificate(b"-----BEGIN CERTIFICATE-----\nAAAA\n", ca[0], at=NOW)


def test_unknown_role_and_field_are_usage_errors(ca: tuple[bytes, bytes]) -> None:
    with pytest.raises(UsageError, match="unknown role"):
        certs.issue(*ca, name="x", role="janitor", now=NOW)
    with pytest.raises(UsageError, match="unknown subject field"):
        certs.issue(*ca, name="x", role="subscriber", attributes={"nope": "1"}, now=NOW)


def test_a_sweep_over_hundreds_of_members_checks_each_ca_signature_once(
    ca: tuple[bytes, bytes],
) -> None:
    members = [
        certs.issue(*ca, name=f"m{i}", role="subscriber", now=NOW)[0] for i in range(300)
    ]
    for pem in members:  # the first sweep checks each
        certs.verify_certificate(pem, ca[0], at=NOW, role="subscriber")
    before = certs._issuer_refusal.cache_info(), certs.credential_from_pem.cache_info()
    for pem in members:  # a key service's next sweep, in the same order
        certs.verify_certificate(pem, ca[0], at=NOW, role="subscriber")
    after = certs._issuer_refusal.cache_info(), certs.credential_from_pem.cache_info()
    for was, now in zip(before, after, strict=True):
        assert now.hits - was.hits >= 300
        assert now.misses == was.misses
