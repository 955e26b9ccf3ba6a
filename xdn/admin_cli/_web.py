"""An HTTPS client of a site's linked-data endpoint, for the command line (an edge).

Every request is mutual TLS with a certificate of the network (``--certs DIR --name NAME``:
``NAME.pem``, ``NAME.key``, ``ca.pem``), as the endpoint requires. Resources are named by node
URIs (``https://d2.xdn.example/msg/…``), which are names, not addresses: ``--web URL`` (the
base URL a site's endpoint listens on, as ``xdn cluster status`` prints it) says where to ask,
and a node URI's path is asked there. Answers are read up to ``--max-bytes``; a status other
than 2xx is a :class:`~xdn.errors.PeerError` carrying the site's message.
"""

from __future__ import annotations

import argparse
import http.client
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from xdn.errors import PeerError, UsageError

__all__ = ["Reply", "WebClient", "web_args"]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def web_args(parser: argparse.ArgumentParser, *, required: bool = True) -> None:
    """Add ``--web``, ``--certs`` and ``--name`` (who asks, and where)."""
    parser.add_argument(
        "--web", required=required, metavar="URL",
        help="the site's HTTPS endpoint, e.g. https://127.0.0.1:8443/ (xdn cluster status "
        "prints it); a node URI's path is asked there",
    )
    parser.add_argument("--name", required=required, help="your certificate's name (NAME.pem)")
    parser.add_argument(
        "--certs", type=Path, required=required,
        help="directory with NAME.pem, NAME.key and the network's ca.pem",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A 2xx answer."""

    status: int
    content_type: str
    location: str | None
    body: bytes
    links: tuple[str, ...] = ()  # the Link header values


class WebClient:
    """Requests to one site's endpoint as one party of the network."""

    def __init__(self, web: str, *, certs: Path, name: str, max_bytes: int = DEFAULT_MAX_BYTES):
        base = urlsplit(web)
        if base.scheme != "https" or not base.hostname:
            raise UsageError(f"--web must be an https:// URL, got {web!r}")
        self.base = web if web.endswith("/") else web + "/"
        self.max_bytes = max_bytes
        try:
            self._context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
            self._context.load_cert_chain(str(certs / f"{name}.pem"), str(certs / f"{name}.key"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot load the certificate of {name!r} from {certs}: {exc}"
                             ) from None

    def url(self, target: str) -> str:
        """Where to ask for ``target``: a node URI's (or a path's) path, on ``--web``."""
        parts = urlsplit(target)
        path = parts.path or "/"
        return urljoin(self.base, path if not parts.query else f"{path}?{parts.query}")

    def request(
        self, method: str, target: str, *, accept: str | None = None,
        body: bytes | None = None, content_type: str | None = None,
    ) -> Reply:
        """Send one request; return the 2xx answer.

        Raises:
            PeerError: the site answered with another status (its message), or the
                connection failed (TLS refused, reset).
        """
        url = urlsplit(self.url(target))
        headers = {}
        if accept is not None:
            headers["Accept"] = accept
        if content_type is not None:
            headers["Content-Type"] = content_type
        conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=self._context,
                                           timeout=30)
        try:
            conn.request(method, url.path + (f"?{url.query}" if url.query else ""), body=body,
                         headers=headers)
            answer = conn.getresponse()
            data = answer.read(self.max_bytes + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise PeerError(f"{self.base}: {exc}") from None
        finally:
            conn.close()
        if len(data) > self.max_bytes:
            raise PeerError(f"{url.geturl()}: the answer is larger than {self.max_bytes} bytes")
        if not 200 <= answer.status < 300:
            message = data.decode("utf-8", "replace").strip()
            raise PeerError(f"{method} {url.path}: {answer.status} {answer.reason}: {message}")
        return Reply(
            status=answer.status, content_type=answer.headers.get("Content-Type", ""),
            location=answer.headers.get("Location"), body=data,
            links=tuple(answer.headers.get_all("Link") or ()),
        )
