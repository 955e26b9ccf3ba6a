"""A thousand live subscribers on one site (issue #15), run in this process.

One real root site process; 1,000 subscribers with real certificates in three credential
profiles (the WorkOrder block; production data without machine settings; the WorkOrder block
narrowed to Production by the subscriber), each with its own mutual-TLS stream, session and
state, all run on this test's event loop (:func:`subscriber.client.run_subscribers`). A first
document reaches everyone; then one subscriber leaves, another joins, and two more documents
follow. Every subscriber must hold exactly what the policy grants its credential of the
documents published while it was subscribed, each once, nothing refused.
"""

from __future__ import annotations

import asyncio
import gc
import json
import resource
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from deploy.docgen import generate
from deploy.expectations import Deliveries, expected_deliveries, read_received
from deploy.network import DEFAULT_PUBLISHERS, LocalNetwork, SiteSpec
from deploy.pki import Party, issue_party
from subscriber.client import run_subscribers, unsubscribe
from subscriber.session import SubscriberSetup
from xdn.collector import tune_for_service
from xdn.grpc_tls import TlsFiles
from xdn.ontology import Ontology, load_ontology
from xdn.paths import REPO_ROOT

pytestmark = pytest.mark.integration  # (~1.5 min: a thousand sessions)

COUNT = 1_000
PUBLISHER = DEFAULT_PUBLISHERS[0]
PROFILES = (({"OU": "Cred1"}, ()), ({"OU": "Contractors"}, ()), ({"OU": "Cred1"}, ("Production",)))


@pytest.fixture(autouse=True)
def collector() -> Iterator[None]:
    """The collector set as a process running thousands of sessions should set it."""
    before = gc.get_threshold()
    tune_for_service()
    yield
    gc.set_threshold(*before)


@pytest.fixture
def network(tmp_path: Path) -> Iterator[LocalNetwork]:
    # Each subscriber holds a socket and its SQLite files open here, and the site a socket each:
    # raise the descriptor limit as far as allowed (the site process inherits it).
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 8 * COUNT
    assert hard == resource.RLIM_INFINITY or hard >= wanted, f"open files limited to {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    net = LocalNetwork(
        tmp_path / "net", sites=(SiteSpec(name="d1", block="ProductionProcess"),), subscribers=()
    )
    net.workdir.mkdir(parents=True)
    net.prepare()
    net.start_sites()
    try:
        yield net
    finally:
        net.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _setup(net: LocalNetwork, index: int, documents: int) -> SubscriberSetup:
    name = f"s{index:04d}"
    attributes, concepts = PROFILES[index % len(PROFILES)]
    issue_party(net.certs, Party(name=name, role="subscriber", attributes=attributes),
                now=datetime.now(UTC))
    state = net.workdir / "swarm" / name
    return SubscriberSetup(
        name=name, tls=TlsFiles.from_dir(net.certs, name), connect=net.address("d1"),
        out_dir=state / "inbox", state_dir=state, provenance_log=state / "provenance.nq",
        concepts=concepts, max_documents=documents,
    )


def _document(net: LocalNetwork, name: str, seed: int) -> Path:
    path = net.workdir / "docs" / f"{name}.xml"
    path.parent.mkdir(exist_ok=True)
    with path.open("wb") as out:
        generate(PUBLISHER.name, 5_000, out, seed=seed)
    return path


async def _publish(net: LocalNetwork, docs: list[Path], members: list[SubscriberSetup]) -> str:
    """``xdn publish`` once the key service counts every one of ``members`` as a member."""
    wait = [f"--wait-for={s.name}" for s in members]
    return await asyncio.to_thread(
        net.publish, PUBLISHER.name, docs, timeout=600, extra=("--wait-timeout", "300", *wait)
    )


def _expected(
    net: LocalNetwork, ontology: Ontology, setup: SubscriberSetup, docs: list[Path]
) -> Deliveries:
    granted = expected_deliveries(net, ontology, setup.name, {PUBLISHER.name: docs})
    if not setup.concepts:
        return granted
    asked = frozenset().union(*(ontology.block(c) for c in setup.concepts))
    narrowed = {
        key: {f: c for f, c in fragments.items() if c in asked}
        for key, fragments in granted.items()
    }
    return {key: fragments for key, fragments in narrowed.items() if fragments}


def test_a_thousand_live_subscribers_each_get_exactly_their_grants(
    network: LocalNetwork,
) -> None:
    ontology = load_ontology([REPO_ROOT / "ontology" / "production.owl"])
    first = [_document(network, "first", 1)]
    later = [_document(network, "second", 2), _document(network, "third", 3)]
    stayers = [_setup(network, i, documents=3) for i in range(1, COUNT)]
    leaver = _setup(network, 0, documents=1)
    joiner = _setup(network, COUNT, documents=2)

    async def scenario() -> None:
        stop = asyncio.Event()
        # The leaver runs on its own, so that its end (after the first document) is awaited.
        leaving = asyncio.ensure_future(run_subscribers([leaver], stop))
        everyone = asyncio.ensure_future(run_subscribers(stayers, stop))
        try:
            # (xdn publish --wait-for waits until the key service counts every one a member)
            await _publish(network, first, [leaver, *stayers])
            reports = [await asyncio.wait_for(leaving, 300)]
            await unsubscribe(leaver.tls, network.address("d1"))
            joining = asyncio.ensure_future(run_subscribers([joiner], stop))
            output = await _publish(network, later, [joiner, *stayers])
            second = next(line for line in output.splitlines() if "published second" in line)
            assert "rekeyed: none" not in second  # the leaver's groups start new epochs
            reports += await asyncio.wait_for(asyncio.gather(everyone, joining), 600)
        finally:
            stop.set()
        refused = [r.refused for batch in reports for r in batch]
        assert sum(refused) == 0

    asyncio.run(scenario())
    for setup, docs in [
        (leaver, first), (joiner, later), *((s, first + later) for s in stayers)
    ]:
        received, refused = read_received(setup.out_dir)
        lines = (setup.out_dir / "received.jsonl").read_text().splitlines()
        assert refused == 0
        assert len(lines) == len(received), f"{setup.name} got a document twice"
        assert received == _expected(network, ontology, setup, docs), setup.name
    profiles = {json.dumps(read_received(s.out_dir)[0][(PUBLISHER.name, "first")], sort_keys=True)
                for s in stayers}
    assert len(profiles) == len(PROFILES)  # three credential profiles, three distinct views
