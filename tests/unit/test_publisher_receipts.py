"""The publisher's side of receipts: its own check, its archive, and who received what."""

from __future__ import annotations

from pathlib import Path

import pytest

from publisher.keystore import KeyStore
from publisher.receipts import (
    Missing,
    ReceiptArchive,
    Received,
    check_receipt,
    members_by_concept,
    report,
)
from tests.unit.receipt_fixtures import DOC, NOW, PUBLISHER, Pki, chain, make_pki
from xdn import certs, lease, provenance
from xdn.errors import ReceiptError, SignatureError
from xdn.receipts import Receipt


@pytest.fixture(scope="module")
def pki() -> Pki:
    return make_pki()


def _check(pki: Pki, data: bytes) -> Receipt:
    return check_receipt(
        data, provenance.ChainVerifier(pki.ca), publisher_pem=pki.parties[PUBLISHER][0], at=NOW
    )


def test_the_publisher_takes_receipts_of_its_own_publications_only(pki: Pki) -> None:
    assert _check(pki, chain(pki, "d1", "d2")).sites == ("d1", "d2")
    with pytest.raises(ReceiptError, match="published by 'qa-company', not under our"):
        _check(pki, chain(pki, "d1", "d2", publisher="qa-company"))
    revoked = frozenset({certs.credential_from_pem(pki.parties["alice"][0]).serial})
    with pytest.raises(SignatureError, match="revoked"):
        check_receipt(
            chain(pki, "d1", "d2"), provenance.ChainVerifier(pki.ca, revoked=lambda: revoked),
            publisher_pem=pki.parties[PUBLISHER][0], at=NOW,
        )


def test_the_archive_keeps_each_receipt_once(pki: Pki, tmp_path: Path) -> None:
    archive = ReceiptArchive(tmp_path / "receipts.sqlite")
    first = _check(pki, chain(pki, "d1", "d2"))
    second = _check(pki, chain(pki, "d1", "d3", to="carol", version=2))
    assert archive.store([first, second]) == 2
    assert archive.store([first]) == 0
    archive.close()
    archive = ReceiptArchive(tmp_path / "receipts.sqlite")  # durable
    kept = archive.of(DOC)
    assert set(kept) == {1, 2}
    (alice,) = kept[1]
    assert (alice.name, alice.member, alice.sites, alice.fragments) == (
        "alice", first.member_id, ("d1", "d2"), 10
    )
    assert kept[2][0].sites == ("d1", "d3")
    assert archive.of("another document") == {}
    archive.close()


def test_a_versions_concepts_are_recorded_when_it_is_published(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER)
    store.commit(DOC, 1, concepts=iter(["WorkOrder", "Machine"]), sequence=1)
    store.commit(DOC, 2, concepts=["Machine"])
    store.commit("other", 1, concepts=["Tool"])
    assert store.version_concepts(DOC) == {1: {"WorkOrder", "Machine"}, 2: {"Machine"}}
    assert store.concept_sequences() == {"Machine": 1, "WorkOrder": 1}  # the iterator, once
    store.close()


def _lease(member: str, *, expires_at: int = 10_000, leave: bool = False) -> lease.Lease:
    return lease.Lease(
        member=member, site="d2", block="WorkOrder", issued_at=1000,
        expires_at=1000 if leave else expires_at, leave=leave,
    )


MEMBERS = {name: f"{name}@{str(n) * 32}" for n, name in enumerate(
    ("alice", "carol", "dave", "erin", "frank", "gina"), start=1
)}


def test_who_has_not_received_a_version_is_each_member_in_force_of_one_of_its_groups() -> None:
    m = MEMBERS
    groups = {
        "WorkOrder": frozenset({m["alice"], m["carol"], m["erin"], m["frank"]}),
        "Machine": frozenset({m["dave"], m["gina"]}),
    }
    leases = {
        m["alice"]: _lease(m["alice"]), m["carol"]: _lease(m["carol"]),
        m["dave"]: _lease(m["dave"]),
        m["erin"]: _lease(m["erin"], expires_at=1500),  # lapsed by 2000
        m["frank"]: _lease(m["frank"], leave=True),  # left
        # gina: no lease seen
    }
    members = members_by_concept(groups, leases.get, at_ms=2000)
    assert sorted(members) == [m["alice"], m["carol"], m["dave"]]
    alice = Received(name="alice", member=m["alice"], received_ms=1500, fragments=3,
                     sites=("d1", "d2"))
    versions = {1: frozenset({"WorkOrder", "Machine"}), 2: frozenset({"Machine"})}
    reports = report(DOC, versions=versions, received={1: [alice]}, members=members)
    assert [r.version for r in reports] == [1, 2]
    v1, v2 = reports
    assert v1.received == (alice,)
    assert [x.member for x in v1.missing] == [m["carol"], m["dave"]]
    assert v1.missing[0] == Missing(
        name="carol", member=m["carol"], concepts=("WorkOrder",), site="d2", lease_until_ms=10_000
    )
    assert (v2.received, [x.name for x in v2.missing]) == ((), ["dave"])
    assert report(DOC, versions=versions, received={1: [alice]}, members=members, only=2) == [v2]
    # a receipt of a version whose concepts were not recorded: received known, missing unknown
    (old,) = report(DOC, versions={}, received={3: [alice]}, members=members)
    assert old.concepts is None and old.to_json()["not_received"] is None
    assert "unknown" in "\n".join(old.lines())
    text = "\n".join(v1.lines())
    assert "received (1):" in text and "via d1 -> d2" in text and "not received (2):" in text
    assert v1.to_json()["received"][0]["path"] == ["d1", "d2"]


