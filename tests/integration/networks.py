"""Set-up shared by integration tests that run a LocalNetwork with alice subscribed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import pytest

from deploy.network import LocalNetwork


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
