"""What a document costs the key service as membership grows (issue #15).

* ``publisher_doc_cost_10k_vs_10`` — time per document of the real key service
  (:class:`publisher.client.Publisher`: membership, rekeying, entitlements, encryption, the
  ``Publish`` call) publishing small documents (~5 KB) to a real root site process (d1, from
  :mod:`deploy.network`) that has 10,000 unchanged members, ÷ the same with 10 members. The
  members are real: certificates from the network's CA, each with its own signed lease,
  reported by a stand-in downlink (d2's certificate) in ``InterestUpdate`` messages on a Link
  stream, as a downlink site reports its subscribers; the root checks each. The stand-in
  acknowledges what the root sends it. A first document enrols everyone (not timed); then the
  two networks take turns (10 / 10k / 10k / 10), each time publishing a batch; the figure is
  the median over all the documents of a side, spread in the note.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import grpc

from benchmarks.harness import Result, ratio_result
from benchmarks.key_service import PUBLISHER, key_service
from deploy.docgen import generate
from deploy.network import LocalNetwork, SiteSpec
from deploy.pki import Party, issue_party
from disseminator.limits import Limits
from disseminator.uplink import interest_chunks
from publisher.client import Publisher
from xdn import certs, crypto, lease
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.wire.v1 import dissemination_pb2 as pb

ONTOLOGY = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
DOWNLINK, DOWNLINK_BLOCK = "d2", "WorkOrder"
_LINK = "/{}/Link".format(pb.DESCRIPTOR.services_by_name["Disseminator"].full_name)


def _members(net: LocalNetwork, count: int) -> list[pb.Member]:
    """``count`` subscribers behind the downlink: certificates and signed leases."""
    ca = ((net.certs / "ca.pem").read_bytes(), (net.certs / "ca.key").read_bytes())
    now = datetime.now(UTC)
    concepts = sorted(ONTOLOGY.block(DOWNLINK_BLOCK))
    out = []
    for i in range(count):
        cert, key = certs.issue(
            *ca, name=f"m{i:05d}", role="subscriber", attributes={"OU": "Cred1"}, now=now
        )
        member = certs.credential_from_pem(cert).member_id
        signed = lease.sign(
            lease.issue(member=member, site=DOWNLINK, block=DOWNLINK_BLOCK,
                        now_ms=lease.millis(now), period_ms=4 * 3600 * 1000),
            crypto.load_private_key_pem(key),
        )
        out.append(pb.Member(
            subscriber=member, certificate=cert, lease=signed.to_bytes(),
            grants=[pb.Grant(publisher=PUBLISHER.name, concepts=concepts)],
        ))
    return out


async def _downlink(address: str, tls: TlsFiles, members: list[pb.Member]) -> None:
    """A stand-in downlink: links, reports ``members``, answers heartbeats, acknowledges."""
    outgoing: asyncio.Queue[pb.LinkMessage] = asyncio.Queue()
    outgoing.put_nowait(pb.LinkMessage(hello=pb.LinkHello(site=DOWNLINK, block=DOWNLINK_BLOCK)))
    for message in interest_chunks(members, Limits()):
        outgoing.put_nowait(message)

    async def requests() -> AsyncIterator[pb.LinkMessage]:
        while True:
            yield await outgoing.get()

    async with grpc.aio.secure_channel(
        address, channel_credentials(tls), options=CHANNEL_OPTIONS
    ) as channel:
        link = channel.stream_stream(
            _LINK, request_serializer=pb.LinkMessage.SerializeToString,
            response_deserializer=pb.Delivery.FromString,
        )
        async for delivery in link(requests()):
            if delivery.WhichOneof("body") == "heartbeat":
                outgoing.put_nowait(pb.LinkMessage(heartbeat=delivery.heartbeat))
            else:
                outgoing.put_nowait(pb.LinkMessage(ack=pb.Ack(sequence=delivery.sequence)))


class _Side:
    """One root site with ``count`` members behind a stand-in downlink, and its key service."""

    def __init__(self, workdir: Path, count: int) -> None:
        self.count = count
        self.net = LocalNetwork(
            workdir, sites=(SiteSpec(name="d1", block="ProductionProcess"),), subscribers=()
        )
        self.net.workdir.mkdir(parents=True)
        self.net.prepare()
        issue_party(self.net.certs, Party(
            name=DOWNLINK, role="site", hosts=("localhost",),
            attributes={certs.BLOCK_FIELD: DOWNLINK_BLOCK},
        ), now=datetime.now(UTC))
        self.members = _members(self.net, count)
        self.times: list[float] = []
        self._link: asyncio.Task[None] | None = None
        self.publisher: Publisher | None = None

    async def start(self, first: Path) -> None:
        self.net.start_sites()
        address = self.net.address("d1")
        self._link = asyncio.ensure_future(
            _downlink(address, TlsFiles.from_dir(self.net.certs, DOWNLINK), self.members)
        )
        self.publisher = key_service(self.net, ONTOLOGY, address)
        # Until the root has checked them all and the key service counts them.
        await self.publisher.wait_for_members(
            [m.subscriber for m in self.members], timeout=600
        )
        result = await self.publisher.publish(first)  # enrols everyone: not timed
        if result.key_messages < self.count:
            raise RuntimeError(f"{result.key_messages} key messages for {self.count} members")

    async def publish(self, docs: list[Path]) -> None:
        assert self.publisher is not None
        for doc in docs:
            started = time.perf_counter()
            result = await self.publisher.publish(doc)
            self.times.append((time.perf_counter() - started) * 1000)
            if result.rekeyed:
                raise RuntimeError(f"members did not stay unchanged: {result.rekeyed} rekeyed")

    async def stop(self) -> None:
        if self.publisher is not None:
            await self.publisher.close()
        if self._link is not None:
            self._link.cancel()
            with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                await self._link
        self.net.stop()


async def _measure(workdir: Path, *, many: int, docs: list[Path], repetitions: int) -> tuple[
    list[float], list[float]
]:
    sides = {10: _Side(workdir / "few", 10), many: _Side(workdir / "many", many)}
    try:
        for side in sides.values():
            await side.start(docs[0])
        for rep in range(repetitions):
            order = (10, many, many, 10) if rep % 2 == 0 else (many, 10, 10, many)
            for count in order:
                await sides[count].publish(docs[1:])
        return sides[10].times, sides[many].times
    finally:
        for side in sides.values():
            await side.stop()


def run(quick: bool) -> list[Result]:
    many, batch, repetitions = (1_000, 5, 1) if quick else (10_000, 25, 2)
    with tempfile.TemporaryDirectory(prefix="xdn-bench-members-") as tmp:
        workdir = Path(tmp)
        docs = []
        for i in range(batch + 1):
            docs.append(workdir / "docs" / f"m{i}.xml")
            docs[-1].parent.mkdir(parents=True, exist_ok=True)
            with docs[-1].open("wb") as out:
                generate(PUBLISHER.name, 5_000, out, seed=100 + i)
        started = time.perf_counter()
        few, lots = asyncio.run(_measure(workdir, many=many, docs=docs, repetitions=repetitions))
        print(f"   membership: {time.perf_counter() - started:.0f} s", flush=True)

    def spread(times: list[float]) -> str:
        q = statistics.quantiles(times, n=10)
        return f"p10 {q[0]:.1f}, p90 {q[-1]:.1f} ms"

    return [
        ratio_result(
            name="publisher_doc_cost_10k_vs_10", value=statistics.median(lots), unit="ms",
            baseline="the same with 10 members (ms per document)",
            baseline_value=statistics.median(few), goal="<= 1.5",
            note=f"~5 KB documents, {many} vs 10 unchanged members behind a downlink of a real "
            f"root site; {len(lots)} documents per side ({repetitions * 2} batches of {batch}, "
            f"turns 10/{many}/{many}/10); medians, {many}: {spread(lots)}; 10: {spread(few)}",
        ),
    ]
