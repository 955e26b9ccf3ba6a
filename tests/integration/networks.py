"""Set-up shared by integration tests that run a LocalNetwork with alice subscribed."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from deploy.network import ONTOLOGY, LocalNetwork
from publisher.client import Publisher, PublisherSetup
from xdn import certs
from xdn.grpc_tls import TlsFiles
from xdn.mapping import load_mapping
from xdn.ontology import load_ontology
from xdn.policy import load_signed_policy


@contextlib.contextmanager
def serving_alice(
    network: LocalNetwork, *, site_env: Mapping[str, str] | None = None
) -> Iterator[LocalNetwork]:
    """Start the sites (with ``site_env`` added to their environment) and alice, served by d2;
    stop the network however the block ends."""
    try:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in (site_env or {}).items():
                patch.setenv(key, value)
            network.start_sites()
        network.start_subscriber("alice")
        assert network.wait_subscribed("alice")["served_by"] == "d2"
        yield network
    finally:
        network.stop()


def publisher_setup(network: LocalNetwork, name: str) -> PublisherSetup:
    """The setup ``xdn publish`` gets from :meth:`LocalNetwork.publish_command` (same state
    directory, same provenance log), so a later CLI run continues this in-process publisher."""
    ontology = load_ontology([ONTOLOGY])
    tls = TlsFiles.from_dir(network.certs, name)
    spec = network.publishers[name]
    return PublisherSetup(
        name=name, tls=tls, ontology=ontology,
        mapping=load_mapping(spec.mapping, ontology),
        policy=load_signed_policy(
            network.workdir / "policies" / spec.policy.name, ontology,
            certs.public_key_of(tls.cert_pem), publisher=name,
        ),
        state_dir=network.workdir / "state" / name,
        provenance_log=network.workdir / "logs" / f"{name}.nq",
        connect=network.address("d1"),
    )


class Crash(Exception):
    """The publisher process dying (what a SIGKILL leaves: nothing after it runs)."""


def publish_and_die_unrecorded(
    network: LocalNetwork, name: str, document: Path, *, waiting_for: str
) -> None:
    """Publish ``document`` as publisher ``name`` in this process, which dies once the root
    acknowledged it, before the key store records it (nothing recorded or logged here)."""

    async def run() -> None:
        publisher = Publisher(publisher_setup(network, name), warn=lambda _: None)
        try:
            await publisher.wait_for_members([waiting_for], timeout=30)

            def die(*args: object, **kwargs: object) -> None:
                raise Crash

            publisher._keys.commit = die  # type: ignore[method-assign]
            with pytest.raises(Crash):
                await publisher.publish(document)
        finally:
            await publisher.close()

    asyncio.run(run())
