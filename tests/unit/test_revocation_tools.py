"""Revocation tooling: `xdn certs revoke|crl`, the site's `[tls] crl` and loading it at start."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cli.main import main
from deploy.pki import Party, ensure_ca, issue_party, revoke_party, write_crl
from disseminator.config import load_site_config
from disseminator.daemon import crl_at_start, read_crl_file
from disseminator.metrics import SiteMetrics
from disseminator.store import Store
from xdn import certs
from xdn.errors import ConfigError, UsageError

SITE = """
[site]
name = "d2"
listen = "127.0.0.1:0"
block = "WorkOrder"

[tls]
ca = "certs/ca.pem"
cert = "certs/d2.pem"
key = "certs/d2.key"
{crl}

[ontology]
files = ["onto.owl"]
"""


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    directory = tmp_path / "certs"
    now = datetime.now(UTC)
    ensure_ca(directory, now=now)
    for name in ("alice", "bob"):
        issue_party(directory, Party(name=name, role="subscriber"), now=now)
    return directory


def _serial(directory: Path, name: str) -> int:
    return certs.credential_from_pem((directory / f"{name}.pem").read_bytes()).serial


def _revoked(directory: Path) -> frozenset[int]:
    ca = (directory / "ca.pem").read_bytes()
    return certs.load_crl((directory / "crl.pem").read_bytes(), ca, at=datetime.now(UTC))


def test_revoke_lists_the_serial_once_and_signs_the_crl(pki: Path) -> None:
    now = datetime.now(UTC)
    assert revoke_party(pki, "alice", now=now) == _serial(pki, "alice")
    revoke_party(pki, "alice", now=now)  # idempotent
    assert len((pki / "revoked.txt").read_text().splitlines()) == 1
    assert _revoked(pki) == {_serial(pki, "alice")}
    write_crl(pki, now=now)  # re-signing keeps the list
    assert _revoked(pki) == {_serial(pki, "alice")}


def test_cli_revoke_and_crl(pki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "crl", "--dir", str(pki)]) == 0
    assert _revoked(pki) == frozenset()
    assert main(["certs", "revoke", "--dir", str(pki), "--name", "bob"]) == 0
    assert "revoked certificate of bob" in capsys.readouterr().out
    assert _revoked(pki) == {_serial(pki, "bob")}


def test_revoking_an_unknown_party_or_without_a_ca_is_a_usage_error(
    pki: Path, tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match=r"no certificate mallory\.pem"):
        revoke_party(pki, "mallory", now=datetime.now(UTC))
    with pytest.raises(UsageError, match="no CA here"):
        write_crl(tmp_path / "empty", now=datetime.now(UTC))
    (pki / "revoked.txt").write_text("not a line\n")
    with pytest.raises(UsageError, match="SERIAL-HEX NAME ISO-TIME"):
        write_crl(pki, now=datetime.now(UTC))


def test_site_config_crl_is_optional_and_resolved(tmp_path: Path) -> None:
    path = tmp_path / "d2.toml"
    path.write_text(SITE.format(crl=""))
    assert load_site_config(path).crl is None
    path.write_text(SITE.format(crl='crl = "certs/crl.pem"'))
    assert load_site_config(path).crl == tmp_path / "certs" / "crl.pem"
    path.write_text(SITE.format(crl="crl = 5"))
    with pytest.raises(ConfigError, match="crl must be"):
        load_site_config(path)


def test_site_reads_the_crl_and_refuses_a_bad_one(pki: Path) -> None:
    path = pki.parent / "d2.toml"
    path.write_text(SITE.format(crl='crl = "certs/crl.pem"'))
    config = load_site_config(path)
    ca = (pki / "ca.pem").read_bytes()
    revoke_party(pki, "alice", now=datetime.now(UTC))
    crl = read_crl_file(config, ca)
    assert crl is not None and crl.serials == {_serial(pki, "alice")}
    assert read_crl_file(replace(config, crl=None), ca) is None
    # a stale CRL is read (the site raises the alarm, see disseminator.revocation)
    write_crl(pki, now=datetime.now(UTC) - timedelta(days=3), days=1)
    stale = read_crl_file(config, ca)
    assert stale is not None and stale.next_update < datetime.now(UTC)
    (pki / "crl.pem").write_text("garbage")
    with pytest.raises(ConfigError, match=r"not a PEM X\.509 CRL"):
        read_crl_file(config, ca)
    (pki / "crl.pem").unlink()
    with pytest.raises(ConfigError, match="cannot read CRL"):
        read_crl_file(config, ca)


def test_an_older_crl_file_cannot_roll_back_the_crl_a_site_enforced(
    pki: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Across a restart too: the store keeps the newest CRL, and a lower number is refused."""
    path = pki.parent / "d2.toml"
    path.write_text(SITE.format(crl='crl = "certs/crl.pem"'))
    config = load_site_config(path)
    ca = (pki / "ca.pem").read_bytes()
    now = datetime.now(UTC)
    older = write_crl(pki, now=now).read_bytes()  # the CA's previous CRL: nobody revoked
    revoke_party(pki, "alice", now=now)
    store, metrics = Store(pki.parent / "site.sqlite"), SiteMetrics("d2")
    held = crl_at_start(config, ca, store, metrics, at=now)
    assert held.revoked == {_serial(pki, "alice")}
    newest = held.crl
    assert newest is not None
    store.close()

    (pki / "crl.pem").write_bytes(older)  # put the older CRL back, then "restart"
    store = Store(pki.parent / "site.sqlite")
    with caplog.at_level(logging.ERROR):
        held = crl_at_start(config, ca, store, metrics, at=now)
    assert held.revoked == {_serial(pki, "alice")}  # alice stays revoked
    assert held.crl == newest
    assert f"is older than CRL number {newest.number}" in caplog.text
    assert metrics.registry.get_sample_value(
        "xdn_crl_refused_total", {"reason": "CrlRollbackError"}
    ) == 1
    # without the file, the stored CRL stays in force
    assert crl_at_start(replace(config, crl=None), ca, store, metrics, at=now).crl == newest
    store.close()


def test_every_crl_written_numbers_higher_than_the_last(pki: Path) -> None:
    ca = (pki / "ca.pem").read_bytes()
    now = datetime.now(UTC)
    numbers = []
    for when in (now, now, now - timedelta(days=3)):  # same second, then an older clock
        write_crl(pki, now=when)
        numbers.append(certs.read_crl((pki / "crl.pem").read_bytes(), ca).number)
    assert numbers[0] >= int(now.timestamp())
    assert numbers == sorted(set(numbers))


def test_a_new_crl_is_numbered_above_every_one_signed_even_if_an_older_is_put_back(
    pki: Path,
) -> None:
    now = datetime.now(UTC)
    ca = (pki / "ca.pem").read_bytes()
    first = write_crl(pki, now=now).read_bytes()
    second = write_crl(pki, now=now).read_bytes()
    (pki / "crl.pem").write_bytes(first)  # someone puts the older file back
    third = write_crl(pki, now=now - timedelta(days=3), days=1).read_bytes()  # signed "earlier"
    numbers = [certs.read_crl(pem, ca).number for pem in (first, second, third)]
    assert numbers[0] < numbers[1] < numbers[2]
