"""How the audit's Spark session is made, on one machine or a cluster (the job's I/O edge).

Theory of operation
-------------------
The transforms run Python UDFs (:mod:`audit.rows`, :mod:`audit.verify`) that import ``audit``
and ``xdn``. In ``local[*]`` mode the Python workers are children of this process's JVM and
import what this interpreter imports. On a cluster (``spark://``, ``yarn``, ``k8s://``) the
workers run on other machines, so three things must be arranged before the first job:

1. **The code.** :func:`package_zip` zips the packages the UDFs import (``audit`` and ``xdn``,
   sources and package data, no bytecode) into a temporary directory; :func:`open_session`
   ships it with ``SparkContext.addPyFile`` (every executor puts it on its Python path). The
   third-party libraries those packages use (``cryptography``, ``pyspark``…) must be installed
   on the executors: the same install everywhere, or a Python that has them.
2. **The interpreter.** PySpark names the executors' Python once, from ``PYSPARK_PYTHON`` when
   the context starts. ``executor_python`` (default: this interpreter's path, right on one
   machine and for identical installs) is set for exactly that moment and put back after.
3. **The parallelism.** Spark's default of 200 shuffle partitions is tuned for big clusters
   and big data; :func:`partitions_for` derives them from the cores the cluster gives and the
   input size (``--partitions`` overrides), for the shuffles and for splitting the input.

``driver_memory`` and the other ``--conf`` settings apply only when this process starts the
JVM; a session that is already active (a test's, ``spark-submit``'s) is reused as it is, and a
setting it cannot take is said in a warning, not silently dropped.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import logging
import math
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from pyspark.sql import SparkSession

from xdn.errors import UsageError

__all__ = [
    "SessionOptions",
    "is_local_master",
    "open_session",
    "package_zip",
    "parse_conf",
    "partitions_for",
    "set_partitions",
]

log = logging.getLogger(__name__)

#: Input bytes per partition the default aims at (one task's share of the logs).
BYTES_PER_PARTITION = 64 * 1024 * 1024
#: Logs smaller than this are audited in one partition: their work is a second or two, less
#: than what a second task per stage costs (a Python worker, scheduling, a shuffle file).
SMALL_INPUT_BYTES = 4 * 1024 * 1024
#: How long a cluster session waits for its first executor before it picks its partitions.
EXECUTOR_WAIT_S = 60.0


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionOptions:
    """How to start (or take) the audit's Spark session."""

    master: str = "local[*]"
    executor_python: str = field(default_factory=lambda: sys.executable)
    driver_memory: str | None = None
    partitions: int | None = None
    conf: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.partitions is not None and self.partitions < 1:
            raise UsageError("--partitions must be at least 1")
        if not self.master:
            raise UsageError("--master must name a Spark master")