# ------------------------------------------------------------------- subscribers' refusals


def test_the_publisher_keeps_notices_about_itself_and_reports_who_refused_what(
    pki: Pki, tmp_path: Path
) -> None:
    from publisher.receipts import check_notice
    from tests.unit.test_site_notices import notice
    from xdn.errors import NoticeError

    verifier = provenance.ChainVerifier(pki.ca)
    mine = check_notice(notice(pki, "carol"), verifier, publisher=PUBLISHER, at=NOW)
    with pytest.raises(NoticeError, match="about publisher 'qa-company', not"):
        check_notice(notice(pki, publisher="qa-company"), verifier, publisher=PUBLISHER, at=NOW)
    older = check_notice(notice(pki, "carol", hop="0", at_ms=mine.signed_ms - 10,
                                reason="an older reason"), verifier, publisher=PUBLISHER, at=NOW)
    archive = ReceiptArchive(tmp_path / "receipts.sqlite")
    assert archive.store_refusals([mine, older]) == 2
    assert archive.store_refusals([mine]) == 0  # kept once
    refused = archive.refusals_of(DOC)
    archive.close()
    (carol,) = refused[1]  # one per member: the newest
    assert (carol.name, carol.kind, carol.reason) == (
        "carol", "document", "the manifest signature does not verify"
    )
    m = {"alice": _member(pki, "alice"), "carol": mine.member_id}
    members = {
        who: (frozenset({"WorkOrder"}), _lease(member)) for who, member in m.items()
    }
    by_member = {member: value for member, value in zip(m.values(), members.values(), strict=True)}
    (v1,) = report(DOC, versions={1: frozenset({"WorkOrder"})}, received={},
                   members=by_member, refused=refused)
    assert [r.name for r in v1.refused] == ["carol"]
    assert [x.name for x in v1.missing] == ["alice"]  # carol refused it: not among the missing
    text = "\n".join(v1.lines())
    assert "refused (1):" in text
    assert "refused: the manifest signature does not verify (document)" in text
    assert v1.to_json()["refused"][0]["kind"] == "document"
    # a member that refused a version and received it after all is listed as received
    got = Received(name="carol", member=m["carol"], received_ms=1, fragments=1, sites=("d1",))
    (again,) = report(DOC, versions={1: frozenset({"WorkOrder"})}, received={1: [got]},
                      members=by_member, refused=refused)
    assert again.refused == () and [r.name for r in again.received] == ["carol"]


def _member(pki: Pki, name: str) -> str:
    return certs.credential_from_pem(pki.parties[name][0]).member_id


def test_a_gap_is_reported_against_the_version_of_its_sequence_number(
    pki: Pki, tmp_path: Path
) -> None:
    from publisher.receipts import check_notice, version_sequences

    keys = KeyStore(tmp_path / "keys.sqlite", publisher=PUBLISHER)
    keys.commit(DOC, 1, concepts=["WorkOrder"], sequence=4)
    keys.commit(DOC, 2, concepts=["WorkOrder"], sequence=9)
    keys.commit("other", 1, concepts=["WorkOrder"], sequence=5)
    keys.close()
    sequences = version_sequences(tmp_path / "keys.sqlite", PUBLISHER, DOC)
    assert sequences == {4: 1, 9: 2}
    signer = pki.signer("carol")
    gap = provenance.failure_notice(
        signer, message_uri=provenance.notice_uri(signer.node_uri, "gap-9"),
        refusal=provenance.RefusalFacts(
            kind="gap", reason="document #9 of production-dept was withheld",
            publisher=PUBLISHER, sequence=9, received_from=certs.node_uri("d2"),
        ),
        timestamp_ms=int(NOW.timestamp() * 1000),
    )
    other = provenance.failure_notice(
        signer, message_uri=provenance.notice_uri(signer.node_uri, "gap-5"),
        refusal=provenance.RefusalFacts(kind="gap", reason="#5", publisher=PUBLISHER,
                                        sequence=5),
        timestamp_ms=int(NOW.timestamp() * 1000),
    )
    verifier = provenance.ChainVerifier(pki.ca)
    archive = ReceiptArchive(tmp_path / "receipts.sqlite")
    assert archive.store_refusals(
        check_notice(n.to_nquads(), verifier, publisher=PUBLISHER, at=NOW) for n in (gap, other)
    ) == 2
    refused = archive.refusals_of(DOC, sequences)
    assert archive.refusals_of(DOC) == {}  # without the numbers, a gap names no document
    archive.close()
    assert list(refused) == [2]
    (carol,) = refused[2]
    assert (carol.name, carol.kind) == ("carol", "gap")


