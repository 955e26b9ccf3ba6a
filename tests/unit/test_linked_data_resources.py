"""The site's own resources: the root (node description, public key, inbox) and the inbox."""

from __future__ import annotations

from datetime import UTC, datetime

import pyoxigraph as ox
import pytest

from tests.unit.chain_fixtures import issue_site
from xdn import certs, crypto, provenance, rdf
from xdn import linked_data as ld

NODE = certs.node_uri("d1")


def test_root_description_holds_the_certificate_graph_the_inbox_and_the_key() -> None:
    now = datetime.now(UTC)
    ca = certs.create_ca("ca", now=now)
    cert_pem, key_pem = issue_site(ca, "d1", now=now)
    dataset = ld.root_description(NODE, cert_pem)
    named = [q for q in dataset if not isinstance(q.graph_name, ox.DefaultGraph)]
    written = ld.serialise(tuple(named), ld.N_QUADS, title=NODE, local_prefix=NODE)
    # the certificate graph reads back as the provenance log's node description
    assert provenance.read_node_description(NODE + "#cert", rdf.parse_nquads(written)) == (
        NODE, cert_pem,
    )
    default = {(str(q.predicate), q.object) for q in dataset if q not in named}
    assert (f"<{ld.LDP_INBOX}>", ox.NamedNode(NODE + "inbox/")) in default
    pem = next(o.value for p, o in default if p == f"<{ld.SEC_PUBLIC_KEY_PEM}>")
    key = crypto.load_private_key_pem(key_pem)
    assert crypto.public_key_to_pem(key.public_key()).decode() == pem


def test_inbox_listing_is_a_basic_container_containing_each_notification() -> None:
    inbox = ld.inbox_uri(NODE)
    listing = ld.inbox_listing(inbox, [ld.notification_uri(NODE, "a"), inbox + "b"])
    types = {str(q.object) for q in listing if q.predicate.value.endswith("#type")}
    assert types == {f"<{ld.LDP}Container>", f"<{ld.LDP}BasicContainer>"}
    contains = [q.object.value for q in listing if q.predicate.value == ld.LDP + "contains"]
    assert contains == [inbox + "a", inbox + "b"]
    assert {q.subject.value for q in listing} == {inbox}
    assert ld.inbox_listing(inbox, []) and len(ld.inbox_listing(inbox, [])) == 2


@pytest.mark.parametrize("text", ["", "a/b", "..", "a b", "x" * 65, "é"])
def test_notification_ids_are_plain_segments(text: str) -> None:
    assert not ld.is_notification_id(text)
    with pytest.raises(ValueError, match="not a notification id"):
        ld.notification_uri(NODE, text)


def test_public_api_is_pinned() -> None:
    assert set(ld.__all__) == {
        "ACCEPTED_POST_TYPES", "AUDITOR_ROLE", "BUNDLED_CONTEXTS", "HTML", "IANA_RELATION",
        "InboxPage", "InvalidRequest", "JSON_LD", "LDP", "LDP_INBOX", "page_cursor",
        "parse_links", "ADDRESSING", "chain_readers", "is_node_uri", "notification_readers",
        "party", "reads_every_notification",
        "N_QUADS", "SEC_PUBLIC_KEY_PEM", "TRIG", "TURTLE", "Dataset", "InvalidNotification",
        "MediaRange", "NotAcceptable", "Notification", "NotificationLimits", "PayloadTooLarge",
        "UnsupportedMediaType", "accepted_media_type", "bundled_context", "choose",
        "content_type", "from_nquads", "from_terms", "inbox_listing", "inbox_uri",
        "inline_contexts", "is_notification_id", "is_receipt", "is_refusal", "may_read",
        "message_readers",
        "message_uri_of_path", "notification_uri", "offers", "parse_accept",
        "parse_content_type", "parse_notification", "root_description", "serialise",
    }
    for name in ld.__all__:
        assert hasattr(ld, name), name


@pytest.mark.parametrize("iri, node", [
    ("https://alice.xdn.example/", True),
    ("https://d2.xdn.example/", True),
    ("https://alice.xdn.example/inbox/", False),
    ("http://alice.xdn.example/", False),
    ("https://xdn.example/", False),
    ("https://a/b.xdn.example/", False),
    ("https://alice.xdn.example", False),
    ("https://example.org/alice", False),
])
def test_only_node_uris_of_the_network_name_readers(iri: str, node: bool) -> None:
    assert ld.is_node_uri(iri) is node
