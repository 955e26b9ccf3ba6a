"""Membership leases: signed by the subscriber, checked by everyone, never extended by a site."""

from __future__ import annotations

import contextlib
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import certs, crypto, lease
from xdn.errors import (
    CertificateError,
    LeaseError,
    LeaseLapsedError,
    ProtocolError,
    SignatureError,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NOW_MS = lease.millis(NOW)
HOUR_MS = 3600 * 1000


@dataclasses.dataclass(frozen=True)
class Party:
    cert: bytes
    key: crypto.PrivateKey
    member: str


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("Test CA", now=NOW - timedelta(days=1))


def _party(ca: tuple[bytes, bytes], name: str, role: str = "subscriber") -> Party:
    attributes = {certs.BLOCK_FIELD: "Root"} if role == "site" else None
    cert, key = certs.issue(
        ca[0], ca[1], name=name, role=role, attributes=attributes,
        now=NOW - timedelta(days=1),
    )
    credential = certs.credential_from_pem(cert)
    return Party(cert=cert, key=crypto.load_private_key_pem(key), member=credential.member_id)


@pytest.fixture(scope="module")
def alice(ca: tuple[bytes, bytes]) -> Party:
    return _party(ca, "alice")


def _lease(who: Party, **changes: object) -> lease.Lease:
    base = lease.issue(
        member=who.member, site="d2", block="Medical", concepts=("B", "A"),
        now_ms=NOW_MS, period_ms=HOUR_MS,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _verify(data: bytes, who: Party, ca: tuple[bytes, bytes], **kwargs: object) -> lease.Lease:
    at = kwargs.pop("at", NOW)
    return lease.verify(data, certificate_pem=who.cert, ca_pem=ca[0], at=at, **kwargs)  # type: ignore[arg-type]


def test_a_signed_lease_round_trips_and_verifies(ca: tuple[bytes, bytes], alice: Party) -> None:
    signed = lease.sign(_lease(alice), alice.key)
    data = signed.to_bytes()
    assert lease.SignedLease.from_bytes(data) == signed
    got = _verify(data, alice, ca, site="d2", member=alice.member)
    assert got == signed.lease
    assert got.concepts == ("A", "B")
    assert got.period_ms == HOUR_MS


def test_the_statement_starts_with_a_domain_label(alice: Party) -> None:
    assert _lease(alice).to_bytes().startswith(b"xdn/lease/v1\x00")


@pytest.mark.parametrize(
    "change",
    [
        {"member": "mallory@" + "0" * 32},
        {"site": "d3"},
        {"block": "Root"},
        {"concepts": ("A",)},
        {"concepts": ()},
        {"issued_at": NOW_MS - 1},
        {"expires_at": NOW_MS + 2 * HOUR_MS},
        {"leave": True, "expires_at": NOW_MS},
    ],
    ids=lambda change: "-".join(change),
)
def test_every_field_is_signed(
    ca: tuple[bytes, bytes], alice: Party, change: dict[str, object]
) -> None:
    signed = lease.sign(_lease(alice), alice.key)
    forged = lease.SignedLease(lease=_lease(alice, **change), signature=signed.signature)
    with pytest.raises((SignatureError, LeaseError)):
        lease.open_lease(forged.to_bytes(), certificate_pem=alice.cert, ca_pem=ca[0], at=NOW)


def test_every_byte_of_the_wire_form_matters(ca: tuple[bytes, bytes], alice: Party) -> None:
    data = lease.sign(_lease(alice), alice.key).to_bytes()
    for index in range(len(data)):
        tampered = data[:index] + bytes((data[index] ^ 0x01,)) + data[index + 1 :]
        with pytest.raises((ProtocolError, SignatureError, LeaseError)):
            _verify(tampered, alice, ca)


def test_an_expired_lease_is_lapsed(ca: tuple[bytes, bytes], alice: Party) -> None:
    data = lease.sign(_lease(alice), alice.key).to_bytes()
    with pytest.raises(LeaseLapsedError, match="expired"):
        _verify(data, alice, ca, at=NOW + timedelta(hours=1))
    assert _verify(data, alice, ca, at=NOW + timedelta(minutes=59)).member == alice.member
    # still authentic: a party may remember it as the newest statement seen
    assert lease.open_lease(
        data, certificate_pem=alice.cert, ca_pem=ca[0], at=NOW + timedelta(hours=2)
    ).expires_at == NOW_MS + HOUR_MS


def test_a_leave_is_lapsed_at_once(ca: tuple[bytes, bytes], alice: Party) -> None:
    leave = lease.issue(
        member=alice.member, site="d2", block="Medical", now_ms=NOW_MS, period_ms=HOUR_MS,
        leave=True,
    )
    assert leave.expires_at == leave.issued_at and not leave.active_at(NOW_MS)
    data = lease.sign(leave, alice.key).to_bytes()
    with pytest.raises(LeaseLapsedError, match="left"):
        _verify(data, alice, ca)
    assert lease.open_lease(data, certificate_pem=alice.cert, ca_pem=ca[0], at=NOW).leave


def test_a_lease_issued_in_the_future_is_not_valid_yet(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    ahead = lease.MAX_SKEW_MS + 1
    data = lease.sign(
        _lease(alice, issued_at=NOW_MS + ahead, expires_at=NOW_MS + ahead + HOUR_MS), alice.key
    ).to_bytes()
    with pytest.raises(LeaseError, match="not valid yet"):
        _verify(data, alice, ca)
    skewed = lease.sign(
        _lease(alice, issued_at=NOW_MS + 1000, expires_at=NOW_MS + HOUR_MS), alice.key
    ).to_bytes()
    assert _verify(skewed, alice, ca).issued_at == NOW_MS + 1000


def test_a_lease_signed_by_another_key_is_refused(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    namesake = _party(ca, "alice")
    data = lease.sign(_lease(alice), namesake.key).to_bytes()
    with pytest.raises(SignatureError):
        _verify(data, alice, ca)


def test_a_lease_offered_with_another_certificate_is_refused(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    mallory = _party(ca, "mallory")
    data = lease.sign(_lease(alice), alice.key).to_bytes()
    with pytest.raises(LeaseError, match="its certificate is"):
        _verify(data, mallory, ca)


def test_a_lease_whose_member_id_is_not_its_certificate_is_refused(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    namesake = _party(ca, "alice")  # same common name, another certificate
    data = lease.sign(_lease(alice, member=namesake.member), alice.key).to_bytes()
    with pytest.raises(LeaseError, match="its certificate is"):
        _verify(data, alice, ca)


def test_a_lease_for_another_entry_or_site_is_refused(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    data = lease.sign(_lease(alice), alice.key).to_bytes()
    with pytest.raises(LeaseError, match="offered for"):
        _verify(data, alice, ca, member="bob@" + "1" * 32)
    with pytest.raises(LeaseError, match="names site 'd2'"):
        _verify(data, alice, ca, site="d3")


def test_a_revoked_or_foreign_certificate_is_refused(
    ca: tuple[bytes, bytes], alice: Party
) -> None:
    data = lease.sign(_lease(alice), alice.key).to_bytes()
    serial = certs.credential_from_pem(alice.cert).serial
    with pytest.raises(CertificateError, match="revoked"):
        _verify(data, alice, ca, revoked=frozenset({serial}))
    other_ca = certs.create_ca("Other CA", now=NOW - timedelta(days=1))
    with pytest.raises(CertificateError, match="not issued by the trusted CA"):
        lease.verify(data, certificate_pem=alice.cert, ca_pem=other_ca[0], at=NOW)


def test_only_a_subscriber_certificate_signs_leases(ca: tuple[bytes, bytes]) -> None:
    site = _party(ca, "d2", role="site")
    data = lease.sign(_lease(site), site.key).to_bytes()
    with pytest.raises(CertificateError, match="role"):
        _verify(data, site, ca)


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"member": "alice"}, ValueError),
        ({"site": ""}, ValueError),
        ({"block": "a\nb"}, ValueError),
        ({"concepts": ("B", "A")}, ValueError),
        ({"concepts": ["A"]}, TypeError),
        ({"issued_at": -1}, ValueError),
        ({"expires_at": NOW_MS - 1}, ValueError),
        ({"expires_at": NOW_MS + lease.MAX_PERIOD_MS + 1}, ValueError),
        ({"leave": True}, ValueError),
        ({"leave": 1}, TypeError),
        ({"issued_at": True}, TypeError),
    ],
)
def test_misuse_is_refused_by_type(
    alice: Party, change: dict[str, object], error: type[Exception]
) -> None:
    with pytest.raises(error):
        _lease(alice, **change)


def test_the_newest_statement_counts_and_a_replayed_older_lease_does_not(alice: Party) -> None:
    first = _lease(alice)
    renewed = _lease(alice, issued_at=NOW_MS + 1000, expires_at=NOW_MS + 1000 + HOUR_MS)
    left = lease.issue(
        member=alice.member, site="d2", block="Medical", now_ms=NOW_MS + 2000, period_ms=1,
        leave=True,
    )
    assert lease.newest(None, first) == first
    assert lease.newest(first, renewed) == lease.newest(renewed, first) == renewed
    assert lease.newest(left, renewed) == left  # the replayed older lease is ignored
    assert not lease.newest(left, first).active_at(NOW_MS + 3000)
    same_time = _lease(alice, issued_at=NOW_MS, expires_at=NOW_MS, leave=True)
    assert lease.newest(first, same_time) == same_time
    with pytest.raises(ValueError, match="different members"):
        lease.newest(first, _lease(alice, member="bob@" + "1" * 32))


def test_a_lease_must_last_some_time(alice: Party) -> None:
    with pytest.raises(ValueError, match="some time"):
        lease.issue(member=alice.member, site="d", block="B", now_ms=0, period_ms=0)


_TEXT = st.text(
    st.characters(exclude_categories=["Cs"], min_codepoint=0x20).filter(lambda c: c != "\x7f"),
    min_size=1,
    max_size=12,
)
_LEASES = st.builds(
    lambda member, site, block, concepts, issued, period, leave: lease.issue(
        member=member, site=site, block=block, concepts=concepts, now_ms=issued,
        period_ms=period, leave=leave,
    ),
    member=st.builds("{}@{}".format, _TEXT, st.text("0123456789abcdef", min_size=32, max_size=32)),
    site=_TEXT,
    block=_TEXT,
    concepts=st.lists(_TEXT, max_size=5),
    issued=st.integers(0, 2**62),
    period=st.integers(1, lease.MAX_PERIOD_MS),
    leave=st.booleans(),
)


@given(_LEASES)
def test_statement_bytes_round_trip(value: lease.Lease) -> None:
    data = value.to_bytes()
    assert lease.Lease.from_bytes(data) == value
    assert lease.Lease.from_bytes(data).to_bytes() == data


@given(_LEASES, st.binary(min_size=1, max_size=104))
def test_wire_bytes_round_trip(value: lease.Lease, signature: bytes) -> None:
    signed = lease.SignedLease(lease=value, signature=signature)
    assert lease.SignedLease.from_bytes(signed.to_bytes()) == signed


@given(_LEASES, _LEASES)
def test_different_leases_have_different_statements(a: lease.Lease, b: lease.Lease) -> None:
    assert (a.to_bytes() == b.to_bytes()) == (a == b)


@given(_LEASES, st.data())
def test_truncated_or_extended_bytes_are_refused(value: lease.Lease, data: st.DataObject) -> None:
    raw = lease.SignedLease(lease=value, signature=b"s" * 8).to_bytes()
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(ProtocolError):
        lease.SignedLease.from_bytes(raw[:cut])
    with pytest.raises(ProtocolError):
        lease.SignedLease.from_bytes(raw + data.draw(st.binary(min_size=1, max_size=4)))


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_crash_the_decoder(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        lease.SignedLease.from_bytes(raw)
    with contextlib.suppress(ProtocolError):
        lease.Lease.from_bytes(b"xdn/lease/v1\x00" + raw)
