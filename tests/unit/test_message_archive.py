"""Messages a site minted: kept with the chain they extend, joined back, pruned, authorised."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from disseminator.messages import hop_of
from disseminator.store import Store
from tests.unit.chain_fixtures import issue_site, signer_of
from xdn import certs, provenance
from xdn import linked_data as ld

NOW = datetime.now(UTC)
D1 = certs.node_uri("d1")


def chain_and_hop() -> tuple[provenance.Message, provenance.Message]:
    """A publication by production-dept to d1, and d1's hop relaying it to alice."""
    ca = certs.create_ca("ca", now=NOW)
    publisher = signer_of("production-dept", certs.issue(
        *ca, name="production-dept", role="publisher", now=NOW))
    site = signer_of("d1", issue_site(ca, "d1", now=NOW))
    published = provenance.originate(
        publisher,
        message_uri=provenance.message_uri(publisher.node_uri, "order 1", "v1"),
        recipient_uri=D1,
        content=provenance.ContentFacts(
            document_id="order 1", publisher="production-dept", manifest_root=b"\x01" * 32,
            leaf_count=4,
        ),
        timestamp_ms=1_000,
    )
    hop = provenance.relay(
        published, site, message_uri=provenance.message_uri(D1, "order 1", "v1", "to-alice"),
        recipient_uri=certs.node_uri("alice"), leaves=provenance.LeafRanges.of([(0, 4)]),
        timestamp_ms=2_000,
    )
    return published, hop


@pytest.fixture(scope="module")
def messages() -> tuple[provenance.Message, provenance.Message]:
    return chain_and_hop()


def route_and_flush(
    store: Store, log: Path, published: provenance.Message, hop: provenance.Message,
    *, at_ms: int = 5_000,
) -> None:
    """Route a document with ``hop`` as a site does, then flush its outbox to ``log``."""
    store.commit_routing(
        document=("production-dept", "order 1", 1), appends=[],
        log_graphs=[hop.latest_graphs_nquads()], at_ms=at_ms,
        chain=(published.uri, published.to_nquads()),
    )
    staged = store.take_log_outbox()
    blobs = [data for _, data in staged]
    with log.open("ab") as out:
        offset = out.tell()
        out.write(b"".join(blobs))
    store.clear_log_outbox([i for i, _ in staged], logged=(offset, blobs), at_ms=at_ms)


def test_a_hop_is_indexed_in_the_log_and_kept_with_its_chain(
    messages: tuple[provenance.Message, provenance.Message], tmp_path: Path,
) -> None:
    published, hop = messages
    log = tmp_path / "d1.nq"
    log.write_bytes(b"# the node description comes first\n")
    store = Store(":memory:", messages_of=D1)
    assert store.messages is not None
    route_and_flush(store, log, published, hop)
    kept = store.messages.find(hop.uri)
    assert kept is not None and kept.chain == published.to_nquads()
    with log.open("rb") as f:
        f.seek(kept.log_offset)
        graphs = f.read(kept.log_length)
    assert graphs == hop.latest_graphs_nquads()
    assert hop_of(graphs) == (hop.uri, published.uri)
    assert provenance.Message.from_nquads(kept.chain + graphs) == hop
    assert hop.uri == D1 + "msg/order%201/v1/to-alice"
    assert store.messages.find(published.uri) is None  # not minted here
    assert store.messages.keeps(hop.uri) and not store.messages.keeps(published.uri)
    # pruned with the routed window: gone once older than the cut
    assert store.messages.prune(5_000) == 0
    assert store.messages.prune(5_001) == 2
    assert store.messages.find(hop.uri) is None and not store.messages.keeps(hop.uri)


def test_a_hop_is_kept_once_flushed_to_the_log(
    messages: tuple[provenance.Message, provenance.Message],
) -> None:
    published, hop = messages
    store = Store(":memory:", messages_of=D1)
    assert store.messages is not None
    store.commit_routing(
        document=("production-dept", "order 1", 1), appends=[],
        log_graphs=[hop.latest_graphs_nquads()], at_ms=5_000,
        chain=(published.uri, published.to_nquads()),
    )
    assert not store.messages.keeps(hop.uri)  # staged, not yet in the log: not indexed


def test_without_messages_of_nothing_is_kept(
    messages: tuple[provenance.Message, provenance.Message], tmp_path: Path,
) -> None:
    published, hop = messages
    store = Store(":memory:")
    assert store.messages is None
    route_and_flush(store, tmp_path / "d1.nq", published, hop)


def test_hops_outside_the_sites_msg_space_are_not_kept(
    messages: tuple[provenance.Message, provenance.Message], tmp_path: Path,
) -> None:
    published, hop = messages
    store = Store(":memory:", messages_of=certs.node_uri("d2"))
    assert store.messages is not None
    route_and_flush(store, tmp_path / "d1.nq", published, hop)
    assert store.messages.find(hop.uri) is None


@pytest.mark.parametrize(
    "graphs", [b"", b"garbage", b"<a> <b> <c> <d> .\n", b"<a> <b> <c> .\n"]
)
def test_hop_of_anything_else_is_none(graphs: bytes) -> None:
    assert hop_of(graphs) is None


def _credential(name: str, role: str) -> certs.Credential:
    ca = certs.create_ca("ca", now=NOW)
    attributes = {certs.BLOCK_FIELD: "ProductionProcess"} if role == "site" else None
    cert, _ = certs.issue(*ca, name=name, role=role, attributes=attributes, now=NOW)
    return certs.credential_from_pem(cert)


@pytest.mark.parametrize(
    ("name", "role", "allowed"),
    [
        ("production-dept", "publisher", True),  # its publisher
        ("d1", "site", True),  # a site on its path
        ("alice", "subscriber", True),  # its recipient
        ("eve", "auditor", True),  # an auditor
        ("bob", "subscriber", False),
        ("d2", "site", False),
        ("qa-company", "publisher", False),
    ],
)
def test_who_may_read_a_message(
    messages: tuple[provenance.Message, provenance.Message], name: str, role: str,
    allowed: bool,
) -> None:
    _, hop = messages
    assert ld.may_read(hop, _credential(name, role)) is allowed
    assert ld.message_readers(hop) == {
        certs.node_uri(n) for n in ("production-dept", "d1", "alice")
    }


@pytest.mark.parametrize(
    ("path", "uri"),
    [
        ("/msg/order%201/v1/to-alice", D1 + "msg/order%201/v1/to-alice"),
        ("/msg/", D1 + "msg/"),
        ("/inbox/x", None),
        ("/msg/a b", None),
        ("/msg/%zz", None),
        ("/msg/" + "a" * 3000, None),
    ],
)
def test_message_uri_of_path(path: str, uri: str | None) -> None:
    assert ld.message_uri_of_path(D1, path) == uri
