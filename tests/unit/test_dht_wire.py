"""The Dht wire contract: protobuf conversion, malformed input, status codes, public API."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import grpc
import pytest
from hypothesis import given
from hypothesis import strategies as st

import disseminator.dht as dht
from disseminator.dht import (
    Contact,
    DhtProtocolError,
    InvalidRecordError,
    NodeId,
    RecordAuthenticationError,
    SiteCredentials,
    StoreFullError,
    ValueReply,
    sign_site_record,
    status_for,
)
from disseminator.dht import _convert as convert
from xdn import certs
from xdn.errors import CertificateError, ConfigError, ProtocolError
from xdn.wire.v1 import dht_pb2 as pb

NOW = datetime(2026, 1, 1, tzinfo=UTC)

ids = st.integers(min_value=0, max_value=(1 << 256) - 1).map(lambda v: NodeId(value=v))
hosts = st.from_regex(r"[a-z][a-z0-9.-]{0,30}", fullmatch=True)
addresses = st.builds(lambda h, p: f"{h}:{p}", hosts, st.integers(min_value=1, max_value=65535))
contacts = st.builds(lambda i, a: Contact(node_id=i, address=a), ids, addresses)


@pytest.fixture(scope="module")
def creds() -> SiteCredentials:
    ca, ca_key = certs.create_ca("ca", now=NOW)
    cert, key = certs.issue(
        ca, ca_key, name="d1", role="site", attributes={certs.BLOCK_FIELD: "WorkOrder"},
        hosts=["127.0.0.1"], now=NOW,
    )
    return SiteCredentials.from_pem(cert, key)


@given(contacts)
def test_contact_round_trip(contact: Contact) -> None:
    wire = pb.DhtContact.FromString(convert.contact_to_pb(contact).SerializeToString())
    assert convert.contact_from_pb(wire) == contact


@given(st.lists(contacts, max_size=20))
def test_find_node_reply_round_trip(items: list[Contact]) -> None:
    wire = pb.DhtFindNodeResponse.FromString(convert.contacts_to_pb(items).SerializeToString())
    assert convert.contacts_from_pb(wire.contacts) == tuple(items)


def test_value_reply_round_trip(creds: SiteCredentials) -> None:
    record = sign_site_record(
        creds, address="127.0.0.1:5001", block="WorkOrder", issued_at_ms=10**12, ttl_ms=60_000
    )
    reply = ValueReply(
        records=(record,), contacts=(Contact(node_id=NodeId(value=9), address="a:1"),)
    )
    wire = pb.DhtFindValueResponse.FromString(convert.value_reply_to_pb(reply).SerializeToString())
    assert convert.value_reply_from_pb(wire) == reply


@pytest.mark.parametrize("raw", [b"", b"\x01" * 31, b"\x01" * 64])
def test_ids_of_the_wrong_length_are_refused(raw: bytes) -> None:
    with pytest.raises(DhtProtocolError, match="target: node id must be 32 bytes"):
        convert.node_id_from_pb(raw, "target")


def test_malformed_contacts_and_too_many_of_them_are_refused() -> None:
    with pytest.raises(DhtProtocolError, match="contact"):
        convert.contact_from_pb(pb.DhtContact(node_id=bytes(32), address="no-port"))
    many = [pb.DhtContact(node_id=bytes(32), address="a:1")] * (convert.MAX_CONTACTS + 1)
    with pytest.raises(DhtProtocolError, match="more than"):
        convert.contacts_from_pb(many)


def test_malformed_records_are_refused(creds: SiteCredentials) -> None:
    with pytest.raises(InvalidRecordError, match="malformed site record"):
        convert.record_from_pb(pb.DhtSiteRecord(site="d1", address="x:1", block="WorkOrder"))
    record = sign_site_record(
        creds, address="127.0.0.1:5001", block="WorkOrder", issued_at_ms=1, ttl_ms=1
    )
    message = convert.record_to_pb(record)
    message.certificate_pem = b"x" * 100_000  # oversized
    with pytest.raises(InvalidRecordError, match="certificate"):
        convert.record_from_pb(message)


def test_a_record_with_its_web_endpoint_round_trips(creds: SiteCredentials) -> None:
    record = sign_site_record(creds, address="127.0.0.1:5001", block="WorkOrder",
                              issued_at_ms=1, ttl_ms=1, web="127.0.0.1:8443")
    wire = pb.DhtSiteRecord.FromString(convert.record_to_pb(record).SerializeToString())
    assert wire.web == "127.0.0.1:8443"
    assert convert.record_from_pb(wire) == record
    old = replace(record, web="")  # a record of a site that predates the field: no field 8
    assert convert.record_from_pb(convert.record_to_pb(old)).web == ""


def test_a_malformed_record_in_a_reply_is_skipped_not_fatal() -> None:
    reply = pb.DhtFindValueResponse(records=[pb.DhtSiteRecord(site="x")])
    assert convert.value_reply_from_pb(reply).records == ()


def test_sender_address() -> None:
    assert convert.sender_address_from_pb("") is None
    assert convert.sender_address_from_pb("127.0.0.1:9") == "127.0.0.1:9"
    with pytest.raises(DhtProtocolError, match="sender_address"):
        convert.sender_address_from_pb("nonsense")


@pytest.mark.parametrize(
    "error, code",
    [
        (DhtProtocolError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (InvalidRecordError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (ProtocolError("x"), grpc.StatusCode.INVALID_ARGUMENT),
        (RecordAuthenticationError("x"), grpc.StatusCode.UNAUTHENTICATED),
        (CertificateError("x"), grpc.StatusCode.UNAUTHENTICATED),
        (StoreFullError("x"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (dht.DhtUsageError("x"), grpc.StatusCode.FAILED_PRECONDITION),
        (ConfigError("x"), grpc.StatusCode.FAILED_PRECONDITION),
    ],
)
def test_status_codes(error: Exception, code: grpc.StatusCode) -> None:
    assert status_for(error) is code  # type: ignore[arg-type]


def test_service_name() -> None:
    assert dht.DHT_SERVICE_NAME == "xdn.wire.v1.Dht"


def test_public_api_is_pinned() -> None:
    assert sorted(dht.__all__) == sorted(
        [
            "DHT_SERVICE_NAME",
            "BootstrapError",
            "BucketInfo",
            "CaRecordVerifier",
            "CandidateState",
            "Clock",
            "Contact",
            "DhtConfig",
            "DhtNode",
            "DhtProtocolError",
            "DhtServicer",
            "DhtUsageError",
            "GrpcTransport",
            "InvalidRecordError",
            "KademliaNode",
            "Lookup",
            "LookupEvent",
            "LookupResult",
            "LookupStateError",
            "MemoryArchive",
            "NodeId",
            "Observation",
            "Outcome",
            "PeerRefusedError",
            "PeerUnavailableError",
            "PingProof",
            "PutOutcome",
            "RecordArchive",
            "RecordAuthenticationError",
            "RecordStore",
            "RecordVerifier",
            "RoutingTable",
            "SiteCredentials",
            "SiteRecord",
            "StoreFullError",
            "Transport",
            "ValueReply",
            "add_dht_to_server",
            "choose_uplink",
            "create_grpc_node",
            "is_fallback",
            "key_for_concept",
            "key_for_site",
            "make_ping_proof",
            "node_id_of_certificate",
            "recheck_uplink",
            "record_payload",
            "serving_keys",
            "serving_sites",
            "sign_site_record",
            "sites_within",
            "status_for",
            "uplink_candidates",
            "verify_ping_proof",
        ]
    )
    for name in dht.__all__:
        assert getattr(dht, name) is not None
    from disseminator.dht import testing

    assert sorted(testing.__all__) == [
        "FakeClock", "MemoryArchive", "MemoryNetwork", "MemoryTransport",
    ]
