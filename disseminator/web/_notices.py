"""A failure notice posted to the inbox: a subscriber hands its signed refusal to its site.

Theory of operation
-------------------
A notification whose envelope is of message type ``xdn:Refusal``
(:func:`xdn.linked_data.is_refusal`) is not kept as a generic notification: it is a
subscriber's failure notice, and the site checks it with the one check of notices that came
over gRPC (:meth:`disseminator.notices.SiteNotices.from_subscriber`):

1. it must verify (read on a worker thread: bounded, well-formed, a failure notice, Algorithm 2
   under the certificate it carries, the CA and the CRL, a subscriber's) — else ``400`` with
   the reason;
2. it must be signed under the TLS client's own certificate — else ``403``: a party posts its
   own notices, no one else's;
3. the client must be registered at this site, the notice name this site as the hop it
   refused (if it names one), be fresh, and the client hold fewer than the most notices a
   subscriber may have here — else ``400``.

Every refusal is counted (``xdn_notices_refused{source="inbox",reason}``) and logged. An
accepted notice is logged once, listed in the inbox and queued upstream, in one transaction:
the answer is ``201 Created`` with the ``Location`` of its notification, or ``200`` with the
same ``Location`` for a notice the site already has (a retry, or the one sent over gRPC).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from disseminator.web._site import CREDENTIAL, WebSite, text
from xdn import linked_data as ld
from xdn.errors import ForeignNoticeError, PeerError

__all__ = ["NoticePost"]

SOURCE = "inbox"  # the source label of the notices metrics


class NoticePost:
    """The handler of failure notices posted to the inbox."""

    def __init__(self, site: WebSite) -> None:
        self.site = site

    async def post(self, request: web.Request, notification: ld.Notification) -> web.Response:
        """Check ``notification`` as the client's failure notice and accept it, or say why
        not."""
        desk = self.site.notices
        assert desk is not None
        credential = request[CREDENTIAL]
        try:
            notice = await asyncio.to_thread(desk.read, notification.nquads)
        except PeerError as exc:
            desk.refused(SOURCE, exc, sender=credential.name)
            return text(400, f"the failure notice does not verify: {exc}")
        try:
            fresh = desk.from_subscriber(credential, notice)
        except ForeignNoticeError as exc:
            desk.refused(SOURCE, exc, sender=credential.name)
            return text(403, f"{exc}: post your own notices only")
        except PeerError as exc:
            desk.refused(SOURCE, exc, sender=credential.name)
            return text(400, f"the failure notice is refused: {exc}")
        location = f"/inbox/{notice.notification_id}"
        return web.Response(
            status=201 if fresh else 200, headers={"Location": location},
            text=f"{'created' if fresh else 'already received'} {location}\n",
            content_type="text/plain",
        )
