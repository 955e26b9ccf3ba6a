"""A publish request with too many key messages for one goes as several, in the site's order;
the document, of any size, stays with the last."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from publisher.split import split_request
from xdn.wire.v1 import dissemination_pb2 as pb

_KINDS = {
    "rekeys": lambda n: pb.GroupRekey(publisher="p", message=b"r" * n),
    "keys": lambda n: pb.KeyMessage(publisher="p", sealed=b"k" * n),
    "document_keys": lambda n: pb.DocumentKeys(publisher="p", sealed=b"d" * n),
    "entitlements": lambda n: pb.Entitlement(publisher="p", subscriber="s" * n),
}


def _request(sizes: dict[str, list[int]], document: int) -> pb.PublishRequest:
    request = pb.PublishRequest()
    for name, make in _KINDS.items():
        getattr(request, name).extend(make(n) for n in sizes.get(name, []))
    if document:
        request.dissemination.provenance = b"x" * document
        request.checkpoint.publisher = "p"
    return request


def _key_bytes(request: pb.PublishRequest) -> int:
    return sum(m.ByteSize() + 6 for name in _KINDS for m in getattr(request, name))


def _flattened(requests: list[pb.PublishRequest]) -> list[tuple[str, bytes]]:
    return [
        (name, m.SerializeToString()) for r in requests for name in _KINDS for m in getattr(r, name)
    ]


@given(
    st.dictionaries(st.sampled_from(sorted(_KINDS)), st.lists(st.integers(0, 300), max_size=20)),
    st.integers(0, 400),
    st.integers(420, 3000),
    st.integers(1, 30),
)
def test_parts_fit_and_keep_every_message_in_the_site_order(
    sizes: dict[str, list[int]], document: int, max_bytes: int, max_messages: int
) -> None:
    request = _request(sizes, document)
    parts = split_request(request, max_bytes, max_messages)
    assert all(_key_bytes(p) <= max_bytes for p in parts)
    assert all(len(_flattened([p])) <= max_messages for p in parts)
    assert _flattened(parts) == _flattened([request])  # same messages, kinds in order
    keys = len(_flattened([request]))
    if _key_bytes(request) <= max_bytes and keys <= max_messages:
        assert parts == [request]  # whatever the document's size
    elif _key_bytes(request) <= max_bytes:  # parts only as many as the count needs
        assert len([p for p in parts if _flattened([p])]) == -(-keys // max_messages)
    documents = [p for p in parts if p.HasField("dissemination") or p.HasField("checkpoint")]
    assert documents == ([parts[-1]] if document else [])
    if document:
        assert parts[-1].dissemination == request.dissemination
        assert parts[-1].checkpoint == request.checkpoint


def test_a_key_message_larger_than_a_request_is_refused() -> None:
    with pytest.raises(ValueError, match="keys message of"):
        split_request(_request({"keys": [10, 5000]}, 0), 1000, 10)


def test_a_document_of_any_size_stays_with_its_keys_when_they_fit() -> None:
    request = _request({"keys": [10, 20]}, 50_000)  # the request goes in parts, whole
    assert split_request(request, 1000, 10) == [request]
    crowded = _request({"keys": [10] * 12}, 50_000)
    *keys, last = split_request(crowded, 1000, 10)
    assert len(keys) == 2 and last.dissemination == crowded.dissemination
