"""A real site's HTTPS endpoint as an LDN receiver (W3C Linked Data Notifications, §4.2).

One site process on loopback (mutual TLS, port 0, its address from ``network.web_url``); every
MUST and SHOULD of a receiver is a test here (docs/linked-data.md lists which checks which).
The client is Python's ``http.client`` with a certificate of the network's CA.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import grpc
import pyoxigraph as ox
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deploy.network import DEFAULT_SITES, LocalNetwork, wait_until
from deploy.pki import revoke_party
from disseminator.web import client_context
from xdn.grpc_tls import TlsFiles, channel_credentials

pytestmark = pytest.mark.integration

LDP = "http://www.w3.org/ns/ldp#"
NODE = "https://d1.xdn.example/"
AS = "https://www.w3.org/ns/activitystreams#"
NOTE = {
    "@context": "https://www.w3.org/ns/activitystreams",
    "@id": "", "type": "Announce", "actor": "https://alice.xdn.example/",
    "object": "https://d1.xdn.example/msg/order-1/v1/alice",
}


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    net = LocalNetwork(tmp_path_factory.mktemp("ldn") / "net", sites=DEFAULT_SITES[:1])
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        yield net
    finally:
        net.stop()


class Client:
    """An HTTPS client of the network (certificate ``name``), one connection per request."""

    def __init__(self, network: LocalNetwork, name: str | None = "alice") -> None:
        self.base = network.web_url("d1")
        ca = (network.certs / "ca.pem").read_bytes()
        self.context = (
            client_context(cert=network.certs / f"{name}.pem", key=network.certs / f"{name}.key",
                           ca_pem=ca)
            if name is not None else ssl.create_default_context(cadata=ca.decode())
        )

    def request(
        self, method: str, path: str, body: bytes | None = None, **headers: str
    ) -> tuple[int, http.client.HTTPMessage, bytes]:
        url = urlsplit(urljoin(self.base, path))
        conn = http.client.HTTPSConnection(url.hostname or "", url.port, context=self.context,
                                           timeout=30)
        try:
            target = url.path + (f"?{url.query}" if url.query else "")
            conn.request(method, target, body=body,
                         headers={k.replace("_", "-"): v for k, v in headers.items()})
            reply = conn.getresponse()
            return reply.status, reply.headers, reply.read()
        finally:
            conn.close()

    def post(self, body: bytes, content_type: str) -> tuple[int, http.client.HTTPMessage, bytes]:
        return self.request("POST", "/inbox/", body, Content_Type=content_type)


def _graph(body: bytes, content_type: str) -> set[tuple[str, str, str]]:
    media_type = content_type.split(";")[0].strip()
    fmt = ox.RdfFormat.from_media_type(media_type)
    assert fmt is not None, content_type
    return {(str(q.subject), str(q.predicate), str(q.object))
            for q in ox.parse(body, format=fmt)}


def _inbox_link(headers: http.client.HTTPMessage) -> str:
    for link in headers.get_all("Link") or ():
        for value in link.split(","):
            target, _, params = value.partition(";")
            if f'rel="{LDP}inbox"' in params:
                return target.strip().strip("<>")
    raise AssertionError(f"no ldp:inbox Link in {headers}")


# ---- discovery (LDN §4.1: a target advertises its inbox; §4.2: receivers expose it) -------

def test_the_endpoint_is_announced_at_start_up(network: LocalNetwork) -> None:
    base = network.web_url("d1")
    assert f"site d1: linked data at {base} (inbox {base}inbox/)" in network.output("d1")


def test_discovery_by_link_header_and_in_the_root_rdf(network: LocalNetwork) -> None:
    client = Client(network)
    status, headers, body = client.request("GET", "/")
    assert status == 200
    assert _inbox_link(headers) == "/inbox/"
    assert headers["Content-Type"] == "application/ld+json"  # JSON-LD by default
    root = _graph(body, headers["Content-Type"])
    assert (f"<{NODE}>", f"<{LDP}inbox>", f"<{NODE}inbox/>") in root
    status, headers, _ = client.request("HEAD", "/")
    assert status == 200 and _inbox_link(headers) == "/inbox/"


def test_the_root_describes_the_node_for_a_verifier(network: LocalNetwork) -> None:
    from xdn import provenance, rdf

    status, headers, body = Client(network).request("GET", "/", Accept="application/n-quads")
    assert status == 200 and headers["Content-Type"] == "application/n-quads"
    quads = [q for q in rdf.parse_nquads(body) if q.g is not None]
    assert provenance.read_node_description(NODE + "#cert", quads) == (
        NODE, (network.certs / "d1.pem").read_bytes(),
    )
    assert b"-----BEGIN PUBLIC KEY-----" in body


# ---- POST (LDN §4.2: MUST accept JSON-LD, 201 + Location; MAY other types; 4xx on refusal) -

def test_post_json_ld_is_created_listed_and_retrievable(network: LocalNetwork) -> None:
    client = Client(network)
    status, headers, _ = client.post(json.dumps(NOTE).encode(), "application/ld+json")
    assert status == 201
    location = headers["Location"]
    assert location.startswith("/inbox/")
    uri = NODE + location.lstrip("/")
    # the inbox lists it with ldp:contains, in JSON-LD by default
    status, headers, body = client.request("GET", "/inbox/")
    assert status == 200 and headers["Content-Type"] == "application/ld+json"
    listing = _graph(body, headers["Content-Type"])
    assert (f"<{NODE}inbox/>", f"<{LDP}contains>", f"<{uri}>") in listing
    assert (f"<{NODE}inbox/>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>",
            f"<{LDP}BasicContainer>") in listing
    # the notification, in JSON-LD by default, its "" resolved to its own URI
    status, headers, body = client.request("GET", location)
    assert status == 200 and headers["Content-Type"] == "application/ld+json"
    assert (f"<{uri}>", f"<{AS}actor>", "<https://alice.xdn.example/>") in _graph(
        body, headers["Content-Type"])


@pytest.mark.parametrize(
    "accept", ["application/trig", "application/n-quads", "text/turtle", "application/ld+json"]
)
def test_other_rdf_types_by_negotiation(network: LocalNetwork, accept: str) -> None:
    client = Client(network)
    _, headers, _ = client.post(json.dumps(NOTE).encode(), "application/ld+json")
    for path in ("/inbox/", headers["Location"]):
        status, reply, body = client.request("GET", path, Accept=accept)
        assert status == 200 and reply["Content-Type"].startswith(accept)
        assert "Accept" in reply["Vary"]
        assert _graph(body, reply["Content-Type"])


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'<> a <https://www.w3.org/ns/activitystreams#Read> .', "text/turtle"),
        (b"<https://a.example/s> <https://a.example/p> <https://a.example/o> "
         b"<https://a.example/g> .\n", "application/n-quads"),
    ],
)
def test_post_turtle_and_n_quads(network: LocalNetwork, body: bytes, content_type: str) -> None:
    client = Client(network)
    status, headers, _ = client.post(body, content_type)
    assert status == 201
    status, reply, got = client.request("GET", headers["Location"], Accept="application/trig")
    assert status == 200 and _graph(got, reply["Content-Type"])


def test_html_for_people(network: LocalNetwork) -> None:
    status, headers, body = Client(network).request("GET", "/", Accept="text/html")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b'<a href="/inbox/">' in body


def test_head_and_options_announce_accept_post(network: LocalNetwork) -> None:
    client = Client(network)
    for method in ("HEAD", "OPTIONS"):
        status, headers, body = client.request(method, "/inbox/")
        assert status in (200, 204) and body == b""
        accepted = {t.strip() for t in headers["Accept-Post"].split(",")}
        assert {"application/ld+json", "text/turtle", "application/n-quads"} <= accepted
        assert "POST" in headers["Allow"]


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        (b"<a> <b> <c> .", "application/json", 415, b"not accepted"),
        (b"x", "image/png", 415, b"not accepted"),
        (b'{"@id": ', "application/ld+json", 400, b"not JSON"),
        (b"not turtle", "text/turtle", 400, b"not valid text/turtle"),
        (json.dumps({"@context": "https://evil.example/ctx", "@id": ""}).encode(),
         "application/ld+json", 400, b"https://evil.example/ctx"),
        (b"[]", "application/ld+json", 400, b"no statement"),
        (b"#" * (256 * 1024 + 1), "text/turtle", 413, b"over the inbox's limit"),
    ],
)
def test_refusals(
    network: LocalNetwork, body: bytes, content_type: str, status: int, message: bytes
) -> None:
    got, _, text = Client(network).post(body, content_type)
    assert got == status and message in text


def test_406_and_404(network: LocalNetwork) -> None:
    client = Client(network)
    assert client.request("GET", "/", Accept="image/png")[0] == 406
    assert client.request("GET", "/inbox/", Accept="application/json")[0] == 406
    assert client.request("GET", "/nowhere")[0] == 404
    # an id the inbox does not hold: 404 to the site itself; to anyone else the 403 another
    # party's notification gets (receipt ids can be guessed: no oracle of who received what)
    assert Client(network, "d1").request("GET", "/inbox/not-a-notification")[0] == 404
    assert client.request("GET", "/inbox/not-a-notification")[0] == 403
    assert client.request("GET", "/inbox/not%20an%20id")[0] == 404


# ---- mutual TLS --------------------------------------------------------------------------

def test_a_client_without_a_certificate_cannot_connect(network: LocalNetwork) -> None:
    with pytest.raises((ssl.SSLError, ConnectionError, socket.timeout)):
        Client(network, name=None).request("GET", "/")


def test_bad_input_leaves_grpc_serving(network: LocalNetwork) -> None:
    client = Client(network)
    for _ in range(20):
        client.post(b"{" * 5000, "application/ld+json")
        client.post(b"#" * (1024 * 1024), "text/turtle")
    with grpc.secure_channel(
        network.address("d1"), channel_credentials(TlsFiles.from_dir(network.certs, "d1"))
    ) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=10
        )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_a_connection_flood_is_closed_at_accept_and_grpc_serves(network: LocalNetwork) -> None:
    """A site's defaults ([web] connections_per_address = 32): 100 bare TCP connections from
    one address, never starting TLS; past 32 each is closed by the site at once, the gRPC
    health service answers meanwhile, and once the flood ends the address is served again."""
    url = urlsplit(network.web_url("d1"))
    def refused() -> float:
        return network.metric("d1", "xdn_web_connections_refused_total", reason="per_address")

    before = refused()
    flood = [socket.create_connection((url.hostname or "", url.port or 0), timeout=30)
             for _ in range(100)]
    try:
        closed = 0
        for conn in flood[32:]:
            try:
                closed += conn.recv(1) == b""  # closed by the site before any byte
            except ConnectionResetError:
                closed += 1
        assert closed == 68
        # counted on the site's Prometheus metrics, not only in its memory
        assert wait_until(lambda: refused() - before >= 68, 10), refused() - before
        assert refused() - before == 68
        with grpc.secure_channel(
            network.address("d1"), channel_credentials(TlsFiles.from_dir(network.certs, "d1"))
        ) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        for conn in flood:
            conn.close()

    def served() -> bool:
        try:
            return Client(network).request("GET", "/")[0] == 200
        except (OSError, http.client.HTTPException):
            return False

    assert wait_until(served, 30)


# ---- the command line: xdn inbox list|show|post ---------------------------------------------

def test_the_inbox_from_the_command_line(
    network: LocalNetwork, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    note = tmp_path / "note.jsonld"
    note.write_text(json.dumps(NOTE))
    who = ["--web", network.web_url("d1"), "--certs", str(network.certs), "--name", "alice"]
    assert main(["inbox", "post", str(note), *who]) == 0
    url = capsys.readouterr().out.strip()
    assert url.startswith(network.web_url("d1") + "inbox/")
    uri = NODE + url.removeprefix(network.web_url("d1"))
    assert main(["inbox", "list", *who]) == 0
    assert uri in capsys.readouterr().out.split()
    assert main(["inbox", "show", uri, *who]) == 0
    assert "<https://alice.xdn.example/>" in capsys.readouterr().out
    bad = tmp_path / "bad.ttl"
    bad.write_text("not turtle")
    assert main(["inbox", "post", str(bad), *who]) != 0
    assert "400 Bad Request: not valid text/turtle" in capsys.readouterr().err


# ---- durability, revocation (these change the site: last) ---------------------------------

def test_notifications_survive_a_restart(network: LocalNetwork) -> None:
    client = Client(network)
    _, headers, _ = client.post(json.dumps(NOTE).encode(), "application/ld+json")
    location = headers["Location"]
    network.signal_site("d1", 15)
    assert network.wait_site("d1") == 0
    network.restart_site("d1")
    client = Client(network)  # a new port
    status, _, body = client.request("GET", location, Accept="application/n-quads")
    assert status == 200 and b"alice.xdn.example" in body
    status, _, body = client.request("GET", "/inbox/", Accept="application/n-quads")
    assert (NODE + location.lstrip("/")).encode() in body


def test_a_revoked_certificate_is_refused(network: LocalNetwork) -> None:
    assert Client(network, "bob").request("GET", "/")[0] == 200
    revoke_party(network.certs, "bob", now=datetime.now(UTC))
    assert wait_until(lambda: Client(network, "bob").request("GET", "/")[0] == 403, 30)
    status, _, body = Client(network, "bob").post(json.dumps(NOTE).encode(),
                                                  "application/ld+json")
    assert status == 403 and b"'bob' was revoked" in body
    assert Client(network, "alice").request("GET", "/")[0] == 200


