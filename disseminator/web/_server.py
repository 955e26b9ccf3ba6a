"""Running the endpoint on the daemon's event loop: bind, serve, stop.

:class:`WebServer` binds the aiohttp application (:mod:`._app`) with the mutual-TLS context
(:mod:`._tls`) on ``[site] web_listen``. Beyond the per-request limits of the application, the
connection itself is bounded: a TLS handshake may take ``[web] handshake_seconds`` and a
connection takes no new request after ``[web] connection_seconds`` and is closed
``[web] request_seconds`` later (the longest its request in progress, if any, may take), so a
client that trickles its headers cannot hold one forever.
"""

from __future__ import annotations

import asyncio
import ssl

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from disseminator.web._app import WebSite, make_app

__all__ = ["WebServer"]


class WebServer:
    """The HTTPS endpoint of one site."""

    def __init__(self, site: WebSite, context: ssl.SSLContext) -> None:
        self._site, self._context = site, context
        self._runner = web.AppRunner(
            make_app(site), handle_signals=False, access_log=None, shutdown_timeout=1.0,
            keepalive_timeout=min(75.0, site.config.connection_seconds),
        )
        self._server: asyncio.AbstractServer | None = None
        self.port = 0

    async def start(self) -> int:
        """Bind and serve; return the bound port (the configured one, or a free one for 0)."""
        await self._runner.setup()
        handler = self._runner.server
        assert handler is not None
        loop = asyncio.get_running_loop()
        lifetime = self._site.config.connection_seconds
        grace = self._site.config.request_seconds  # the longest a request in progress may take

        def end(protocol: RequestHandler) -> None:
            protocol.close()  # no further request; the one in progress, if any, is answered
            loop.call_later(grace, protocol.force_close)  # (close() leaves an idle one open)

        def connection() -> RequestHandler:
            protocol = handler()
            loop.call_later(lifetime, end, protocol)
            return protocol

        self._server = await loop.create_server(
            connection, self._site.config.host, self._site.config.port, ssl=self._context,
            ssl_handshake_timeout=self._site.config.handshake_seconds, backlog=128,
        )
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    async def stop(self) -> None:
        """Stop listening, close connections (idempotent)."""
        if self._server is not None:
            self._server.close()
            self._server = None
        await self._runner.cleanup()
