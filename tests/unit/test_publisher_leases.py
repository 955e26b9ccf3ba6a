"""The key service keeps a member only by its newest, unexpired, authentic lease."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from publisher.leases import LeaseBook
from xdn import certs, crypto, lease
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NOW_MS = lease.millis(NOW)
MINUTE_MS = 60_000


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([REPO_ROOT / "ontology" / "production.owl"])


@pytest.fixture(scope="module")
def pki() -> tuple[bytes, bytes, bytes, crypto.PrivateKey, str]:
    ca = certs.create_ca("Test CA", now=NOW - timedelta(days=1))
    cert, key = certs.issue(*ca, name="alice", role="subscriber", now=NOW - timedelta(days=1))
    member = certs.credential_from_pem(cert).member_id
    return ca[0], ca[1], cert, crypto.load_private_key_pem(key), member


@pytest.fixture
def book(tmp_path: Path, pki: tuple[bytes, ...], ontology: Ontology) -> LeaseBook:
    return LeaseBook(tmp_path / "keys.sqlite", ca_pem=pki[0], ontology=ontology)  # type: ignore[arg-type]


def _signed(pki: tuple, *, at_ms: int, period_ms: int = 10 * MINUTE_MS, leave: bool = False,
            concepts: tuple[str, ...] = ()) -> bytes:
    made = lease.issue(member=pki[4], site="d1", block="Production", concepts=concepts,
                       now_ms=at_ms, period_ms=period_ms, leave=leave)
    return lease.sign(made, pki[3]).to_bytes()


def test_a_member_with_a_current_lease_is_kept(book: LeaseBook, pki: tuple) -> None:
    assert book.bound(pki[4], pki[2], _signed(pki, at_ms=NOW_MS), at=NOW) == frozenset()


def test_no_lease_a_lapsed_one_or_a_foreign_one_leaves_the_member_out(
    book: LeaseBook, pki: tuple
) -> None:
    assert book.bound(pki[4], pki[2], b"", at=NOW) is None
    old = _signed(pki, at_ms=NOW_MS - 20 * MINUTE_MS)
    assert book.bound(pki[4], pki[2], old, at=NOW) is None
    assert book.bound("bob@" + "2" * 32, pki[2], _signed(pki, at_ms=NOW_MS), at=NOW) is None
    assert book.bound(pki[4], pki[2], b"garbage", at=NOW) is None


def test_a_revoked_certificate_leaves_the_member_out(book: LeaseBook, pki: tuple) -> None:
    serial = certs.credential_from_pem(pki[2]).serial
    data = _signed(pki, at_ms=NOW_MS)
    assert book.bound(pki[4], pki[2], data, at=NOW, revoked=frozenset({serial})) is None


def test_an_older_lease_replayed_after_a_leave_counts_for_nothing(
    book: LeaseBook, pki: tuple
) -> None:
    before = _signed(pki, at_ms=NOW_MS - MINUTE_MS)
    left = _signed(pki, at_ms=NOW_MS - 1000, leave=True)
    assert book.bound(pki[4], pki[2], before, at=NOW) is not None
    assert book.bound(pki[4], pki[2], left, at=NOW) is None
    assert book.bound(pki[4], pki[2], before, at=NOW) is None  # the site replays it
    rejoined = _signed(pki, at_ms=NOW_MS)
    assert book.bound(pki[4], pki[2], rejoined, at=NOW) is not None


def test_the_newest_statement_survives_a_restart(
    tmp_path: Path, pki: tuple, ontology: Ontology
) -> None:
    first = LeaseBook(tmp_path / "k.sqlite", ca_pem=pki[0], ontology=ontology)
    assert first.bound(pki[4], pki[2], _signed(pki, at_ms=NOW_MS, leave=True), at=NOW) is None
    first.close()
    again = LeaseBook(tmp_path / "k.sqlite", ca_pem=pki[0], ontology=ontology)
    stale = _signed(pki, at_ms=NOW_MS - MINUTE_MS)
    assert again.bound(pki[4], pki[2], stale, at=NOW) is None
    held = again.held(pki[4])
    assert held is not None and held.leave


def test_the_concepts_a_lease_names_bound_the_groups(
    book: LeaseBook, pki: tuple, ontology: Ontology
) -> None:
    data = _signed(pki, at_ms=NOW_MS, concepts=("QualityInspection",))
    assert book.bound(pki[4], pki[2], data, at=NOW) == ontology.block("QualityInspection")
