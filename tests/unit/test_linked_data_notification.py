"""Reading a notification: media type, byte limit, RDF, constraints, JSON-LD contexts."""

from __future__ import annotations

import json

import pyoxigraph as ox
import pytest

from xdn import linked_data as ld

URI = "https://d1.xdn.example/inbox/n1"
AS = "https://www.w3.org/ns/activitystreams#"
LIMITS = ld.NotificationLimits()


def _parse(body: bytes | str, content_type: str | None = ld.JSON_LD,
           limits: ld.NotificationLimits = LIMITS) -> ld.Notification:
    data = body.encode() if isinstance(body, str) else body
    return ld.parse_notification(data, content_type, uri=URI, limits=limits)


def _triples(n: ld.Notification) -> set[tuple[str, str, str]]:
    return {(str(q.subject), str(q.predicate), str(q.object)) for q in n.dataset}


def test_json_ld_with_the_activitystreams_context_and_a_relative_id() -> None:
    n = _parse(json.dumps({
        "@context": "https://www.w3.org/ns/activitystreams",
        "@id": "", "type": "Announce", "actor": "https://alice.xdn.example/",
        "object": "https://d2.xdn.example/msg/order-1/v1", "published": "2026-01-01T00:00:00Z",
    }))
    assert n.uri == URI and n.media_type == ld.JSON_LD
    assert _triples(n) == {
        (f"<{URI}>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{AS}Announce>"),
        (f"<{URI}>", f"<{AS}actor>", "<https://alice.xdn.example/>"),
        (f"<{URI}>", f"<{AS}object>", "<https://d2.xdn.example/msg/order-1/v1>"),
        (f"<{URI}>", f"<{AS}published>",
         '"2026-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>'),
    }
    assert b"inbox/n1" in n.nquads


@pytest.mark.parametrize(
    "context",
    [
        "http://www.w3.org/ns/activitystreams",
        ["https://www.w3.org/ns/activitystreams", {"ex": "https://ex.example/"}],
        {"@import": "https://www.w3.org/ns/activitystreams"},
    ],
)
def test_bundled_contexts_by_any_route(context: object) -> None:
    n = _parse(json.dumps({"@context": context, "@id": "", "type": "Offer"}))
    assert {t[2] for t in _triples(n)} == {f"<{AS}Offer>"}


def test_inline_and_scoped_contexts() -> None:
    n = _parse(json.dumps({
        "@context": {"ex": "https://ex.example/", "about": {
            "@id": "ex:about", "@context": "https://www.w3.org/ns/activitystreams"}},
        "@id": "", "about": {"@id": "https://x.example/", "type": "Note"},
    }))
    assert ("<https://x.example/>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>",
            f"<{AS}Note>") in _triples(n)


@pytest.mark.parametrize(
    "document",
    [
        {"@context": "https://evil.example/context.jsonld", "@id": ""},
        {"@context": {"@import": "https://evil.example/context.jsonld"}, "@id": ""},
        {"@context": {"ex": "https://ex.example/"}, "ex:p": {
            "@context": "https://evil.example/context.jsonld", "@id": "https://a.example/"}},
        {"@context": ["https://www.w3.org/ns/activitystreams",
                      "https://evil.example/context.jsonld"], "@id": ""},
    ],
)
def test_a_remote_context_not_bundled_is_refused_by_name(document: object) -> None:
    with pytest.raises(ld.InvalidNotification, match=r"https://evil\.example/context\.jsonld"):
        _parse(json.dumps(document))


def test_json_literals_are_not_rewritten() -> None:
    n = _parse(json.dumps({
        "@context": {"data": {"@id": "https://ex.example/data", "@type": "@json"}},
        "@id": "", "data": {"@value": {"@context": "https://evil.example/"}},
    }))
    assert len(n.dataset) == 1


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{", "not JSON"),
        ("[]", "no statement"),
        ('"text"', "JSON object or array"),
        ("[" * 100 + "]" * 100, "deeper than"),
        ("[" * 100_000 + "]" * 100_000, "deeper than"),
        ('{"@context": {"@version": 2}, "@id": ""}', "not valid application/ld\\+json"),
        ('{"@id": "", "https://ex.example/p": "x"}', None),  # valid: one statement
    ],
)
def test_bad_json_ld(body: str, message: str | None) -> None:
    if message is None:
        assert len(_parse(body).dataset) == 1
        return
    with pytest.raises(ld.InvalidNotification, match=message):
        _parse(body)


def test_turtle_resolves_relative_iris_against_the_new_uri() -> None:
    n = _parse('<> a <https://www.w3.org/ns/activitystreams#Read> ; <#p> <../other> .',
               "text/turtle; charset=UTF-8")
    assert _triples(n) == {
        (f"<{URI}>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", f"<{AS}Read>"),
        (f"<{URI}>", f"<{URI}#p>", "<https://d1.xdn.example/other>"),
    }


