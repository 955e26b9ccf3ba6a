"""The administrator commands end to end through ``cli.main.main``: output, exit codes, errors."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cli import admin as admin_cli
from cli.main import main
from xdn import certs
from xdn.policy import signature_path

REPO = Path(__file__).resolve().parents[2]
OWL = REPO / "ontology" / "production.owl"
PD = REPO / "policies" / "production-dept.toml"
QA = REPO / "policies" / "qa-company.toml"
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
AT = ["--at", "2025-06-02T00:00:00"]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pki")
    (root / "subscribers").mkdir()
    ca_cert, ca_key = certs.create_ca("xdn-ca", now=NOW)
    files = {}
    for name, role, attributes in [
        ("qa-company", "publisher", {}),
        ("alice", "subscriber", {"OU": "Cred2"}),
        ("bob", "subscriber", {"OU": "Cred1"}),
        ("carol", "subscriber", {"OU": "Contractors"}),
    ]:
        cert, key = certs.issue(
            ca_cert, ca_key, name=name, role=role, attributes=attributes, now=NOW
        )
        folder = root / "subscribers" if role == "subscriber" else root
        (folder / f"{name}.pem").write_bytes(cert)
        (root / f"{name}.key").write_bytes(key)
        files[name], files[f"{name}-key"] = folder / f"{name}.pem", root / f"{name}.key"
    files["dir"] = root / "subscribers"
    return files


def _copy(tmp_path: Path, source: Path, text: str | None = None) -> Path:
    path = tmp_path / source.name
    path.write_text(text if text is not None else source.read_text(encoding="utf-8"), "utf-8")
    return path


# ----------------------------------------------------------------------------- ontology


def test_ontology_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "ontology", "check")
    assert code == 0 and out.endswith("13 concepts, 13 containments, 0 problem(s)\n")
    bad = tmp_path / "bad.owl"
    bad.write_text(
        OWL.read_text(encoding="utf-8").replace(
            'rdf:resource="http://xdn.example.org/ontology/production#WorkOrder"/>',
            'rdf:resource="http://xdn.example.org/ontology/production#WorkOrdr"/>',
            1,
        ),
        encoding="utf-8",
    )
    code, out, _ = run(capsys, "ontology", "check", "--ontology", str(bad))
    assert code == 1
    assert f"problem: {bad}:40: unknown reference: WorkOrdr (super-concept of Production)" in out


@pytest.fixture
def no_graphviz(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))


@pytest.fixture
def fake_graphviz(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A stand-in ``dot`` that records its arguments and writes a marker file."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "dot"
    script.write_text(
        '#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\ncat > "$(dirname "$0")/stdin"\n'
        'while [ "$1" != "-o" ]; do shift; done\necho rendered > "$2"\n',
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder


def test_ontology_show_without_graphviz(
    tmp_path: Path, no_graphviz: None, capsys: pytest.CaptureFixture[str]
) -> None:
    dot, svg = tmp_path / "o.dot", tmp_path / "o.svg"
    code, out, _ = run(capsys, "ontology", "show", "--dot", str(dot), "--svg", str(svg))
    assert code == 0 and out.splitlines()[1] == "ProductionProcess — Production process"
    assert "built-in layout; Graphviz not found — install Graphviz: apt-get install graphviz" in out
    assert dot.read_text(encoding="utf-8").startswith("digraph ontology {")
    assert svg.read_text(encoding="utf-8").startswith("<svg")
    code, out, err = run(capsys, "ontology", "show", "--png", str(tmp_path / "o.png"))
    assert code == 1 and out == ""  # said before printing the tree
    assert "drawing PNG needs Graphviz 'dot', which is not installed" in err
    assert "apt-get install graphviz" in err and not (tmp_path / "o.png").exists()


def test_ontology_show_with_graphviz(
    tmp_path: Path, fake_graphviz: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    svg, png = tmp_path / "o.svg", tmp_path / "o.png"
    code, out, _ = run(capsys, "ontology", "show", "--svg", str(svg), "--png", str(png))
    assert code == 0 and f"wrote {png} (Graphviz)" in out
    assert svg.read_text() == png.read_text() == "rendered\n"
    assert (fake_graphviz / "args").read_text().startswith("-Tpng -o")
    assert (fake_graphviz / "stdin").read_text().startswith("digraph ontology {")
    code, out, _ = run(capsys, "ontology", "show", "--svg", str(svg), "--builtin")
    assert "(built-in layout)" in out and svg.read_text().startswith("<svg")


# ----------------------------------------------------------------------------- mapping


def test_mapping_test_lists_lines_and_concepts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys,
        "mapping",
        "test",
        str(REPO / "ontology/samples/qa-company-report.xml"),
        "--mapping",
        str(REPO / "ontology/mappings/qa-company.toml"),
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["line", "element", "→", "concept"]
    assert lines[1].split() == ["4", "qa:InspectionReport", "not", "published"]
    assert any(line.split() == ["10", "qa:Scope", "→", "ProductionProcess"] for line in lines)
    assert "14 mapped element(s)\n8 element(s) and 5 attribute(s) outside every mapped" in out
    assert "concepts this mapping never produces: MachineSetting, Production, ProductionStep" in out


# ----------------------------------------------------------------------------- policy


def test_policy_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policy", "check", str(PD), str(QA), *AT)
    assert code == 0 and out.count(": OK") == 2
    code, _, err = run(capsys, "policy", "check", str(QA), str(QA))
    assert code == 1 and "second policy for 'qa-company'" in err
    warned = _copy(
        tmp_path,
        QA,
        QA.read_text(encoding="utf-8")
        + (
            '[[rule]]\nid = "W"\neffect = "deny"\nconcept = "QualityInspection"\n'
            'when = { subject = { OU = "Cred2" }, role = "subscriber" }\n'
        ),
    )
    code, out, _ = run(capsys, "policy", "check", str(warned))
    assert code == 0 and f"warning: {warned}:23: rule R2 grants QualityInspection" in out
    code, _, err = run(capsys, "policy", "check", str(warned), "--strict")
    assert code == 1 and "1 warning(s) and --strict" in err
    expiring = _copy(
        tmp_path,
        QA,
        QA.read_text(encoding="utf-8").replace(
            "version = 1\n", "version = 1\nvalid_until = 2025-06-30T00:00:00Z\n"
        ),
    )
    assert run(capsys, "policy", "check", str(expiring), *AT)[0] == 0
    code, _, err = run(capsys, "policy", "check", str(expiring), "--at", "2025-07-01")
    assert code == 1 and f"{expiring}:9: policy expired at 2025-06-30T00:00:00+00:00" in err


@pytest.mark.parametrize(
    "value", ["[" * 5000 + "]" * 5000, "{ a = " * 5000 + "1" + " }" * 5000]
)
def test_policy_check_refuses_deep_nesting_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    """Issue #12 item 9: deeply nested TOML was a RecursionError traceback."""
    deep = _copy(tmp_path, QA, QA.read_text(encoding="utf-8") + f"[[rule]]\nid = {value}\n")
    code, out, err = run(capsys, "policy", "check", str(deep))
    assert code == 1 and not out
    assert f"{deep}: malformed policy: arrays or inline tables nested too deeply" in err
    assert "Traceback" not in err and "RecursionError" not in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('concept = "ResourceDetails"', 'concept = "Resources"'), ":17: rule R0: unknown concept"),
        (("inherit = true", "inherit = maybe"), ":18: malformed TOML"),
        (
            ('requires = "ResourceDetails"', 'requires = "MachineSetting"'),
            ":23: rule R2: requires MachineSetting, which no grant rule",
        ),
        (('id = "R0"', 'id = "R2"'), ":24: rule R2: duplicate rule id (first at line 13)"),
    ],
)
def test_policy_check_errors_name_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: tuple[str, str], message: str
) -> None:
    broken = _copy(tmp_path, QA, QA.read_text(encoding="utf-8").replace(*edit, 1))
    code, _, err = run(capsys, "policy", "check", str(broken))
    assert code == 1 and err.startswith(f"xdn: error: {broken}{message}"), err


