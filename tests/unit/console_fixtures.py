"""A console's world for tests: a CA, the production department's signed policy and key, two
known subscribers (alice of Cred1, carl of the contractors) and an admin certificate."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from console import ConsoleConfig, PublisherFiles, TokenGate, Workspace, known_subscribers
from deploy.network import ONTOLOGY
from deploy.pki import Party, ensure_ca, issue_party
from xdn import crypto
from xdn.grpc_tls import TlsFiles
from xdn.ontology import Ontology
from xdn.paths import REPO_ROOT
from xdn.policy import sign_policy, signature_path

__all__ = [
    "NOW",
    "ONTOLOGY",
    "PUBLISHER",
    "ConsoleWorld",
    "bumped",
    "console_config",
    "console_world",
    "without_deny",
]

PUBLISHER = "production-dept"
NOW = datetime.now(UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleWorld:
    """Where the files are."""

    root: Path
    certs: Path
    subscribers: Path
    policy: Path
    key: Path

    @property
    def signature(self) -> Path:
        return signature_path(self.policy)


def console_world(root: Path) -> ConsoleWorld:
    """Lay out the files under ``root``: certificates, the signed policy (version 1)."""
    certs_dir, subscribers = root / "certs", root / "subscribers"
    subscribers.mkdir(parents=True)
    ensure_ca(certs_dir, now=NOW)
    issue_party(certs_dir, Party(name=PUBLISHER, role="publisher"), now=NOW)
    issue_party(
        certs_dir, Party(name="ops", role="admin", hosts=("localhost", "127.0.0.1")), now=NOW
    )
    for name, unit in (("alice", "Cred1"), ("carl", "Contractors")):
        issue_party(
            certs_dir, Party(name=name, role="subscriber", attributes={"OU": unit}), now=NOW
        )
        shutil.copy(certs_dir / f"{name}.pem", subscribers / f"{name}.pem")
    policy = root / "policies" / f"{PUBLISHER}.toml"
    policy.parent.mkdir()
    shutil.copy(REPO_ROOT / "policies" / f"{PUBLISHER}.toml", policy)
    key = certs_dir / f"{PUBLISHER}.key"
    signature_path(policy).write_bytes(
        sign_policy(policy.read_bytes(), crypto.load_private_key_pem(key.read_bytes()))
    )
    return ConsoleWorld(root=root, certs=certs_dir, subscribers=subscribers, policy=policy, key=key)


def console_config(
    world: ConsoleWorld,
    ontology: Ontology,
    *,
    with_key: bool = True,
    sites: tuple[str, ...] = (),
    audit: Path | None = None,
) -> ConsoleConfig:
    """A console over ``world``, behind a token gate."""
    workspace = Workspace(
        ontology,
        {PUBLISHER: PublisherFiles(policy=world.policy, key=world.key if with_key else None)},
        subscribers=known_subscribers(world.subscribers),
        clock=lambda: datetime.now(UTC),
    )
    return ConsoleConfig(
        workspace=workspace,
        gate=TokenGate(),
        sites=sites,
        admin_tls=TlsFiles.from_dir(world.certs, "ops"),
        audit_report=audit,
        site_timeout=5.0,
    )


def bumped(text: str, version: int) -> str:
    """``text`` with its policy version set to ``version``."""
    return text.replace("version = 1\n", f"version = {version}\n", 1)


def without_deny(text: str) -> str:
    """``text`` less its last rule, C2: contractors' deny of machine settings."""
    return text[: text.index('[[rule]]\nid = "C2"')].rstrip() + "\n"
