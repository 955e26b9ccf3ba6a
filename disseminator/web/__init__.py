"""The HTTPS linked-data endpoint of a site (the daemon's edge): its root and its LDN inbox.

See :mod:`disseminator.web._app` for the routes (:mod:`disseminator.web._messages` for message
URIs, :mod:`disseminator.web._receipts` for receipts posted to the inbox),
:mod:`disseminator.web._tls` for mutual TLS,
:mod:`disseminator.web._server` for the connection limits (:mod:`disseminator.web._limits`
for the per-client rate and the connection caps) and docs/linked-data.md for the whole. The
decisions (content negotiation, serialisation, notification checks, who reads a
notification) are pure, in :mod:`xdn.linked_data`.
"""

from disseminator.web._app import WebSite, make_app
from disseminator.web._config import WebConfig
from disseminator.web._server import WebServer
from disseminator.web._site import NoRefusals, Refusals
from disseminator.web._tls import check_peer, client_context, server_context

__all__ = [
    "NoRefusals",
    "Refusals",
    "WebConfig",
    "WebServer",
    "WebSite",
    "check_peer",
    "client_context",
    "make_app",
    "server_context",
]
