"""A policy-change notice at the subscriber (subscriber.policy_notices via Session): the
publisher's, for her, consistent with the entitlement it came with — shown and kept once;
forged, someone else's or inconsistent — refused as a bad entitlement is."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from subscriber.policy_notices import shown
from tests.unit import sequence_fixtures
from tests.unit.sequence_fixtures import NOW, PUBLISHER, SITE, alice_session
from xdn import certs, crypto, provenance
from xdn.completeness import Entitlement, sign_entitlement
from xdn.policy_notices import policy_change, sign_policy_notice
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wireconv import entitlement_to_pb

pki = sequence_fixtures.pki
T = int(NOW.timestamp() * 1000)
Pki = dict[str, tuple[bytes, bytes]]


def _signer(pki: Pki, name: str) -> provenance.Signer:
    cert, key = pki[name]
    return provenance.Signer(
        node_uri=certs.node_uri(name), private_key=crypto.load_private_key_pem(key),
        certificate=cert,
    )


def _notice(pki: Pki, *, by: str = PUBLISHER, for_: str = "alice", version: int = 2,
            gained: frozenset[str] = frozenset({"Quality"})) -> bytes:
    holder = certs.credential_from_pem(pki[for_][0])
    change = policy_change(
        publisher=PUBLISHER, subscriber=holder.name, certificate=holder.fingerprint,
        previous_version=version - 1, previous={"WorkOrder", "MachineSetting"},
        version=version, current={"WorkOrder"} | gained, at_ms=T,
    )
    assert change is not None
    return sign_policy_notice(_signer(pki, by), change, timestamp_ms=T).to_nquads()


def _entitlement(pki: Pki, notice: bytes, *, version: int = 2) -> pb.Entitlement:
    holder = certs.credential_from_pem(pki["alice"][0])
    signed = sign_entitlement(
        Entitlement(
            publisher=PUBLISHER, subscriber=holder.member_id, certificate=holder.fingerprint,
            policy_version=version, issued_at_ms=T,
            valid_until_ms=int((NOW + timedelta(days=1)).timestamp() * 1000),
            concepts=frozenset({"WorkOrder", "Quality"}),
        ),
        crypto.load_private_key_pem(pki[PUBLISHER][1]),
    )
    message = entitlement_to_pb(signed, publisher_certificate=pki[PUBLISHER][0])
    message.notice = notice
    return message


def _refused(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "out" / "refused.jsonl"
    return [json.loads(line) for line in path.open()] if path.exists() else []


def test_her_notice_is_shown_and_kept_once(
    tmp_path: Path, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    session = alice_session(tmp_path, pki, ["WorkOrder"])
    try:
        data = _notice(pki)
        session.on_entitlement(_entitlement(pki, data), 1)
        session.on_entitlement(_entitlement(pki, data), 2)  # re-sent: shown once
        lines = [x for x in capsys.readouterr().out.splitlines() if "policy v2" in x]
        assert lines == [
            "alice: policy v2 of production-dept: you gain Quality, lose MachineSetting"
        ]
        assert _refused(tmp_path) == []
    finally:
        session.close()
    assert (tmp_path / "out" / "policy-notices.nq").read_bytes() == data


@pytest.mark.parametrize(
    "how", ["forged", "someone-else", "other-version", "inconsistent", "tampered"]
)
def test_a_bad_notice_is_refused_and_the_entitlement_kept(
    tmp_path: Path, pki: Pki, how: str, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {
        "forged": lambda: _notice(pki, by=SITE),  # d2 signing a notice as if the publisher's
        "someone-else": lambda: _notice(pki, for_=PUBLISHER),  # about another certificate
        "other-version": lambda: _notice(pki, version=3),
        "inconsistent": lambda: _notice(pki, gained=frozenset({"Quality", "Secret"})),
        "tampered": lambda: _notice(pki).replace(b'"MachineSetting"', b'"WorkOrder"'),
    }[how]()
    session = alice_session(tmp_path, pki, ["WorkOrder"])
    try:
        session.on_entitlement(_entitlement(pki, data), 1)
        (refusal,) = _refused(tmp_path)
        assert refusal["kind"] == "entitlement"
        assert "policy-change notice" in str(refusal["reason"])
        assert "policy v2 of" not in capsys.readouterr().out
        assert not (tmp_path / "out" / "policy-notices.nq").exists()
        # the entitlement itself was genuine and is kept
        assert session.completeness.entitled(PUBLISHER, T) == {"WorkOrder", "Quality"}
    finally:
        session.close()


def test_a_restarted_subscriber_does_not_show_a_notice_it_kept_again(
    tmp_path: Path, pki: Pki, capsys: pytest.CaptureFixture[str]
) -> None:
    data, next_version, cut = _notice(pki), _notice(pki, version=3), _notice(pki, version=4)
    session = alice_session(tmp_path, pki, ["WorkOrder"])
    try:
        session.on_entitlement(_entitlement(pki, data), 1)
    finally:
        session.close()
    kept = tmp_path / "out" / "policy-notices.nq"
    with kept.open("ab") as out:  # a crash in the middle of appending another one
        out.write(cut[: len(cut) // 2 + 7])
    assert "policy v2 of" in capsys.readouterr().out

    session = alice_session(tmp_path, pki, ["WorkOrder"])  # restarted: the same folders
    try:
        session.on_entitlement(_entitlement(pki, data), 2)  # v2's, re-sent: not again
        assert "policy v2 of" not in capsys.readouterr().out
        session.on_entitlement(_entitlement(pki, next_version, version=3), 3)  # shown, kept
        assert capsys.readouterr().out.count("alice: policy v3 of production-dept") == 1
    finally:
        session.close()
    assert kept.read_bytes().startswith(data) and kept.read_bytes().endswith(next_version)
    assert shown(kept) == {(PUBLISHER, 2), (PUBLISHER, 3)}  # not the one cut short
    assert _refused(tmp_path) == []

    session = alice_session(tmp_path, pki, ["WorkOrder"])  # and again: both remembered
    try:
        session.on_entitlement(_entitlement(pki, next_version, version=3), 4)
        assert "policy v3 of" not in capsys.readouterr().out
    finally:
        session.close()
