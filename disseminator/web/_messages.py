"""``GET /msg/…``: a message this site minted, to its parties and auditors only.

The message is joined from what the site kept (:mod:`disseminator.messages`): the chain it
received, and its hop read back from the provenance log at the place indexed when it was
flushed (checked to still be that hop: a rotated log answers 404). Who may read it is decided
by :func:`xdn.linked_data.may_read` on the whole message (its publisher, every sender and
recipient, auditors); anyone else gets 403 — and so does a message URI this site does not
keep, except for the site itself and auditors (404): a message URI names the document, its
version and the recipient, all guessable, so "404 or 403" would tell anyone who received what
(the inbox answers unknown notification ids the same way). A path that is no message URI at
all is 404 for everyone. The inbox reads a receipt's message the same way
(:func:`read_kept`) to rebuild its notification.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiohttp import web

from disseminator.messages import MessageArchive, hop_of
from disseminator.web._site import CREDENTIAL, WebSite, negotiated, text
from xdn import certs, provenance
from xdn import linked_data as ld
from xdn.errors import ProvenanceError

__all__ = ["MessageRoute", "read_kept"]

log = logging.getLogger(__name__)


class MessageRoute:
    """The handler of message URIs."""

    def __init__(self, site: WebSite) -> None:
        self.site = site

    async def get(self, request: web.Request) -> web.StreamResponse:
        """The message a path names, in the negotiated representation."""
        path = request.raw_path.partition("?")[0]
        uri = ld.message_uri_of_path(self.site.node_uri, path)
        if uri is None:  # not a message URI at all: nothing to probe
            return text(404, f"no message at {path}")
        data = None
        if self.site.messages is not None:
            data = read_kept(self.site.messages, self.site.log_path, uri)
        credential = request[CREDENTIAL]
        every = ld.reads_every_notification(credential, self.site.node_uri)
        if data is None and not every:
            return self._forbidden(credential)
        if data is None:
            return text(404, f"no message at {path} (this site keeps the messages it minted "
                              "for as long as it remembers routing them)")
        try:
            message = provenance.Message.from_nquads(data)
        except ProvenanceError as exc:  # our own store's: say so, and not to the client
            log.error("message %s as kept does not read back: %s", uri, exc)
            return text(500, "this message cannot be served")
        if not (every or ld.may_read(message, credential)):
            return self._forbidden(credential)
        dataset = ld.from_nquads(message.to_nquads())
        return negotiated(request, dataset, title=uri, site=self.site)

    @staticmethod
    def _forbidden(credential: certs.Credential) -> web.Response:
        """The one refusal for a message the client may not read and one not kept here."""
        return text(403, f"{credential.name!r} may not read this message: a message is read by "
                         "its parties (its publisher, the sites on its path, its recipient), "
                         "this site and auditors")


def read_kept(messages: MessageArchive, log_path: Path, uri: str) -> bytes | None:
    """Message ``uri`` as this site sent it: the chain it kept, and its hop from the log at
    ``log_path`` (``None`` if not kept, or no longer where the index says: a rotated log)."""
    kept = messages.find(uri)
    if kept is None:
        return None
    try:
        with log_path.open("rb") as log_file:
            log_file.seek(kept.log_offset)
            hop = log_file.read(kept.log_length)
    except OSError as exc:
        log.warning("message %s: cannot read the provenance log: %s", uri, exc)
        return None
    found = hop_of(hop)
    if found is None or found[0] != uri:
        log.warning("message %s: not at its place in %s (rotated?)", uri, log_path)
        return None
    return kept.chain + (b"" if kept.chain.endswith(b"\n") else b"\n") + hop
