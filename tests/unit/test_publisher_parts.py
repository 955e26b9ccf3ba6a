"""A publisher sends a request larger than its part size in parts (``PublishParts``), a smaller
one whole (``Publish``), and handles the acknowledgement and a refusal alike. A document is
streamed through files of the state directory (the request framed by hand, the same bytes as
parsed in memory), which are gone once it is acknowledged or refused, and at start-up.

The root site is a fake servicer on a real in-process gRPC server (mutual TLS, port 0) that
records which call carried what; it joins parts with :class:`xdn.parts.Joiner`.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import pytest

from deploy.network import ONTOLOGY, SAMPLE_DOCUMENTS, LocalNetwork
from publisher import client
from publisher.client import Publisher, PublisherSetup, PublishResult, call_failure
from xdn import certs, crypto
from xdn.errors import UsageError
from xdn.grpc_tls import TlsFiles, server_credentials
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.parts import MIN_PART_BYTES, Joiner, PartData
from xdn.paths import REPO_ROOT
from xdn.policy import load_signed_policy
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc
from xdn.wire_write import SplicedDissemination

PUBLISHER = "production-dept"
SAMPLE = SAMPLE_DOCUMENTS[PUBLISHER]


@dataclass(frozen=True, slots=True)
class _Received:
    call: str  # "Publish" or "PublishParts"
    parts: int
    largest_part: int
    request: pb.PublishRequest
    raw: bytes  # as it came (parts joined), or re-serialized (whole)


class _RootSite(pb_grpc.DisseminatorServicer):  # type: ignore[misc]
    """A root site that records every publish request and how it came."""

    def __init__(self, refuse_parts: str | None = None, refuse_whole: str | None = None) -> None:
        self.received: list[_Received] = []
        self._refuse_parts = refuse_parts
        self._refuse_whole = refuse_whole

    async def GetMembership(
        self, request: pb.MembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.Membership:
        return pb.Membership(site="d1", standing=pb.SiteStanding(root=True, policy_version=1))

    def _ack(self, request: pb.PublishRequest) -> pb.PublishAck:
        return pb.PublishAck(
            document_id=request.dissemination.manifest.document_id,
            fragments_accepted=len(request.dissemination.fragments), subscribers_reached=7,
        )

    async def Publish(
        self, request: pb.PublishRequest, context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        if self._refuse_whole is not None and request.HasField("dissemination"):
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, self._refuse_whole)
        raw = request.SerializeToString()
        self.received.append(_Received("Publish", 1, len(raw), request, raw))
        return self._ack(request)

    async def PublishParts(
        self, parts: AsyncIterator[pb.Part], context: grpc.aio.ServicerContext
    ) -> pb.PublishAck:
        joiner, count, largest = Joiner(10**9, "a request"), 0, 0
        async for part in parts:
            if self._refuse_parts is not None:
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, self._refuse_parts)
            count, largest = count + 1, max(largest, len(part.data))
            joined = joiner.add(PartData(part.data, part.size, part.more))
            if joined is not None:
                request = pb.PublishRequest.FromString(joined)
                self.received.append(
                    _Received("PublishParts", count, largest, request, bytes(joined))
                )
                return self._ack(request)
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no last part")
        raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    """The PKI and the signed policy of a local network (no process is started)."""
    net = LocalNetwork(tmp_path_factory.mktemp("parts") / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    yield net


def _setup(net: LocalNetwork, state: Path, port: int, **options: int) -> PublisherSetup:
    ontology = load_ontology([ONTOLOGY])
    tls = TlsFiles.from_dir(net.certs, PUBLISHER)
    mapping = REPO_ROOT / "ontology" / "mappings" / f"{PUBLISHER}.toml"
    return PublisherSetup(
        name=PUBLISHER, tls=tls, ontology=ontology, mapping=load_mapping(mapping, ontology),
        policy=load_signed_policy(
            net.workdir / "policies" / f"{PUBLISHER}.toml", ontology,
            certs.public_key_of(tls.cert_pem), publisher=PUBLISHER,
        ),
        state_dir=state, provenance_log=state / "provenance.nq", connect=f"127.0.0.1:{port}",
        **options,
    )


async def _publish(
    net: LocalNetwork, state: Path, site: _RootSite, *, publisher_options: Any = None,
    **options: int,
) -> PublishResult:
    server = grpc.aio.server()
    pb_grpc.add_DisseminatorServicer_to_server(site, server)
    port = server.add_secure_port(
        "127.0.0.1:0", server_credentials(TlsFiles.from_dir(net.certs, "d1"))
    )
    await server.start()
    publisher = Publisher(
        _setup(net, state, port, **options), warn=lambda _: None, **(publisher_options or {})
    )
    try:
        return await publisher.publish(SAMPLE)
    finally:
        await publisher.close()
        await server.stop(None)


def test_a_request_larger_than_the_part_size_goes_in_parts(
    network: LocalNetwork, tmp_path: Path
) -> None:
    site = _RootSite()
    result = asyncio.run(_publish(network, tmp_path, site, part_bytes=MIN_PART_BYTES))
    (received,) = site.received
    assert received.call == "PublishParts"
    size = received.request.ByteSize()
    assert size > MIN_PART_BYTES
    assert received.parts == -(-size // MIN_PART_BYTES)  # every part full but the last
    assert received.largest_part == MIN_PART_BYTES
    assert len(received.request.dissemination.fragments) == result.fragments > 0
    assert received.request.HasField("checkpoint")
    assert result.reach.subscribers == 7  # the acknowledgement is read as Publish's


def test_a_request_within_the_part_size_goes_whole(
    network: LocalNetwork, tmp_path: Path
) -> None:
    site = _RootSite()
    result = asyncio.run(_publish(network, tmp_path, site))  # the default: 4 MiB
    (received,) = site.received
    assert received.call == "Publish"
    assert received.request.ByteSize() <= 4 * 1024 * 1024
    assert len(received.request.dissemination.fragments) == result.fragments > 0
    assert result.reach.subscribers == 7


def _sized(size: int) -> pb.PublishRequest:
    """A key-only request of exactly ``size`` serialized bytes."""
    request = pb.PublishRequest(keys=[pb.KeyMessage(publisher=PUBLISHER)])
    request.keys[0].sealed = b"k" * (size - request.ByteSize() - 4)
    while request.ByteSize() < size:
        request.keys[0].sealed += b"k"
    assert request.ByteSize() == size
    return request


def test_the_part_size_itself_goes_whole_one_byte_more_in_parts(
    network: LocalNetwork, tmp_path: Path
) -> None:
    async def scenario(site: _RootSite) -> None:
        server = grpc.aio.server()
        pb_grpc.add_DisseminatorServicer_to_server(site, server)
        port = server.add_secure_port(
            "127.0.0.1:0", server_credentials(TlsFiles.from_dir(network.certs, "d1"))
        )
        await server.start()
        publisher = Publisher(_setup(network, tmp_path, port, part_bytes=4096))
        try:
            for size in (4096, 4097):
                await publisher._publish("sending key messages", _sized(size))
        finally:
            await publisher.close()
            await server.stop(None)

    site = _RootSite()
    asyncio.run(scenario(site))
    assert [(r.call, r.parts, r.request) for r in site.received] == [
        ("Publish", 1, _sized(4096)), ("PublishParts", 2, _sized(4097)),
    ]


def test_a_refusal_of_parts_is_the_sites_message(network: LocalNetwork, tmp_path: Path) -> None:
    site = _RootSite(refuse_parts="over the site's limit document_bytes = 1024")
    with pytest.raises(UsageError) as info:
        asyncio.run(_publish(network, tmp_path, site, part_bytes=MIN_PART_BYTES))
    message = str(info.value)
    assert "publishing 'production-dept-order'" in message
    # The site's reason, unless grpc.aio lost it to a write racing the site's refusal
    # (grpc/grpc#36066): then the publisher says so instead of "Internal error from Core".
    assert (
        "(RESOURCE_EXHAUSTED): over the site's limit document_bytes = 1024" in message
        or "(INTERNAL): the site ended the call while parts were still being sent" in message
    ), message
    assert not any((tmp_path / "outgoing").iterdir())  # the document's files went with it


@pytest.mark.parametrize("part_bytes", [MIN_PART_BYTES - 1, 64 * 1024 * 1024, True])
def test_a_part_size_out_of_bounds_is_refused_before_any_work(
    network: LocalNetwork, tmp_path: Path, part_bytes: int
) -> None:
    with pytest.raises((ValueError, TypeError), match="part_bytes"):
        _setup(network, tmp_path, 9, part_bytes=part_bytes)


def test_the_cli_refuses_a_part_size_below_the_minimum(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from cli.main import main

    code = main([
        "publish", "doc.xml", "--connect", "127.0.0.1:9", "--name", PUBLISHER,
        "--certs", "certs", "--mapping", "m.toml", "--policy", "p.toml", "--part-bytes", "100",
    ])
    assert code == 1
    assert capsys.readouterr().err.startswith(
        "xdn: error: --part-bytes 100: a part must be at least 1024 bytes"
    )


# -- a document streamed through files ----------------------------------------------------------


def _outgoing(state: Path) -> list[str]:
    return sorted(p.name for p in (state / "outgoing").iterdir())


@pytest.mark.parametrize("part_bytes", [MIN_PART_BYTES, 4 * 1024 * 1024])
def test_a_streamed_documents_files_are_gone_once_it_is_acknowledged(
    network: LocalNetwork, tmp_path: Path, part_bytes: int
) -> None:
    site = _RootSite()
    seen: list[list[str]] = []
    real = SplicedDissemination.read

    def read(body: SplicedDissemination, start: int, end: int) -> bytes:
        seen.append(_outgoing(tmp_path))
        assert end - start <= part_bytes  # (a part at a time, never the whole file)
        return real(body, start, end)

    with mock.patch.object(SplicedDissemination, "read", read):
        result = asyncio.run(_publish(network, tmp_path, site, part_bytes=part_bytes))
    (received,) = site.received
    assert received.call == ("PublishParts" if part_bytes == MIN_PART_BYTES else "Publish")
    assert len(received.request.dissemination.fragments) == result.fragments > 1
    assert seen and all(len(names) == 1 and names[0].endswith(".records") for names in seen)
    assert _outgoing(tmp_path) == []


@pytest.mark.parametrize("parts", [True, False])
def test_a_refused_documents_files_are_gone(
    network: LocalNetwork, tmp_path: Path, parts: bool
) -> None:
    site = _RootSite(refuse_parts="no" if parts else None, refuse_whole=None if parts else "no")
    options = {"part_bytes": MIN_PART_BYTES} if parts else {}
    with pytest.raises(UsageError, match=r"publishing 'production-dept-order' .*: no"):
        asyncio.run(_publish(network, tmp_path, site, **options))
    assert _outgoing(tmp_path) == []


def test_files_a_crash_left_are_deleted_at_start_up(network: LocalNetwork, tmp_path: Path) -> None:
    (tmp_path / "outgoing").mkdir()
    for name in ("0123.records", "4567.dissemination"):
        (tmp_path / "outgoing" / name).write_bytes(b"left by a crash")

    async def start() -> None:
        await Publisher(_setup(network, tmp_path, 9), warn=lambda _: None).close()

    asyncio.run(start())
    assert _outgoing(tmp_path) == []


@contextmanager
def _deterministic() -> Iterator[None]:
    """One IV for every fragment, one (real) signature per distinct bytes signed."""
    encrypt, sign, memo = crypto.Aead.encrypt, crypto.sign, {}

    def signed(key: crypto.PrivateKey, data: bytes) -> bytes:
        if data not in memo:
            memo[data] = sign(key, data)
        return memo[data]

    def encrypted(cipher: crypto.Aead, plaintext: bytes, *, iv: bytes | None = None) -> bytes:
        return encrypt(cipher, plaintext, iv=bytes(12))

    with mock.patch.object(crypto, "sign", signed), mock.patch.object(
        crypto.Aead, "encrypt", encrypted
    ):
        yield


def test_a_streamed_request_is_the_request_the_in_memory_path_sends(
    network: LocalNetwork, tmp_path: Path
) -> None:
    """Two publishers of one state (the groups made by a first publication), one clock: the
    one that streams sends, byte for byte, what the one that parses in memory sends."""
    first = tmp_path / "first"
    asyncio.run(_publish(network, first, _RootSite()))
    clock = {"clock": lambda: datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)}
    sent = {}
    with _deterministic():
        for streaming in (None, False):
            state = tmp_path / f"streaming-{streaming}"
            shutil.copytree(first, state)
            site = _RootSite()
            options = {**clock, "streaming": streaming}
            with mock.patch.object(
                SplicedDissemination, "read", autospec=True, side_effect=SplicedDissemination.read
            ) as read:
                asyncio.run(
                    _publish(network, state, site, publisher_options=options, part_bytes=4096)
                )
            assert bool(read.call_count) == (streaming is None)  # (from the records: streamed)
            (received,) = site.received
            assert received.call == "PublishParts"
            sent[streaming] = received.raw
    assert sent[None] == sent[False]
    assert pb.PublishRequest.FromString(sent[None]).dissemination.manifest.version == 2


def test_key_messages_too_many_for_one_request_go_first_the_streamed_document_last(
    network: LocalNetwork, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client, "KEY_MESSAGES_PER_REQUEST", 3)
    site = _RootSite()
    result = asyncio.run(_publish(network, tmp_path, site, part_bytes=MIN_PART_BYTES))
    *keys_first, last = site.received
    assert len(keys_first) == -(-len(result.rekeyed) // 3) > 1  # (a new group each: a rekey)
    assert all(not r.request.HasField("dissemination") for r in keys_first)
    assert [len(r.request.rekeys) for r in keys_first][:-1] == [3] * (len(keys_first) - 1)
    assert last.call == "PublishParts" and not last.request.rekeys
    assert len(last.request.dissemination.fragments) == result.fragments
    assert last.request.HasField("checkpoint")
    assert _outgoing(tmp_path) == []


def test_a_document_prepared_but_never_sent_leaves_no_file(
    network: LocalNetwork, tmp_path: Path
) -> None:
    """Pipelined, the next document is encoded while the previous one is sent: a caller that
    stops after the first result leaves the second one unsent, and its file goes."""
    documents = []
    for name in ("first", "second"):
        documents.append(tmp_path / f"{name}.xml")
        shutil.copyfile(SAMPLE, documents[-1])
    site = _RootSite()
    state = tmp_path / "state"

    async def scenario() -> list[str]:
        server = grpc.aio.server()
        pb_grpc.add_DisseminatorServicer_to_server(site, server)
        port = server.add_secure_port(
            "127.0.0.1:0", server_credentials(TlsFiles.from_dir(network.certs, "d1"))
        )
        await server.start()
        publisher = Publisher(_setup(network, state, port), warn=lambda _: None)
        try:
            results = publisher.publish_each(documents)
            first = await anext(results)  # reported while the second one is prepared
            deadline = asyncio.get_running_loop().time() + 30
            while len(_outgoing(state)) != 1:  # the second one, prepared
                assert asyncio.get_running_loop().time() < deadline, "never prepared"
                await asyncio.sleep(0.01)
            await results.aclose()
            return [first.document_id]
        finally:
            await publisher.close()
            await server.stop(None)

    assert asyncio.run(scenario()) == ["first"]
    assert [r.request.dissemination.manifest.document_id for r in site.received] == ["first"]
    assert _outgoing(state) == []


def test_a_status_grpc_lost_is_explained_and_others_are_the_sites_words() -> None:
    def failure(code: grpc.StatusCode, details: str) -> str:
        exc = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)
        return str(call_failure("publishing 'd'", "127.0.0.1:9", exc))

    lost = failure(grpc.StatusCode.INTERNAL, "Internal error from Core")
    assert lost.startswith("publishing 'd' at 127.0.0.1:9 failed (INTERNAL): the site ended")
    assert "grpc/grpc#36066" in lost and "publishing the document again is safe" in lost
    assert failure(grpc.StatusCode.INTERNAL, "disk on fire").endswith("(INTERNAL): disk on fire")
    assert failure(grpc.StatusCode.RESOURCE_EXHAUSTED, "over the limit").endswith(
        "(RESOURCE_EXHAUSTED): over the limit"
    )
