"""An incremental audit: the lines one run parsed and saved (``--save-parquet``) audited again
with the logs written since (``--from-parquet``) give the audit of everything at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from audit_logs import NOW, make_network
from pyspark.sql import SparkSession

from audit.job import run_audit
from xdn.errors import UsageError

pytestmark = [pytest.mark.spark, pytest.mark.long]  # (minutes of audits: make test-long)


def test_saved_lines_and_new_logs_audit_as_one(spark: SparkSession, tmp_path: Path) -> None:
    network = make_network(tmp_path / "logs")
    logs = sorted(p for p in network.clean.iterdir() if p.is_dir())
    first, later = (
        [str(p) for p in logs if p.name in ("pub", "d1")],
        [str(p) for p in logs if p.name not in ("pub", "d1")],
    )
    saved = tmp_path / "saved"
    run_audit(first, ca_pem=network.ca_pem, out_dir=tmp_path / "a", at=NOW, save_parquet=saved)
    assert spark.read.parquet(str(saved)).where("line IS NOT NULL").count() > 0
    summary = run_audit(
        later,
        ca_pem=network.ca_pem,
        out_dir=tmp_path / "b",
        at=NOW,
        from_parquet=[str(saved)],
    )
    assert summary.failures == () and summary.ok, summary.failures
    assert (summary.messages, summary.signatures_verified, summary.chains_ok) == (6, 7, 2)
    assert summary.fragments_delivered == 10
    with pytest.raises(UsageError, match="must not overwrite"):
        run_audit(
            later,
            ca_pem=network.ca_pem,
            out_dir=tmp_path / "c",
            at=NOW,
            from_parquet=[str(saved)],
            save_parquet=saved,
        )
    with pytest.raises(UsageError, match="not lines saved by xdn audit"):
        run_audit(
            later,
            ca_pem=network.ca_pem,
            out_dir=tmp_path / "c",
            at=NOW,
            from_parquet=[str(tmp_path / "b" / "chains")],
        )
