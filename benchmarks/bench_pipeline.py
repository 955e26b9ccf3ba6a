"""What ``xdn publish`` and ``xdn subscribe`` do per document, against the tight floor.

Pipelines (MB of input document per second, one process, no network; see
:mod:`benchmarks.pipeline_parties`):

* ``publish_vs_tight_floor_*`` — the document file to the wire messages gRPC sends: publish id,
  the streamed read for the concepts present, encryption into the staging folder, signed
  manifest, provenance originated, the framed ``PublishRequest`` with its signed checkpoint,
  cut into ``Part`` messages when over 4 MiB. The group keys are held already.
* ``subscribe_vs_tight_floor_*`` — the ``ServerMessage`` bytes a site delivers (every concept,
  provenance relayed one hop) to the view on disk: parse, join parts in the spool, check the
  publisher certificate and CRL, manifest signature, range proofs, decrypt, rebuild the view,
  verify the provenance chain, sign the receipt, write the view (synced), record it.

Baselines, measured in the same run on the same document (the *tight* floor: every mapped byte
handled once, no per-fragment work for nested mapped nodes):

* publish: lxml parse of the document's bytes + exclusive C14N of the outermost mapped nodes +
  AES-256-GCM of those bytes (:func:`benchmarks.bench_codec._floor`);
* subscribe, its inverse: AES-256-GCM decryption of those canonical bytes + an lxml parse of
  each.

The four are timed in alternation, ≥ 3 repetitions (the machine is shared and its load
drifts); each figure is the median, with min and max in the note. ``--quick`` skips the 100 MB
document.
"""

from __future__ import annotations

import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from lxml import etree

from benchmarks.bench_codec import _document, _floor, _paths_to
from benchmarks.harness import Result, ratio_result
from benchmarks.pipeline_parties import (
    MAPPING,
    PublishRun,
    SubscribeRun,
    delivered,
    parties,
    utc_now,
)
from xdn import crypto
from xdn.mapping import map_document

GOAL = ">= 0.6"
CASES = (  # (label, document bytes, docgen fragments_hint)
    ("1mb_10frag", 1_000_000, 10),
    ("1mb_7500frag", 1_000_000, 7_500),
    ("100mb_10000frag", 100_000_000, 10_000),
)
_PARSER = {"huge_tree": True, "resolve_entities": False, "no_network": True}


def _inverse_floor(data: bytes, paths: list[list[int]]) -> Callable[[], object]:
    """AES-256-GCM decryption + lxml parse of each outermost mapped node's canonical bytes."""
    key = crypto.random_bytes(32)
    root = etree.fromstring(data, etree.XMLParser(**_PARSER))
    sealed = []
    for path in paths:
        node = root
        for index in path:
            node = node[index]
        sealed.append(crypto.aead_encrypt(key, etree.tostring(node, method="c14n", exclusive=True)))
    del root

    def run() -> None:
        parser = etree.XMLParser(**_PARSER)
        for blob in sealed:
            etree.fromstring(crypto.aead_decrypt(key, blob), parser)

    return run


Timed = tuple[Callable[[], object], Callable[[], object]]  # (untimed preparation, timed call)


def _samples(
    items: list[Timed], *, repeat: int, min_time: float = 0.05
) -> tuple[list[list[float]], list[list[float]]]:
    """Seconds per call of each item, ``repeat`` samples each, timed in alternation; each
    sample runs enough calls to last ``min_time`` (preparations not counted). Returns the
    wall-clock samples and the process CPU time of the same calls (on this shared machine,
    what the wall clock loses to other processes shows as the difference)."""
    calls = []
    for prepare, call in items:
        prepare()
        call()  # warm up
        prepare()
        started = time.perf_counter()
        call()
        calls.append(max(1, int(min_time / max(time.perf_counter() - started, 1e-6))))
    wall: list[list[float]] = [[] for _ in items]
    cpu: list[list[float]] = [[] for _ in items]
    for _ in range(repeat):  # (the garbage collector on, as in the commands)
        for index, (prepare, call) in enumerate(items):
            spent = used = 0.0
            for _ in range(calls[index]):
                prepare()
                started, started_cpu = time.perf_counter(), time.process_time()
                call()
                spent += time.perf_counter() - started
                used += time.process_time() - started_cpu
            wall[index].append(spent / calls[index])
            cpu[index].append(used / calls[index])
            gc.collect()
    return wall, cpu


