"""A delivery that comes in parts is spooled to a file and opened from it (subscriber.spool,
issue #15): the same view and record as a delivery that came whole; truncated, malformed and
tampered input refused with a typed error, nothing written to the view, the spool deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subscriber.client import _ConnectionLost, _whole
from subscriber.session import Session
from subscriber.spool import Spool, SpooledDissemination, read_spooled
from tests.unit import test_subscriber as whole
from xdn.errors import ProtocolError
from xdn.parts import cut
from xdn.span_files import FileSource
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_parts import DeliveryJoiner

pki = whole.pki  # (fixtures: the test CA, a published document)
dissemination = whole.dissemination
_session = whole._session


def spooled(session: Session, joined: bytes, sequence: int = 7) -> SpooledDissemination:
    """``joined`` sent in 1 KiB parts of delivery ``sequence`` and spooled by ``session``."""
    joiner: DeliveryJoiner[FileSource] = DeliveryJoiner(1 << 30, "site d2", session.spool.open_sink)
    whole = None
    for part in cut([joined], 1024):
        carrier = pb.Delivery(
            sequence=sequence, part=pb.Part(data=part.data, size=part.size, more=part.more)
        )
        whole = joiner.add(carrier, lambda source: read_spooled(source, "a delivery", sequence))
    assert isinstance(whole, SpooledDissemination)
    return whole


def files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file())


def test_a_spooled_document_gives_the_view_and_record_a_whole_one_gives(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], dissemination: pb.Dissemination
) -> None:
    outcomes = []
    for name, in_parts in (("whole", False), ("parts", True)):
        session = _session(tmp_path / name, pki, dissemination)
        try:
            if in_parts:
                joined = pb.Delivery(sequence=7, dissemination=dissemination).SerializeToString()
                stored = spooled(session, joined)
                assert not any(f.cipher_value for f in stored.message.fragments)  # not read
                receipt = session.on_dissemination(stored.message, 7, stored=stored)
                stored.delete()
                assert files(session.spool.folder) == []
            else:
                receipt = session.on_dissemination(dissemination, 7)
            assert receipt
        finally:
            session.close()
        out = tmp_path / name / "out"
        record = json.loads((out / "received.jsonl").read_text())
        del record["received_at_ms"]
        views = {p.relative_to(out): p.read_bytes() for p in (out / "views").rglob("*.xml")}
        outcomes.append((record, views))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][1]  # a view was written


def test_a_flipped_ciphertext_byte_is_refused_nothing_written_and_the_spool_deleted(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], dissemination: pb.Dissemination
) -> None:
    session = _session(tmp_path, pki, dissemination)
    try:
        tampered = pb.Dissemination()
        tampered.CopyFrom(dissemination)
        blob = bytearray(tampered.fragments[-1].cipher_value)
        blob[len(blob) // 2] ^= 1
        tampered.fragments[-1].cipher_value = bytes(blob)
        joined = pb.Delivery(sequence=3, dissemination=tampered).SerializeToString()
        stored = spooled(session, joined, sequence=3)
        assert session.on_dissemination(stored.message, 3, stored=stored) == b""
        stored.delete()
        refused = [json.loads(line) for line in (tmp_path / "out" / "refused.jsonl").open()]
        assert [(r["kind"], r["reason"]) for r in refused] == [
            ("document", "fragment could not be decrypted or verified")
        ]
        assert files(tmp_path / "out" / "views") == []
        assert not (tmp_path / "out" / "received.jsonl").exists()
        assert files(session.spool.folder) == []
        assert session.report.refused == 1 and session.report.accepted == 0
    finally:
        session.close()


@pytest.mark.parametrize(
    ("mangle", "error"),
    [
        (lambda b: b[: len(b) - 5], "malformed"),  # truncated: a field cut short
        (lambda b: b + b"\x0a\x05ab", "malformed"),  # a trailing field announcing too much
        (lambda b: b + bytes([0x72, 0x02, 0x08, 0x01]), "parts again"),  # Delivery.part
    ],
    ids=["truncated", "length-past-the-end", "parts-again"],
)
def test_bytes_that_are_not_a_delivery_are_refused_and_the_spool_deleted(
    tmp_path: Path,
    pki: dict[str, tuple[bytes, bytes]],
    dissemination: pb.Dissemination,
    mangle: object,
    error: str,
) -> None:
    session = _session(tmp_path, pki, dissemination)
    try:
        joined = pb.Delivery(sequence=4, dissemination=dissemination).SerializeToString()
        with pytest.raises(ProtocolError, match=error):
            spooled(session, mangle(joined))  # type: ignore[operator]
        assert files(session.spool.folder) == []
    finally:
        session.close()


def test_parts_that_join_to_another_delivery_are_refused_and_the_spool_deleted(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], dissemination: pb.Dissemination
) -> None:
    session = _session(tmp_path, pki, dissemination)
    try:
        joined = pb.Delivery(sequence=5, dissemination=dissemination).SerializeToString()
        with pytest.raises(ProtocolError, match="joins to delivery 5"):
            spooled(session, joined, sequence=6)
        assert files(session.spool.folder) == []
    finally:
        session.close()


def test_a_second_manifest_in_a_dissemination_is_refused(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], dissemination: pb.Dissemination
) -> None:
    session = _session(tmp_path, pki, dissemination)
    try:
        body = dissemination.SerializeToString()
        body += pb.Dissemination(manifest=dissemination.manifest).SerializeToString()
        joined = pb.Delivery(sequence=4).SerializeToString()
        joined += bytes([0x12]) + _varint(len(body)) + body
        with pytest.raises(ProtocolError, match="field 1 twice"):
            spooled(session, joined)
        assert files(session.spool.folder) == []
    finally:
        session.close()


def test_a_delivery_without_a_document_is_parsed_whole_and_its_spool_deleted(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool")
    sink = spool.open_sink(0)
    checkpoint = pb.Delivery(sequence=9, checkpoint=pb.Checkpoint(publisher="p"))
    sink.write(checkpoint.SerializeToString())
    read = read_spooled(sink.finish(), "a delivery")
    assert isinstance(read, pb.Delivery) and read.checkpoint.publisher == "p"
    assert files(spool.folder) == []


def test_parts_that_stop_short_leave_nothing_in_the_spool(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "spool")
    joiner: DeliveryJoiner[FileSource] = DeliveryJoiner(1 << 20, "site d2", spool.open_sink)
    joined = pb.Delivery(sequence=2, checkpoint=pb.Checkpoint(publisher="p" * 3000))
    parts = list(cut([joined.SerializeToString()], 1024))
    first = pb.Part(data=parts[0].data, size=parts[0].size, more=True)
    joiner.add(pb.Delivery(sequence=2, part=first), pb.Delivery.FromString)
    assert len(files(spool.folder)) == 1
    joiner.reset()  # the stream ended amid the parts
    assert files(spool.folder) == []


def test_spooled_files_a_crash_left_are_deleted_at_start_up(
    tmp_path: Path, pki: dict[str, tuple[bytes, bytes]], dissemination: pb.Dissemination
) -> None:
    folder = tmp_path / "state" / "spool"
    folder.mkdir(parents=True)
    (folder / "left.spool").write_bytes(b"x" * 100)
    (folder / "left.view").write_bytes(b"<v/>")
    session = _session(tmp_path, pki, dissemination)
    try:
        assert session.spool.folder == folder
        assert files(folder) == []
    finally:
        session.close()


def _varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_parts_the_spool_cannot_keep_end_the_stream_to_be_resumed(tmp_path: Path) -> None:
    """A spool that fails (here: its folder is gone; a full disk alike) loses the connection,
    which is resumed later, rather than ending the subscriber."""
    spool = Spool(tmp_path / "spool")
    spool.folder.rmdir()
    joiner: DeliveryJoiner[FileSource] = DeliveryJoiner(1 << 20, "site d2", spool.open_sink)
    first = pb.Delivery(sequence=2, part=pb.Part(data=b"x" * 1024, size=4096, more=True))
    with pytest.raises(_ConnectionLost, match="spooling a delivery in parts failed"):
        _whole(joiner, first, "d2:1")
    assert not joiner.pending
