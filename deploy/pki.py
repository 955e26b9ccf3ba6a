"""Development PKI on disk: a CA and the certificates of every party of a network.

Layout of a certificate directory::

    ca.pem  ca.key            the development CA
    NAME.pem NAME.key         one pair per party (site, publisher, subscriber)

Keys are written with mode 0600. This is tooling for development networks and tests; a real
deployment brings its own CA and only uses ``xdn certs issue``-style requests against it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from xdn import certs
from xdn.errors import UsageError

__all__ = ["Party", "PartyFiles", "ensure_ca", "issue_party", "party_files"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Party:
    """One certificate to issue."""

    name: str
    role: str
    attributes: Mapping[str, str] = field(default_factory=dict)
    hosts: Sequence[str] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class PartyFiles:
    """Where a party's credential lives."""

    cert: Path
    key: Path
    ca: Path

    def read(self) -> tuple[bytes, bytes, bytes]:
        """``(cert_pem, key_pem, ca_pem)``."""
        return self.cert.read_bytes(), self.key.read_bytes(), self.ca.read_bytes()


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def ensure_ca(directory: Path, *, now: datetime, name: str = "xdn-dev-ca") -> Path:
    """Create ``ca.pem``/``ca.key`` in ``directory`` unless present; return the CA cert path."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "ca.pem", directory / "ca.key"
    if cert_path.exists() != key_path.exists():
        raise UsageError(f"{directory}: ca.pem and ca.key must both exist or both be absent")
    if not cert_path.exists():
        cert_pem, key_pem = certs.create_ca(name, now=now)
        _write_private(key_path, key_pem)
        cert_path.write_bytes(cert_pem)
    return cert_path


def party_files(directory: Path, name: str) -> PartyFiles:
    """The file paths of party ``name`` in ``directory``."""
    return PartyFiles(
        cert=directory / f"{name}.pem", key=directory / f"{name}.key", ca=directory / "ca.pem"
    )


def issue_party(directory: Path, party: Party, *, now: datetime, days: int = 365) -> PartyFiles:
    """Issue ``party``'s certificate from the CA in ``directory`` (which must exist)."""
    files = party_files(directory, party.name)
    ca_key = directory / "ca.key"
    if not files.ca.exists() or not ca_key.exists():
        raise UsageError(f"{directory}: no CA here; run `xdn certs init --dir {directory}` first")
    cert_pem, key_pem = certs.issue(
        files.ca.read_bytes(),
        ca_key.read_bytes(),
        name=party.name,
        role=party.role,
        attributes=party.attributes,
        hosts=party.hosts,
        now=now,
        days=days,
    )
    _write_private(files.key, key_pem)
    files.cert.write_bytes(cert_pem)
    return files
