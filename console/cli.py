"""``xdn console``: serve the administrators' web console.

On loopback by default, over plain HTTP behind a one-time token printed at start (another
local user can reach the port but not the token). Anywhere else only with ``--tls``: HTTPS
with mutual TLS, the console presenting its own certificate (``--certs``/``--name``) and
admitting browsers that present an ``admin`` certificate of the same CA. The same certificate
asks the sites (``--site``) for their status. Publishers' keys (``--key``) are read from disk
when a draft is signed and never sent anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdn.errors import UsageError

if TYPE_CHECKING:
    from console import ConsoleConfig, Gate

__all__ = ["register"]

DEFAULT_LISTEN = "127.0.0.1:8470"


def register(subparsers: Any) -> None:
    """Add ``xdn console``."""
    p = subparsers.add_parser(
        "console",
        help="serve the administrators' web console (policies, sites, audit)",
        description="A web console for administrators: the ontology DAG, each publisher's "
        "policy with live validation as you edit, who gets what, the diff of a draft against "
        "the signed version, signing with the publisher's key (which stays on this machine), "
        "the sites' subscribers and queues, the latest audit report. Loopback only unless "
        "--tls; prints the address to open (with a one-time token) when it is ready.",
    )
    p.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="HOST:PORT",
        help=f"where to serve (default {DEFAULT_LISTEN}; port 0: any free port)",
    )
    p.add_argument(
        "--ontology",
        type=Path,
        action="append",
        metavar="OWL",
        help="ontology file, repeatable (default ontology/production.owl)",
    )
    p.add_argument(
        "--policy",
        type=Path,
        action="append",
        metavar="POLICY.toml",
        help="a publisher's policy file, repeatable (default policies/*.toml)",
    )
    p.add_argument(
        "--key",
        action="append",
        default=[],
        metavar="PUBLISHER=KEY.pem",
        help="the key that signs PUBLISHER's policy, repeatable",
    )
    p.add_argument(
        "--subscribers",
        type=Path,
        metavar="DIR",
        help="certificates of known subscribers (*.pem; crl.pem and ca.pem beside "
        "drop revoked ones), for 'who gets what' and diffs",
    )
    p.add_argument(
        "--site",
        action="append",
        default=[],
        metavar="HOST:PORT",
        help="a site's gRPC port to ask for its status, repeatable",
    )
    p.add_argument(
        "--certs",
        type=Path,
        metavar="DIR",
        help="directory with NAME.pem, NAME.key and ca.pem: the console's own "
        "(admin) certificate, for --site and --tls",
    )
    p.add_argument("--name", help="the console's certificate name in --certs")
    p.add_argument(
        "--tls",
        action="store_true",
        help="serve HTTPS with mutual TLS: browsers must present an admin "
        "certificate of the CA in --certs (needed to listen beyond loopback)",
    )
    p.add_argument(
        "--audit-report",
        type=Path,
        metavar="PATH",
        help="the audit's report.html, or an audit output folder (newest report)",
    )
    p.set_defaults(func=cmd_console)


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--listen {text!r}: write HOST:PORT, e.g. {DEFAULT_LISTEN}")
    return host, int(port)



def _keys(items: list[str]) -> dict[str, Path]:
    keys = {}
    for item in items:
        publisher, sep, path = item.partition("=")
        if not sep or not publisher or not path:
            raise UsageError(f"--key {item!r}: write PUBLISHER=KEY.pem")
        if not Path(path).is_file():
            raise UsageError(f"--key {item!r}: no such file {path}")
        keys[publisher] = Path(path)
    return keys


def _tls_files(args: argparse.Namespace) -> Any:
    from xdn.grpc_tls import TlsFiles

    if args.certs is None and args.name is None:
        return None
    if args.certs is None or args.name is None:
        raise UsageError("--certs and --name go together (the console's certificate)")
    try:
        return TlsFiles.from_dir(args.certs, args.name)
    except OSError as exc:
        raise UsageError(f"{exc.filename}: cannot read: {exc.strerror}") from None


def _server_ssl(args: argparse.Namespace) -> ssl.SSLContext:
    from console import mutual_tls

    certs, name = args.certs, args.name
    return mutual_tls(certs / f"{name}.pem", certs / f"{name}.key", certs / "ca.pem")


def _gate(args: argparse.Namespace, tls: Any) -> Gate:
    from console import ClientCertGate, TokenGate
    from xdn.certs import read_crl

    if not args.tls:
        return TokenGate()
    crl = args.certs / "crl.pem"
    revoked = (
        frozenset(read_crl(crl.read_bytes(), tls.ca_pem).serials)
        if crl.exists()
        else frozenset[int]()
    )
    return ClientCertGate(tls.ca_pem, clock=lambda: datetime.now(UTC), revoked=revoked)


def build_config(args: argparse.Namespace) -> ConsoleConfig:
    """The console's configuration from the command line (reads the files it names)."""
    from console import ConsoleConfig, Workspace, known_subscribers
    from deploy.site_tree import is_loopback
    from xdn.ontology import load_ontology
    from xdn.paths import REPO_ROOT

    host, _ = _listen(args.listen)
    tls = _tls_files(args)
    if args.tls and tls is None:
        raise UsageError("--tls needs the console's certificate: --certs DIR --name NAME")
    if not args.tls and not is_loopback(host):
        raise UsageError(
            f"--listen {args.listen}: beyond loopback the console needs --tls "
            "(a token over plain HTTP could be read on the way)"
        )
    if args.site and tls is None:
        raise UsageError("--site needs the console's certificate: --certs DIR --name NAME")
    ontology = load_ontology(args.ontology or [REPO_ROOT / "ontology" / "production.owl"])
    policies = args.policy or sorted((REPO_ROOT / "policies").glob("*.toml"))
    workspace = Workspace.of_files(
        ontology,
        policies,
        _keys(args.key),
        subscribers=known_subscribers(args.subscribers) if args.subscribers else {},
        clock=lambda: datetime.now(UTC),
    )
    return ConsoleConfig(
        workspace=workspace,
        gate=_gate(args, tls),
        sites=tuple(args.site),
        admin_tls=tls,
        audit_report=args.audit_report,
    )


async def _serve(
    config: ConsoleConfig, host: str, port: int, context: ssl.SSLContext | None
) -> None:
    from aiohttp import web

    from console import TokenGate, build_app

    runner = web.AppRunner(build_app(config), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=context)
        await site.start()
        bound = runner.addresses[0][1]
        where = f"[{host}]" if ":" in host else host
        url = f"{'https' if context else 'http'}://{where}:{bound}/"
        if isinstance(config.gate, TokenGate):
            print(
                f"xdn console: open {url}login?token={config.gate.token} (the token works once)",
                flush=True,
            )
        else:
            print(
                f"xdn console: open {url} with an admin certificate of the network CA", flush=True
            )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
    finally:
        await runner.cleanup()


def cmd_console(args: argparse.Namespace) -> int:
    """``xdn console``: serve until interrupted."""
    config = build_config(args)
    host, port = _listen(args.listen)
    asyncio.run(_serve(config, host, port, _server_ssl(args) if args.tls else None))
    print("xdn console: stopped")
    return 0
