"""Publishing in parts with real processes: a document larger than the publisher's part size
goes to the root site on one ``PublishParts`` call, and its subscriber gets exactly the view
the same document published whole gives; parts that do not make a request are refused with a
precise status, and the site goes on serving.

One three-site network (mutual TLS, port 0) is shared by the module, with alice (Cred1)
subscribed at d2 throughout; its sites take publish requests of up to 4 MiB
(``[limits] document_bytes``), which a document of 1 MB fits (its request is about 3 MB).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from deploy.docgen import generate
from deploy.network import LocalNetwork, wait_until
from tests.integration.networks import serving_alice
from tests.integration.raw_calls import site_channel
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire.v1 import dissemination_pb2_grpc as pb_grpc

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
SAMPLE = REPO_ROOT / "ontology" / "samples" / "production-dept-order.xml"
PARTS_METRIC = "xdn_publish_parts_total"
TIMEOUT = 10.0
DOCUMENT_BYTES = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def net(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalNetwork]:
    network = LocalNetwork(  # every site taking publish requests of up to DOCUMENT_BYTES
        tmp_path_factory.mktemp("publishing-in-parts") / "net",
        limits={"document_bytes": DOCUMENT_BYTES},
    )
    network.workdir.mkdir(parents=True)
    network.prepare()
    with serving_alice(network):
        yield network


def _generated(net: LocalNetwork, name: str, size: int) -> Path:
    path = net.workdir / f"{name}.xml"
    with open(path, "wb") as out:
        generate(PUBLISHER, size, out, seed=15)
    assert path.stat().st_size >= 0.99 * size
    return path


def _documents(net: LocalNetwork, document: str) -> list[dict[str, Any]]:
    return [r for r in net.received("alice") if r["document"] == document]


def _published(net: LocalNetwork, path: Path, *, extra: tuple[str, ...] = ()) -> str:
    """Publish ``path`` (its next version), wait until alice has it; return the output."""
    before = len(_documents(net, path.stem))
    out = net.publish(PUBLISHER, [path], wait_for=("alice",), extra=extra)
    assert wait_until(lambda: len(_documents(net, path.stem)) > before, 60), net.output("alice")
    return out


# ---- a large document ------------------------------------------------------------------------
def test_a_document_published_in_parts_gives_the_view_it_gives_published_whole(
    net: LocalNetwork,
) -> None:
    document = _generated(net, "large-order", 1_000_000)
    before = net.metric("d1", PARTS_METRIC)
    _published(net, document)  # version 1: whole (the default part size is 4 MiB)
    assert net.metric("d1", PARTS_METRIC) == before
    _published(net, document, extra=("--part-bytes", "65536", "--again"))  # v2: in parts
    parts = net.metric("d1", PARTS_METRIC) - before
    assert parts >= 1_000_000 // 65536  # at least 15 parts of 64 KiB each

    whole, parted = _documents(net, document.stem)
    assert (whole["version"], parted["version"]) == (1, 2)
    assert parted["fragments"] == whole["fragments"] and whole["fragments"]
    views = net.inbox("alice") / "views" / PUBLISHER
    view_whole = (views / f"{document.stem}.v1.xml").read_bytes()
    view_parted = (views / f"{document.stem}.v2.xml").read_bytes()
    header = b'publisher="production-dept" version="%d">'
    assert header % 1 in view_whole[:200]  # the views differ in their version only
    assert view_parted == view_whole.replace(header % 1, header % 2, 1)
    assert len(view_whole) > 100_000  # alice's share of the document: no small part of it


# ---- bad input -----------------------------------------------------------------------------
async def _parts_error(net: LocalNetwork, parts: list[pb.Part]) -> grpc.aio.AioRpcError:
    """Send ``parts`` on a PublishParts call, then half-close, as a publisher does; the call
    must fail: return its error (a refused call is read to its half-close by the site)."""
    async with site_channel(net, "d1", PUBLISHER) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await pb_grpc.DisseminatorStub(channel).PublishParts(iter(parts), timeout=TIMEOUT)
    return info.value


def _still_publishes(net: LocalNetwork, tmp_path: Path) -> None:
    """A normal publish (whole, then in parts) after the abuse still reaches alice."""
    copy = tmp_path / f"after-{tmp_path.name}.xml"
    shutil.copyfile(SAMPLE, copy)
    _published(net, copy)
    _published(net, copy, extra=("--part-bytes", "1024", "--again"))


_GARBAGE = b"\x0a\x10abc" + b"\xff" * 3000  # field 1 announces 16 bytes, then no valid tag


@pytest.mark.parametrize(
    ("parts", "code", "messages"),
    [
        pytest.param(  # over document_bytes, refused at the first part
            [pb.Part(data=b"x" * 1024, size=DOCUMENT_BYTES + 1, more=True),
             pb.Part(data=b"y" * 1024, more=True)],
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            (f"announces {DOCUMENT_BYTES + 1} bytes", f"document_bytes = {DOCUMENT_BYTES}"),
            id="over-document-bytes",
        ),
        pytest.param(
            [pb.Part(data=b"a" * 10, size=20, more=True), pb.Part(data=b"b" * 10, size=20)],
            grpc.StatusCode.INVALID_ARGUMENT,
            ("states a size (20) where it continues one of 20 bytes",),
            id="do-not-follow",
        ),
        pytest.param(
            [pb.Part(data=b"a" * 10, size=30, more=True), pb.Part(data=b"b" * 10, more=True)],
            grpc.StatusCode.INVALID_ARGUMENT,
            ("ended after 2 parts, holding 20 of the 30 bytes",),
            id="half-closed-before-the-last",
        ),
        pytest.param(
            [pb.Part(data=_GARBAGE[:1500], size=len(_GARBAGE), more=True),
             pb.Part(data=_GARBAGE[1500:])],
            grpc.StatusCode.INVALID_ARGUMENT,
            ("are not a valid PublishRequest",),
            id="not-a-publish-request",
        ),
    ],
)  # fmt: skip
def test_parts_that_make_no_acceptable_request_are_refused(
    net: LocalNetwork, tmp_path: Path, parts: list[pb.Part], code: grpc.StatusCode,
    messages: tuple[str, ...],
) -> None:
    error = asyncio.run(_parts_error(net, parts))
    assert error.code() == code
    for message in messages:
        assert message in (error.details() or "")
    _still_publishes(net, tmp_path)


@pytest.mark.long  # (~3 s: a document of 2 MB to encode)
def test_a_publisher_over_document_bytes_is_told_so(net: LocalNetwork, tmp_path: Path) -> None:
    document = _generated(net, "too-large", 2_000_000)  # a request of about 6 MB
    before = net.metric("d1", PARTS_METRIC)
    done = net.run_publish(PUBLISHER, [document], extra=("--part-bytes", "65536"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"publishing {document.stem!r} at {net.address('d1')} failed (RESOURCE_EXHAUSTED)" \
        in done.stderr  # the site's status, not INTERNAL: the site read the call to its end
    assert f"document_bytes = {DOCUMENT_BYTES}" in done.stderr
    assert net.metric("d1", PARTS_METRIC) == before  # nothing joined
    assert _documents(net, document.stem) == []
    _still_publishes(net, tmp_path)
