"""Publishing is idempotent per content, against real sites (issue 18, findings 2 and 4).

* A document the root routed is reported even when preparing the next one fails (its
  ``GetMembership`` refused), and publishing it again is answered "already published", so every
  subscriber gets it once.
* A publisher that dies after its root routed a version but before it recorded it, and is run
  again, records that version and logs the message the root's hop references — not a message
  signed anew that no hop references (audit condition 5).

The publisher runs in this process so that the fault lands exactly in the window at issue; the
operator's retry is a real ``xdn publish`` with the same state directory and log.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from networks import (  # tests/integration is on sys.path (pytest's rootdir)
    publish_and_die_unrecorded,
    publisher_setup,
)

from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, wait_until
from publisher.client import Publisher, PublishResult
from xdn import certs
from xdn.errors import UsageError
from xdn.provenance._shape import message_uri_prefix
from xdn.provenance._vocab import HAS_SIGNATURE_GRAPH, HAS_SIGNATURE_VALUE
from xdn.rdf import IRI, Quad, Term, parse_line

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
SAMPLE = SAMPLE_DOCUMENTS[PUBLISHER]


def _copy(directory: Path, name: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.xml"
    shutil.copyfile(SAMPLE, path)
    return path


class _FailingMembership:
    """The publisher's stub, whose ``GetMembership`` fails from the ``fail_from``-th call on."""

    def __init__(self, stub: Any, fail_from: int) -> None:
        self._stub = stub
        self._calls = 0
        self._fail_from = fail_from

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stub, name)

    def GetMembership(self, *args: Any, **kwargs: Any) -> Any:  # (gRPC's name)
        self._calls += 1
        if self._calls < self._fail_from:
            return self._stub.GetMembership(*args, **kwargs)

        async def refused() -> None:
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                details="connection reset (injected)",
            )

        return refused()


def _versions(network: LocalNetwork, subscriber: str, document: str) -> list[int]:
    return [
        int(str(r["version"])) for r in network.received(subscriber)
        if r["publisher"] == PUBLISHER and r["document"] == document
    ]


def _quads(path: Path) -> Iterator[Quad]:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        quad = parse_line(line, number)
        if quad is not None:
            yield quad


def _signatures(log: Path, prefix: str) -> dict[IRI, Term]:
    """Signature graph → value, of the signature graphs under ``prefix`` in ``log``."""
    return {
        q[0]: q[2] for q in _quads(log)
        if q[1] == HAS_SIGNATURE_VALUE and q[3] == q[0] and q[0].startswith(prefix)
    }


def _references(log: Path, prefix: str) -> dict[IRI, Term]:
    """Signature graph → the value an envelope in ``log`` references it with (condition 5), of
    the signature graphs under ``prefix``."""
    graphs: dict[IRI, IRI] = {}
    values: dict[IRI, Term] = {}
    for subject, predicate, obj, graph in _quads(log):
        if subject == graph:
            continue  # (a signature graph's own value, not a reference)
        if predicate == HAS_SIGNATURE_GRAPH and isinstance(obj, IRI):
            graphs[subject] = obj
        elif predicate == HAS_SIGNATURE_VALUE:
            values[subject] = obj
    return {
        graph: values[ref] for ref, graph in graphs.items()
        if graph.startswith(prefix) and ref in values
    }


def _assert_linked(network: LocalNetwork, document: str) -> None:
    """The publisher's log holds exactly the signatures d1's hops reference for ``document``."""
    prefix = message_uri_prefix(certs.node_uri(PUBLISHER), document)
    site_log = network.workdir / "logs" / "d1.nq"
    assert wait_until(
        lambda: site_log.exists() and bool(_references(site_log, prefix)), 30
    ), "d1 logged no hop over the publisher's message"
    referenced = _references(site_log, prefix)
    logged = _signatures(network.workdir / "logs" / f"{PUBLISHER}.nq", prefix)
    envelopes = {graph for graph in logged if "#e" in graph}
    assert len(envelopes) == 1, f"the publisher logged {len(envelopes)} envelopes of {document}"
    assert referenced == {g: logged[g] for g in referenced}, (
        "d1's hop references a signature the publisher's log does not hold"
    )
    assert envelopes <= referenced.keys(), "the publisher logged an envelope no hop references"


def test_a_document_routed_is_reported_when_the_next_fails_and_is_not_published_twice(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    first, second = _copy(tmp_path, "order-a"), _copy(tmp_path, "order-b")

    async def run() -> tuple[list[PublishResult], str]:
        publisher = Publisher(publisher_setup(network, PUBLISHER), warn=lambda _: None)
        try:
            await publisher.wait_for_members(["alice"], timeout=30)
            # order-a's GetMembership goes through; order-b's (prepared while order-a is
            # being sent) fails.
            publisher._stub = _FailingMembership(publisher._stub, fail_from=2)
            reported: list[PublishResult] = []
            with pytest.raises(UsageError) as failed:
                async for result in publisher.publish_each([first, second]):
                    reported.append(result)
            return reported, str(failed.value)
        finally:
            await publisher.close()

    reported, error = asyncio.run(run())
    assert "connection reset (injected)" in error

    # The operator publishes both again: order-a is already published, order-b is new.
    out = network.publish(PUBLISHER, [first, second])
    network.publish_marker(PUBLISHER, ["alice"])
    assert _versions(network, "alice", "order-a") == [1], "order-a was published twice"
    assert _versions(network, "alice", "order-b") == [1]
    assert [(r.document_id, r.version) for r in reported] == [("order-a", 1)], (
        "order-a was routed but not reported"
    )
    assert "already published order-a v1: this content is its newest version" in out
    assert "published order-b v1:" in out
    assert "order-a v2" not in out
    _assert_linked(network, "order-a")


def test_a_version_routed_before_the_publisher_recorded_it_is_recorded_and_linked(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    document = _copy(tmp_path, "order-c")

    publish_and_die_unrecorded(network, PUBLISHER, document, waiting_for="alice")
    assert wait_until(lambda: _versions(network, "alice", "order-c") == [1], 30)

    out = network.publish(PUBLISHER, [document])  # the publisher run again, same state
    _assert_linked(network, "order-c")  # (audit condition 5 across the two logs)
    assert "already published order-c v1" in out
    again = network.publish(PUBLISHER, [document])  # recorded: the same answer again
    assert "already published order-c v1" in again
    _assert_linked(network, "order-c")

    network.publish_marker(PUBLISHER, ["alice"])
    assert _versions(network, "alice", "order-c") == [1]
    # And the version is recorded: the next content is v2 (the retry took no version number).
    document.write_text(document.read_text().replace("</", " </", 1))
    assert "published order-c v2:" in network.publish(PUBLISHER, [document])