def test_n_quads_and_trig_keep_named_graphs() -> None:
    triple = "<https://a.example/s> <https://a.example/p> <https://a.example/o>"
    for media_type, body in (
        (ld.N_QUADS, f"{triple} <https://a.example/g> ."),
        (ld.TRIG, f"<https://a.example/g> {{ {triple} . }}"),
    ):
        n = _parse(body, media_type)
        assert [str(q.graph_name) for q in n.dataset] == ["<https://a.example/g>"]


@pytest.mark.parametrize(
    ("content_type", "message"),
    [
        (None, "needs a Content-Type"),
        ("", "needs a Content-Type"),
        ("application/json", "'application/json' is not accepted"),
        ("text/plain", "not accepted"),
        ("application/rdf+xml", "not accepted"),
        ("garbage", "not a media type"),
        ("text/turtle; charset=latin-1", "charset 'latin-1'"),
        ("text/turtle; =x", "malformed parameter"),
    ],
)
def test_unsupported_media_types(content_type: str | None, message: str) -> None:
    with pytest.raises(ld.UnsupportedMediaType, match=message):
        _parse("<https://a.example/s> <https://a.example/p> 1 .", content_type)


def test_the_accepted_types_are_the_ones_listed() -> None:
    for media_type in ld.ACCEPTED_POST_TYPES:
        assert ld.accepted_media_type(f"{media_type.upper()}; charset=utf-8") == media_type


def test_limits() -> None:
    small = ld.NotificationLimits(max_bytes=64, max_statements=2)
    with pytest.raises(ld.PayloadTooLarge, match="65 bytes, over the inbox's limit of 64"):
        _parse(b"#" * 65, ld.N_QUADS, small)
    three = "".join(f"<https://a.example/{i}> <https://a.example/p> {i} .\n" for i in range(3))
    with pytest.raises(ld.InvalidNotification, match="more than 2 statements"):
        _parse(three, ld.TURTLE, ld.NotificationLimits(max_statements=2))
    with pytest.raises(ValueError):
        ld.NotificationLimits(max_bytes=0)


@pytest.mark.parametrize(
    ("body", "media_type", "message"),
    [
        ("<a> <b> <c> .", ld.N_QUADS, "not valid application/n-quads"),
        ("<https://a.example/s> <https://a.example/p> .", ld.TURTLE, "not valid text/turtle"),
        ("", ld.TURTLE, "no statement"),
        ("# only a comment\n", ld.N_QUADS, "no statement"),
        (b"\xff\xfe", ld.TURTLE, "not valid UTF-8 at byte 0"),
        ("<https://a.example/s> <https://a.example/p> <https://a b> .", ld.TURTLE, "not valid"),
    ],
)
def test_not_rdf_is_refused(body: str | bytes, media_type: str, message: str) -> None:
    with pytest.raises(ld.InvalidNotification, match=message):
        _parse(body, media_type)


def test_errors_are_linked_data_errors_from_a_peer() -> None:
    from xdn.errors import LinkedDataError, PeerError

    for kind in (ld.InvalidNotification, ld.UnsupportedMediaType, ld.PayloadTooLarge,
                 ld.NotAcceptable):
        assert issubclass(kind, LinkedDataError) and issubclass(kind, PeerError)


def test_bundled_context_is_data_and_only_the_allow_list() -> None:
    context = ld.bundled_context("https://www.w3.org/ns/activitystreams")
    assert context["actor"] == {"@id": "as:actor", "@type": "@id"}
    assert context["inbox"] == {"@id": "ldp:inbox", "@type": "@id"}
    with pytest.raises(ld.InvalidNotification, match="fetches none"):
        ld.bundled_context("https://schema.org/")


def test_the_inline_rewrite_leaves_an_equivalent_document() -> None:
    text = json.dumps({"@context": "https://www.w3.org/ns/activitystreams", "@id": "",
                       "type": "Note"})
    inlined = json.loads(ld.inline_contexts(text))
    assert isinstance(inlined["@context"], dict)
    assert len(list(ox.parse(json.dumps(inlined), format=ox.RdfFormat.JSON_LD,
                             base_iri=URI))) == 1


_TYPE = "<http://purl.org/webofneeds/message#hasMessageType>"


@pytest.mark.parametrize("body, receipt", [
    (f"<https://a.example/m#e4> {{ <https://a.example/m#e4> {_TYPE} "
     "<https://xdn.example.org/ns#Receipt> . }", True),
    # the type in the default graph is no envelope of ours; another message type is no receipt
    (f"<https://a.example/m#e4> {_TYPE} <https://xdn.example.org/ns#Receipt> .", False),
    (f"<https://a.example/m#e4> {{ <https://a.example/m#e4> {_TYPE} "
     "<https://xdn.example.org/ns#Relay> . }", False),
    (f"<> a <{AS}Announce> ; <{AS}object> <https://xdn.example.org/ns#Receipt> .", False),
])
def test_a_receipt_is_known_by_its_envelopes_type(body: str, receipt: bool) -> None:
    assert ld.is_receipt(_parse(body, ld.TRIG)) is receipt
