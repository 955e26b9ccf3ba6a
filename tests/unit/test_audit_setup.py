"""Which files the audit reads, how it ships itself to a cluster, and its progress line
(plain Python: no Spark session)."""

from __future__ import annotations

import argparse
import gzip
import sqlite3
import subprocess
import sys
import threading
import zipfile
from datetime import UTC, datetime
from pathlib import Path

import pytest

import audit
import xdn
from audit.cluster import (
    BYTES_PER_PARTITION,
    SMALL_INPUT_BYTES,
    SessionOptions,
    is_local_master,
    package_zip,
    parse_conf,
    partitions_for,
)
from audit.inputs import MAX_NAMED_SKIPS, Skipped, find_logs, is_log_name, skipped_line, sniff
from audit.progress import ProgressLine
from xdn.errors import UsageError

LINE = b'<urn:s> <urn:p> "o" <urn:g> .\n'


@pytest.mark.parametrize(
    "name",
    [
        "provenance.nq",
        "d2.nq",
        "provenance.nq.gz",
        "provenance.nq.1",
        "provenance.nq.12.gz",
        "provenance.nq-20260105",
        "provenance.nq-2026-01-05.gz",
    ],
)
def test_log_names_and_their_rotations_are_read(name: str) -> None:
    assert is_log_name(name)


@pytest.mark.parametrize(
    "name",
    [
        "state.sqlite3",
        "state.sqlite3-wal",
        "site.pem",
        "provenance.nq.bak",
        "provenance.nq.gz.part",
        "provenance.nqx",
        ".nq",
        "report.html",
        "part-00000.snappy.parquet",
    ],
)
def test_other_names_are_not(name: str) -> None:
    assert not is_log_name(name)


def test_sniff_names_what_a_file_is() -> None:
    assert sniff(b"") == "empty"
    assert sniff(b"SQLite format 3\x00\x10\x00") == "SQLite database"
    assert sniff(b"-----BEGIN CERTIFICATE-----\nMII") == "PEM"
    assert sniff(gzip.compress(b"x")) == "gzip, not named *.nq.gz"
    assert sniff(bytes(range(256))) == "not N-Quads: binary"
    assert sniff(b"text\x00with a NUL") == "not N-Quads: binary"
    assert sniff(b"port = 7400\n") == "text, not named like a provenance log"
    # a multi-byte character cut by the sample's end is still text
    assert sniff("é".encode() * 10 + "é".encode()[:1]) == "text, not named like a provenance log"


def _site_tree(root: Path) -> None:
    """What a deployment's state and log folders hold: logs among SQLite, PEM and port files."""
    (root / "d1").mkdir(parents=True)
    (root / "d1" / "provenance.nq").write_bytes(LINE)
    (root / "d1" / "provenance.nq.1.gz").write_bytes(gzip.compress(LINE))
    with sqlite3.connect(root / "d1" / "state.sqlite3") as db:
        db.execute("CREATE TABLE q (x)")
    db.close()
    (root / "d1" / "site.pem").write_bytes(b"-----BEGIN PRIVATE KEY-----\n")
    (root / "d1" / "port").write_text("7400\n")
    (root / "alice" / "inbox").mkdir(parents=True)
    (root / "alice" / "provenance.nq").write_bytes(LINE)
    (root / "alice" / "inbox" / "blob.bin").write_bytes(bytes(range(256)) * 4)


def test_find_logs_picks_the_logs_and_says_why_it_skips_the_rest(tmp_path: Path) -> None:
    _site_tree(tmp_path)
    found = find_logs([str(tmp_path)])
    assert [Path(f.path).relative_to(tmp_path).as_posix() for f in found.logs] == [
        "alice/provenance.nq",
        "d1/provenance.nq",
        "d1/provenance.nq.1.gz",
    ]
    assert [f.compressed for f in found.logs] == [False, False, True]
    assert found.total_bytes == 2 * len(LINE) + len(gzip.compress(LINE))
    assert found.skipped == (
        Skipped(path="alice/inbox/blob.bin", reason="not N-Quads: binary"),
        Skipped(path="d1/port", reason="text, not named like a provenance log"),
        Skipped(path="d1/site.pem", reason="PEM"),
        Skipped(path="d1/state.sqlite3", reason="SQLite database"),
    )


def test_a_file_named_explicitly_is_read_whatever_its_name(tmp_path: Path) -> None:
    (tmp_path / "d1.log").write_bytes(LINE)
    found = find_logs([str(tmp_path / "d1.log"), "file://" + str(tmp_path / "d1.log")])
    assert [f.path for f in found.logs] == [str(tmp_path / "d1.log")] * 2
    assert found.skipped == ()


def test_a_missing_location_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        find_logs([str(tmp_path / "absent")])


def test_skipped_files_are_reported_in_one_bounded_line() -> None:
    assert skipped_line(()) is None
    one = skipped_line([Skipped(path="d1/state.sqlite3", reason="SQLite database")])
    assert one == "skipped 1 file that is not a provenance log: d1/state.sqlite3 (SQLite database)"
    many = [Skipped(path=f"f{i}", reason="PEM") for i in range(MAX_NAMED_SKIPS + 5)]
    line = skipped_line(many)
    assert line is not None and line.startswith(f"skipped {MAX_NAMED_SKIPS + 5} files")
    assert line.count("(PEM)") == MAX_NAMED_SKIPS and line.endswith(", and 5 more")


# ----------------------------------------------------------------------------- the session


