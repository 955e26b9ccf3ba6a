"""A delivery receipt posted to the inbox: a subscriber hands its signed receipt to its site.

Theory of operation
-------------------
A notification whose envelope is of message type ``xdn:Receipt``
(:func:`xdn.linked_data.is_receipt`) is not kept as a generic notification: it is a
subscriber's receipt chain, and the site treats it as if it had come with the subscriber's
acknowledgement (:meth:`disseminator.receipts.SiteReceipts.from_subscriber`):

1. it must verify (:meth:`~disseminator.web._site.ReceiptDesk.read`, on a worker thread:
   bounded, well-formed, a receipt, Algorithm 2 under the certificates it carries, the CA
   and the CRL) — else ``400`` with the reason, which names the graph at fault;
2. its receipt must be signed under the TLS client's own certificate — else ``403``: a party
   posts its own receipts, no one else's;
3. the client must be registered at this site and the receipt wrap a relay this site signed to
   it — else ``400``.

Every refusal is counted (``xdn_receipts_refused{source="inbox",reason}``) and logged, as those
of acknowledgements are. An accepted receipt is queued upstream, logged once and listed in the
inbox, in one transaction: the answer is ``201 Created`` with the ``Location`` of its
notification, or ``200`` with the same ``Location`` for a receipt the site already has (a
retry, or the one that came with the acknowledgement).
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from disseminator.web._site import CREDENTIAL, WebSite, text
from xdn import linked_data as ld
from xdn.errors import PeerError, ReceiptError

__all__ = ["ReceiptPost"]

log = logging.getLogger(__name__)

SOURCE = "inbox"  # the source label of the receipts metrics


class ReceiptPost:
    """The handler of receipts posted to the inbox."""

    def __init__(self, site: WebSite) -> None:
        self.site = site

    async def post(self, request: web.Request, notification: ld.Notification) -> web.Response:
        """Check ``notification`` as the client's receipt and accept it, or say why not."""
        desk = self.site.receipts
        assert desk is not None
        credential = request[CREDENTIAL]
        try:
            receipt = await asyncio.to_thread(desk.read, notification.nquads)
        except PeerError as exc:
            desk.refused(SOURCE, exc, sender=credential.name)
            return text(400, f"the receipt does not verify: {exc}")
        if receipt.subscriber.fingerprint != credential.fingerprint:
            foreign = ReceiptError(
                f"the receipt is signed by {receipt.subscriber.name!r} (certificate "
                f"{receipt.subscriber.fingerprint[:16]}…), not by you, {credential.name!r} "
                f"(certificate {credential.fingerprint[:16]}…): post your own receipts only"
            )
            desk.refused(SOURCE, foreign, sender=credential.name)
            return text(403, str(foreign))
        try:
            fresh = desk.from_subscriber(credential.member_id, receipt)
        except PeerError as exc:
            desk.refused(SOURCE, exc, sender=credential.name)
            return text(400, f"the receipt is refused: {exc}")
        location = f"/inbox/{receipt.notification_id}"
        return web.Response(
            status=201 if fresh else 200, headers={"Location": location},
            text=f"{'created' if fresh else 'already received'} {location}\n",
            content_type="text/plain",
        )
