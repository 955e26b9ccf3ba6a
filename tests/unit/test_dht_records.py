"""Site records (signing, verification, forgery), the record store, ping proofs, config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from disseminator.dht import (
    CaRecordVerifier,
    DhtConfig,
    DhtUsageError,
    InvalidRecordError,
    NodeId,
    PutOutcome,
    RecordAuthenticationError,
    RecordStore,
    SiteCredentials,
    SiteRecord,
    StoreFullError,
    make_ping_proof,
    node_id_of_certificate,
    record_payload,
    sign_site_record,
    verify_ping_proof,
)
from disseminator.dht._proof import check_nonce
from disseminator.dht._records import MAX_TTL_MS
from xdn import certs
from xdn.errors import ConfigError, ProtocolError

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("xdn test CA", now=NOW)


@pytest.fixture(scope="module")
def issue(ca: tuple[bytes, bytes]) -> Callable[..., SiteCredentials]:
    def make(name: str, role: str = "site", authority: tuple[bytes, bytes] = ca) -> SiteCredentials:
        block = {certs.BLOCK_FIELD: "WorkOrder"} if role == "site" else {}
        cert, key = certs.issue(
            *authority, name=name, role=role, attributes=block, hosts=["127.0.0.1"], now=NOW
        )
        return SiteCredentials.from_pem(cert, key)

    return make


@pytest.fixture(scope="module")
def d1(issue: Callable[..., SiteCredentials]) -> SiteCredentials:
    return issue("d1")


@pytest.fixture(scope="module")
def verifier(ca: tuple[bytes, bytes]) -> CaRecordVerifier:
    return CaRecordVerifier(ca_pem=ca[0])


def record_of(
    creds: SiteCredentials, *, block: str = "WorkOrder", at: int = NOW_MS, ttl: int = HOUR_MS
) -> SiteRecord:
    return sign_site_record(
        creds, address="127.0.0.1:5001", block=block, issued_at_ms=at, ttl_ms=ttl
    )


def test_credentials_know_their_name_and_node_id(d1: SiteCredentials) -> None:
    assert d1.name == "d1"
    assert d1.node_id == node_id_of_certificate(d1.certificate_pem)
    assert "PRIVATE" not in repr(d1)


def test_credentials_refuse_a_key_of_another_certificate(
    d1: SiteCredentials, issue: Callable[..., SiteCredentials]
) -> None:
    other = issue("d2")
    with pytest.raises(DhtUsageError, match="does not match"):
        SiteCredentials(certificate_pem=d1.certificate_pem, private_key=other.private_key)


def test_a_signed_record_verifies(d1: SiteCredentials, verifier: CaRecordVerifier) -> None:
    record = record_of(d1)
    verifier.verify(record, now_ms=NOW_MS + 1000)
    assert not record.withdrawn
    assert record.live_at(NOW_MS) and not record.live_at(NOW_MS + HOUR_MS)


@pytest.mark.parametrize(
    "change",
    [
        {"address": "10.6.6.6:5001"},  # redirect traffic to the attacker
        {"block": "ProductionProcess"},  # claim a bigger block
        {"expires_at_ms": NOW_MS + 2 * HOUR_MS},  # live longer
        {"issued_at_ms": NOW_MS + 1},
    ],
)
def test_any_altered_field_breaks_the_signature(
    d1: SiteCredentials, verifier: CaRecordVerifier, change: dict[str, object]
) -> None:
    forged = replace(record_of(d1), **change)  # type: ignore[arg-type]
    with pytest.raises(RecordAuthenticationError, match="signature"):
        verifier.verify(forged, now_ms=NOW_MS)


def test_a_signed_record_for_a_block_the_certificate_does_not_authorise_is_refused(
    d1: SiteCredentials, verifier: CaRecordVerifier
) -> None:
    grab = record_of(d1, block="ProductionProcess")  # d1 may serve WorkOrder only
    with pytest.raises(RecordAuthenticationError, match="authorises only 'WorkOrder'"):
        verifier.verify(grab, now_ms=NOW_MS)


def test_a_record_for_another_site_cannot_be_made_with_own_certificate(
    issue: Callable[..., SiteCredentials], verifier: CaRecordVerifier
) -> None:
    mallory = issue("mallory")
    genuine = record_of(mallory)
    forged = replace(genuine, site="d1")  # claims to be d1, signed and certified as mallory
    with pytest.raises(RecordAuthenticationError, match="certificate of 'mallory'"):
        verifier.verify(forged, now_ms=NOW_MS)


def test_a_record_certified_by_another_ca_is_refused(
    issue: Callable[..., SiteCredentials], verifier: CaRecordVerifier
) -> None:
    rogue_ca = certs.create_ca("rogue CA", now=NOW)
    impostor = issue("d1", authority=rogue_ca)
    with pytest.raises(RecordAuthenticationError, match="not issued by the trusted CA"):
        verifier.verify(record_of(impostor), now_ms=NOW_MS)


def test_a_record_signed_by_a_non_site_is_refused(
    issue: Callable[..., SiteCredentials], verifier: CaRecordVerifier
) -> None:
    publisher = issue("production-dept", role="publisher")
    with pytest.raises(RecordAuthenticationError, match="role 'publisher'"):
        verifier.verify(record_of(publisher), now_ms=NOW_MS)


def test_expired_future_and_withdrawn_records(
    d1: SiteCredentials, verifier: CaRecordVerifier
) -> None:
    with pytest.raises(InvalidRecordError, match="expired"):
        verifier.verify(record_of(d1), now_ms=NOW_MS + HOUR_MS)
    with pytest.raises(InvalidRecordError, match="future"):
        verifier.verify(record_of(d1, at=NOW_MS + HOUR_MS), now_ms=NOW_MS)
    withdrawal = record_of(d1, ttl=0)
    assert withdrawal.withdrawn
    with pytest.raises(InvalidRecordError, match="withdrawal"):
        verifier.verify(withdrawal, now_ms=NOW_MS)
    verifier.verify(withdrawal, now_ms=NOW_MS, allow_withdrawal=True)


def test_a_record_after_its_certificate_expired_is_refused(
    d1: SiteCredentials, verifier: CaRecordVerifier
) -> None:
    late = NOW + timedelta(days=400)
    late_ms = int(late.timestamp() * 1000)
    with pytest.raises(RecordAuthenticationError, match="not valid at"):
        verifier.verify(record_of(d1, at=late_ms), now_ms=late_ms)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"site": ""}, "site"),
        ({"block": "x" * 300}, "block"),
        ({"address": "nowhere"}, "HOST:PORT"),
        ({"issued_at_ms": -1}, "non-negative"),
        ({"expires_at_ms": NOW_MS - 1}, "expire before"),
        ({"expires_at_ms": NOW_MS + MAX_TTL_MS + 1}, "at most"),
        ({"certificate_pem": b"x" * 9000}, "certificate"),
        ({"signature": b""}, "signature"),
    ],
)
def test_record_constructor_refuses_malformed_fields(
    d1: SiteCredentials, change: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        replace(record_of(d1), **change)  # type: ignore[arg-type]


def test_payload_is_unambiguous() -> None:
    a = record_payload(site="ab", address="c.d:1", block="e", issued_at_ms=1, expires_at_ms=2)
    b = record_payload(site="a", address="bc.d:1", block="e", issued_at_ms=1, expires_at_ms=2)
    assert a != b


def test_a_record_without_web_is_signed_as_before_web_existed(
    d1: SiteCredentials, verifier: CaRecordVerifier
) -> None:
    """Old records (no HTTPS endpoint) keep their payload, tag v1, byte for byte: sites that
    predate the field still verify; a record with one is signed under v2, WEB last."""
    old = record_of(d1)
    assert old.web == ""
    expected = (b"xdn-dht-site-record/v1\n" + b"".join(
        len(f).to_bytes(4, "big") + f
        for f in (b"d1", b"127.0.0.1:5001", b"WorkOrder", NOW_MS.to_bytes(8, "big"),
                  (NOW_MS + HOUR_MS).to_bytes(8, "big"))))
    assert old.payload() == expected
    verifier.verify(old, now_ms=NOW_MS)
    new = sign_site_record(d1, address="127.0.0.1:5001", block="WorkOrder",
                           issued_at_ms=NOW_MS, ttl_ms=HOUR_MS, web="127.0.0.1:8443")
    assert new.payload() == (b"xdn-dht-site-record/v2\n" + expected.partition(b"\n")[2]
                             + (14).to_bytes(4, "big") + b"127.0.0.1:8443")
    verifier.verify(new, now_ms=NOW_MS)
    for forged in (replace(new, web="10.6.6.6:8443"), replace(new, web=""),
                   replace(old, web="127.0.0.1:8443")):  # redirected, dropped, added
        with pytest.raises(RecordAuthenticationError, match="signature"):
            verifier.verify(forged, now_ms=NOW_MS)
    with pytest.raises(ValueError, match="HOST:PORT"):
        replace(new, web="nowhere")


def test_a_record_travels_as_json_and_still_verifies(
    d1: SiteCredentials, verifier: CaRecordVerifier
) -> None:
    import json

    record = sign_site_record(d1, address="127.0.0.1:5001", block="WorkOrder",
                              issued_at_ms=NOW_MS, ttl_ms=HOUR_MS, web="127.0.0.1:8443")
    again = SiteRecord.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record
    verifier.verify(again, now_ms=NOW_MS)
    good = record.to_json()
    for bad in ([], {**good, "extra": 1}, {k: v for k, v in good.items() if k != "web"},
                {**good, "signature": "not base64!"}, {**good, "issued_at_ms": "1"},
                {**good, "issued_at_ms": True}, {**good, "web": "nowhere"},
                {**good, "certificate_pem": "é"}):
        with pytest.raises(InvalidRecordError):
            SiteRecord.from_json(bad)


# ---- the store --------------------------------------------------------------------------------
KEY = NodeId(value=42)


def test_store_keeps_the_newest_record_per_site(d1: SiteCredentials) -> None:
    store = RecordStore()
    old, new = record_of(d1, at=NOW_MS), record_of(d1, at=NOW_MS + 1000)
    assert store.put(KEY, old, NOW_MS) is PutOutcome.STORED
    assert store.put(KEY, new, NOW_MS) is PutOutcome.REPLACED
    assert store.put(KEY, old, NOW_MS) is PutOutcome.STALE  # a replay cannot roll back
    assert store.get(KEY, NOW_MS + 2000) == (new,)


def test_a_withdrawal_hides_the_site_and_blocks_replays(d1: SiteCredentials) -> None:
    store = RecordStore()
    live = record_of(d1, at=NOW_MS)
    store.put(KEY, live, NOW_MS)
    assert store.put(KEY, record_of(d1, at=NOW_MS + 10, ttl=0), NOW_MS + 10) is PutOutcome.WITHDRAWN
    assert store.live(KEY, NOW_MS + 20) == ()
    (tombstone,) = store.get(KEY, NOW_MS + 20)  # handed out, so stale copies elsewhere lose
    assert tombstone.withdrawn and not tombstone.live_at(NOW_MS + 20)
    assert store.put(KEY, live, NOW_MS + 20) is PutOutcome.STALE
    store.expire(NOW_MS + 10 + MAX_TTL_MS)
    assert len(store) == 0


def test_expired_records_are_dropped(d1: SiteCredentials) -> None:
    store = RecordStore()
    store.put(KEY, record_of(d1), NOW_MS)
    assert store.expire(NOW_MS + HOUR_MS - 1) == 0
    assert store.expire(NOW_MS + HOUR_MS) == 1
    assert list(store.keys()) == []


def test_store_is_bounded(issue: Callable[..., SiteCredentials], d1: SiteCredentials) -> None:
    store = RecordStore(max_keys=1, max_records_per_key=1)
    store.put(KEY, record_of(d1), NOW_MS)
    with pytest.raises(StoreFullError, match="records for key"):
        store.put(KEY, record_of(issue("d9")), NOW_MS)
    with pytest.raises(StoreFullError, match="keys"):
        store.put(NodeId(value=7), record_of(d1), NOW_MS)
    store.put(NodeId(value=7), record_of(d1), NOW_MS + HOUR_MS)  # room again once expired


# ---- ping proofs ------------------------------------------------------------------------------
NONCE = bytes(range(32))


def test_ping_proof_names_the_node(d1: SiteCredentials, ca: tuple[bytes, bytes]) -> None:
    proof = make_ping_proof(d1, nonce=NONCE, address="127.0.0.1:5001")
    contact = verify_ping_proof(proof, nonce=NONCE, ca_pem=ca[0], at=NOW)
    assert contact.node_id == d1.node_id
    assert contact.address == "127.0.0.1:5001"


def test_ping_proof_for_another_nonce_or_address_is_refused(
    d1: SiteCredentials, ca: tuple[bytes, bytes]
) -> None:
    proof = make_ping_proof(d1, nonce=NONCE, address="127.0.0.1:5001")
    with pytest.raises(RecordAuthenticationError):
        verify_ping_proof(proof, nonce=bytes(32), ca_pem=ca[0], at=NOW)
    with pytest.raises(RecordAuthenticationError):
        verify_ping_proof(replace(proof, address="10.6.6.6:1"), nonce=NONCE, ca_pem=ca[0], at=NOW)


@pytest.mark.parametrize("size", [0, 15, 65])
def test_nonce_sizes_are_checked(size: int) -> None:
    with pytest.raises(ProtocolError, match="nonce"):
        check_nonce(bytes(size))


# ---- configuration ----------------------------------------------------------------------------
def test_config_defaults_follow_kademlia() -> None:
    config = DhtConfig()
    assert (config.k, config.alpha) == (20, 3)
    assert config.record_ttl_ms > config.republish_interval_ms


def test_config_from_a_toml_table() -> None:
    config = DhtConfig.from_mapping(
        {"bootstrap": ["127.0.0.1:5001"], "k": 8, "record_ttl_s": 120, "republish_interval_s": 60}
    )
    assert config.bootstrap == ("127.0.0.1:5001",)
    assert config.k == 8


@pytest.mark.parametrize(
    "table, message",
    [
        ({"bootstrap": "127.0.0.1:5001"}, "list"),
        ({"bootstrap": ["nowhere"]}, "HOST:PORT"),
        ({"k": 0}, "dht.k"),
        ({"alpha": "3"}, "dht.alpha"),
        ({"record_ttl_s": 60, "republish_interval_s": 60}, "shorter"),
        ({"record_ttl_s": 10 * 86400}, "at most"),
        ({"colour": "blue"}, "unknown key"),
        ({"advertise": 5}, "advertise"),
    ],
)
def test_config_errors_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        DhtConfig.from_mapping(table, source="d1.toml [dht]")


# ---- revocation and expiry of site certificates ----------------------------------------------
def test_records_and_ping_answers_of_a_revoked_or_expired_site_are_refused(
    d1: SiteCredentials, ca: tuple[bytes, bytes]
) -> None:
    revoked: set[int] = set()
    verifier = CaRecordVerifier(ca_pem=ca[0], revoked=lambda: frozenset(revoked))
    record = record_of(d1)
    proof = make_ping_proof(d1, nonce=NONCE, address="127.0.0.1:5001")
    verifier.verify(record, now_ms=NOW_MS)
    revoked.add(certs.credential_from_pem(d1.certificate_pem).serial)  # the CRL changes
    with pytest.raises(RecordAuthenticationError, match="revoked"):
        verifier.verify(record, now_ms=NOW_MS)
    with pytest.raises(RecordAuthenticationError, match="revoked"):
        verify_ping_proof(proof, nonce=NONCE, ca_pem=ca[0], at=NOW, revoked=frozenset(revoked))
    later = NOW + timedelta(days=366)  # past the certificate's validity
    with pytest.raises(RecordAuthenticationError, match="not valid at"):
        verify_ping_proof(proof, nonce=NONCE, ca_pem=ca[0], at=later)


def test_a_store_drops_records_on_demand(d1: SiteCredentials) -> None:
    store = RecordStore()
    store.put(NodeId(value=1), record_of(d1), NOW_MS)
    store.put(NodeId(value=2), record_of(d1), NOW_MS)
    assert store.drop_where(lambda r: r.site == "nobody") == 0
    assert store.drop_where(lambda r: r.site == "d1") == 2
    assert len(store) == 0 and not list(store.keys())
