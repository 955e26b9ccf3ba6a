"""The campaign driver reads libFuzzer's output right: executions, and what a finding is."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fuzz_driver import ROOT, _executed, _run_worker, _signature

pytestmark = pytest.mark.fuzz

CRASH = f"""INFO: Seed: 1
#2\tINITED cov: 253 ft: 253 corp: 1/1780b exec/s: 0 rss: 117Mb
#8\tNEW    cov: 268 ft: 445 corp: 4/6320b lim: 1780 exec/s: 0 rss: 117Mb

 === Uncaught Python exception: ===
UnicodeDecodeError: 'utf-8' codec can't decode byte 0x97 in position 980
Traceback (most recent call last):
  File "{ROOT}/tests/fuzz/fuzz_driver.py", line 67, in one_input
    run(data)
  File "{ROOT}/disseminator/config.py", line 194, in load_site_config
    data = tomllib.loads(path.read_text(encoding="utf-8"))
  File "<frozen codecs>", line 322, in decode
UnicodeDecodeError: 'utf-8' codec can't decode byte 0x97 in position 980

==19171== ERROR: libFuzzer: fuzz target exited
stat::number_of_executed_units: 9
"""


def test_a_python_exception_is_named_with_where_our_code_raised_it() -> None:
    assert _signature(CRASH) == (
        "UnicodeDecodeError at disseminator/config.py:194 in load_site_config"
    )


def test_a_timeout_and_an_oom_are_libfuzzers_verdicts() -> None:
    assert _signature("==1== ERROR: libFuzzer: timeout after 10 seconds\n") == (
        "timeout after 10 seconds"
    )
    assert _signature("==1== ERROR: libFuzzer: out-of-memory (used: 2100Mb)\n") == "out-of-memory"


def test_executions_come_from_the_final_stats_else_the_last_status_line() -> None:
    assert _executed(CRASH) == 9
    assert _executed("#1024\tpulse  cov: 1\n#2048\tpulse  cov: 1\n") == 2048
    assert _executed("Done 50000 runs in 14 second(s)\n") == 50000


def test_a_worker_is_measured_by_its_own_cpu_time_and_exit_code(tmp_path: Path) -> None:
    busy = (
        "import sys, time\n"
        "end = time.process_time() + 0.3\n"
        "while time.process_time() < end: pass\n"
        "sys.exit(3)"
    )
    with (tmp_path / "log").open("ab") as log:
        code, cpu = _run_worker([sys.executable, "-c", busy], log)
    assert code == 3
    assert 0.3 <= cpu < 30