def test_sign_then_check_signature(
    tmp_path: Path, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    policy = _copy(tmp_path, QA)
    code, out, _ = run(capsys, "policy", "sign", str(policy), "--key", str(pki["qa-company-key"]))
    assert code == 0 and out.startswith(f"signed {policy} (publisher qa-company, version 1)")
    code, out, _ = run(capsys, "policy", "check", str(policy), "--verify", str(pki["qa-company"]))
    assert code == 0 and "signature verified: OK" in out
    policy.write_bytes(policy.read_bytes() + b"\n# edited after signing\n")
    code, _, err = run(capsys, "policy", "check", str(policy), "--verify", str(pki["qa-company"]))
    assert code == 1 and "does not verify" in err
    signature_path(policy).unlink()
    code, _, err = run(capsys, "policy", "check", str(policy), "--verify", str(pki["qa-company"]))
    assert code == 1 and "unsigned policy" in err


def test_sign_refuses_invalid_or_expired_policies(
    tmp_path: Path, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _copy(tmp_path, QA, QA.read_text(encoding="utf-8").replace("ResourceDetails", "Nope"))
    code, _, err = run(capsys, "policy", "sign", str(bad), "--key", str(pki["qa-company-key"]))
    assert code == 1 and "unknown concept 'Nope'" in err and not signature_path(bad).exists()
    old = _copy(
        tmp_path,
        QA,
        QA.read_text(encoding="utf-8").replace(
            "version = 1\n", "version = 1\nvalid_until = 2020-01-01T00:00:00Z\n"
        ),
    )
    code, _, err = run(capsys, "policy", "sign", str(old), "--key", str(pki["qa-company-key"]))
    assert code == 1 and "policy expired" in err and not signature_path(old).exists()


def test_explain(pki: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "policy", "explain", str(QA), "--cert", str(pki["alice"]), *AT)
    assert code == 0
    assert "rules matching this credential: 2 of 2" in out
    assert "R2: grant QualityInspection and sub-concepts, if ResourceDetails granted" in out
    assert "publisher qa-company: InspectionResult, Machine, Material, Measurement" in out
    assert "by R2 via QualityInspection ⊒ InspectionResult ⊒ Measurement" in out
    assert "(because ResourceDetails is granted)" in out
    code, out, _ = run(capsys, "policy", "explain", str(PD), "--cert", str(pki["carol"]), *AT)
    assert "deny  MachineSetting" in out and "by C2 via MachineSetting" in out


def test_explain_with_dissemination_state(
    tmp_path: Path, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    evolved = _copy(
        tmp_path,
        QA,
        QA.read_text(encoding="utf-8")
        + (
            '[[rule]]\nid = "E1"\neffect = "grant"\nconcept = "Machine"\nmax_instances = 1\n'
            'after = { publisher = "production-dept", concept = "ProductSpecification" }\n'
            'when = { subject = { OU = "Cred1" } }\n'
        ),
    )
    args = ("policy", "explain", str(evolved), "--cert", str(pki["bob"]), *AT)
    assert "E1 waits until ProductSpecification of production-dept" in run(capsys, *args)[1]
    done = ("--disseminated", "production-dept:ProductSpecification")
    out = run(capsys, *args, *done)[1]
    assert "publisher qa-company: Machine" in out and "limit Machine: at most 1" in out
    out = run(capsys, *args, *done, "--received", "Machine=1")[1]
    assert "publisher qa-company: nothing" in out and "E1: Machine exhausted" in out
    code, _, err = run(capsys, *args, "--received", "Machine")
    assert code == 1 and "write CONCEPT=N" in err
    code, _, err = run(capsys, *args, "--disseminated", "Machine")
    assert code == 1 and "write PUBLISHER:CONCEPT" in err


def test_diff(tmp_path: Path, pki: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    new = _copy(
        tmp_path,
        PD,
        PD.read_text(encoding="utf-8")
        .replace("version = 1", "version = 2")
        .replace(
            'concept = "Production"\ninherit = true', 'concept = "ProductionStep"\ninherit = true'
        )
        + '[[rule]]\nid = "N1"\neffect = "grant"\nconcept = "Machine"\n'
        'when = { subject = { OU = "Cred2" } }\n',
    )
    code, out, _ = run(capsys, "policy", "diff", str(PD), str(new), *AT)
    assert code == 0
    assert out.splitlines()[0] == "production-dept: version 1 → 2"
    assert "  + N1: grant Machine — for subject OU=Cred2" in out
    assert "  ~ C1: grant Production and sub-concepts — for subject OU=Contractors" in out
    assert "credentials with subject OU=Contractors, role subscriber:" in out
    assert "  loses ProductSpecification, Production, ResourceSpecification" in out
    assert "credentials with subject OU=Cred2:\n  gains Machine" in out
    code, out, _ = run(capsys, "policy", "diff", str(PD), str(new), "--certs", str(pki["dir"]), *AT)
    assert "certificate alice.pem:\n  gains Machine" in out
    assert "certificate carol.pem:\n  loses ProductSpecification, Production" in out
    assert "bob.pem" not in out
    code, out, _ = run(capsys, "policy", "diff", str(PD), str(PD), *AT)
    assert "no rule changed" in out and "nobody gains or loses anything" in out
    assert "warning:" in out and "does not supersede" in out
    code, _, err = run(capsys, "policy", "diff", str(PD), str(QA))
    assert code == 1 and "policy of 'qa-company', not 'production-dept'" in err
    code, _, err = run(capsys, "policy", "diff", str(PD), str(new), "--certs", str(tmp_path))
    assert code == 1 and "no *.pem certificate" in err


def test_admin_cli_exports() -> None:
    assert {"register", "parse_size", "cmd_policy_diff", "cmd_ontology_show"} <= set(
        admin_cli.__all__
    )
