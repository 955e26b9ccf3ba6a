"""An HTTPS client of a site's linked-data endpoint (for the command line, the demo, the console).

Every request is mutual TLS with a certificate of the network (a directory with ``NAME.pem``,
``NAME.key`` and ``ca.pem``), as the endpoint requires. Resources are named by node
URIs (``https://d2.xdn.example/msg/…``), which are names, not addresses. Where to ask:

* a site's own endpoint (its base URL, as ``xdn cluster status`` prints it): a node URI's path
  is asked there, whoever's URI it is;
* *any* site's endpoint, through which the site a node URI names is resolved
  (:func:`resolve`): ``GET /nodes/NAME`` answers NAME's signed DHT record, which this client
  checks itself — the signature under the certificate the record carries, that certificate
  under the network CA (a site's, in force), that it is NAME's and live — and then asks the
  endpoint the record names, checking that the server there presents NAME's certificate. So
  the site asked is trusted with nothing: a forged, altered, stale or someone else's record
  is refused (:class:`ResolveError`), and so is an endpoint that is not NAME's.

Answers are read up to a size limit; a status other than 2xx is a
:class:`~xdn.errors.PeerError` carrying the site's message.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, urljoin, urlsplit

from xdn import certs as xdn_certs
from xdn.errors import CertificateError, PeerError, UsageError

__all__ = [
    "DEFAULT_MAX_BYTES",
    "Reply",
    "ResolveError",
    "Resolved",
    "WebClient",
    "node_name",
    "resolve",
]

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
_NODE_SUFFIX = ".xdn.example"
_RECORD_BYTES = 64 * 1024  # a site record: a certificate, a signature, a few names


class ResolveError(PeerError):
    """The site asked to resolve a name answered a record that does not check out."""


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

    def __init__(self, web: str, *, certs: Path, name: str, max_bytes: int = DEFAULT_MAX_BYTES,
                 server: str | None = None):
        base = urlsplit(web)
        if base.scheme != "https" or not base.hostname:
            raise UsageError(f"--web must be an https:// URL, got {web!r}")
        self.base = web if web.endswith("/") else web + "/"
        self.max_bytes = max_bytes
        self.certs, self.name = certs, name
        self.server = server  # the site whose certificate the server must present (None: any)
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
        body: bytes | None = None, content_type: str | None = None, limit: int | None = None,
    ) -> Reply:
        """Send one request; return the 2xx answer (read up to ``limit`` bytes, by default
        ``max_bytes``).

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
            conn.connect()
            self._check_server(conn)
            conn.request(method, url.path + (f"?{url.query}" if url.query else ""), body=body,
                         headers=headers)
            answer = conn.getresponse()
            data = answer.read((limit or self.max_bytes) + 1)
        except (OSError, http.client.HTTPException) as exc:
            raise PeerError(f"{self.base}: {exc}") from None
        finally:
            conn.close()
        if len(data) > (limit or self.max_bytes):
            raise PeerError(f"{url.geturl()}: the answer is larger than "
                            f"{limit or self.max_bytes} bytes")
        if not 200 <= answer.status < 300:
            message = data.decode("utf-8", "replace").strip()
            raise PeerError(f"{method} {url.path}: {answer.status} {answer.reason}: {message}")
        return Reply(
            status=answer.status, content_type=answer.headers.get("Content-Type", ""),
            location=answer.headers.get("Location"), body=data,
            links=tuple(answer.headers.get_all("Link") or ()),
        )

    def _check_server(self, conn: http.client.HTTPSConnection) -> None:
        """The server presents :attr:`server`'s certificate (a site's), when one is expected."""
        if self.server is None:
            return
        sock = conn.sock
        der = sock.getpeercert(binary_form=True) if isinstance(sock, ssl.SSLSocket) else None
        try:
            credential = xdn_certs.credential_from_pem(
                ssl.DER_cert_to_PEM_cert(der or b"").encode("ascii"))
        except (CertificateError, ValueError):
            credential = None
        if credential is None or credential.name != self.server or credential.role != "site":
            found = "no certificate" if credential is None else repr(credential.name)
            raise PeerError(f"{self.base} is not site {self.server!r}'s endpoint: the server "
                            f"there presents {found}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """Where a site's endpoint is, from its record as checked here."""

    site: str
    endpoint: str  # https://HOST:PORT/
    address: str  # its gRPC address
    block: str
    issued: datetime
    expires: datetime
    serial: int  # of the certificate that signed the record
    via: str  # the endpoint asked

    def describe(self) -> str:
        """One line for a person."""
        return (f"site {self.site} ({xdn_certs.node_uri(self.site)}) is at {self.endpoint}: "
                f"its DHT record, signed by {self.site} (certificate serial {self.serial:x}) "
                f"and checked under the CA here, as {self.via} found it")


def node_name(uri: str) -> str:
    """The site a node URI (``https://NAME.xdn.example/…``) or a bare NAME names."""
    if "://" not in uri:
        name = uri
    else:
        parts = urlsplit(uri)
        host = parts.netloc
        if parts.scheme != "https" or not host.endswith(_NODE_SUFFIX):
            raise UsageError(f"{uri!r} is not a node URI (https://NAME{_NODE_SUFFIX}/…)")
        name = host.removesuffix(_NODE_SUFFIX)
    if not name or "/" in name or not name.isprintable():
        raise UsageError(f"{uri!r} names no site")
    return name


def resolve(via: WebClient, name: str, *, ca_pem: bytes, now: datetime) -> Resolved:
    """Site ``name``'s endpoint, from the record ``via``'s site answers, checked here.

    Raises:
        ResolveError: the answer is not a record, not ``name``'s, forged or altered (its
            signature or certificate does not verify under the CA), expired or withdrawn, or
            names no endpoint.
        PeerError: ``via`` answered another status (e.g. 404: the DHT holds no record of it).
    """
    from disseminator.dht import CaRecordVerifier, SiteRecord  # the DHT's own checks

    reply = via.request("GET", f"/nodes/{quote(name, safe='')}", accept="application/json",
                        limit=_RECORD_BYTES)
    if len(reply.body) > _RECORD_BYTES:
        raise ResolveError(f"{via.base} answered {len(reply.body)} bytes for a site record")
    try:
        record = SiteRecord.from_json(json.loads(reply.body))
    except (ValueError, PeerError) as exc:  # JSONDecodeError, InvalidRecordError
        raise ResolveError(f"{via.base} answered no site record for {name!r}: {exc}") from None
    if record.site != name:
        raise ResolveError(f"{via.base} answered the record of site {record.site!r} when asked "
                           f"for {name!r}: refused")
    try:
        CaRecordVerifier(ca_pem=ca_pem).verify(record, now_ms=int(now.timestamp() * 1000))
    except PeerError as exc:
        raise ResolveError(f"{via.base} answered a record of {name!r} that does not check out "
                           f"(forged, altered or stale): {exc}; refused") from None
    if not record.web:
        raise ResolveError(f"site {name!r} announces no HTTPS endpoint in its DHT record")
    credential = xdn_certs.credential_from_pem(record.certificate_pem)
    return Resolved(
        site=name, endpoint=f"https://{record.web}/", address=record.address,
        block=record.block, issued=datetime.fromtimestamp(record.issued_at_ms / 1000, UTC),
        expires=datetime.fromtimestamp(record.expires_at_ms / 1000, UTC),
        serial=credential.serial, via=via.base,
    )
