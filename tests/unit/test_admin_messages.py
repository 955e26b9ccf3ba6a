"""Administrator commands that say what is wrong (issue #20): a missing publisher key, a
revoked certificate, the CRL of a fresh CA, the count of credentials a diff evaluated."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.main import main
from xdn import certs

REPO = Path(__file__).resolve().parents[2]
PD = REPO / "policies" / "production-dept.toml"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ca") / "certs"
    assert main(["certs", "init", "--dir", str(folder)]) == 0
    for name in ("alice", "bob"):
        issued = ["certs", "issue", "--dir", str(folder), "--name", name, "--role", "subscriber"]
        assert main([*issued, "--attr", "OU=Cred1"]) == 0
    return folder


def test_certs_init_writes_an_empty_crl_signed_by_the_ca(ca: Path) -> None:
    crl = certs.read_crl((ca / "crl.pem").read_bytes(), (ca / "ca.pem").read_bytes())
    assert crl.serials == frozenset()


def test_sign_with_a_missing_key_says_which_certificate_to_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / PD.name
    policy.write_bytes(PD.read_bytes())
    key = tmp_path / "certs" / "production-dept.key"
    code, _, err = run(capsys, "policy", "sign", str(policy), "--key", str(key))
    assert code == 1
    assert f"{key}: no such key" in err
    assert (
        f"xdn certs issue --dir {key.parent} --name production-dept --role publisher" in err
    )
    assert not (tmp_path / f"{PD.name}.sig").exists()


def test_explain_a_revoked_certificate(
    tmp_path: Path, ca: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "policy", "explain", str(PD), "--cert", str(ca / "bob.pem"))
    assert code == 0 and "publisher production-dept:" in out and "revoked" not in out
    assert main(["certs", "revoke", "--dir", str(ca), "--name", "bob"]) == 0
    capsys.readouterr()
    code, out, _ = run(capsys, "policy", "explain", str(PD), "--cert", str(ca / "bob.pem"))
    assert code == 0
    assert "is revoked by" in out and "gets nothing from this policy" in out
    assert "publisher production-dept:" not in out  # no grants shown
    # the same with the CRL named, from elsewhere
    elsewhere = tmp_path / "bob.pem"
    elsewhere.write_bytes((ca / "bob.pem").read_bytes())
    code, out, _ = run(
        capsys, "policy", "explain", str(PD), "--cert", str(elsewhere),
        "--crl", str(ca / "crl.pem"),
    )
    assert "is revoked by" in out


def test_diff_counts_credentials_once(
    tmp_path: Path, ca: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = tmp_path / "newer.toml"
    newer.write_text(PD.read_text(encoding="utf-8").replace("version = 1", "version = 2", 1))
    code, out, _ = run(capsys, "policy", "diff", str(PD), str(newer))
    assert code == 0
    assert "credentials evaluated)" in out and "credentialss" not in out
    code, out, _ = run(capsys, "policy", "diff", str(PD), str(newer), "--certs", str(ca))
    assert "(3 certificates evaluated)" in out  # alice, bob and ca.pem