def parse_conf(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` strings (``--conf``) → pairs.

    Raises:
        UsageError: a string has no ``=`` or an empty key.
    """
    out = []
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf takes KEY=VALUE, not {pair!r}")
        out.append((key.strip(), value))
    return tuple(out)


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs everything in this machine's JVM (``local``, ``local[N]``…)."""
    return master == "local" or master.startswith("local[")


def partitions_for(input_bytes: int, parallelism: int) -> int:
    """Shuffle and input partitions: every core busy, about 64 MiB of logs per task; one for
    logs under :data:`SMALL_INPUT_BYTES`.

    Args:
        input_bytes: size of the logs as stored.
        parallelism: the cores Spark gives the job (``defaultParallelism``).
    """
    if input_bytes < SMALL_INPUT_BYTES:
        return 1
    return max(1, parallelism, math.ceil(input_bytes / BYTES_PER_PARTITION))


def _package_files(package: ModuleType) -> Iterator[tuple[Path, str]]:
    root = Path(package.__file__ or "").parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            yield path, str(Path(root.name) / path.relative_to(root))


def package_zip(directory: Path, packages: Sequence[ModuleType]) -> Path:
    """Zip ``packages`` (sources and data) into ``directory``; the name carries a content hash,
    so a long-lived context never confuses two builds.
    """
    entries = sorted(e for p in packages for e in _package_files(p))
    digest = hashlib.sha256()
    for path, name in entries:
        digest.update(name.encode() + b"\0" + path.read_bytes())
    target = directory / f"xdn-audit-{digest.hexdigest()[:16]}.zip"
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path, name in entries:
            zf.write(path, name)
    return target


@contextlib.contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    """``os.environ[name] = value`` while PySpark reads it, then as it was."""
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def _builder(options: SessionOptions) -> SparkSession.Builder:
    builder = (
        SparkSession.builder.master(options.master)
        .appName("xdn-audit")
        .config("spark.ui.showConsoleProgress", "false")
    )
    if options.driver_memory is not None:
        builder = builder.config("spark.driver.memory", options.driver_memory)
    if options.partitions is not None:  # before any executor exists: RDD defaults too
        builder = builder.config("spark.default.parallelism", str(options.partitions))
    for key, value in options.conf:
        builder = builder.config(key, value)
    return builder


def _wait_for_executors(spark: SparkSession, deadline_s: float, say: Callable[[str], None]) -> None:
    """Until the cluster has given at least one executor (the driver is listed too)."""
    tracker = spark.sparkContext._jsc.sc().statusTracker()
    end = time.monotonic() + deadline_s
    while len(tracker.getExecutorInfos()) < 2:
        if time.monotonic() > end:
            say(f"no executor registered within {deadline_s:.0f} s; jobs wait for one")
            return
        time.sleep(0.2)


def _ship_packages(
    spark: SparkSession, *, owned: bool, say: Callable[[str], None]
) -> Callable[[], None]:
    """Zip ``audit`` and ``xdn`` and add the zip to the context; return how to clean up.

    A session this process owns is stopped before the zip is deleted; a reused one may start
    executors later that fetch it, so its zip stays until this process exits.
    """
    import audit
    import xdn

    folder = tempfile.mkdtemp(prefix="xdn-audit-")
    remove = functools.partial(shutil.rmtree, folder, ignore_errors=True)
    shipped = package_zip(Path(folder), [audit, xdn])
    spark.sparkContext.addPyFile(str(shipped))
    say(f"shipping {shipped.name} ({shipped.stat().st_size:,} bytes) to the executors")
    if owned:
        return remove
    atexit.register(remove)
    return lambda: None


_TUNED = ("spark.sql.shuffle.partitions", "spark.sql.files.minPartitionNum")


def set_partitions(
    spark: SparkSession, options: SessionOptions, input_bytes: int, say: Callable[[str], None]
) -> int:
    """Set the shuffle and input partitions of ``spark`` for ``input_bytes`` of logs."""
    context = spark.sparkContext
    cores = context.defaultParallelism
    partitions = options.partitions or partitions_for(input_bytes, cores)
    for key in _TUNED:
        spark.conf.set(key, str(partitions))
    plural = "" if partitions == 1 else "s"
    say(f"Spark {context.master}: {cores} cores, {partitions} partition{plural}")
    return partitions


@contextlib.contextmanager
def open_session(options: SessionOptions, *, say: Callable[[str], None]) -> Iterator[SparkSession]:
    """The active session (left running, its settings put back) or a new one (stopped on
    exit), ready for the audit.

    A new session runs ``options.executor_python`` on its executors; on a cluster the session
    gets the packages' zip and has at least one executor (waiting up to
    :data:`EXECUTOR_WAIT_S`), so that :func:`set_partitions` sees the cores it was given.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        spark, owned = active, False
        ignored = [k for k, _ in options.conf]
        ignored += ["--driver-memory"] if options.driver_memory else []
        if options.executor_python != active.sparkContext.pythonExec:
            ignored.append(f"--executor-python (it runs {active.sparkContext.pythonExec})")
        if ignored:
            log.warning(
                "a Spark session is already running: %s cannot change it", ", ".join(ignored)
            )
    else:
        with _environment("PYSPARK_PYTHON", options.executor_python):
            spark, owned = _builder(options).getOrCreate(), True
    context = spark.sparkContext
    before = {key: spark.conf.get(key, None) for key in _TUNED}
    cleanup: Callable[[], None] = lambda: None  # noqa: E731
    try:
        if not is_local_master(context.master or ""):
            cleanup = _ship_packages(spark, owned=owned, say=say)
            _wait_for_executors(spark, EXECUTOR_WAIT_S, say)
        yield spark
    finally:
        if owned:
            spark.stop()
        else:
            for key, value in before.items():
                if value is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, value)
        cleanup()
