"""A subscriber checks completeness itself: a dishonest site (simulated here, feeding the
session directly) that withholds a document, or the newest one, is found out; what the site
cannot replay is reported; forged checkpoints count for nothing. Also the publisher's durable
sequence in its key store."""

from __future__ import annotations

import json
from pathlib import Path

from publisher.keystore import KeyStore
from subscriber.session import Session
from tests.unit import sequence_fixtures
from tests.unit.sequence_fixtures import (
    GROUP_KEY,
    NOW,
    PUBLISHER,
    alice_session,
    concepts_of,
    signed_checkpoint,
)
from xdn import certs, crypto
from xdn.completeness import Checkpoint, sign_checkpoint
from xdn.provenance import Message
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import checkpoint_to_pb

pki = sequence_fixtures.pki
documents = sequence_fixtures.documents


def _session(tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], concepts: list[str]) -> Session:
    return alice_session(tmp_path, pki, concepts, checkpoint_max_age_s=60)


def test_a_withheld_document_is_asked_for_and_reported_if_the_site_cannot_replay_it(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    session = _session(tmp_path, pki, concepts_of(documents[0]))
    try:
        assert session.on_dissemination(documents[0], 1)
        assert session.completeness.requests() == []
        # The site withholds document 2 and delivers 3, whose back pointers name 2.
        assert session.on_dissemination(documents[2], 2)
        assert session.completeness.requests() == [pb.Missing(publisher=PUBLISHER, sequences=[2])]
        assert session.completeness.requests() == [], "asked once per stream"
        assert session.report.missing == 1
        session.on_unavailable(pb.Missing(publisher=PUBLISHER, sequences=[2]), 3)
        assert session.report.gaps == 1
        gaps = [json.loads(line) for line in (tmp_path / "out" / "gaps.jsonl").open()]
        assert [(g["publisher"], g["sequence"]) for g in gaps] == [(PUBLISHER, 2)]
        assert sorted(gaps[0]["concepts"]) == concepts_of(documents[1])
        # the gap is signed as a failure notice, queued for the site (and the publisher)
        (queued,) = session.notices.batch(limit=10, max_bytes=10**6)
        gap = Message.from_nquads(queued[1]).refusal
        assert gap is not None
        assert (gap.kind, gap.publisher, gap.sequence, gap.document_id) == (
            "gap", PUBLISHER, 2, None
        )
        assert "document #2 of" in gap.reason and "cannot replay it" in gap.reason
        session.completeness.new_stream()
        assert session.completeness.requests() == [], "a reported gap is not asked again"
    finally:
        session.close()


def test_a_replayed_document_fills_the_gap_and_the_state_survives_a_restart(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    session = _session(tmp_path, pki, concepts_of(documents[0]))
    try:
        session.on_dissemination(documents[0], 1)
        session.on_dissemination(documents[2], 2)
    finally:
        session.close()
    again = _session(tmp_path, pki, concepts_of(documents[0]))
    try:
        again.completeness.new_stream()
        assert again.completeness.requests() == [pb.Missing(publisher=PUBLISHER, sequences=[2])]
        assert again.on_dissemination(documents[1], 3), "the replay is accepted"
        again.completeness.new_stream()
        assert again.completeness.requests() == []
        assert not (tmp_path / "out" / "gaps.jsonl").exists()
    finally:
        again.close()


def test_withholding_the_newest_document_shows_by_the_checkpoint(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    concepts = concepts_of(documents[0])
    session = _session(tmp_path, pki, concepts)
    try:
        assert session.completeness.unvouched(0, 60_000) == {
            PUBLISHER: "no signed checkpoint received"
        }
        session.on_dissemination(documents[0], 1)
        session.on_checkpoint(signed_checkpoint(pki, dict.fromkeys(concepts, 1)), 2)
        assert session.completeness.requests() == []
        # Document 2 and its checkpoint withheld; the checkpoint after 3 is relayed.
        session.on_checkpoint(signed_checkpoint(pki, dict.fromkeys(concepts, 3)), 3)
        assert session.completeness.requests() == [pb.Missing(publisher=PUBLISHER, sequences=[3])]
        now_ms = int(NOW.timestamp() * 1000)
        assert session.completeness.unvouched(now_ms, 60_000) == {
            PUBLISHER: "no current signed entitlement received"  # (see test_entitlement.py)
        }
        stale = session.completeness.unvouched(now_ms + 61_000, 60_000)
        assert "61s old (bound 60s)" in stale[PUBLISHER]
    finally:
        session.close()


def test_forged_or_foreign_checkpoints_count_for_nothing(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    concepts = concepts_of(documents[0])
    session = _session(tmp_path, pki, concepts)
    try:
        session.on_dissemination(documents[0], 1)
        forged = signed_checkpoint(pki, dict.fromkeys(concepts, 3))
        forged.concepts[0].latest = 2
        session.on_checkpoint(forged, 2)
        other_ca = certs.create_ca("test-ca", now=NOW)
        cert, key = certs.issue(*other_ca, name=PUBLISHER, role="publisher", now=NOW)
        foreign = checkpoint_to_pb(
            sign_checkpoint(
                Checkpoint(publisher=PUBLISHER, issued_at_ms=1, sequence=3, latest={"X": 3}),
                crypto.load_private_key_pem(key),
            ),
            publisher_certificate=cert,
        )
        session.on_checkpoint(foreign, 3)
        assert session.completeness.requests() == []
        refused = (tmp_path / "out" / "refused.jsonl").read_text().splitlines()
        assert len(refused) == 2
        assert session.completeness.unvouched(0, 60_000), "no checkpoint was accepted"
    finally:
        session.close()


def test_a_newly_granted_concept_starts_fresh(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], documents: list[pb.Dissemination]
) -> None:
    concepts = concepts_of(documents[0])
    session = _session(tmp_path, pki, concepts[:1])
    for concept in concepts:
        session.keyring.put(PUBLISHER, concept, 1, GROUP_KEY)
    try:
        session.on_dissemination(documents[0], 1)  # its other concepts are not followed yet
        session.on_grants_changed(
            pb.GrantsChanged(grants=[pb.Grant(publisher=PUBLISHER, concepts=concepts)]), 2
        )
        session.on_dissemination(documents[1], 3)
        session.on_dissemination(documents[2], 4)
        assert session.completeness.requests() == []
        assert session.report.accepted == 3
    finally:
        session.close()


def test_the_publishers_sequence_is_durable_and_never_reused(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER)
    try:
        assert store.last_sequence() == 0
        assert [store.reserve_sequence() for _ in range(3)] == [1, 2, 3]
        store.commit("a", 1, sequence=3, concepts=["A", "B"])
        store.commit("b", 1, sequence=2, concepts=["A", "C"])  # acknowledged late
    finally:
        store.close()
    again = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER)
    try:
        assert again.reserve_sequence() == 4  # 1-3 were signed (or may have been): never again
        assert again.concept_sequences() == {"A": 3, "B": 3, "C": 2}
        assert again.next_version("a") == 2
    finally:
        again.close()

