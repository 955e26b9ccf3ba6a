"""A receipt split at the message a site minted, and joined again byte for byte."""

from __future__ import annotations

import hashlib

import pytest

from disseminator.receipt_refs import after_message, rejoin
from tests.unit.receipt_fixtures import Pki, make_pki, published, receipted, relay
from xdn import provenance


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


def test_split_at_each_sites_message_and_rejoined_is_the_receipt(pki: Pki) -> None:
    to_d2 = relay(pki, published(pki), "d1", "d2")
    to_alice = relay(pki, to_d2, "d2", "alice")
    receipt = receipted(pki, to_alice, "alice")
    data = receipt.to_nquads()
    digest = hashlib.sha256(data).hexdigest()
    for kept in (to_d2, to_alice):  # d1's message, d2's
        rest = after_message(receipt, kept.uri)
        assert not set(kept.to_nquads().splitlines()) & set(rest.splitlines())
        assert rejoin(kept.to_nquads(), rest, digest) == data
    assert after_message(receipt, to_alice.uri) == receipt.latest_graphs_nquads()


def test_what_does_not_rejoin_into_the_receipt_is_none(pki: Pki) -> None:
    to_d2 = relay(pki, published(pki), "d1", "d2")
    receipt = receipted(pki, relay(pki, to_d2, "d2", "alice"), "alice")
    data = receipt.to_nquads()
    digest = hashlib.sha256(data).hexdigest()
    rest = after_message(receipt, to_d2.uri)
    other = relay(pki, published(pki), "d1", "d2")  # the same hop, signed again
    assert rejoin(other.to_nquads(), rest, digest) is None
    assert rejoin(b"not n-quads", rest, digest) is None
    assert rejoin(to_d2.to_nquads(), rest, "00" * 32) is None


def test_a_message_the_receipt_does_not_wrap_is_a_usage_error(pki: Pki) -> None:
    receipt = receipted(pki, relay(pki, published(pki), "d1", "alice"), "alice")
    with pytest.raises(ValueError, match="wraps no message"):
        after_message(receipt, provenance.message_uri("https://d9.xdn.example/", "x", "v1"))
