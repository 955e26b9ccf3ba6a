"""A site's lease checks: its own subscribers' leases name it; a downlink's name it or below."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from disseminator import leases
from disseminator.routing import Registration
from xdn import certs, crypto, lease
from xdn.errors import LeaseError, LeaseLapsedError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NOW_MS = lease.millis(NOW)


@pytest.fixture(scope="module")
def alice() -> tuple[bytes, bytes, crypto.PrivateKey, str]:
    ca = certs.create_ca("Test CA", now=NOW - timedelta(days=1))
    cert, key = certs.issue(*ca, name="alice", role="subscriber", now=NOW - timedelta(days=1))
    return ca[0], cert, crypto.load_private_key_pem(key), certs.credential_from_pem(cert).member_id


def _data(alice: tuple, site: str, block: str, at_ms: int = NOW_MS) -> bytes:
    made = lease.issue(member=alice[3], site=site, block=block, now_ms=at_ms, period_ms=60_000)
    return lease.sign(made, alice[2]).to_bytes()


def _relayed(alice: tuple, data: bytes, link: str, served: frozenset[str]) -> lease.Lease:
    return leases.check_relayed(
        data, member=alice[3], certificate=alice[1], link=link, link_served=served,
        ca_pem=alice[0], revoked=frozenset(), at=NOW,
    )


def test_a_downlink_relays_its_own_and_its_sub_sites_subscribers(alice: tuple) -> None:
    served = frozenset({"Production", "QualityInspection"})
    assert _relayed(alice, _data(alice, "d2", "Production"), "d2", served).site == "d2"
    assert _relayed(alice, _data(alice, "d4", "QualityInspection"), "d2", served).site == "d4"


def test_a_sibling_cannot_claim_another_sites_subscriber(alice: tuple) -> None:
    with pytest.raises(LeaseError, match="neither downlink 'd3' nor below it"):
        _relayed(alice, _data(alice, "d2", "Production"), "d3", frozenset({"Machine"}))


def test_a_relayed_member_needs_a_current_lease(alice: tuple) -> None:
    with pytest.raises(LeaseError, match="without a lease"):
        _relayed(alice, b"", "d2", frozenset({"Production"}))
    old = _data(alice, "d2", "Production", at_ms=NOW_MS - 120_000)
    with pytest.raises(LeaseLapsedError):
        _relayed(alice, old, "d2", frozenset({"Production"}))


def test_a_local_lease_names_this_site_and_its_block(alice: tuple) -> None:
    def local(data: bytes) -> lease.Lease:
        return leases.check_local(
            data, member=alice[3], certificate=alice[1], site="d2", block="Production",
            ca_pem=alice[0], revoked=frozenset(), at=NOW,
        )

    assert local(_data(alice, "d2", "Production")).member == alice[3]
    with pytest.raises(LeaseError, match="names site"):
        local(_data(alice, "d1", "Production"))
    with pytest.raises(LeaseError, match="names block"):
        local(_data(alice, "d2", "Machine"))


def test_a_registration_is_reported_only_while_its_lease_holds(alice: tuple) -> None:
    data = _data(alice, "d2", "Production")
    reg = Registration(subscriber=alice[3], certificate=alice[1], grants={}, lease=data)
    assert leases.holds(reg, NOW_MS)
    assert not leases.holds(reg, NOW_MS + 60_000)
    assert not leases.holds(Registration(subscriber="a", certificate=b"", grants={}), NOW_MS)
    renewed = _data(alice, "d2", "Production", at_ms=NOW_MS + 20_000)
    assert leases.newer(data, renewed) == renewed
    assert leases.newer(renewed, data) == renewed  # a replayed older lease does not win
