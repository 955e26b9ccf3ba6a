"""Development PKI on disk: a CA and the certificates of every party of a network.

Layout of a certificate directory::

    ca.pem  ca.key            the development CA
    NAME.pem NAME.key         one pair per party (site, publisher, subscriber)
    revoked.txt               revoked certificates, one ``SERIAL-HEX NAME ISO-TIME`` a line
    crl.pem                   the CA-signed CRL made from revoked.txt (sites reload it)
    crl-number                the number of the last CRL the CA signed here

Every CRL written here is numbered higher than any CRL the CA signed before (sites and key
services refuse a CRL numbered below the one they hold), whatever the ``now`` it is signed at
and whatever ``crl.pem`` now holds (an older copy put back counts for nothing).

Keys are written with mode 0600. This is tooling for development networks and tests; a real
deployment brings its own CA and only uses ``xdn certs issue``-style requests against it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from xdn import certs, crypto
from xdn.errors import CertificateError, UsageError

__all__ = [
    "CRL_DAYS",
    "Party",
    "PartyFiles",
    "ensure_ca",
    "issue_party",
    "party_files",
    "revoke_party",
    "write_crl",
]

CRL_DAYS = 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Party:
    """One certificate to issue."""

    name: str
    role: str
    attributes: certs.Attributes = field(default_factory=dict)
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


def ensure_ca(
    directory: Path, *, now: datetime, name: str = "xdn-dev-ca", curve: str = crypto.DEFAULT_CURVE
) -> Path:
    """Create ``ca.pem``/``ca.key`` in ``directory`` unless present; return the CA cert path.

    ``curve`` is the CA's (and so every issued key's); an existing CA keeps its own.
    """
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / "ca.pem", directory / "ca.key"
    if cert_path.exists() != key_path.exists():
        raise UsageError(f"{directory}: ca.pem and ca.key must both exist or both be absent")
    if not cert_path.exists():
        cert_pem, key_pem = certs.create_ca(name, now=now, curve=curve)
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


def _ca_pair(directory: Path) -> tuple[bytes, bytes]:
    cert, key = directory / "ca.pem", directory / "ca.key"
    if not cert.exists() or not key.exists():
        raise UsageError(f"{directory}: no CA here; run `xdn certs init --dir {directory}` first")
    return cert.read_bytes(), key.read_bytes()


def _revoked(directory: Path) -> list[tuple[int, str, datetime]]:
    path = directory / "revoked.txt"
    if not path.exists():
        return []
    entries = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            serial, name, when = line.split()
            entries.append((int(serial, 16), name, datetime.fromisoformat(when)))
        except ValueError:
            raise UsageError(f"{path}:{number}: expected `SERIAL-HEX NAME ISO-TIME`") from None
    return entries


def _last_number(path: Path, ca_cert: bytes) -> int:
    """The highest number of a CRL signed here: in ``crl-number``, or of the CRL at ``path``
    (-1: none, or not one our CA signed)."""
    try:
        recorded = int((path.parent / "crl-number").read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        recorded = -1
    try:
        return max(recorded, certs.read_crl(path.read_bytes(), ca_cert).number)
    except (OSError, CertificateError):
        return recorded


def write_crl(directory: Path, *, now: datetime, days: int = CRL_DAYS) -> Path:
    """(Re)write ``crl.pem`` from ``revoked.txt``, signed by the CA; return its path.

    The file is replaced atomically, so a site watching it never reads half a CRL.
    """
    if days <= 0:
        raise UsageError("a CRL must be valid for at least one day")
    ca_cert, ca_key = _ca_pair(directory)
    path, tmp = directory / "crl.pem", directory / "crl.pem.tmp"
    number = max(int(now.timestamp()), _last_number(path, ca_cert) + 1)
    pem = certs.create_crl(
        ca_cert, ca_key, [(serial, when) for serial, _, when in _revoked(directory)],
        now=now, next_update=now + timedelta(days=days), number=number,
    )
    (directory / "crl-number").write_text(f"{number}\n", encoding="utf-8")  # before it is used
    tmp.write_bytes(pem)
    os.replace(tmp, path)
    return path


def revoke_party(directory: Path, name: str, *, now: datetime, days: int = CRL_DAYS) -> int:
    """Revoke the current certificate of ``name`` and rewrite the CRL; return its serial."""
    cert = party_files(directory, name).cert
    if not cert.exists():
        raise UsageError(f"{directory}: no certificate {cert.name} to revoke")
    serial = certs.credential_from_pem(cert.read_bytes()).serial
    if all(serial != known for known, _, _ in _revoked(directory)):
        with open(directory / "revoked.txt", "a", encoding="utf-8") as out:
            out.write(f"{serial:x} {name} {now.isoformat()}\n")
    write_crl(directory, now=now, days=days)
    return serial
