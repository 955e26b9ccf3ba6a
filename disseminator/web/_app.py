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
  its notifications, ``[web] inbox_page`` at most: the first page, ``Link: <…>; rel="next"``
  to the next, ``/inbox/?after=SEQ`` (:mod:`xdn.linked_data._paging`); ``OPTIONS /inbox/`` —
  ``Allow`` and ``Accept-Post``.
* ``POST /inbox/`` — a notification (:func:`xdn.linked_data.parse_notification`): ``201
  Created`` and ``Location: /inbox/ID``; stored in the site's store before the answer. A
  delivery receipt (:func:`xdn.linked_data.is_receipt`) is checked and accepted as the
  client's acknowledged receipt instead (:mod:`disseminator.web._receipts`), and a failure
  notice (:func:`xdn.linked_data.is_refusal`) as the client's own notice
  (:mod:`disseminator.web._notices`).
* ``GET|HEAD /inbox/ID`` — the notification, to its readers only (``403`` otherwise, the same
  for a well-formed id the inbox does not hold; see below). A receipt's kept by reference is
  rebuilt from the message of this site it wraps (:mod:`disseminator.receipt_refs`): ``410
  Gone`` once that message is no longer kept (pruned, or the provenance log rotated).
* ``GET|HEAD /msg/…`` — a message this site minted, to its parties and auditors only
  (:mod:`disseminator.web._messages`).
* ``GET|HEAD /nodes/NAME`` — site NAME's signed DHT record as this site finds it in the DHT
  (its own for itself), JSON (:meth:`disseminator.dht.SiteRecord.to_json`): how a client
  resolves a node URI, a name, to the site's HTTPS endpoint through any site, checking the
  record itself (signature, certificate under the CA, name, expiry), so this site is not
  trusted with the answer. ``404`` when the DHT holds no live record of NAME.

Who reads what (:mod:`xdn.linked_data._readers`): a notification's readers — its sender and
the parties it concerns — are decided when it is stored and written with it; the site itself
and auditors read every notification; the listing shows a client only what it may read (an
index range of the store, :meth:`disseminator.notifications.Notifications.page`).

Every ``GET`` negotiates its representation (:func:`xdn.linked_data.choose`; ``406``
otherwise) and says ``Vary: Accept``. Middleware, outermost first: a request longer than
``[web] request_seconds`` gets ``408``; the client's certificate must be in force (``403``,
the connection closed: :func:`~disseminator.web._tls.check_peer`); a client certificate over
its request rate (a token bucket, ``[web] client_requests_per_second`` and ``client_burst``:
:class:`~disseminator.web._limits.TokenBuckets`) gets ``429`` with ``Retry-After``, before
any of its body is read; errors of the core map to
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

from aiohttp import web

from disseminator.notifications import InboxFull, StoredNotification
from disseminator.receipt_refs import rejoin
from disseminator.web._limits import TokenBuckets
from disseminator.web._messages import MessageRoute, read_kept
from disseminator.web._notices import NoticePost
from disseminator.web._receipts import ReceiptPost
from disseminator.web._site import CREDENTIAL, WebSite, negotiated, text
from disseminator.web._tls import check_peer
from xdn import linked_data as ld
from xdn.errors import CertificateError, LinkedDataError, XdnError

__all__ = ["WebSite", "make_app"]

log = logging.getLogger(__name__)