def _spread(rates: list[float]) -> str:
    return f"{statistics.median(rates):.3g} MB/s (min {min(rates):.3g}, max {max(rates):.3g})"


def _case(label: str, size: int, hint: int, workdir: Path) -> list[Result]:
    path = _document(size, hint)
    data = path.read_bytes()
    mb = len(data) / 1e6
    root = etree.fromstring(data, etree.XMLParser(**_PARSER))
    outermost = _paths_to(root, MAPPING, outermost=True)
    fragments = len(map_document(root, MAPPING))
    del root
    who = parties(utc_now())
    publish = PublishRun(who, workdir)
    version = 0

    def publish_once() -> object:
        nonlocal version
        version += 1
        return publish(path, version=version, now_ms=int(time.time() * 1000))

    wire = publish_once()
    assert isinstance(wire, list)
    to_subscriber = delivered(who, wire, now_ms=int(time.time() * 1000))
    subscribe = SubscribeRun(who, workdir, clock=utc_now)
    del wire
    try:
        samples, cpu = _samples(
            [
                (lambda: None, _floor(data, outermost)),
                (lambda: None, publish_once),
                (lambda: None, _inverse_floor(data, outermost)),
                (subscribe.prepare, lambda: subscribe(to_subscriber)),
            ],
            repeat=3 if size > 20_000_000 else 7,
        )
    finally:
        subscribe.close()
    floor, ours, inverse, theirs = ([mb / s for s in kind] for kind in samples)
    cpu_floor, cpu_ours, cpu_inverse, cpu_theirs = (statistics.median(k) for k in cpu)
    note = (
        f"{mb:.1f} MB, docgen fragments_hint={hint}, {fragments} fragments "
        f"({len(outermost)} outermost), {len(to_subscriber)} message(s) delivered"
    )
    by_cpu = "; by process CPU time (medians) the ratio is {:.3f}"
    return [
        _result(
            f"publish_vs_tight_floor_{label}",
            ours,
            floor,
            _PUBLISH_FLOOR,
            note + by_cpu.format(cpu_floor / cpu_ours),
        ),
        _result(
            f"subscribe_vs_tight_floor_{label}",
            theirs,
            inverse,
            _SUBSCRIBE_FLOOR,
            note + by_cpu.format(cpu_inverse / cpu_theirs),
        ),
    ]


_PUBLISH_FLOOR = (
    "tight floor MB/s (lxml parse + exclusive C14N of the outermost mapped nodes + AES-256-GCM)"
)
_SUBSCRIBE_FLOOR = (
    "tight floor MB/s (AES-256-GCM decryption + lxml parse of the outermost mapped nodes' "
    "canonical bytes)"
)


def _result(name: str, ours: list[float], floor: list[float], baseline: str, note: str) -> Result:
    """The medians' ratio; each side's spread and the ratio of each repetition in the note."""
    ratios = sorted(a / b for a, b in zip(ours, floor, strict=True))
    return ratio_result(
        name=name,
        value=statistics.median(ours),
        unit="MB/s",
        baseline=baseline,
        baseline_value=statistics.median(floor),
        goal=GOAL,
        note=f"{note}; wall clock, medians of {len(ours)}: ours {_spread(ours)}, floor "
        f"{_spread(floor)}, ratio per repetition {ratios[0]:.3f} to {ratios[-1]:.3f}",
    )


def run(quick: bool) -> list[Result]:
    """The two pipelines on 1 MB documents of 10 and ~7,500 fragments and (not quick) a 100 MB
    document of ~10,000."""
    results: list[Result] = []
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="xdn-bench-pipeline-") as tmp:
        for label, size, hint in CASES:
            if quick and size > 20_000_000:
                continue
            results += _case(label, size, hint, Path(tmp))
    print(f"   pipeline benchmark: {time.perf_counter() - started:.0f} s", flush=True)
    return results
