"""Who may use the console: mutual TLS with an admin certificate; where it may listen."""

from __future__ import annotations

import argparse
import asyncio
import ssl
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from console import ClientCertGate, build_app, mutual_tls
from console.cli import build_config, register
from tests.unit.console_fixtures import ONTOLOGY, ConsoleWorld, console_config, console_world
from xdn.errors import UsageError
from xdn.ontology import load_ontology


def _client_context(world: ConsoleWorld, name: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(world.certs / "ca.pem"))
    if name is not None:
        context.load_cert_chain(world.certs / f"{name}.pem", world.certs / f"{name}.key")
    return context


def test_over_mutual_tls_an_admin_certificate_gets_in_and_others_do_not(tmp_path: Path) -> None:
    world = console_world(tmp_path)
    ca_pem = (world.certs / "ca.pem").read_bytes()
    config = console_config(world, load_ontology([ONTOLOGY]))
    config = type(config)(
        workspace=config.workspace, gate=ClientCertGate(ca_pem, clock=lambda: datetime.now(UTC))
    )

    async def run() -> dict[str, object]:
        runner = web.AppRunner(build_app(config))
        await runner.setup()
        site = web.TCPSite(
            runner,
            "127.0.0.1",
            0,
            ssl_context=mutual_tls(
                world.certs / "ops.pem", world.certs / "ops.key", world.certs / "ca.pem"
            ),
        )
        await site.start()
        url = f"https://127.0.0.1:{runner.addresses[0][1]}/"
        seen: dict[str, object] = {}
        try:
            for name in ("ops", "alice", None):
                async with aiohttp.ClientSession() as session:
                    try:
                        async with session.get(url, ssl=_client_context(world, name)) as answer:
                            seen[str(name)] = (answer.status, await answer.text())
                    except aiohttp.ClientError as exc:
                        seen[str(name)] = exc
        finally:
            await runner.cleanup()
        return seen

    seen = asyncio.run(run())
    status, text = seen["ops"]  # type: ignore[misc]
    assert status == 200 and "Overview" in text
    status, text = seen["alice"]  # type: ignore[misc]
    assert status == 401 and "role &#x27;subscriber&#x27;, expected &#x27;admin&#x27;" in text
    assert isinstance(seen["None"], aiohttp.ClientError)  # no certificate: no handshake


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["console", *argv])


@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (["--listen", "0.0.0.0:8470"], "beyond loopback the console needs --tls"),
        (["--listen", "8470"], "write HOST:PORT"),
        (["--tls"], "--tls needs the console's certificate"),
        (["--site", "localhost:5001"], "--site needs the console's certificate"),
        (["--key", "production-dept"], "write PUBLISHER=KEY.pem"),
        (["--name", "ops"], "--certs and --name go together"),
    ],
)
def test_the_command_line_refuses_what_would_be_unsafe_or_unclear(
    argv: list[str], refusal: str
) -> None:
    with pytest.raises(UsageError, match=refusal):
        build_config(_args(*argv))


def test_a_key_for_a_publisher_without_a_policy_is_refused(tmp_path: Path) -> None:
    world = console_world(tmp_path)
    with pytest.raises(UsageError, match="--key for qa-company: no policy of that publisher"):
        build_config(_args("--policy", str(world.policy), "--key", f"qa-company={world.key}"))


def test_the_command_line_builds_a_console_with_its_certificate(tmp_path: Path) -> None:
    world = console_world(tmp_path)
    config = build_config(
        _args(
            "--listen",
            "0.0.0.0:0",
            "--tls",
            "--certs",
            str(world.certs),
            "--name",
            "ops",
            "--policy",
            str(world.policy),
            "--key",
            f"production-dept={world.key}",
            "--subscribers",
            str(world.subscribers),
            "--site",
            "localhost:5001",
        )
    )
    assert isinstance(config.gate, ClientCertGate)
    assert config.sites == ("localhost:5001",)
    assert set(config.workspace.subscribers) == {"alice", "carl"}
    assert config.workspace.files("production-dept").key == world.key
