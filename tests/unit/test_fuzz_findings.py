"""What the fuzz campaign (``make fuzz``, tests/fuzz) found, each pinned by a test.

Every input here once escaped its parser as an untyped exception; each must now be refused with
the parser's typed error. The inputs the fuzzer wrote are kept in ``tests/fuzz/regressions/``
(replayed there too); the tests below say what each one is about.
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest

from deploy.cluster import load_topology
from disseminator.admin_service import AdminService, add_admin_to_server
from disseminator.config import load_site_config
from disseminator.dht import add_dht_to_server
from xdn import certs
from xdn.errors import CertificateError, ConfigError
from xdn.paths import REPO_ROOT

REGRESSIONS = REPO_ROOT / "tests" / "fuzz" / "regressions"
NOW = datetime(2026, 6, 1, tzinfo=UTC)
CA, CA_KEY = certs.create_ca("test-ca", now=NOW)


def _pem(der: bytes) -> bytes:
    body = base64.encodebytes(der)
    return b"-----BEGIN CERTIFICATE-----\n" + body + b"-----END CERTIFICATE-----\n"


def _found(target: str, name: str) -> bytes:
    return (REGRESSIONS / target / name).read_bytes()


def test_a_site_config_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_bytes(b'[site]\nname = "d\x971"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_site_config(path)


def test_a_topology_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "topology.toml"
    path.write_bytes(b'[[site]]\nname = "d\xff1"\n')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_topology(path)


def test_reading_topologies_loads_the_ontology_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each topology read used to load the whole ontology (owlready2, ~70 ms): the fuzzer ran
    at a few hundred inputs a second, and so would anything reading many topologies."""
    import xdn.ontology

    loads = []
    real = xdn.ontology.load_ontology
    monkeypatch.setattr(xdn.ontology, "load_ontology", lambda p: loads.append(p) or real(p))
    path = tmp_path / "topology.toml"
    path.write_text('[[site]]\nname = "d1"\nblock = "ProductionProcess"\n')
    tops = [load_topology(path) for _ in range(3)]
    assert [t.sites[0].block for t in tops] == ["ProductionProcess"] * 3
    assert len(loads) <= 1  # none when an earlier test of this process loaded it


@pytest.mark.parametrize("found", ["unreadable-key.der", "unknown-curve.der"])
def test_a_certificate_whose_key_cannot_be_read_is_a_certificate_error(found: str) -> None:
    pem = _pem(_found("certificate", found))
    certs.credential_from_pem(pem)  # the rest of it reads
    with pytest.raises(CertificateError, match="unreadable public key"):
        certs.public_key_of(pem)


@pytest.mark.parametrize(
    "found",
    [
        "malformed-extension.der",  # an extension's DER does not parse
        "duplicate-extension.der",  # an extension listed twice
        "bitstring-name.der",  # a name attribute of a string type its OID does not allow
    ],
)
def test_a_certificate_with_a_malformed_name_or_extension_is_a_certificate_error(
    found: str,
) -> None:
    pem = _pem(_found("certificate", found))
    with pytest.raises(CertificateError, match="malformed name or extension"):
        certs.credential_from_pem(pem)
    with pytest.raises(CertificateError):
        certs.verify_certificate(pem, CA, at=NOW)


SITE = """
[site]
name = "d1"
listen = "127.0.0.1:0"
block = "ProductionProcess"
[tls]
ca = "ca.pem"
cert = "d1.pem"
key = "d1.key"
[ontology]
files = ["production.owl"]
"""


@pytest.mark.parametrize(
    ("extra", "complaint"),
    [
        ('publisher = "production-dept"\n', "must be \\[\\[publisher\\]\\] tables"),
        ("publisher = [1]\n", "must be \\[\\[publisher\\]\\] tables"),
    ],
)
def test_publishers_that_are_not_tables_are_a_config_error(
    tmp_path: Path, extra: str, complaint: str
) -> None:
    path = tmp_path / "site.toml"
    path.write_text(extra + SITE)
    with pytest.raises(ConfigError, match=complaint):
        load_site_config(path)


@pytest.mark.parametrize("key", ["state_dir", "provenance_log"])
def test_a_site_path_that_is_not_a_string_is_a_config_error(tmp_path: Path, key: str) -> None:
    path = tmp_path / "site.toml"
    path.write_text(SITE.replace("[tls]", f"{key} = 5\n[tls]"))
    with pytest.raises(ConfigError, match=f"{key} must be a path"):
        load_site_config(path)


@pytest.mark.parametrize("found", ["crl-version.der", "crl-bitstring-name.der"])
def test_a_malformed_crl_is_a_certificate_error(found: str) -> None:
    crl = _found("certificate", found)[1:]  # (after the target's "C": a CRL follows)
    pem = b"-----BEGIN X509 CRL-----\n" + base64.encodebytes(crl) + b"-----END X509 CRL-----\n"
    with pytest.raises(CertificateError, match=r"not a PEM X\.509 CRL"):
        certs.read_crl(pem, CA)


def test_a_certificate_of_an_unknown_version_is_a_certificate_error() -> None:
    pem, _ = certs.issue(CA, CA_KEY, name="d1", role="publisher", now=NOW)
    der = base64.b64decode(b"".join(line for line in pem.splitlines() if b"-----" not in line))
    version = der.index(bytes.fromhex("a003020102"))  # [0] EXPLICIT INTEGER 2 (v3)
    bad = der[: version + 4] + b"\x07" + der[version + 5 :]
    with pytest.raises(CertificateError, match=r"not a PEM X\.509 certificate"):
        certs.credential_from_pem(_pem(bad))


@pytest.mark.parametrize(
    "method",
    [
        "/xdn.wire.v1.Dht/Ping",
        "/xdn.wire.v1.Dht/FindNode",
        "/xdn.wire.v1.Dht/FindValue",
        "/xdn.wire.v1.Dht/Store",
        "/xdn.wire.v1.Admin/Status",
        "/xdn.wire.v1.Admin/Subscribers",
    ],
)
def test_a_dht_or_admin_request_that_does_not_decode_is_invalid_argument(method: str) -> None:
    async def call() -> grpc.StatusCode:
        server = grpc.aio.server()
        add_dht_to_server(server, None)  # type: ignore[arg-type]  # (never reached)
        add_admin_to_server(server, AdminService(None, uplink_connected=bool, dht=None))  # type: ignore[arg-type]
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await channel.unary_unary(method)(b"\xff\xff\xff", timeout=10)
                return refused.value.code()
        finally:
            await server.stop(None)

    assert asyncio.run(call()) == grpc.StatusCode.INVALID_ARGUMENT
