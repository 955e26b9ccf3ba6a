"""Bad input and a deployment's folders: the audit reads its logs (rotated, gzip-compressed)
and skips the rest with reasons; torn, binary and enormous-line logs are one finding per file;
long runs print a progress line. One shared local session, real logs (``audit_logs``)."""

from __future__ import annotations

import gzip
import logging
import os
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from audit_logs import NOW, Network, make_network
from pyspark.sql import SparkSession

from audit import transforms as t
from audit.cluster import SessionOptions
from audit.job import run_audit

pytestmark = [pytest.mark.spark, pytest.mark.long]  # (minutes of audits: make test-long)


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Network:
    return make_network(tmp_path_factory.mktemp("logs"))


def _deployment(clean: Path, root: Path) -> Path:
    """The clean logs laid out as sites keep them: pub's log rotated and compressed, s2's
    rotated in two, next to SQLite state, credentials, port files and a binary blob."""
    shutil.copytree(clean, root)
    pub = root / "pub" / "provenance.nq"
    (root / "pub" / "provenance.nq-20260105.gz").write_bytes(gzip.compress(pub.read_bytes()))
    pub.unlink()
    s2 = root / "s2" / "provenance.nq"
    lines = s2.read_bytes().splitlines(keepends=True)
    assert len(lines) > 4
    (root / "s2" / "provenance.nq.1").write_bytes(b"".join(lines[:3]))
    s2.write_bytes(b"".join(lines[3:]))
    for site in ("d1", "d2"):
        with sqlite3.connect(root / site / "state.sqlite3") as db:
            db.execute("CREATE TABLE queue (seq INTEGER, body BLOB)")
            db.executemany(
                "INSERT INTO queue VALUES (?, ?)", [(i, os.urandom(64)) for i in range(500)]
            )
        db.close()
        (root / site / "site.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n")
        (root / site / "grpc.port").write_text("7400\n")
    (root / "s1" / "keys.bin").write_bytes(os.urandom(8192))
    return root


def test_a_deployment_folder_is_audited_from_its_logs_alone(
    spark: SparkSession, network: Network, tmp_path: Path
) -> None:
    said: list[str] = []
    logs = _deployment(network.clean, tmp_path / "deployment")
    summary = run_audit(
        [str(logs)], ca_pem=network.ca_pem, out_dir=tmp_path / "out", at=NOW, progress=said.append
    )
    # as clean as the clean logs: the compressed publisher log and the rotated parts were read
    assert summary.failures == () and summary.ok, summary.failures
    assert (summary.messages, summary.signatures_verified, summary.fragments_delivered) == (
        6,
        7,
        10,
    )
    (skipped,) = [s for s in said if s.startswith("skipped ")]
    assert skipped.startswith("skipped 7 files that are not provenance logs: ")
    for entry in (
        "d1/state.sqlite3 (SQLite database)",
        "d2/site.pem (PEM)",
        "d1/grpc.port (text, not named like a provenance log)",
        "s1/keys.bin (not N-Quads: binary)",
    ):
        assert entry in skipped, skipped
    assert any(s.startswith("reading 6 provenance log(s)") for s in said), said


def _tear(log: Path) -> str:
    """Append the first half of the log's last line, no line end: a write torn by a crash."""
    last = log.read_text().splitlines()[-1]
    torn = last[: len(last) // 2]
    with log.open("a") as f:
        f.write(torn)
    return torn


def test_torn_binary_and_enormous_line_logs_are_one_finding_per_file(
    spark: SparkSession, network: Network, tmp_path: Path
) -> None:
    logs = tmp_path / "logs"
    shutil.copytree(network.clean, logs)
    _tear(logs / "d2" / "provenance.nq")
    (logs / "junk").mkdir()
    # binary lines (no line ends inside, none a blank or "#" comment line)
    garbage = b"\n".join(
        b"\xff" + os.urandom(40).replace(b"\n", b" ").replace(b"\r", b" ") for _ in range(2_000)
    )
    (logs / "junk" / "provenance.nq").write_bytes(garbage)
    huge = logs / "huge" / "provenance.nq"
    huge.parent.mkdir()
    readable = b'<urn:a> <urn:b> "x" <urn:g> .\n'
    huge.write_bytes(
        readable + b'<urn:a> <urn:b> "' + b"A" * 3 * t.MAX_LINE_BYTES + b'" <urn:g> .\n'
    )
    only = logs / "only huge" / "provenance.nq"  # no line short enough: Spark gets no row
    only.parent.mkdir()
    only.write_bytes(b"A" * (2 * t.MAX_LINE_BYTES) + b"\n")
    summary = run_audit([str(logs)], ca_pem=network.ca_pem, out_dir=tmp_path / "out", at=NOW)
    by_file = {f.node.rsplit("/", 2)[-2]: f for f in summary.failures if f.graph == ""}
    assert sorted(by_file) == ["d2", "huge", "junk", "only huge"], summary.failures
    assert by_file["only huge"] == (
        "",
        str(only),
        f"no line read: every line is longer than {t.MAX_LINE_BYTES} bytes",
        "malformed",
    )
    assert {f.kind for f in by_file.values()} == {"malformed"}
    assert re.fullmatch(r"1 malformed log line\(s\), e\.g\. .+", by_file["d2"].reason)
    assert re.fullmatch(r"2000 malformed log line\(s\), e\.g\. .+", by_file["junk"].reason)
    unread = huge.stat().st_size - len(readable)
    assert by_file["huge"].reason == (
        f"lines longer than {t.MAX_LINE_BYTES} bytes not read ({unread} bytes)"
    )
    # the huge log's readable line is read, and judged as any graph
    assert [(f.reason, f.kind) for f in summary.failures if f.graph == "urn:g"] == [
        ("graph <urn:g>: a content graph must be named <message#cN>", "malformed")
    ]
    assert len(summary.failures) == 5
    # the chains themselves are intact: the torn line was a copy's half
    assert (summary.chains_ok, summary.fragments_delivered) == (2, 10)


def test_long_runs_print_progress_with_counts_and_rate(
    spark: SparkSession, network: Network, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    said: list[str] = []
    # the shared session is running: what only a new JVM could take is refused aloud
    session = SessionOptions(
        executor_python="/elsewhere/bin/python",
        driver_memory="3g",
        conf=(("spark.executor.memory", "2g"),),
    )
    with caplog.at_level(logging.WARNING, logger="audit.cluster"):
        run_audit(
            [str(network.clean)],
            ca_pem=network.ca_pem,
            out_dir=tmp_path,
            session=session,
            at=NOW,
            progress=said.append,
            progress_every_s=0.05,
        )
    assert (
        "spark.executor.memory, --driver-memory, --executor-python "
        f"(it runs {spark.sparkContext.pythonExec}) cannot change it"
    ) in caplog.text
    # the partitions it set on the reused session are put back
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"
    assert spark.conf.get("spark.sql.files.minPartitionNum", None) is None
    line = re.compile(
        r"(?P<stage>[^:]+): (?P<lines>[\d,]+) log lines, (?P<envelopes>[\d,]+) envelopes read "
        r"\([\d,]+ lines/s, \d+ s\)"
    )
    ticks = [m for m in map(line.fullmatch, said) if m]
    assert ticks, said
    assert {m["stage"] for m in ticks} & {
        "verifying signatures and chains",
        "reconstructing fragment paths",
    }
    total = sum(len(p.read_bytes().splitlines()) for p in network.clean.rglob("provenance.nq"))
    (final,) = [s for s in said if s.startswith("read ")]
    assert final.startswith(f"read {total:,} log lines, 6 envelopes read ("), (final, total)
