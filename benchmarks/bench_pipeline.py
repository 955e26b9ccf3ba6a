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


def _samples(items: list[Timed], *, repeat: int, min_time: float = 0.05) -> list[list[float]]:
    """Seconds per call of each item, ``repeat`` samples each, timed in alternation; each
    sample runs enough calls to last ``min_time`` (preparations not counted)."""
    calls = []
    for prepare, call in items:
        prepare()
        call()  # warm up
        prepare()
        started = time.perf_counter()
        call()
        calls.append(max(1, int(min_time / max(time.perf_counter() - started, 1e-6))))
    samples: list[list[float]] = [[] for _ in items]
    for _ in range(repeat):  # (the garbage collector on, as in the commands)
        for index, (prepare, call) in enumerate(items):
            spent = 0.0
            for _ in range(calls[index]):
                prepare()
                started = time.perf_counter()
                call()
                spent += time.perf_counter() - started
            samples[index].append(spent / calls[index])
            gc.collect()
    return samples


def _spread(rates: list[float]) -> str:
    return f"{statistics.median(rates):.3g} MB/s (min {min(rates):.3g}, max {max(rates):.3g})"


def _case(label: str, size: int, hint: int, workdir: Path) -> list[Result]:
    path = _document(size, hint)
    data = path.read_bytes()
    mb = len(data) / 1e6
    root = etree.fromstring(data, etree.XMLParser(**_PARSER))
    outermost = _paths_to(root, MAPPING, outermost=True)
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
    fragments = len(outermost)
    subscribe = SubscribeRun(who, workdir, clock=utc_now)
    del wire
    try:
        samples = _samples(
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
    note = (
        f"{mb:.1f} MB, docgen fragments_hint={hint}, {fragments} outermost mapped nodes, "
        f"{len(to_subscriber)} message(s) delivered; medians of {len(floor)}"
    )
    return [
        ratio_result(
            name=f"publish_vs_tight_floor_{label}",
            value=statistics.median(ours),
            unit="MB/s",
            baseline="tight floor MB/s (lxml parse + exclusive C14N of the outermost mapped "
            "nodes + AES-256-GCM)",
            baseline_value=statistics.median(floor),
            goal=GOAL,
            note=f"{note}; publish {_spread(ours)}; floor {_spread(floor)}",
        ),
        ratio_result(
            name=f"subscribe_vs_tight_floor_{label}",
            value=statistics.median(theirs),
            unit="MB/s",
            baseline="tight floor MB/s (AES-256-GCM decryption + lxml parse of the outermost "
            "mapped nodes' canonical bytes)",
            baseline_value=statistics.median(inverse),
            goal=GOAL,
            note=f"{note}; subscribe {_spread(theirs)}; floor {_spread(inverse)}",
        ),
    ]


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
