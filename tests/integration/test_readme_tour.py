"""The README's tour, run as a user types it: its shell blocks, in order, in one bash, from a
scratch directory laid out like a checkout (issue #20).

The scratch directory links the repository's read-only data (ontology, policies) and copies
``deploy/`` (its example site config resolves paths against its own directory, so a link would
lead back into the checkout). ``. .venv/bin/activate`` there puts this interpreter's ``xdn`` on
the PATH with this checkout's code. The script runs under ``set -euo pipefail``: every command
must succeed, as a user reading along would expect.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from xdn.paths import REPO_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.long]

README = REPO_ROOT / "README.md"


def tour_blocks(readme: str) -> list[str]:
    """The ```sh blocks of the README's "A tour" section, in order."""
    section = readme.split("\n## A tour\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)


def _scratch(root: Path) -> Path:
    root.mkdir()
    for name in ("ontology", "policies"):
        (root / name).symlink_to(REPO_ROOT / name)
    shutil.copytree(REPO_ROOT / "deploy", root / "deploy",
                    ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    activate = root / ".venv" / "bin" / "activate"
    activate.parent.mkdir(parents=True)
    activate.write_text(
        f'export PATH="{Path(sys.executable).parent}:$PATH"\n'
        f'export PYTHONPATH="{REPO_ROOT}"\n',
        encoding="utf-8",
    )
    return root


def test_the_tour_blocks_are_found() -> None:
    blocks = tour_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) == 3
    assert blocks[0].startswith(". .venv/bin/activate\n")
    assert "xdn cluster up" in blocks[2] and "xdn cluster down" in blocks[2]


def test_readme_and_docs_link_nothing_outside_the_repository() -> None:
    for path in [README, *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        assert "../shared" not in text, path
        for target in re.findall(r"\]\(([^)#]+)", text):
            if "://" not in target:
                assert (path.parent / target).exists(), f"{path.name}: broken link {target}"


def test_the_tour_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed: the README tour uses it (make test-long installs "
                    "it; or apt-get install curl)")
    root = _scratch(tmp_path / "checkout")
    script = "set -euo pipefail\n" + "\n".join(tour_blocks(README.read_text(encoding="utf-8")))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    try:
        run = subprocess.run(
            ["bash", "-c", script], cwd=root, env=env, capture_output=True, text=True,
            timeout=600, check=False,
        )
    finally:  # the cluster's sites outlive a failed script: stop them
        if (root / "build" / "cluster" / "three-sites" / "run").is_dir():
            subprocess.run(
                ["bash", "-c", ". .venv/bin/activate && xdn cluster down "
                 "deploy/topologies/three-sites.toml"],
                cwd=root, env=env, capture_output=True, timeout=60, check=False,
            )
    out, err = run.stdout, run.stderr
    assert run.returncode == 0, f"exit {run.returncode}\n--- stdout\n{out}\n--- stderr\n{err}"
    # The tour wrote only under build/ (git ignores it), never into the checkout.
    assert sorted(p.name for p in root.iterdir()) == [
        ".venv", "build", "deploy", "ontology", "policies"
    ]
    assert not (REPO_ROOT / "policies" / "production-dept.toml.sig").exists()
    # certs init wrote an empty CRL, so the hand-made site's `crl = ...` worked.
    assert (root / "build" / "tour" / "certs" / "crl.pem").exists()
    # explain after the revocation says so instead of listing grants
    assert "is revoked by" in out and "gets nothing from this policy" in out
    # alice: one line per accepted document, a clean end at `xdn unsubscribe` (exit 0)
    assert re.search(
        r"alice: accepted production-dept production-dept-order v1: \d+ fragments, \d+ bytes",
        err,
    ), err
    assert "alice: unsubscribed at 127.0.0.1:" in out
    assert "PERMISSION_DENIED" not in out + err and "Traceback" not in err
    assert "production-dept-order.v1.xml" in out
    # cluster up printed complete commands, and where the enforced policies are
    assert "--out build/cluster/three-sites/inbox/alice" in out
    assert re.search(
        r"publisher production-dept: xdn publish \S*ontology/samples/production-dept-order.xml "
        r"--connect 127.0.0.1:\d+ --name production-dept --certs build/cluster/three-sites/certs "
        r"--mapping \S*ontology/mappings/production-dept.toml "
        r"--policy build/cluster/three-sites/policies/production-dept.toml ",
        out,
    ), out
    assert "re-signed with each publisher's key in build/cluster/three-sites/policies/" in out
    # unmapped content is said to be unpublished: by `mapping test`, and once by `publish`
    assert "pd:Header  not published" in out and "(no concept)" not in out
    assert err.count("outside every mapped element are not published (in no view)") == 1, err
    # the downlink said which uplink it linked to
    d2 = (root / "build" / "cluster" / "three-sites" / "d2.out").read_text()
    assert "site d2: uplink at 127.0.0.1:" in d2
    assert "3/3 sites serving" in out
    assert (root / "build" / "tour" / "audit" / "report.html").exists()
