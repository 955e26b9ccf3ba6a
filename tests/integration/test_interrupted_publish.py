"""A publication interrupted mid-document never leaves a gap that looks like withholding (issue 18).

The soak stops ``xdn publish --again`` with SIGTERM while a document is in flight. A publisher
that died after its root routed a version, before recording it, used to give that version
again to its next content: the root ignores a version it routed, yet the publisher recorded the
new sequence number as its concepts' newest, so the next back pointers and checkpoints named a
document no site ever had — every subscriber reported it "withheld: the site did not deliver it
and cannot replay it".

* The publisher dying between the root's routing and its own record (injected in this process,
  where ``KeyStore.commit`` runs) and a fresh ``xdn publish --again`` of new content: the new
  content is the next version, delivered, and alice reports no gap.
* A real ``xdn publish`` sent SIGTERM while a document is in flight (its staging file exists):
  it finishes or abandons that document, exits 143 saying what it did not send, and the
  documents published again by a fresh run reach alice with no gap.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from networks import (
    publish_and_die_unrecorded,  # tests/integration is on sys.path (pytest's rootdir)
)

from deploy.docgen import generate
from deploy.network import SAMPLE_DOCUMENTS, LocalNetwork, wait_until

pytestmark = pytest.mark.integration

PUBLISHER = "production-dept"
SAMPLE = SAMPLE_DOCUMENTS[PUBLISHER]


def _versions(network: LocalNetwork, document: str) -> list[int]:
    return sorted(
        int(str(r["version"]))
        for r in network.received("alice")
        if r["publisher"] == PUBLISHER and r["document"] == document
    )


def _assert_no_gap(network: LocalNetwork) -> None:
    """Alice, having accepted the last marker, found nothing of the sequence missing."""
    assert not (network.inbox("alice") / "gaps.jsonl").exists(), (
        network.inbox("alice") / "gaps.jsonl"
    ).read_text()
    assert "missing document" not in network.full_output("alice"), network.output("alice")


def test_a_version_routed_but_not_recorded_is_not_given_to_new_content(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    document = tmp_path / "order-s.xml"
    shutil.copyfile(SAMPLE, document)

    publish_and_die_unrecorded(network, PUBLISHER, document, waiting_for="alice")
    assert wait_until(lambda: _versions(network, "order-s") == [1], 30)

    document.write_text(document.read_text().replace("</", " </", 1))  # new content
    out = network.publish(PUBLISHER, [document], extra=("--again",))
    assert "published order-s v2:" in out, out
    network.publish_marker(PUBLISHER, ["alice"])  # its back pointers name order-s v2
    assert wait_until(lambda: _versions(network, "order-s") == [1, 2], 30)
    _assert_no_gap(network)


def _large_documents(folder: Path, count: int) -> list[Path]:
    """Documents big enough (2 MB) that one is in flight for a while."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed in range(count):
        path = folder / f"big-{seed}.xml"
        with path.open("wb") as out:
            generate(PUBLISHER, 2 << 20, out, seed=seed)
        paths.append(path)
    return paths


def test_sigterm_finishes_or_abandons_the_document_in_flight(
    network: LocalNetwork, tmp_path: Path
) -> None:
    network.start_subscriber("alice")
    network.wait_subscribed("alice")
    documents = _large_documents(tmp_path / "docs", 3)
    command = network.publish_command(
        PUBLISHER, documents, wait_for=("alice",), extra=("--again", "--part-bytes", "1048576")
    )
    outgoing = network.workdir / "state" / PUBLISHER / "outgoing"
    run = subprocess.Popen(
        command, cwd=network.workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        # In flight: a document's staging file exists once it is encoded, until acknowledged.
        assert wait_until(
            lambda: (outgoing.exists() and any(outgoing.iterdir())) or run.poll() is not None, 120
        )
        assert run.poll() is None, "the publisher finished before a document was in flight"
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=150)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 128 + signal.SIGTERM, (run.returncode, out, err)
    assert "stopped by SIGTERM" in err, err
    published = [line.split()[1] for line in out.splitlines() if line.startswith("published ")]
    assert len(published) < len(documents), out
    assert not outgoing.exists() or not any(outgoing.iterdir()), "a staging file was left"

    # The operator publishes what was not sent; everything arrives, nothing is a gap.
    rest = [d for d in documents if d.stem not in published]
    network.publish(PUBLISHER, rest, extra=("--again", "--part-bytes", "1048576"), timeout=300)
    network.publish_marker(PUBLISHER, ["alice"])
    for document in documents:
        assert wait_until(lambda d=document: _versions(network, d.stem) != [], 60), document.stem
    _assert_no_gap(network)
