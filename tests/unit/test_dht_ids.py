"""DHT identifiers: 256-bit ids, the XOR metric, concept keys, certificate-derived node ids."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

import pytest
from cryptography import x509
from hypothesis import given
from hypothesis import strategies as st

from disseminator.dht import Contact, NodeId, key_for_concept, node_id_of_certificate
from disseminator.dht._ids import ID_BYTES, check_address
from xdn import certs
from xdn.crypto import DER

ids = st.integers(min_value=0, max_value=(1 << 256) - 1).map(lambda v: NodeId(value=v))


@given(ids, ids)
def test_xor_distance_is_symmetric_and_zero_only_to_itself(a: NodeId, b: NodeId) -> None:
    assert a.distance(b) == b.distance(a)
    assert a.distance(a) == 0
    assert (a.distance(b) == 0) == (a == b)


@given(ids, ids, ids)
def test_xor_distance_satisfies_the_triangle_inequality(a: NodeId, b: NodeId, c: NodeId) -> None:
    assert a.distance(c) <= a.distance(b) + b.distance(c)


@given(ids, st.integers(min_value=0, max_value=(1 << 256) - 1))
def test_xor_distance_is_unidirectional(a: NodeId, d: int) -> None:
    """Exactly one point lies at each distance from a given point (Kademlia §2.1)."""
    (b,) = [NodeId(value=a.value ^ d)]
    assert a.distance(b) == d


@given(ids)
def test_node_id_bytes_round_trip(a: NodeId) -> None:
    raw = a.to_bytes()
    assert len(raw) == ID_BYTES
    assert NodeId.from_bytes(raw) == a
    assert len(a.hex()) == 64


@pytest.mark.parametrize("raw", [b"", b"\x00" * 31, b"\x00" * 33])
def test_node_id_refuses_other_lengths(raw: bytes) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        NodeId.from_bytes(raw)


@pytest.mark.parametrize("value", [-1, 1 << 256])
def test_node_id_refuses_values_outside_the_space(value: int) -> None:
    with pytest.raises(ValueError):
        NodeId(value=value)


def test_node_id_refuses_non_integers() -> None:
    with pytest.raises(TypeError):
        NodeId(value=True)
    with pytest.raises(TypeError):
        NodeId(value="1")  # type: ignore[arg-type]


def test_key_of_a_concept_is_sha256_of_its_id() -> None:
    expected = int.from_bytes(hashlib.sha256(b"WorkOrder").digest(), "big")
    assert key_for_concept("WorkOrder") == NodeId(value=expected)
    assert key_for_concept("WorkOrder") != key_for_concept("Production")
    with pytest.raises(ValueError):
        key_for_concept("")


def test_node_id_is_sha256_of_the_certificate_der() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    ca, ca_key = certs.create_ca("ca", now=now)
    cert, _ = certs.issue(
        ca, ca_key, name="d1", role="site", attributes={certs.BLOCK_FIELD: "WorkOrder"},
        hosts=["127.0.0.1"], now=now,
    )
    der = x509.load_pem_x509_certificate(cert).public_bytes(DER)
    assert node_id_of_certificate(cert) == NodeId.from_bytes(hashlib.sha256(der).digest())


@pytest.mark.parametrize("address", ["127.0.0.1:5000", "d1.example.org:443", "[::1]:50051"])
def test_addresses_accepted(address: str) -> None:
    assert check_address(address) == address
    assert Contact(node_id=NodeId(value=1), address=address).address == address


@pytest.mark.parametrize(
    "address", ["", "host", ":5000", "host:", "host:0", "host:70000", "host:port", "a b:1", "x/y:1"]
)
def test_addresses_refused(address: str) -> None:
    with pytest.raises(ValueError):
        check_address(address)
