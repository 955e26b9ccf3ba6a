"""audit.grants: what each subscriber certificate was entitled to over time, under the
publishers' signed policy versions, as the publisher evaluates them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from audit.grants import (
    SubscriberCertificate,
    check_signed,
    grant_intervals,
    load_policies,
)
from xdn import certs, crypto
from xdn.errors import UsageError
from xdn.paths import REPO_ROOT
from xdn.policy import sign_policy, signature_path

NOW = datetime(2026, 1, 5, tzinfo=UTC)
T0 = int(NOW.timestamp() * 1000)
ONTOLOGY = REPO_ROOT / "ontology" / "production.owl"
GRACE = 60_000

HEAD = """
[policy]
publisher = "pub"
version = {version}
ontology = "http://xdn.example.org/ontology/production"

[[rule]]
id = "C1"
effect = "grant"
concept = "Production"
inherit = true
when = {{ subject = {{ OU = "Contractors" }}, role = "subscriber" }}

[[rule]]
id = "C2"
effect = "deny"
concept = "MachineSetting"
inherit = true
when = {{ subject = {{ OU = "Contractors" }} }}
"""
QUALITY = """
[[rule]]
id = "C3"
effect = "grant"
concept = "QualityInspection"
when = { subject = { OU = "Contractors" }, role = "subscriber" }
"""
PRODUCTION = ("ProductSpecification", "Production", "ProductionStep", "ResourceSpecification")
WITH_QUALITY = tuple(sorted((*PRODUCTION, "QualityInspection")))


@pytest.fixture(scope="module")
def ca() -> tuple[bytes, bytes]:
    return certs.create_ca("test CA", now=NOW)


def _write(root: Path, version: int, extra: str = "", *, key: crypto.PrivateKey | None) -> Path:
    path = root / f"pub-v{version}.toml"
    path.write_text(HEAD.format(version=version) + extra, encoding="utf-8")
    if key is not None:
        signature_path(path).write_bytes(sign_policy(path.read_bytes(), key))
    return path


def _contractor(ca: tuple[bytes, bytes]) -> SubscriberCertificate:
    cert, _ = certs.issue(
        *ca, name="c1", role="subscriber", attributes={"OU": "Contractors"}, now=NOW, days=30
    )
    return SubscriberCertificate(node=certs.node_uri("c1"), cert_pem=cert.decode("ascii"))


def _validity(holder: SubscriberCertificate) -> tuple[int, int]:
    """The certificate's validity as ms from T0, half-open (valid through not_after)."""
    credential = certs.credential_from_pem(holder.cert_pem.encode())
    return (
        int(credential.not_before.timestamp() * 1000) - T0,
        int(credential.not_after.timestamp() * 1000) + 1 - T0,
    )


def test_versions_take_effect_at_their_first_notice_with_a_grace(
    tmp_path: Path, ca: tuple[bytes, bytes]
) -> None:
    ontology, files = load_policies(
        [ONTOLOGY], [_write(tmp_path, 1, key=None), _write(tmp_path, 2, QUALITY, key=None)]
    )
    holder = _contractor(ca)
    change = T0 + 3_600_000
    pieces = grant_intervals(
        [holder], [f.policy for f in files], {("pub", 2): change}, ontology, grace_ms=GRACE
    )
    said = [(p.from_ms - T0, p.to_ms - T0, p.versions, p.allowed, p.required) for p in pieces]
    begin, end = _validity(holder)
    assert said == [
        (begin, change - T0, "1", PRODUCTION, PRODUCTION),
        (change - T0, change - T0 + GRACE, "1|2", WITH_QUALITY, PRODUCTION),
        (change - T0 + GRACE, end, "2", WITH_QUALITY, WITH_QUALITY),
    ]
    assert {p.subscriber for p in pieces} == {holder.node}


def test_a_version_no_notice_names_and_a_revocation(
    tmp_path: Path, ca: tuple[bytes, bytes]
) -> None:
    ontology, files = load_policies(
        [ONTOLOGY], [_write(tmp_path, 1, key=None), _write(tmp_path, 2, QUALITY, key=None)]
    )
    holder = _contractor(ca)
    revoked = SubscriberCertificate(
        node=holder.node, cert_pem=holder.cert_pem, revoked_ms=T0 + 5_000
    )
    pieces = grant_intervals([revoked], [f.policy for f in files], {}, ontology, grace_ms=GRACE)
    begin, _ = _validity(holder)
    assert [(p.from_ms - T0, p.to_ms - T0, p.versions) for p in pieces] == [(begin, 5_000, "1")]


def test_only_policies_their_publisher_signed_are_used(
    tmp_path: Path, ca: tuple[bytes, bytes]
) -> None:
    pub_cert, pub_key = certs.issue(*ca, name="pub", role="publisher", now=NOW)
    renewed, _ = certs.issue(*ca, name="pub", role="publisher", now=NOW + timedelta(days=9))
    _, other_key = certs.issue(*ca, name="mallory", role="publisher", now=NOW)
    signed = _write(tmp_path, 1, key=crypto.load_private_key_pem(pub_key))
    _, files = load_policies([ONTOLOGY], [signed])
    held = {"pub": [renewed.decode(), pub_cert.decode()]}  # either may have signed it
    assert [p.version for p in check_signed(files, held)] == [1]
    (tmp_path / "forged").mkdir()
    forged = _write(tmp_path / "forged", 1, key=crypto.load_private_key_pem(other_key))
    _, files = load_policies([ONTOLOGY], [forged])
    with pytest.raises(UsageError, match=r"no certificate of publisher 'pub'.*verifies"):
        check_signed(files, held)
    with pytest.raises(UsageError, match="hold none of its certificates"):
        check_signed(files, {})


def test_bad_policy_inputs_are_usage_errors(tmp_path: Path) -> None:
    one = _write(tmp_path, 1, key=None)
    with pytest.raises(UsageError, match="--policy needs --ontology"):
        load_policies([], [one])
    with pytest.raises(UsageError, match="a second version 1 of pub"):
        load_policies([ONTOLOGY], [one, one])
    with pytest.raises(UsageError, match="cannot read policy"):
        load_policies([ONTOLOGY], [tmp_path / "missing.toml"])
    with pytest.raises(UsageError, match="cannot read the ontology"):
        load_policies([tmp_path / "missing.owl"], [one])
    (tmp_path / "bad.toml").write_text("[policy]\npublisher = 3\n", encoding="utf-8")
    with pytest.raises(UsageError):
        load_policies([ONTOLOGY], [tmp_path / "bad.toml"])
