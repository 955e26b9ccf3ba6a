"""Integration fixtures: a real local network (separate processes, mutual TLS, port 0)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from deploy.network import LocalNetwork


@pytest.fixture
def network(tmp_path: Path) -> Iterator[LocalNetwork]:
    net = LocalNetwork(tmp_path / "net")
    net.workdir.mkdir(parents=True)
    net.prepare()
    try:
        net.start_sites()
        yield net
    finally:
        net.stop()
