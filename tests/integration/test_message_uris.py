"""Message URIs dereference at the site that minted them, to the message's parties only.

A real network (d1 → d2 → alice); production-dept publishes; d2's message to alice is fetched
from d2's HTTPS endpoint by each kind of party (docs/linked-data.md, "Message URIs").
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import pytest

from deploy.network import LocalNetwork, wait_until
from tests.integration.networks import serving_alice
from tests.integration.test_linked_data import Client
from xdn import certs, provenance

pytestmark = pytest.mark.integration

D2 = certs.node_uri("d2")


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalNetwork, str]]:
    net = LocalNetwork(tmp_path_factory.mktemp("msg") / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    with serving_alice(net):
        marker = net.publish_marker("production-dept", ["alice"])
        pattern = re.compile(
            rf"<({re.escape(D2)}msg/{re.escape(marker.stem)}/v1/subscriber-alice[^>#]*)#"
        )
        log = net.logs / "d2.nq"

        def minted() -> str | None:
            found = pattern.search(log.read_text()) if log.exists() else None
            return found.group(1) if found else None

        assert wait_until(lambda: minted() is not None, 30), "d2 logged no hop to alice"
        uri = minted()
        assert uri is not None
        yield net, uri


def _get(
    network: LocalNetwork, who: str, uri: str, accept: str = "application/n-quads"
) -> tuple[int, bytes]:
    client = Client(network, who)
    client.base = network.web_url("d2")
    status, _, body = client.request("GET", urlsplit(uri).path, Accept=accept)
    return status, body


@pytest.mark.parametrize("who", ["alice", "production-dept", "d1", "d2"])
def test_the_parties_read_the_whole_message(
    published: tuple[LocalNetwork, str], who: str
) -> None:
    network, uri = published
    status, body = _get(network, who, uri)
    assert status == 200, body
    message = provenance.Message.from_nquads(body)
    assert message.uri == uri
    assert [e.sender for e in message.envelopes()] == [
        certs.node_uri(n) for n in ("production-dept", "d1", "d2")
    ]
    assert message.recipient == certs.node_uri("alice")
    # verifiable with the CA alone: every hop's certificate travels with it
    verifier = provenance.ChainVerifier((network.certs / "ca.pem").read_bytes())
    verifier.verify_received(
        message, at=datetime.now(UTC),
        publisher_certificate=(network.certs / "production-dept.pem").read_bytes(),
        recipient=certs.node_uri("alice"),
    )


@pytest.mark.parametrize("who", ["bob", "d3", "qa-company"])
def test_others_are_refused(published: tuple[LocalNetwork, str], who: str) -> None:
    network, uri = published
    status, body = _get(network, who, uri)
    assert status == 403 and b"may not read this message" in body


def test_other_representations_and_unknown_messages(
    published: tuple[LocalNetwork, str],
) -> None:
    network, uri = published
    for accept in ("application/trig", "application/ld+json", "text/html"):
        assert _get(network, "alice", uri, accept)[0] == 200
    # a message d2 does not keep: bob gets the very 403 he gets for alice's (no oracle of
    # who received what), alice too; d2 itself learns it is not there
    assert _get(network, "bob", uri + "-not") == _get(network, "bob", uri)
    assert _get(network, "alice", uri + "-not")[0] == 403
    assert _get(network, "d2", uri + "-not")[0] == 404
    assert _get(network, "alice", uri, "text/turtle")[0] == 406  # named graphs


def test_provenance_show_fetches_a_message_uri(
    published: tuple[LocalNetwork, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main

    network, uri = published
    who = ["--web", network.web_url("d2"), "--certs", str(network.certs)]
    assert main(["provenance", "show", uri, *who, "--name", "alice"]) == 0
    out = capsys.readouterr().out
    assert f"message <{uri}>" in out and "https://d1.xdn.example/" in out
    assert main(["provenance", "show", uri, *who, "--name", "bob"]) != 0
    assert "403 Forbidden" in capsys.readouterr().err


def test_a_message_uri_resolves_through_another_site(
    published: tuple[LocalNetwork, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Only d1's endpoint is given: d2, which minted the URI, is found through it (its signed
    DHT record, checked here under the CA), and the message fetched from d2 verifies."""
    from cli.admin._web import client_for
    from cli.main import main

    network, uri = published
    via = ["--via", network.web_url("d1"), "--certs", str(network.certs), "--name", "alice"]
    d2 = network.web_url("d2")
    assert network.web_url("d1") != d2
    # for a person: where d2 is, and why to believe it
    assert main(["site", "resolve", uri, *via]) == 0
    out = capsys.readouterr().out
    assert f"linked data: {d2}" in out and "signed by d2" in out, out
    assert f"gRPC: {network.address('d2')}" in out, out
    # xdn provenance show, asked through d1 only
    assert main(["provenance", "show", uri, *via]) == 0
    captured = capsys.readouterr()
    assert f"message <{uri}>" in captured.out and "https://d1.xdn.example/" in captured.out
    assert f"site d2 ({D2}) is at {d2}" in captured.err, captured.err
    # the same road, and what came back verifies under the CA alone
    args = argparse.Namespace(web=None, via=network.web_url("d1"), certs=network.certs,
                              name="alice", max_bytes=64 * 1024 * 1024)
    client = client_for(args, uri, quiet=True)
    assert client.base == d2 and client.server == "d2"
    message = provenance.Message.from_nquads(
        client.request("GET", uri, accept="application/n-quads").body)
    assert message.uri == uri
    provenance.ChainVerifier((network.certs / "ca.pem").read_bytes()).verify_received(
        message, at=datetime.now(UTC),
        publisher_certificate=(network.certs / "production-dept.pem").read_bytes(),
        recipient=certs.node_uri("alice"),
    )
    # d2's inbox, through d1 too: alice's receipt of that message is listed and read there
    def receipts() -> list[str]:
        assert main(["inbox", "list", "--site", "d2", *via]) == 0
        return [u for u in capsys.readouterr().out.split() if "/inbox/receipt-" in u]

    assert wait_until(lambda: bool(receipts()), 30), "d2's inbox lists no receipt of alice's"
    listed = receipts()[0]
    assert listed.startswith(f"{D2}inbox/receipt-"), listed
    assert main(["inbox", "show", listed, *via, "--as", "application/n-quads"]) == 0
    assert uri in capsys.readouterr().out  # the receipt wraps d2's message to alice
    # bob is still refused by d2 itself, and a site the DHT does not hold is not found
    assert main(["provenance", "show", uri, "--via", network.web_url("d1"), "--certs",
                 str(network.certs), "--name", "bob"]) != 0
    assert "403 Forbidden" in capsys.readouterr().err
    assert main(["site", "resolve", "nowhere", *via]) != 0
    assert "no live record of a site 'nowhere'" in capsys.readouterr().err
