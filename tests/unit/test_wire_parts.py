"""Deliveries in parts joined at a stream's receiving end, and every way a sender could get
them wrong refused (xdn.wire_parts)."""

from __future__ import annotations

import pytest

from xdn.errors import ProtocolError
from xdn.parts import PartLimitError, cut
from xdn.wire.v1 import dissemination_pb2 as pb
from xdn.wire_parts import DeliveryJoiner

WHOLE = pb.Delivery(sequence=7, key=pb.KeyMessage(publisher="p", concept="c", sealed=b"k" * 5_000))


def _parts(delivery: pb.Delivery, sequence: int | None = None) -> list[pb.Delivery]:
    data = delivery.SerializeToString()
    return [
        pb.Delivery(
            sequence=delivery.sequence if sequence is None else sequence,
            part=pb.Part(data=p.data, size=p.size, more=p.more),
        )
        for p in cut([data], 1_024)
    ]


def _join(joiner: DeliveryJoiner, parts: list[pb.Delivery]) -> pb.Delivery | None:
    whole = None
    for part in parts:
        whole = joiner.add(part, pb.Delivery.FromString)
    return whole


def test_the_parts_of_a_delivery_join_to_it_one_delivery_after_another() -> None:
    joiner = DeliveryJoiner(1 << 20, "site s")
    parts = _parts(WHOLE)
    assert len(parts) > 4
    assert [joiner.add(p, pb.Delivery.FromString) for p in parts[:-1]] == [None] * (len(parts) - 1)
    assert joiner.pending
    assert joiner.add(parts[-1], pb.Delivery.FromString) == WHOLE
    joiner.check_whole(pb.Delivery(sequence=8))  # nothing pending: a whole one may come
    nine = pb.Delivery(sequence=9, key=WHOLE.key)
    assert _join(joiner, _parts(nine)) == nine


def test_a_delivery_over_the_limit_is_refused_at_its_first_part() -> None:
    joiner = DeliveryJoiner(2_000, "site s")
    with pytest.raises(PartLimitError, match=r"a delivery from site s of \d+ bytes is over"):
        joiner.add(_parts(WHOLE)[0], pb.Delivery.FromString)
    assert not joiner.pending


def test_parts_of_two_deliveries_mixed_are_refused() -> None:
    joiner = DeliveryJoiner(1 << 20, "site s")
    parts = _parts(WHOLE)
    joiner.add(parts[0], pb.Delivery.FromString)
    with pytest.raises(ProtocolError, match="part of delivery 8 amid the parts of delivery 7"):
        joiner.add(_parts(WHOLE, sequence=8)[1], pb.Delivery.FromString)
    assert not joiner.pending


def test_a_whole_delivery_amid_parts_is_refused() -> None:
    joiner = DeliveryJoiner(1 << 20, "site s")
    joiner.add(_parts(WHOLE)[0], pb.Delivery.FromString)
    with pytest.raises(ProtocolError, match="sent delivery 8 amid the parts of delivery 7"):
        joiner.check_whole(pb.Delivery(sequence=8))


@pytest.mark.parametrize(
    ("joined", "message"),
    [
        (pb.Delivery(sequence=6, key=WHOLE.key), "join to another message"),
        (pb.Delivery(sequence=7, part=pb.Part(data=b"x" * 2_000, size=9)), "parts again"),
    ],
)
def test_parts_that_join_to_another_message_are_refused(
    joined: pb.Delivery, message: str
) -> None:
    joiner = DeliveryJoiner(1 << 20, "site s")
    with pytest.raises(ProtocolError, match=message):
        _join(joiner, _parts(joined, sequence=7))


def test_parts_that_join_to_bytes_no_delivery_reads_are_refused() -> None:
    joiner = DeliveryJoiner(1 << 20, "site s")
    garbage = [
        pb.Delivery(sequence=7, part=pb.Part(data=p.data, size=p.size, more=p.more))
        for p in cut([b"\xff" * 3_000], 1_024)
    ]
    with pytest.raises(ProtocolError, match="do not join to a delivery"):
        _join(joiner, garbage)