def _refusal(pki: Pki, who: str, hop: str, at_ms: int, **facts: object) -> bytes:
    signer = pki.signer(who)
    return provenance.failure_notice(
        signer, message_uri=provenance.notice_uri(signer.node_uri, hop),
        refusal=provenance.RefusalFacts(publisher=PUBLISHER, **facts),  # type: ignore[arg-type]
        timestamp_ms=at_ms,
    ).to_nquads()


def test_refusals_that_name_no_document_version_are_reported_apart(
    pki: Pki, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli.main import main
    from publisher.receipts import check_notice

    t = int(NOW.timestamp() * 1000)
    notices = [
        _refusal(pki, "carol", "k1", t - 3000, kind="key", reason="rekey not signed",
                 key_message="rekey", concept="WorkOrder", epoch=4),
        _refusal(pki, "alice", "k2", t - 2000, kind="key", reason="enrolment of a stranger",
                 key_message="enrolment", concept="Tool", epoch=1),
        _refusal(pki, "alice", "e1", t - 1000, kind="entitlement", reason="not signed by it"),
        _refusal(pki, "carol", "c1", t - 500, kind="checkpoint", reason="checkpoint rolls back"),
        _refusal(pki, "carol", "d1", t - 400, kind="document", reason="bad proof",
                 document_id=DOC, version=1),
        _refusal(pki, "carol", "g1", t - 300, kind="gap", reason="#4 withheld", sequence=4),
    ]
    verifier = provenance.ChainVerifier(pki.ca)
    state = tmp_path / "state" / PUBLISHER
    state.mkdir(parents=True)
    archive = ReceiptArchive(state / "receipts.sqlite")
    assert archive.store_refusals(
        check_notice(n, verifier, publisher=PUBLISHER, at=NOW) for n in notices
    ) == 6
    every = archive.other_refusals()
    assert [(r.name, r.kind, r.what) for r in every] == [  # newest first; no document, no gap
        ("carol", "checkpoint", ""),
        ("alice", "entitlement", ""),
        ("alice", "key", "enrolment of Tool, epoch 1"),
        ("carol", "key", "rekey of WorkOrder, epoch 4"),
    ]
    # asked about WorkOrder: a key message of another group is not about it
    assert [r.kind for r in archive.other_refusals(frozenset({"WorkOrder"}))] == [
        "checkpoint", "entitlement", "key"
    ]
    archive.close()
    assert every[-1].to_json()["what"] == "rekey of WorkOrder, epoch 4"

    # From the command line: after the per-version report, the section, filtered by DOC's
    # concepts (v1: WorkOrder; v2: Tool, with --version 2).
    keys = KeyStore(state / "keys.sqlite", publisher=PUBLISHER)
    keys.commit(DOC, 1, concepts=["WorkOrder"], sequence=4)
    keys.commit(DOC, 2, concepts=["Tool"], sequence=5)
    keys.close()
    certs_dir = tmp_path / "certs"
    certs_dir.mkdir()
    (certs_dir / "ca.pem").write_bytes(pki.ca)
    (certs_dir / f"{PUBLISHER}.pem").write_bytes(pki.parties[PUBLISHER][0])
    (certs_dir / f"{PUBLISHER}.key").write_bytes(pki.parties[PUBLISHER][1])
    args = ["provenance", "receipts", DOC, "--name", PUBLISHER, "--certs", str(certs_dir),
            "--state-dir", str(tmp_path / "state"), "--no-fetch"]
    capsys.readouterr()
    assert main([*args, "--version", "1"]) == 0
    out = capsys.readouterr().out
    report_part, other = out.split("other refusals (3, naming no document version):\n")
    # (carol's newest notice of v1 is the gap #4, which numbers it: in the version's report)
    assert f"{DOC} v1 " in report_part and "refused: #4 withheld (gap)" in report_part
    lines = other.splitlines()
    assert [line.split()[0] for line in lines] == ["carol", "alice", "carol"]
    assert "checkpoint: checkpoint rolls back" in lines[0]
    assert "entitlement: not signed by it" in lines[1]
    assert "key (rekey of WorkOrder, epoch 4): rekey not signed" in lines[2]
    assert main([*args, "--version", "2"]) == 0
    out = capsys.readouterr().out
    assert "other refusals (3," in out and "enrolment of Tool" in out and "WorkOrder, ep" not in out
    assert main([*args, "--json"]) == 0
    import json

    shown = json.loads(capsys.readouterr().out)["other_refusals"]
    assert [r["kind"] for r in shown] == ["checkpoint", "entitlement", "key", "key"]
