"""Routes of a site's HTTPS linked-data endpoint (aiohttp): the root, the LDN inbox.

Theory of operation
-------------------
The endpoint serves the site's URI space (``https://NAME.xdn.example/``) at whatever address it
listens on: path ``P`` of the node URI is path ``P`` here. Bodies name resources by their node
URIs (the identities signatures use); headers (``Link``, ``Location``) use relative references,
so a client follows them to the address it reached the endpoint at.

* ``GET|HEAD /`` — the node description (:func:`xdn.linked_data.root_description`), with
  ``Link: </inbox/>; rel="http://www.w3.org/ns/ldp#inbox"`` (LDN discovery).
* ``GET|HEAD /inbox/`` — the inbox, an ``ldp:BasicContainer`` whose ``ldp:contains`` lists
  every notification; ``OPTIONS /inbox/`` — ``Allow`` and ``Accept-Post``.
* ``POST /inbox/`` — a notification (:func:`xdn.linked_data.parse_notification`): ``201
  Created`` and ``Location: /inbox/ID``; stored in the site's store before the answer.
* ``GET|HEAD /inbox/ID`` — the notification.
* ``GET|HEAD /msg/…`` — a message this site minted (:mod:`disseminator.messages`): the chain it
  received and its hop, to the message's parties and auditors only
  (:func:`xdn.linked_data.may_read`; ``403`` to anyone else).

Every ``GET`` negotiates its representation (:func:`xdn.linked_data.choose`; ``406``
otherwise) and says ``Vary: Accept``. Middleware, outermost first: a request longer than
``[web] request_seconds`` gets ``408``; the client's certificate must be in force (``403``,
the connection closed: :func:`~disseminator.web._tls.check_peer`); errors of the core map to
their status codes (``415``, ``413``, ``400``, ``406``) with the error's message as plain text.
The body of a POST is read only while it stays within ``[web] notification_bytes`` (its
``Content-Length`` is checked first), and at most ``[web] posts_in_flight`` POSTs are read at
once (``429`` past that), so a flood costs bounded memory.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from aiohttp import web

from disseminator.messages import MessageArchive, hop_of
from disseminator.notifications import InboxFull, Notifications, StoredNotification
from disseminator.web._config import WebConfig
from disseminator.web._tls import check_peer
from xdn import certs, provenance
from xdn import linked_data as ld
from xdn.errors import CertificateError, LinkedDataError, ProvenanceError

__all__ = ["WebSite", "make_app"]

log = logging.getLogger(__name__)

_STATUS: dict[type[LinkedDataError], int] = {
    ld.UnsupportedMediaType: 415,
    ld.PayloadTooLarge: 413,
    ld.InvalidNotification: 400,
    ld.NotAcceptable: 406,
}
_INBOX_ALLOW = "GET, HEAD, OPTIONS, POST"
_READ_CHUNK = 64 * 1024

_CREDENTIAL = web.RequestKey("credential", certs.Credential)  # the client's, checked
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSite:
    """What the endpoint serves, and its seams (clock, CRL in force, id minting)."""

    node_uri: str
    cert_pem: bytes
    notifications: Notifications
    messages: MessageArchive | None
    log_path: Path  # the site's provenance log, where the hops of its messages are
    config: WebConfig
    clock: Callable[[], datetime]
    revoked: Callable[[], frozenset[int]]
    new_id: Callable[[], str]


def _text(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message + "\n", content_type="text/plain")


def _negotiated(
    request: web.Request, dataset: ld.Dataset, *, title: str, site: WebSite
) -> web.Response:
    media_type = ld.choose(request.headers.get("Accept"), ld.offers(dataset))
    body = ld.serialise(dataset, media_type, title=title, local_prefix=site.node_uri)
    response = web.Response(body=body, headers={"Vary": "Accept"})
    response.headers["Content-Type"] = ld.content_type(media_type)
    return response


class _Routes:
    def __init__(self, site: WebSite) -> None:
        self.site = site
        self.inbox = ld.inbox_uri(site.node_uri)
        self.posting = 0  # POSTs being read now

    async def root(self, request: web.Request) -> web.StreamResponse:
        dataset = ld.root_description(self.site.node_uri, self.site.cert_pem)
        response = _negotiated(request, dataset, title=self.site.node_uri, site=self.site)
        response.headers["Link"] = f'</inbox/>; rel="{ld.LDP_INBOX}"'
        return response

    def _inbox_headers(self, response: web.StreamResponse) -> web.StreamResponse:
        response.headers["Allow"] = _INBOX_ALLOW
        response.headers["Accept-Post"] = ", ".join(ld.ACCEPTED_POST_TYPES)
        response.headers["Link"] = (
            f'<{ld.LDP}BasicContainer>; rel="type", <{ld.LDP}Resource>; rel="type"'
        )
        return response

    async def inbox_get(self, request: web.Request) -> web.StreamResponse:
        uris = (self.inbox + i for i in self.site.notifications.ids())
        dataset = ld.inbox_listing(self.inbox, uris)
        return self._inbox_headers(_negotiated(request, dataset, title=self.inbox, site=self.site))

    async def inbox_options(self, request: web.Request) -> web.StreamResponse:
        return self._inbox_headers(web.Response(status=204))

    async def inbox_post(self, request: web.Request) -> web.StreamResponse:
        limit = self.site.config.posts_in_flight
        if self.posting >= limit:
            response = _text(429, f"{limit} notifications are being received; retry later")
            response.headers["Retry-After"] = "1"
            response.force_close()
            return response
        self.posting += 1
        try:
            return await self._post(request)
        finally:
            self.posting -= 1

    async def _post(self, request: web.Request) -> web.StreamResponse:
        content_type = request.headers.get("Content-Type")
        ld.accepted_media_type(content_type)  # 415 before reading any of the body
        try:
            body = await _read_bounded(request, self.site.config.notification_bytes)
        except ConnectionResetError:  # the client went away mid-body: no one to answer
            response = _text(400, "the connection was lost before the notification ended")
            response.force_close()
            return response
        notification_id = self.site.new_id()
        notification = ld.parse_notification(
            body, content_type, uri=ld.notification_uri(self.site.node_uri, notification_id),
            limits=ld.NotificationLimits(
                max_bytes=self.site.config.notification_bytes,
                max_statements=self.site.config.notification_statements,
            ),
        )
        credential = request[_CREDENTIAL]
        try:
            self.site.notifications.add(
                StoredNotification(
                    id=notification_id,
                    received_ms=int(self.site.clock().timestamp() * 1000),
                    sender=credential.name, sender_fingerprint=credential.fingerprint,
                    media_type=notification.media_type, nquads=notification.nquads,
                ),
                capacity=self.site.config.inbox_notifications,
            )
        except InboxFull as exc:
            return _text(507, f"{exc}; the notification was not stored")
        except sqlite3.IntegrityError:  # a minted id taken twice: ours to fix, not the sender's
            log.error("notification id %s minted twice", notification_id)
            return _text(500, "the inbox could not name the notification; retry")
        log.info("inbox: notification %s from %s (%s, %d statements)", notification_id,
                 credential.name, notification.media_type, len(notification.dataset))
        return web.Response(
            status=201, headers={"Location": f"/inbox/{notification_id}"},
            text=f"created /inbox/{notification_id}\n", content_type="text/plain",
        )

    async def notification(self, request: web.Request) -> web.StreamResponse:
        notification_id = request.match_info["id"]
        stored = (
            self.site.notifications.get(notification_id)
            if ld.is_notification_id(notification_id) else None
        )
        if stored is None:
            return _text(404, f"no notification {notification_id!r} in this inbox")
        uri = ld.notification_uri(self.site.node_uri, notification_id)
        return _negotiated(request, ld.from_nquads(stored.nquads), title=uri, site=self.site)

    async def message(self, request: web.Request) -> web.StreamResponse:
        path = request.raw_path.partition("?")[0]
        uri = ld.message_uri_of_path(self.site.node_uri, path)
        data = None
        if uri is not None and self.site.messages is not None:
            data = self._kept(uri)
        if uri is None or data is None:
            return _text(404, f"no message at {path} (this site keeps the messages it minted "
                              "for as long as it remembers routing them)")
        try:
            message = provenance.Message.from_nquads(data)
        except ProvenanceError as exc:  # our own store's: say so, and not to the client
            log.error("message %s as kept does not read back: %s", uri, exc)
            return _text(500, "this message cannot be served")
        credential = request[_CREDENTIAL]
        if not ld.may_read(message, credential):
            return _text(403, f"{credential.name!r} is not a party to this message (its "
                              "publisher, a site on its path, its recipient) nor an auditor")
        dataset = ld.from_nquads(message.to_nquads())
        return _negotiated(request, dataset, title=uri, site=self.site)

    def _kept(self, uri: str) -> bytes | None:
        """Message ``uri`` as this site sent it: the chain it kept, and its hop from the log
        (``None`` if not kept, or no longer where the index says: a rotated log)."""
        assert self.site.messages is not None
        kept = self.site.messages.find(uri)
        if kept is None:
            return None
        try:
            with self.site.log_path.open("rb") as log_file:
                log_file.seek(kept.log_offset)
                hop = log_file.read(kept.log_length)
        except OSError as exc:
            log.warning("message %s: cannot read the provenance log: %s", uri, exc)
            return None
        found = hop_of(hop)
        if found is None or found[0] != uri:
            log.warning("message %s: not at its place in %s (rotated?)", uri, self.site.log_path)
            return None
        return kept.chain + (b"" if kept.chain.endswith(b"\n") else b"\n") + hop

    async def inbox_redirect(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPPermanentRedirect("/inbox/")


async def _read_bounded(request: web.Request, limit: int) -> bytes:
    """The request body, refused as soon as it is known to be longer than ``limit``."""
    if request.content_length is not None and request.content_length > limit:
        raise ld.PayloadTooLarge(
            f"the notification is {request.content_length} bytes, over the inbox's limit of "
            f"{limit}"
        )
    chunks, size = [], 0
    while chunk := await request.content.read(_READ_CHUNK):
        size += len(chunk)
        if size > limit:
            raise ld.PayloadTooLarge(
                f"the notification is over the inbox's limit of {limit} bytes"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _middlewares(site: WebSite) -> list[Callable[..., Awaitable[web.StreamResponse]]]:
    @web.middleware
    async def deadline(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            async with asyncio.timeout(site.config.request_seconds):
                return await handler(request)
        except TimeoutError:
            response = _text(408, f"the request took over {site.config.request_seconds:g}s")
            response.force_close()
            return response

    @web.middleware
    async def peer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            request[_CREDENTIAL] = check_peer(
                request.transport.get_extra_info("ssl_object") if request.transport else None,
                at=site.clock(), revoked=site.revoked(),
            )
        except CertificateError as exc:
            response = _text(403, str(exc))
            response.force_close()
            return response
        return await handler(request)

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except LinkedDataError as exc:
            status = _STATUS.get(type(exc), 400)
            response = _text(status, str(exc))
            if status == 413:  # the rest of the body is not read: the connection cannot go on
                response.force_close()
            return response

    return [deadline, peer, errors]


def make_app(site: WebSite) -> web.Application:
    """The aiohttp application of the endpoint."""
    routes = _Routes(site)
    app = web.Application(middlewares=_middlewares(site), client_max_size=1)
    app.router.add_get("/", routes.root)
    app.router.add_get("/inbox/", routes.inbox_get)
    app.router.add_route("OPTIONS", "/inbox/", routes.inbox_options)
    app.router.add_post("/inbox/", routes.inbox_post)
    app.router.add_get("/inbox", routes.inbox_redirect)
    app.router.add_get("/inbox/{id}", routes.notification)
    app.router.add_get("/msg/{tail:.+}", routes.message)
    return app
