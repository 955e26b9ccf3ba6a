"""Running the endpoint on the daemon's event loop: bind, accept, serve, stop.

:class:`WebServer` binds ``[site] web_listen`` itself and accepts connections in a loop of its
own, so that it can refuse one *before* its TLS handshake: past ``[web] connections`` open in
total, or ``[web] connections_per_address`` from the client's address
(:class:`~disseminator.web._limits.ConnectionGate`), an accepted socket is closed at once. That
costs the site an ``accept`` and a ``close`` (a few microseconds), where answering ``503``
would first cost a whole handshake (a P-384 signature and the client's chain verified, about
a millisecond of CPU on the loop: docs/linked-data.md, "Limits and bad input"). A connection
admitted is handed to asyncio with the mutual-TLS context
(:meth:`asyncio.AbstractEventLoop.connect_accepted_socket`) and the aiohttp application
(:mod:`._app`), wrapped so that its end, or its failed handshake, releases its place.

Beyond the per-request limits of the application, the connection itself is bounded: a TLS
handshake may take ``[web] handshake_seconds`` and a connection takes no new request after
``[web] connection_seconds`` and is closed ``[web] request_seconds`` later (the longest its
request in progress, if any, may take), so a client that trickles its headers cannot hold one
forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable, Coroutine
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from disseminator.web._app import WebSite, make_app
from disseminator.web._limits import ConnectionGate

__all__ = ["WebServer"]

log = logging.getLogger(__name__)

_BACKLOG = 128
_ACCEPT_RETRY_S = 0.1  # after accept failed (out of file descriptors): let some close


class _Counted(asyncio.Protocol):
    """aiohttp's protocol of one connection, releasing the connection's place when it ends."""

    def __init__(self, inner: RequestHandler, release: Callable[[], None]) -> None:
        self.inner, self._release = inner, release

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> None:
        self.inner.eof_received()  # (None: the transport closes itself)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        try:
            self.inner.connection_lost(exc)
        finally:
            self._release()


class WebServer:
    """The HTTPS endpoint of one site."""

    def __init__(self, site: WebSite, context: ssl.SSLContext) -> None:
        self._site, self._context = site, context
        self._runner = web.AppRunner(
            make_app(site), handle_signals=False, access_log=None, shutdown_timeout=1.0,
            keepalive_timeout=min(75.0, site.config.connection_seconds),
        )
        self.gate = ConnectionGate(
            total=site.config.connections, per_address=site.config.connections_per_address
        )
        self._listeners: list[socket.socket] = []
        self._tasks: set[asyncio.Task[None]] = set()  # accept loops, handshakes in progress
        self.port = 0

    async def start(self) -> int:
        """Bind and serve; return the bound port (the configured one, or a free one for 0)."""
        await self._runner.setup()
        config = self._site.config
        self._listeners = await _bind(config.host, config.port)
        self.port = int(self._listeners[0].getsockname()[1])
        for listener in self._listeners:
            self._spawn(self._accept(listener))
        return self.port

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self, listener: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, address = await loop.sock_accept(listener)
            except OSError as exc:  # EMFILE, ENFILE, ENOBUFS...: the listener stays
                log.warning("web: accepting a connection failed: %s", exc)
                await asyncio.sleep(_ACCEPT_RETRY_S)
                continue
            host = str(address[0])
            reason = self.gate.refusal(host)
            if reason is not None:  # closed before the handshake costs anything
                conn.close()
                self._site.refusals.connection(reason)
                log.debug("web: refused a connection from %s (%d open, %d from it)", host,
                          self.gate.open, self.gate.held(host))
                continue
            self._spawn(self._serve(conn, host))

    async def _serve(self, conn: socket.socket, host: str) -> None:
        """Handshake on ``conn`` and hand it to aiohttp; its place is released once, when it
        ends or if the handshake fails."""
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.gate.release(host)

        loop = asyncio.get_running_loop()
        handler = self._runner.server
        assert handler is not None
        lifetime, grace = self._site.config.connection_seconds, self._site.config.request_seconds

        def end(protocol: RequestHandler) -> None:
            protocol.close()  # no further request; the one in progress, if any, is answered
            loop.call_later(grace, protocol.force_close)  # (close() leaves an idle one open)

        def connection() -> _Counted:
            protocol = handler()
            loop.call_later(lifetime, end, protocol)
            return _Counted(protocol, release)

        try:
            await loop.connect_accepted_socket(
                connection, conn, ssl=self._context,
                ssl_handshake_timeout=self._site.config.handshake_seconds,
            )
        except (OSError, TimeoutError) as exc:  # the handshake failed (ssl.SSLError too)
            log.debug("web: TLS handshake with %s failed: %s", host, exc)
            conn.close()
            release()
        except BaseException:
            conn.close()
            release()
            raise

    async def stop(self) -> None:
        """Stop listening, close connections (idempotent)."""
        for task in list(self._tasks):  # accept loops first (they wait on the listeners)
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for listener in self._listeners:
            listener.close()
        self._listeners = []
        await self._runner.cleanup()


async def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address ``host`` resolves to (one port for all of them)."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    listeners: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            listener = socket.socket(family, kind, proto)
            listeners.append(listener)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(listeners) > 1:  # a free port: the same one on each address
                address = (address[0], listeners[0].getsockname()[1], *address[2:])
            listener.bind(address)
            listener.listen(_BACKLOG)
            listener.setblocking(False)
    except OSError:
        for listener in listeners:
            listener.close()
        raise
    if not listeners:
        raise OSError(f"{host!r} resolves to no address")
    return listeners
