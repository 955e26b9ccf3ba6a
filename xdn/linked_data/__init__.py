"""Linked data at a site, without the server: content negotiation, serialisation, LDN.

Theory of operation
-------------------
A site serves its URI space (its node URI, ``https://NAME.xdn.example/``) over HTTPS; the
server is the daemon's edge (:mod:`disseminator.web`). Everything it decides is here, pure (no
sockets, no clock, no randomness: the caller mints ids and passes them in):

* which representation to send — :func:`choose` reads ``Accept`` (q-values, most specific
  range wins) among the media types :func:`offers` lists for a dataset (JSON-LD first, TriG,
  N-Quads, Turtle for a dataset without named graphs, HTML), or raises
  :class:`NotAcceptable`;
* how to write it — :func:`serialise` (pyoxigraph for RDF, :mod:`._html` for people);
* what a POST to an inbox holds — :func:`parse_notification` (media type, byte limit, RDF,
  constraints; JSON-LD contexts only from the bundled allow-list, :mod:`._jsonld`), raising
  :class:`UnsupportedMediaType`, :class:`PayloadTooLarge` or :class:`InvalidNotification` —
  and whether it is a delivery receipt (:func:`is_receipt`, by its envelope's type) or a
  failure notice (:func:`is_refusal`);
* the graphs of the site's own resources — :func:`root_description` (certificate, public key,
  ``ldp:inbox``) and :func:`inbox_listing` (``ldp:contains``), a page of it at a time
  (:class:`InboxPage`, :func:`page_cursor`: cursors, ``rel="next"``; :mod:`._paging`);
* which message URI a path names and who may read that message — :func:`message_uri_of_path`,
  :func:`may_read` (its publisher, senders and recipients, and auditors);
* who may read a notification of the inbox (:mod:`._readers`) — its sender and the parties it
  concerns (:func:`chain_readers` for a receipt, :func:`notification_readers` for a generic
  one), the site and auditors (:func:`reads_every_notification`).

Every error is a :class:`~xdn.errors.LinkedDataError` naming what is wrong; the edge maps the
kind to a status code.
"""

from xdn.linked_data._conneg import MediaRange, choose, parse_accept
from xdn.linked_data._dataset import Dataset, from_nquads, from_terms, offers, serialise
from xdn.linked_data._errors import (
    InvalidNotification,
    InvalidRequest,
    NotAcceptable,
    PayloadTooLarge,
    UnsupportedMediaType,
)
from xdn.linked_data._jsonld import BUNDLED_CONTEXTS, bundled_context, inline_contexts
from xdn.linked_data._media import (
    ACCEPTED_POST_TYPES,
    HTML,
    JSON_LD,
    N_QUADS,
    TRIG,
    TURTLE,
    content_type,
    parse_content_type,
)
from xdn.linked_data._messages import (
    AUDITOR_ROLE,
    may_read,
    message_readers,
    message_uri_of_path,
    party,
)
from xdn.linked_data._notification import (
    Notification,
    NotificationLimits,
    accepted_media_type,
    is_receipt,
    is_refusal,
    parse_notification,
)
from xdn.linked_data._paging import IANA_RELATION, InboxPage, page_cursor, parse_links
from xdn.linked_data._readers import (
    ADDRESSING,
    chain_readers,
    is_node_uri,
    notification_readers,
    reads_every_notification,
)
from xdn.linked_data._resources import (
    LDP,
    LDP_INBOX,
    SEC_PUBLIC_KEY_PEM,
    inbox_listing,
    inbox_uri,
    is_notification_id,
    notification_uri,
    root_description,
)

__all__ = [
    "ACCEPTED_POST_TYPES",
    "ADDRESSING",
    "AUDITOR_ROLE",
    "BUNDLED_CONTEXTS",
    "HTML",
    "IANA_RELATION",
    "JSON_LD",
    "LDP",
    "LDP_INBOX",
    "N_QUADS",
    "SEC_PUBLIC_KEY_PEM",
    "TRIG",
    "TURTLE",
    "Dataset",
    "InboxPage",
    "InvalidNotification",
    "InvalidRequest",
    "MediaRange",
    "NotAcceptable",
    "Notification",
    "NotificationLimits",
    "PayloadTooLarge",
    "UnsupportedMediaType",
    "accepted_media_type",
    "bundled_context",
    "chain_readers",
    "choose",
    "content_type",
    "from_nquads",
    "from_terms",
    "inbox_listing",
    "inbox_uri",
    "inline_contexts",
    "is_node_uri",
    "is_notification_id",
    "is_receipt",
    "is_refusal",
    "may_read",
    "message_readers",
    "message_uri_of_path",
    "notification_readers",
    "notification_uri",
    "offers",
    "page_cursor",
    "parse_accept",
    "parse_content_type",
    "parse_links",
    "parse_notification",
    "party",
    "reads_every_notification",
    "root_description",
    "serialise",
]
