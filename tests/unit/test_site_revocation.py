"""The CRL a site holds in force: no rollback, the stale alarm and failing closed after a grace."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from disseminator.revocation import DEFAULT_GRACE, CrlInForce
from xdn import certs
from xdn.errors import CrlRollbackError

NOW = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _crl(
    number: int, serials: frozenset[int] | set[int] = frozenset(), *, issued: datetime = NOW
) -> certs.Crl:
    return certs.Crl(
        serials=frozenset(serials), number=number, this_update=issued,
        next_update=issued + DAY, pem=f"crl {number} {sorted(serials)}".encode(),
    )


def test_without_a_crl_nothing_is_revoked_and_nothing_refused() -> None:
    held = CrlInForce()
    assert held.revoked == frozenset()
    assert held.freshness(NOW) is certs.CrlFreshness.FRESH
    assert held.alarm(NOW) is None and held.refusal(NOW) is None
    assert held.grace == DEFAULT_GRACE


def test_an_older_crl_is_refused_and_the_newer_stays_in_force() -> None:
    held = CrlInForce()
    assert held.offer(_crl(5, {1}), at=NOW)
    assert held.offer(_crl(6, {1, 2}), at=NOW)
    with pytest.raises(CrlRollbackError, match="CRL number 5 is older than CRL number 6"):
        held.offer(_crl(5, {1}), at=NOW)
    assert held.revoked == {1, 2}
    assert not held.offer(_crl(6, {1, 2}), at=NOW)  # the same CRL again: nothing changes


def test_a_stale_crl_raises_the_alarm_then_refuses_new_work_after_the_grace() -> None:
    held = CrlInForce(grace=timedelta(hours=2))
    held.offer(_crl(7, {3}), at=NOW)
    assert held.alarm(NOW + DAY) is None
    stale = NOW + DAY + timedelta(minutes=1)
    alarm = held.alarm(stale)
    assert alarm is not None and "CRL in force is stale" in alarm and "will be refused" in alarm
    assert held.refusal(stale) is None  # within the grace: still serving new work
    assert held.revoked == {3}  # the stale CRL's revocations stay in force
    late = NOW + DAY + timedelta(hours=2, seconds=1)
    refusal = held.refusal(late)
    assert refusal is not None and "CRL is stale" in refusal and "number 7" in refusal
    assert "installs a fresh CRL" in refusal
    assert "are refused" in (held.alarm(late) or "")
    # a fresh CRL ends it
    held.offer(_crl(8, {3}, issued=late), at=late)
    assert held.alarm(late) is None and held.refusal(late) is None