def test_partitions_follow_the_cores_and_the_input_size() -> None:
    assert partitions_for(0, 2) == partitions_for(SMALL_INPUT_BYTES - 1, 64) == 1
    assert partitions_for(SMALL_INPUT_BYTES, 2) == 2
    assert partitions_for(10 * BYTES_PER_PARTITION, 2) == 10
    assert partitions_for(10 * BYTES_PER_PARTITION + 1, 64) == 64
    assert partitions_for(10 * BYTES_PER_PARTITION + 1, 4) == 11


def test_conf_pairs_and_options_are_checked() -> None:
    assert parse_conf(["spark.executor.memory=4g", "a.b=x=y"]) == (
        ("spark.executor.memory", "4g"),
        ("a.b", "x=y"),
    )
    for bad in ("novalue", "=x"):
        with pytest.raises(UsageError, match="KEY=VALUE"):
            parse_conf([bad])
    with pytest.raises(UsageError, match="at least 1"):
        SessionOptions(partitions=0)
    assert SessionOptions().executor_python == sys.executable
    assert is_local_master("local[*]") and is_local_master("local")
    assert not any(map(is_local_master, ["spark://h:7077", "yarn", "k8s://https://h:6443"]))


def test_the_shipped_zip_holds_what_the_udfs_import(tmp_path: Path) -> None:
    shipped = package_zip(tmp_path, [audit, xdn])
    names = zipfile.ZipFile(shipped).namelist()
    assert {"audit/rows.py", "audit/verify.py", "xdn/provenance/__init__.py"} <= set(names)
    assert "xdn/linked_data/contexts/activitystreams.jsonld" in names  # package data too
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert package_zip(tmp_path, [audit, xdn]) == shipped  # the name is the content's hash
    # a fresh interpreter with the zip on its path imports the UDF modules from it
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "import audit.rows, audit.verify, xdn; print(xdn.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", probe, str(shipped)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(shipped))


# ----------------------------------------------------------------------------- progress


class _Count:
    def __init__(self) -> None:
        self.value = 0


def test_progress_line_names_stage_counts_and_rate() -> None:
    now = [100.0]
    lines, envelopes = _Count(), _Count()
    ticker = ProgressLine(
        print, lines=lines, envelopes=envelopes, every_s=1.0, clock=lambda: now[0]
    )
    lines.value, envelopes.value, now[0] = 50_000, 1_200, 110.0
    ticker.stage("verifying signatures and chains")
    assert ticker.line() == (
        "verifying signatures and chains: 50,000 log lines, 1,200 envelopes read "
        "(5,000 lines/s, 10 s)"
    )
    with pytest.raises(ValueError, match="positive"):
        ProgressLine(print, lines=lines, envelopes=envelopes, every_s=0)


def test_progress_lines_come_while_the_job_runs_and_stop_with_it() -> None:
    said: list[str] = []
    seen = threading.Event()

    def say(text: str) -> None:
        said.append(text)
        if len(said) >= 2:
            seen.set()

    lines = _Count()
    with ProgressLine(say, lines=lines, envelopes=_Count(), every_s=0.01) as ticker:
        ticker.stage("reading")
        lines.value = 7
        assert seen.wait(30), said
    assert not ticker._thread.is_alive()  # stopped and joined: nothing more comes
    assert all(s.startswith(("starting: ", "reading: ")) for s in said)
    assert "reading: 7 log lines, 0 envelopes read" in said[-1]


def test_a_new_session_gets_driver_memory_partitions_and_conf() -> None:
    from audit.cluster import _builder

    options = SessionOptions(
        master="spark://h:7077",
        driver_memory="3g",
        partitions=12,
        conf=(("spark.executor.memory", "4g"), ("spark.driver.host", "10.0.0.5")),
    )
    settings = _builder(options)._options  # what getOrCreate passes to the new JVM
    assert settings["spark.master"] == "spark://h:7077"
    assert settings["spark.driver.memory"] == "3g"
    assert settings["spark.default.parallelism"] == "12"
    assert settings["spark.executor.memory"] == "4g"
    assert settings["spark.driver.host"] == "10.0.0.5"
    assert "spark.driver.memory" not in _builder(SessionOptions())._options


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--partitions", "0"], "--partitions must be at least 1"),
        (["--conf", "spark.executor.memory"], "--conf takes KEY=VALUE"),
        (["--progress-every", "0"], "--progress-every must be positive"),
        (["--crl", "absent-crl.pem"], "cannot read CRL absent-crl.pem"),
        (["--clock-skew", "-1"], "the clock-skew tolerance cannot be negative"),
    ],
)
def test_cli_refuses_bad_session_options_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], message: str
) -> None:
    from cli.main import main

    (tmp_path / "ca.pem").write_bytes(b"-----BEGIN CERTIFICATE-----\n")
    argv = ["audit", str(tmp_path), "--ca", str(tmp_path / "ca.pem"), "--out", str(tmp_path)]
    assert main([*argv, *option]) == 1
    assert message in capsys.readouterr().err


def test_cli_reads_at_as_an_iso_time_in_utc_by_default() -> None:
    from audit.cli import _timestamp

    assert _timestamp("2026-11-01T00:00:00") == datetime(2026, 11, 1, tzinfo=UTC)
    assert _timestamp("2026-11-01T02:00:00+02:00") == datetime(2026, 11, 1, tzinfo=UTC)
    with pytest.raises(argparse.ArgumentTypeError, match="not an ISO 8601 time"):
        _timestamp("yesterday")