_STATUS: dict[type[LinkedDataError], int] = {
    ld.UnsupportedMediaType: 415,
    ld.PayloadTooLarge: 413,
    ld.InvalidNotification: 400,
    ld.InvalidRequest: 400,
    ld.NotAcceptable: 406,
}
_INBOX_ALLOW = "GET, HEAD, OPTIONS, POST"
_READ_CHUNK = 64 * 1024

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class _Routes:
    def __init__(self, site: WebSite) -> None:
        self.site = site
        self.inbox = ld.inbox_uri(site.node_uri)
        self.posting = 0  # POSTs being read now
        self.receipts = ReceiptPost(site)
        self.notices = NoticePost(site)

    async def root(self, request: web.Request) -> web.StreamResponse:
        dataset = ld.root_description(self.site.node_uri, self.site.cert_pem)
        response = negotiated(request, dataset, title=self.site.node_uri, site=self.site)
        response.headers["Link"] = f'</inbox/>; rel="{ld.LDP_INBOX}"'
        return response

    def _inbox_headers(self, response: web.StreamResponse) -> web.StreamResponse:
        response.headers["Allow"] = _INBOX_ALLOW
        response.headers["Accept-Post"] = ", ".join(ld.ACCEPTED_POST_TYPES)
        response.headers["Link"] = (
            f'<{ld.LDP}BasicContainer>; rel="type", <{ld.LDP}Resource>; rel="type"'
        )
        return response

    def _reader(self, request: web.Request) -> str | None:
        """The party whose readable notifications the client sees (``None``: all of them)."""
        credential = request[CREDENTIAL]
        if ld.reads_every_notification(credential, self.site.node_uri):
            return None
        return ld.party(credential)

    async def inbox_get(self, request: web.Request) -> web.StreamResponse:
        after = ld.page_cursor(request.query)
        rows, more = self.site.notifications.page(
            after=after, limit=self.site.config.inbox_page, reader=self._reader(request)
        )
        page = ld.InboxPage.of_rows(
            self.inbox, [(seq, self.inbox + i) for seq, i in rows], after=after, more=more
        )
        response = self._inbox_headers(
            negotiated(request, page.dataset(), title=page.uri, site=self.site)
        )
        for link in page.links("/inbox/"):
            response.headers.add("Link", link)
        return response

    async def inbox_options(self, request: web.Request) -> web.StreamResponse:
        return self._inbox_headers(web.Response(status=204))

    async def inbox_post(self, request: web.Request) -> web.StreamResponse:
        limit = self.site.config.posts_in_flight
        if self.posting >= limit:
            self.site.refusals.request(429, "posts_in_flight")
            response = text(429, f"{limit} notifications are being received; retry later")
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
            response = text(400, "the connection was lost before the notification ended")
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
        if self.site.receipts is not None and ld.is_receipt(notification):
            return await self.receipts.post(request, notification)
        if self.site.notices is not None and ld.is_refusal(notification):
            return await self.notices.post(request, notification)
        credential = request[CREDENTIAL]
        readers = ld.notification_readers(
            notification, credential, max_parties=self.site.config.notification_parties
        )
        try:
            self.site.notifications.add(
                StoredNotification(
                    id=notification_id,
                    received_ms=int(self.site.clock().timestamp() * 1000),
                    sender=credential.name, sender_fingerprint=credential.fingerprint,
                    media_type=notification.media_type, nquads=notification.nquads,
                    readers=readers,
                ),
                capacity=self.site.config.inbox_notifications,
            )
        except InboxFull as exc:
            self.site.refusals.request(507, "inbox_notifications")
            return text(507, f"{exc}; the notification was not stored")
        except sqlite3.IntegrityError:  # a minted id taken twice: ours to fix, not the sender's
            log.error("notification id %s minted twice", notification_id)
            return text(500, "the inbox could not name the notification; retry")
        log.info("inbox: notification %s from %s (%s, %d statements)", notification_id,
                 credential.name, notification.media_type, len(notification.dataset))
        return web.Response(
            status=201, headers={"Location": f"/inbox/{notification_id}"},
            text=f"created /inbox/{notification_id}\n", content_type="text/plain",
        )

    async def notification(self, request: web.Request) -> web.StreamResponse:
        notification_id = request.match_info["id"]
        if not ld.is_notification_id(notification_id):  # (not one this inbox would mint)
            return text(404, f"no notification {notification_id!r} in this inbox")
        stored = self.site.notifications.get(notification_id)
        reader = self._reader(request)
        if reader is not None and (stored is None or reader not in stored.readers):
            # the same answer whether it exists or not: a receipt's id is derived from its
            # subscriber and message, so "404 or 403" would say who received what
            return text(403, f"{request[CREDENTIAL].name!r} may not read a notification "
                             f"{notification_id!r} of this inbox: a notification is read by "
                             "its sender, the parties it concerns (a receipt's publisher, "
                             "sites on its path and subscriber; those a notification names as "
                             "its actor, target or audience), this site and auditors")
        if stored is None:
            return text(404, f"no notification {notification_id!r} in this inbox")
        uri = ld.notification_uri(self.site.node_uri, notification_id)
        data = self._statements(stored)
        if data is None:
            return text(410, f"notification {notification_id!r} is a receipt of message "
                             f"<{stored.via}>, which this site no longer keeps (it keeps the "
                             "messages it minted for as long as it remembers routing them)")
        return negotiated(request, ld.from_nquads(data), title=uri, site=self.site)

    def _statements(self, stored: StoredNotification) -> bytes | None:
        """A notification's N-Quads; a receipt's by reference rebuilt (``None``: no more)."""
        if stored.via is None or stored.digest is None:
            return stored.nquads
        messages = self.site.messages
        kept = None if messages is None else read_kept(messages, self.site.log_path, stored.via)
        data = None if kept is None else rejoin(kept, stored.nquads, stored.digest)
        if data is None:
            log.warning("inbox: receipt %s cannot be rebuilt: message %s %s", stored.id,
                        stored.via, "is no longer kept" if kept is None else "differs")
        return data

    async def node(self, request: web.Request) -> web.StreamResponse:
        """Site NAME's signed record, as this site finds it in the DHT."""
        name = request.match_info["name"]
        if not name.isprintable() or len(name) > 256:
            return text(404, "no site of that name")
        directory = self.site.nodes
        try:
            found = None if directory is None else await directory.find_site(name)
        except XdnError as exc:  # the DHT did not answer: say so, nothing cached
            log.warning("nodes: looking up %r failed: %s", name, exc)
            return text(502, f"the DHT did not answer for {name!r}: {exc}")
        if found is None:
            return text(404, f"the DHT holds no live record of a site {name!r}")
        response = web.json_response(found.to_json())
        response.headers["Cache-Control"] = "no-store"
        return response

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
            site.refusals.request(408, "request_seconds")
            response = text(408, f"the request took over {site.config.request_seconds:g}s")
            response.force_close()
            return response

    @web.middleware
    async def peer(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            request[CREDENTIAL] = check_peer(
                request.transport.get_extra_info("ssl_object") if request.transport else None,
                at=site.clock(), revoked=site.revoked(),
            )
        except CertificateError as exc:
            response = text(403, str(exc))
            response.force_close()
            return response
        return await handler(request)

    buckets = TokenBuckets(
        rate=site.config.client_requests_per_second, burst=site.config.client_burst
    )

    @web.middleware
    async def rate(request: web.Request, handler: Handler) -> web.StreamResponse:
        credential = request[CREDENTIAL]
        wait = buckets.take(credential.fingerprint, site.monotonic())
        if wait > 0:
            site.refusals.request(429, "client_requests_per_second")
            response = text(429, f"{credential.name!r} is over its {buckets.burst} requests "
                                  f"at once, {buckets.rate:g} a second; retry in {wait:.2f}s")
            response.headers["Retry-After"] = TokenBuckets.retry_after(wait)
            if request.body_exists:  # its body is not read: the connection cannot go on
                response.force_close()
            return response
        return await handler(request)

    @web.middleware
    async def errors(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except LinkedDataError as exc:
            status = _STATUS.get(type(exc), 400)
            response = text(status, str(exc))
            if status == 413:  # the rest of the body is not read: the connection cannot go on
                site.refusals.request(413, "notification_bytes")
                response.force_close()
            return response

    return [deadline, peer, rate, errors]


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
    app.router.add_get("/msg/{tail:.+}", MessageRoute(site).get)
    app.router.add_get("/nodes/{name}", routes.node)
    return app
