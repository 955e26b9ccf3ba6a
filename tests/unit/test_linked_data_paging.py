"""Paging the inbox listing (pure): cursors, the page's statements and links, Link headers."""

from __future__ import annotations

import pyoxigraph as ox
import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import certs
from xdn import linked_data as ld

INBOX = ld.inbox_uri(certs.node_uri("d1"))
NEXT = ld.IANA_RELATION + "next"


def _statements(page: ld.InboxPage) -> set[tuple[str, str, str]]:
    return {(q.subject.value, q.predicate.value, q.object.value) for q in page.dataset()}


def test_the_first_page_is_the_inbox_and_links_the_next() -> None:
    page = ld.InboxPage.of_rows(INBOX, [(4, INBOX + "a"), (9, INBOX + "b")], after=0, more=True)
    assert page.uri == INBOX and page.next_uri == INBOX + "?after=9"
    assert page.links("/inbox/") == ['</inbox/?after=9>; rel="next"']
    found = _statements(page)
    assert (INBOX, ld.LDP + "contains", INBOX + "a") in found
    assert (INBOX, NEXT, INBOX + "?after=9") in found
    assert not any(o == ld.LDP + "Page" for _, _, o in found)  # the inbox is not a page


def test_a_later_page_is_an_ldp_page_linking_first_and_no_next_when_last() -> None:
    page = ld.InboxPage.of_rows(INBOX, [(12, INBOX + "c")], after=9, more=False)
    assert page.uri == INBOX + "?after=9" and page.next_uri is None
    assert page.links("/inbox/") == [f'<{ld.LDP}Page>; rel="type"', '</inbox/>; rel="first"']
    found = _statements(page)
    assert (page.uri, "http://www.w3.org/1999/02/22-rdf-syntax-ns#type", ld.LDP + "Page") in found
    assert (page.uri, ld.IANA_RELATION + "first", INBOX) in found
    assert (INBOX, ld.LDP + "contains", INBOX + "c") in found
    assert not any(p == NEXT for _, p, _ in found)
    # served as Turtle too (no named graph)
    assert ld.TURTLE in ld.offers(page.dataset())


def test_an_empty_inbox_has_one_page() -> None:
    page = ld.InboxPage.of_rows(INBOX, [], after=0, more=False)
    assert page.next_uri is None and page.links("/inbox/") == []
    assert all(q.predicate.value != ld.LDP + "contains" for q in page.dataset())


@pytest.mark.parametrize("query, cursor", [({}, 0), ({"after": "0"}, 0), ({"after": "17"}, 17),
                                           ({"other": "x"}, 0)])
def test_page_cursor(query: dict[str, str], cursor: int) -> None:
    assert ld.page_cursor(query) == cursor


@pytest.mark.parametrize("value", ["", "-1", "1.5", "x", "٣", "9" * 20, str(2**63)])
def test_a_bad_cursor_is_an_invalid_request(value: str) -> None:
    with pytest.raises(ld.InvalidRequest, match="a page cursor is a whole number"):
        ld.page_cursor({"after": value})


def test_a_page_checks_its_values() -> None:
    with pytest.raises(ValueError, match="must end with '/'"):
        ld.InboxPage(inbox=INBOX.rstrip("/"), after=0, notifications=(), next_after=None)
    with pytest.raises(ValueError, match="out of range"):
        ld.InboxPage(inbox=INBOX, after=-1, notifications=(), next_after=None)


def test_parse_links() -> None:
    values = [
        f'<{ld.LDP}BasicContainer>; rel="type", <{ld.LDP}Resource>; rel="type"',
        '</inbox/?after=9>; rel="next"',
        '</inbox/>;rel=first; title="a, b"',
        '<https://x.example/>; rel="prev previous"',
    ]
    links = ld.parse_links(values)
    assert links["next"] == "/inbox/?after=9"
    assert links["type"] == f"{ld.LDP}BasicContainer"  # the first of a relation
    assert links["first"] == "/inbox/"
    assert links["prev"] == links["previous"] == "https://x.example/"
    assert ld.parse_links(["garbage", ""]) == {}


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_a_next_link_reads_back_as_its_cursor(cursor: int) -> None:
    page = ld.InboxPage(inbox=INBOX, after=0, notifications=(), next_after=cursor or 1)
    target = ld.parse_links(page.links("/inbox/"))["next"]
    assert ld.page_cursor(dict([target.partition("?")[2].split("=")])) == (cursor or 1)
    assert all(isinstance(q, ox.Quad) for q in page.dataset())
