"""Reading a notification posted to an inbox: media type → parser, byte limit, constraints.

Theory of operation
-------------------
:func:`parse_notification` is what an LDN receiver does with a POST body, without the socket:

1. the ``Content-Type`` must be one of :data:`~xdn.linked_data.ACCEPTED_POST_TYPES` (a
   ``charset`` other than UTF-8 is refused too) — else :class:`UnsupportedMediaType` (415);
2. the body must fit :attr:`NotificationLimits.max_bytes` — else :class:`PayloadTooLarge` (413;
   the HTTPS edge enforces the same limit while reading, so it never holds more);
3. the body is parsed as RDF with pyoxigraph, relative IRIs resolved against the URI the inbox
   mints for the notification (so ``"@id": ""`` names the notification itself); JSON-LD goes
   through :func:`~xdn.linked_data._jsonld.inline_contexts` first (no remote context is ever
   fetched);
4. our constraints: at least one statement, at most :attr:`NotificationLimits.max_statements`
   (counted while parsing, so a small body that expands to many statements stops early).

Failures of 3 and 4 are :class:`InvalidNotification` (400) with the parser's message.
The result is stored as N-Quads (:attr:`Notification.nquads`), whatever it came in.

A notification is a delivery receipt (:func:`is_receipt`) when one of its statements gives an
envelope the message type ``xdn:Receipt`` (``msg:hasMessageType``, our envelope format,
:mod:`xdn.provenance`): the type decides, and the inbox then checks it as a receipt (its
signatures, its signer, its path) rather than keeping it as a generic notification.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyoxigraph as ox

from xdn.linked_data._dataset import Dataset, nquads
from xdn.linked_data._errors import InvalidNotification, PayloadTooLarge, UnsupportedMediaType
from xdn.linked_data._jsonld import inline_contexts
from xdn.linked_data._media import ACCEPTED_POST_TYPES, JSON_LD, RDF_FORMATS, parse_content_type
from xdn.provenance._vocab import HAS_MESSAGE_TYPE, RECEIPT, REFUSAL
from xdn.rdf_syntax import iri_problem

__all__ = [
    "Notification",
    "NotificationLimits",
    "accepted_media_type",
    "is_receipt",
    "is_refusal",
    "parse_notification",
]

_HAS_MESSAGE_TYPE = ox.NamedNode(HAS_MESSAGE_TYPE.value)
_RECEIPT = ox.NamedNode(RECEIPT.value)
_REFUSAL = ox.NamedNode(REFUSAL.value)


@dataclass(frozen=True, slots=True, kw_only=True)
class NotificationLimits:
    """What one notification may hold."""

    max_bytes: int = 256 * 1024
    max_statements: int = 10_000

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.max_statements < 1:
            raise ValueError("notification limits must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class Notification:
    """A notification an inbox accepted: its new URI, the type it came in, its statements."""

    uri: str
    media_type: str
    dataset: Dataset

    def __post_init__(self) -> None:
        if iri_problem(self.uri) is not None:
            raise ValueError(f"notification URI {self.uri!r} is not an absolute IRI")
        if not self.dataset:
            raise ValueError("a notification holds at least one statement")

    @property
    def nquads(self) -> bytes:
        """The statements as N-Quads (how the inbox stores them)."""
        return nquads(self.dataset)


def accepted_media_type(content_type: str | None) -> str:
    """The media type of a ``Content-Type`` value an inbox accepts (check it before reading).

    Raises:
        UnsupportedMediaType: missing, malformed, not accepted, or a charset other than UTF-8.
    """
    kind, params = parse_content_type(content_type)
    if kind not in ACCEPTED_POST_TYPES:
        raise UnsupportedMediaType(
            f"media type {kind!r} is not accepted; send one of {', '.join(ACCEPTED_POST_TYPES)}"
        )
    charset = params.get("charset", "utf-8").lower()
    if charset not in ("utf-8", "utf8"):
        raise UnsupportedMediaType(f"charset {charset!r} is not accepted; send UTF-8")
    return kind


def _statements(text: str, media_type: str, uri: str, limit: int) -> Dataset:
    quads = []
    try:
        for quad in ox.parse(text, format=RDF_FORMATS[media_type], base_iri=uri):
            quads.append(quad)
            if len(quads) > limit:
                raise InvalidNotification(
                    f"the notification holds more than {limit} statements (the inbox's limit)"
                )
    except SyntaxError as exc:
        raise InvalidNotification(f"not valid {media_type}: {exc}") from None
    return tuple(quads)


def parse_notification(
    body: bytes, content_type: str | None, *, uri: str, limits: NotificationLimits
) -> Notification:
    """Check and parse a posted notification that the inbox will store as ``uri``.

    Raises:
        UnsupportedMediaType: the media type or charset is not accepted.
        PayloadTooLarge: ``body`` is longer than ``limits.max_bytes``.
        InvalidNotification: not valid RDF in its media type, a remote JSON-LD context that
            is not bundled, no statements, or too many.
    """
    media_type = accepted_media_type(content_type)
    if len(body) > limits.max_bytes:
        raise PayloadTooLarge(
            f"the notification is {len(body)} bytes, over the inbox's limit of "
            f"{limits.max_bytes}"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidNotification(f"not valid UTF-8 at byte {exc.start}") from None
    if media_type == JSON_LD:
        text = inline_contexts(text)
    dataset = _statements(text, media_type, uri, limits.max_statements)
    if not dataset:
        raise InvalidNotification("the notification holds no statement (an empty graph)")
    return Notification(uri=uri, media_type=media_type, dataset=dataset)


def is_receipt(notification: Notification) -> bool:
    """Whether ``notification`` says it is a delivery receipt: an envelope of message type
    ``xdn:Receipt`` (in a named graph, as our envelopes are). Says nothing of its validity."""
    return any(
        q.predicate == _HAS_MESSAGE_TYPE and q.object == _RECEIPT
        and not isinstance(q.graph_name, ox.DefaultGraph)
        for q in notification.dataset
    )


def is_refusal(notification: Notification) -> bool:
    """Whether ``notification`` says it is a failure notice: an envelope of message type
    ``xdn:Refusal`` (in a named graph). Says nothing of its validity."""
    return any(
        q.predicate == _HAS_MESSAGE_TYPE and q.object == _REFUSAL
        and not isinstance(q.graph_name, ox.DefaultGraph)
        for q in notification.dataset
    )
