"""Idempotent publishing (issue 18, findings 2 and 4), without sockets: the root's memory of
publish ids (newest version only, durable across a restart, bounded by the routed window's
retention) and the publisher's side (publish ids, its secret, its attempts, the check of what a
site says it routed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from disseminator.publications import Publication
from disseminator.store import Store, Window
from publisher.idempotence import own_message, publish_id
from publisher.keystore import KeyStore
from tests.unit.receipt_fixtures import make_pki
from xdn import certs, crypto, provenance
from xdn.errors import ProtocolError
from xdn.publication import PublishedBefore, Reach, describe_reach
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import published_before_to_pb, reach_from_pb

DAY_MS = 86_400_000
ID_A, ID_B = b"a" * 32, b"b" * 32


def _route(
    store: Store, document: str, version: int, publish_id: bytes, *, at_ms: int = 0,
    publisher: str = "p",
) -> None:
    store.commit_routing(
        document=(publisher, document, version), appends=[], sequence=version, at_ms=at_ms,
        publication=Publication(
            publisher=publisher, document=document, publish_id=publish_id, version=version,
            sequence=version, provenance=b"<m> <p> <o> .\n",
        ),
    )


def test_a_publication_routed_as_the_newest_version_is_answered_with_what_was_routed() -> None:
    store = Store(":memory:")
    _route(store, "doc", 1, ID_A)
    assert store.publications.routed_before("p", "doc", ID_A) == PublishedBefore(
        version=1, sequence=1, provenance=b"<m> <p> <o> .\n"
    )
    assert store.publications.routed_before("p", "doc", ID_B) is None  # other content
    assert store.publications.routed_before("p", "other", ID_A) is None  # other document
    assert store.publications.routed_before("q", "doc", ID_A) is None  # other publisher
    assert store.publications.routed_before("p", "doc", b"") is None  # no id: never a retry


def test_only_the_newest_version_counts_a_revert_is_a_new_version() -> None:
    store = Store(":memory:")
    _route(store, "doc", 1, ID_A)
    _route(store, "doc", 2, ID_B)
    assert store.publications.routed_before("p", "doc", ID_A) is None  # v1's content again
    assert store.publications.routed_before("p", "doc", ID_B) is not None
    _route(store, "doc", 1, ID_A)  # an older version never replaces a newer one
    assert store.publications.routed_before("p", "doc", ID_B) is not None
    _route(store, "doc", 3, b"")  # routed without an id (an older publisher): matches nothing
    assert store.publications.routed_before("p", "doc", ID_B) is None
    assert store.publications.entries() == 1  # one row per document


def test_publish_ids_survive_a_restart_and_are_forgotten_after_the_retention(
    tmp_path: Path,
) -> None:
    path = tmp_path / "site.sqlite"
    store = Store(path, routed_window=Window(retention_days=7))
    _route(store, "old", 1, ID_A, at_ms=0)
    _route(store, "new", 1, ID_B, at_ms=6 * DAY_MS)
    store.close()
    store = Store(path, routed_window=Window(retention_days=7))  # the site restarted
    assert store.publications.routed_before("p", "old", ID_A) is not None
    store.prune_routed(7 * DAY_MS - 1)  # within the retention: kept
    assert store.publications.routed_before("p", "old", ID_A) is not None
    store.prune_routed(7 * DAY_MS + 1)
    assert store.publications.routed_before("p", "old", ID_A) is None
    assert store.publications.routed_before("p", "new", ID_B) is not None
    store.close()


def test_a_site_stores_no_oversized_publish_id() -> None:
    with pytest.raises(ValueError, match="at most 64 bytes"):
        Publication(
            publisher="p", document="d", publish_id=b"x" * 65, version=1, sequence=1,
            provenance=b"",
        )


def test_the_ack_carries_what_was_routed_before_and_the_output_says_so() -> None:
    before = PublishedBefore(version=3, sequence=9, provenance=b"nq")
    ack = pb.PublishAck(published_before=published_before_to_pb(before))
    reach = reach_from_pb(ack)
    assert reach == Reach(before=before)
    assert describe_reach(reach, "d1") == (
        "d1 had routed this content as v3 already; nothing new was queued"
    )
    assert reach_from_pb(pb.PublishAck()).before is None  # an older site: no such answer
    with pytest.raises(ProtocolError, match="names no version"):
        reach_from_pb(pb.PublishAck(published_before=pb.PublishedBefore(version=0)))


def test_a_publish_id_names_document_and_content_under_the_publishers_secret(
    tmp_path: Path,
) -> None:
    document = tmp_path / "doc.xml"
    document.write_bytes(b"<a>1</a>")
    secret = b"s" * 32
    first = publish_id(secret, "doc", document)
    assert len(first) == 32 and publish_id(secret, "doc", document) == first
    assert publish_id(secret, "other", document) != first
    assert publish_id(b"t" * 32, "doc", document) != first  # a site cannot recompute it
    document.write_bytes(b"<a>2</a>")
    assert publish_id(secret, "doc", document) != first


def test_the_publishers_secret_and_attempts_are_kept_until_a_version_is_committed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "keys.sqlite"
    keys = KeyStore(path, publisher="p", retain=5)
    secret = keys.publish_secret()
    key = ("Concept", 2, "name", b"k" * 32)
    keys.record_attempt("doc", 1, [key], sequence=4)
    keys.close()
    keys = KeyStore(path, publisher="p", retain=5)  # the publisher ran again
    assert keys.publish_secret() == secret and len(secret) == 32
    assert keys.attempt("doc", sequence=4) == (1, [key])
    assert keys.attempt("doc", sequence=5) is None
    keys.commit("doc", 1, [key], sequence=4, concepts=["Concept"])
    assert keys.attempt("doc", sequence=4) is None  # committed: the attempt is gone
    keys.close()


def test_a_version_attempted_and_not_recorded_is_never_given_to_other_content(
    tmp_path: Path,
) -> None:
    keys = KeyStore(tmp_path / "keys.sqlite", publisher="p")
    key = ("Concept", 1, "name", b"k" * 32)
    keys.commit("doc", 1, [key], sequence=1, concepts=["Concept"])
    keys.record_attempt("doc", 2, [key], sequence=2)  # the root may have routed v2, seq 2
    assert keys.next_version("doc") == 2 and keys.attempted_version("doc") == 2
    assert keys.attempted_version("other") == 0
    keys.record_attempt("doc", 3, [key], sequence=3)  # the next run's attempt: v3
    keys.drop_attempt("doc", sequence=3)  # the root answered: it routed v2 (published before)
    assert keys.attempted_version("doc") == 2
    keys.commit("doc", 2, [key], sequence=2, concepts=["Concept"])
    assert keys.attempted_version("doc") == 0 and keys.next_version("doc") == 3
    keys.close()


def test_a_site_must_answer_with_our_own_message_for_the_version_it_names() -> None:
    pki = make_pki()
    signer = pki.signer("production-dept")
    node = signer.node_uri
    message = provenance.originate(
        signer, message_uri=provenance.message_uri(node, "doc", "v2"),
        previous_message=None, recipient_uri="https://d1.xdn.example/",
        content=provenance.ContentFacts(
            document_id="doc", publisher="production-dept", manifest_root=b"\x01" * 32,
            leaf_count=1,
        ),
        timestamp_ms=1,
    )
    public_key = certs.public_key_of(pki.parties["production-dept"][0])
    good = PublishedBefore(version=2, sequence=1, provenance=message.to_nquads())
    checked = own_message(good, node_uri=node, public_key=public_key, document_id="doc")
    assert checked.uri == message.uri
    other_version = PublishedBefore(version=3, sequence=1, provenance=message.to_nquads())
    with pytest.raises(ProtocolError, match="does not hold"):
        own_message(other_version, node_uri=node, public_key=public_key, document_id="doc")
    someone_else = crypto.generate_private_key("P-384").public_key()
    with pytest.raises(ProtocolError, match="does not hold"):
        own_message(good, node_uri=node, public_key=someone_else, document_id="doc")
    with pytest.raises(ProtocolError, match="does not hold"):
        own_message(
            PublishedBefore(version=2, provenance=b"not n-quads"), node_uri=node,
            public_key=public_key, document_id="doc",
        )
